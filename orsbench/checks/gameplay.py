"""Input synthesis that learns from the environment, to play an episode to ``finished: true``.

Real environments validate beyond their JSON Schema: an ``operator: string``
that must be one of ``+ - * /``, a ``direction`` that must be
``up|down|left|right``, a game whose next legal move is named in the last
answer. A minimal input (``""``) is rejected every time, so the checker learns
candidate values the way a player would, from:

* tool and parameter descriptions — lists such as ``one of: +, -, *, /``,
  ``a|b|c``, quoted tokens, ``e.g. X`` examples;
* the prompt — bracketed options ``[forward]``, quoted tokens, numbers, words;
* ``ok: false`` input-validation answers — the allowed values a validator
  names (pydantic's ``Input should be 'a' or 'b'``, ``must be one of ...``),
  assigned to the parameter its ``loc`` names;
* the answers so far — the most recent first (``Next: 7``);
* the task spec — its short strings and integers.

A tool that is one free-text ``command`` (a shell, a text adventure) is played
with command lines instead: ``help`` first when the environment offers it, then
the verbs its description, prompt and answers list (``look``, ``take <item>``)
joined with the things its latest answer names (``take key``).

Tools that look like they end the episode (``submit``, ``answer``, ...) take
their turn after the others, so every tool is called with a valid input while
the episode is still open. :class:`Player` turns those candidates into inputs,
one call at a time, and never repeats an input in the same state (same last
answer). Pure: it talks to nothing; the collector makes the calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orsbench import schema_examples
from orsbench.protocol import JSON


_QUOTED = re.compile(r"""'([^'\n]{1,40})'|"([^"\n]{1,40})"|`([^`\n]{1,40})`""")
_ONE_OF = re.compile(r"(?:one of|either|choose from|allowed(?: values)?(?: are)?|must be)\s*:?\s*([^.;\n]{1,200})", re.I)
_PIPES = re.compile(r"\b[\w+\-*/]+(?:\s*\|\s*[\w+\-*/]+)+")
_BRACKETS = re.compile(r"\[([^\[\]\n]{1,40})\]")
_EXAMPLE = re.compile(r"(?:e\.g\.|for example|example:|such as)\s*:?\s*([^.;\n,)]{1,40})", re.I)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_WORD = re.compile(r"[A-Za-z][A-Za-z_'-]{0,19}")
_LOC = re.compile(r"'loc':\s*\(([^)]*)\)")
_STOPWORDS = frozenset(
    "a an the and or of to in on at for with is are be by it this that from as your you use call tool one each "
    "must should input value values error type not no yes if then".split()
)
#: A tool whose name or description says it ends the episode: played after the others.
_TERMINAL = re.compile(r"\b(submit|answer|finish|final|done|guess|solve|end)\b", re.I)
#: A free-text parameter that takes a command line (its name, its tool's name or a description says so).
_COMMAND = re.compile(r"\b(command|cmd|action|shell|terminal|console|prompt line)\b", re.I)
#: ``take <item>``, ``go [direction]``: a verb that takes an object.
_TEMPLATE = re.compile(r"\b([A-Za-z][A-Za-z_-]{1,19})\s*[<\[]([A-Za-z_ -]{1,20})[>\]]")
#: ``Commands: look, take <item>, inventory``: a list of commands.
_COMMAND_LIST = re.compile(r"(?:commands?|actions?|verbs?|you can(?: type| use| say| do)?)\s*(?:are|include)?\s*:\s*([^\n.;]{1,300})", re.I)
_HELP = re.compile(r"\bhelp\b", re.I)
#: Words that name no object of a command (besides the stopwords).
_NOT_OBJECTS = frozenset(
    "commands command help available try here there see sees seen can cannot will what which who how you're i "
    "nothing something have has had was were unknown understand does do did get got".split()
)


def _split_list(text: str) -> list[str]:
    parts = re.split(r"\s*(?:,|\bor\b|\||/(?=\s))\s*", text)
    out = []
    for part in parts:
        part = part.strip().strip("'\"`").strip()
        if part and len(part) <= 40:
            out.append(part)
    return out


def mine(text: str, *, words: bool = False) -> list[Any]:
    """Candidate values named in free text, most specific first (quoted and listed before bare numbers)."""
    if not text:
        return []
    found: list[Any] = []

    def add(values: Iterable[Any]) -> None:
        for value in values:
            if value not in found and value != "":
                found.append(value)

    add(next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text))
    for match in _ONE_OF.finditer(text):
        add(_split_list(match.group(1)))
    for match in _PIPES.finditer(text):
        add(p.strip() for p in match.group(0).split("|"))
    add(m.group(1).strip() for m in _BRACKETS.finditer(text))
    add(m.group(1).strip().strip("'\"`") for m in _EXAMPLE.finditer(text))
    for match in _NUMBER.finditer(text):
        number = float(match.group(0))
        add([int(number) if number.is_integer() and "." not in match.group(0) else number])
    if words:
        add(w for w in _WORD.findall(text) if w.lower() not in _STOPWORDS)
    return found


def validation_hints(error: str, fields: Iterable[str]) -> dict[str, list[Any]]:
    """Allowed values a validator named in an ``ok: false`` answer, by the parameter they are for.

    A pydantic error carries ``'loc': ('operator',)``; a hint without a
    recognisable field goes to every field (key ``"*"``).
    """
    names = set(fields)
    out: dict[str, list[Any]] = {}
    # pydantic's str(e.errors()): a list of dicts, one per field; split it so each message keeps its loc.
    pieces = re.split(r"(?=\{'type':)", error) if "'loc'" in error else [error]
    for piece in pieces:
        loc = _LOC.search(piece)
        keys = [k.strip().strip("'\"") for k in loc.group(1).split(",")] if loc else []
        target = next((k for k in keys if k in names), "*")
        message = piece
        msg = re.search(r"'msg':\s*(\"[^\"]*\"|'[^']*')", piece)
        if msg:
            message = msg.group(1)[1:-1]
        values = mine(message)
        values = [v for v in values if not (isinstance(v, str) and v in names)]
        if values:
            out.setdefault(target, []).extend(v for v in values if v not in out.get(target, []))
    return out


def answer_text(output: Any) -> str:
    """The text of a ToolOutput's blocks (what a model would read)."""
    if not isinstance(output, dict):
        return ""
    blocks = output.get("blocks")
    parts = [b.get("text", "") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)] if isinstance(blocks, list) else []
    return "\n".join(parts)


def _fits(value: Any, node: Any) -> Any | None:
    """``value`` coerced to what the property ``node`` takes, or ``None`` when it cannot be."""
    kinds = node.get("type") if isinstance(node, dict) else None
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else ["string"]
    if "integer" in kinds and not isinstance(value, bool):
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    if "number" in kinds and not isinstance(value, bool):
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            return float(value)
    if "string" in kinds:
        return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (int, float)) else None
    return None


@dataclass
class ToolPlan:
    """What the player knows about one tool: its schema, base input and candidates per parameter."""

    name: str
    schema: Any
    base: JSON
    own: dict[str, list[Any]] = field(default_factory=dict)  # from the parameter's description and its validator
    cursor: int = 0
    #: The parameter that takes a whole command line, for a free-text command tool (else ``None``).
    command: str | None = None
    #: The tool's own description (a command tool's verbs and its ``help`` are read from it).
    description: str = ""
    asked_help: bool = False


@dataclass
class Player:
    """Chooses the next tool input from everything learned so far.

    Call :meth:`next_input` for a ``(tool, input)``, make the call, and feed the
    answer back with :meth:`observe`. Inputs are never repeated in the same
    state (same last answer text), so the player moves on when it is stuck and
    returns ``None`` when nothing new is left to try.
    """

    tools: list[ToolPlan]
    general: list[Any] = field(default_factory=list)  # prompt, tool descriptions, task spec
    recent: list[Any] = field(default_factory=list)  # the last answer's values: tried first
    state: str = ""
    tried: set[str] = field(default_factory=set)
    turn: int = 0
    #: The answers before the last one: a state is the last two answers, so a step counter
    #: interleaved with an unchanging answer ("waited 1.5s") still reads as progress.
    previous: str = ""
    #: Tools that took long (≥ 1 s): tried only when the fast ones have nothing new.
    slow: set[str] = field(default_factory=set)
    #: Values from earlier answers (the last answer's are in ``recent``): an answer often needs one.
    seen: list[Any] = field(default_factory=list)
    #: The prompt, then every answer text so far (ok:true outputs and ok:false errors): a command tool's verbs.
    texts: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, tools: list[dict[str, Any]], prompt: str, task: Any) -> "Player":
        plans: list[ToolPlan] = []
        general: list[Any] = []
        for spec in tools:
            schema = spec.get("input_schema")
            try:
                base = schema_examples.minimal_input(schema)
            except schema_examples.NoInput:
                continue
            props = schema_examples.properties(schema)
            own = {name: mine(str((node or {}).get("description", "")) if isinstance(node, dict) else "") for name, node in props.items()}
            for name, node in props.items():
                if isinstance(node, dict) and isinstance(node.get("examples"), list):
                    own[name] = list(node["examples"]) + own[name]
            description = str(spec.get("description") or "")
            plans.append(ToolPlan(spec["name"], schema, base, own, command=command_field(spec), description=description))
            general += mine(description)
        general = mine(prompt, words=True)[:40] + general + _task_values(task)
        unique: list[Any] = []
        for value in general:
            if value not in unique:
                unique.append(value)
        # Stable: tools that look like they end the episode go last, so the others are played first.
        plans.sort(key=lambda p: bool(_TERMINAL.search(f"{p.name} {p.description}".replace("_", " "))))
        return cls(plans, unique, texts=[prompt])

    def observe(self, tool: str, result: Any) -> None:
        """Learn from an answer: output values go first next time; validator hints go to their parameter."""
        if not isinstance(result, dict):
            return
        if result.get("ok") is True:
            text = answer_text(result.get("output"))
            self.previous, self.state = self.state, text
            self.seen = [v for v in self.recent + self.seen if v not in mine(text)][:60]
            self.recent = mine(text)
            self.texts.append(text)
            for plan in self.tools:
                plan.cursor = 0
            return
        error = str(result.get("error") or "")
        self.texts.append(error)
        plan = next((p for p in self.tools if p.name == tool), None)
        if plan is None or not error:
            return
        hints = validation_hints(error, plan.own)
        for name, values in hints.items():
            targets = list(plan.own) if name == "*" else [name]
            for target in targets:
                learned = [v for v in values if v not in plan.own.setdefault(target, [])]
                plan.own[target] = learned + plan.own[target]
        if hints:
            plan.cursor = 0

    def _candidates(self, plan: ToolPlan) -> list[JSON]:
        """Inputs for ``plan``: the k-th candidate of every varied parameter together, k = 0, 1, ..."""
        if plan.command is not None:
            return [{**plan.base, plan.command: line} for line in self._command_lines(plan)] + [dict(plan.base)]
        props = schema_examples.properties(plan.schema)
        fields = [n for n in props if n in plan.base] or list(plan.base)
        lists: dict[str, list[Any]] = {}
        for name in fields:
            own = plan.own.get(name, [])
            # The last answer's suggestions first, but where the parameter has known allowed values, only those.
            later = self.recent + self.seen + self.general
            ordered = [v for v in self.recent if v in own] + own + later if own else later
            values = [self._fit(v, props.get(name)) for v in ordered]
            lists[name] = [v for i, v in enumerate(values) if v is not None and v not in values[:i]]
        longest = max((len(v) for v in lists.values()), default=0)
        out: list[JSON] = []
        for k in range(longest):
            candidate = dict(plan.base)
            for name, values in lists.items():
                if values:
                    candidate[name] = values[min(k, len(values) - 1)]
            out.append(candidate)
        out.append(dict(plan.base))
        return out

    @staticmethod
    def _fit(value: Any, node: Any) -> Any | None:
        return _fits(value, node)

    def _command_lines(self, plan: ToolPlan) -> list[str]:
        """Command lines for a free-text command tool, most promising first.

        ``help`` (once) when the description, the prompt or an answer offers it; then each verb
        that takes an object with each thing the last answer names; then the bare verbs; then
        verbs with the things earlier answers and the prompt named. With no verb found anywhere,
        word pairs from the prompt and answers (``open door``) stand in for them.
        """
        sources = [plan.description, *self.texts]
        offered_help = any(_HELP.search(t) for t in sources)
        bare: list[str] = []
        takes: list[str] = []
        for text in sources:
            b, t = command_verbs(text)
            bare += [v for v in b if v not in bare]
            takes += [v for v in t if v not in takes]
        bare = [v for v in bare if v not in takes and v != "help"]  # help is asked once, above the rest
        verbs = {*bare, *takes, "help"}
        recent = objects(self.state, exclude=verbs)
        older = [o for text in reversed(self.texts[:-1] if self.state else self.texts) for o in objects(text, exclude=verbs)]
        lines: list[str] = []
        if offered_help and not plan.asked_help:
            lines.append("help")
        lines += [f"{verb} {thing}" for verb in takes for thing in recent]
        lines += bare
        lines += [f"{verb} {thing}" for verb in takes for thing in older]
        if not bare and not takes:
            for text in reversed(self.texts):
                words = [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOPWORDS | _NOT_OBJECTS]
                lines += [f"{a} {b}" for a, b in zip(words, words[1:])] + words
        unique: list[str] = []
        for line in lines:
            if line not in unique:
                unique.append(line)
        return unique[:300]

    def next_input(self) -> tuple[str, JSON] | None:
        """The next untried ``(tool, input)`` in this state, fast tools taking turns first; ``None`` when all are tried."""
        for wanted_slow in (False, True):
            start = self.turn
            for step in range(len(self.tools)):
                plan = self.tools[(start + step) % len(self.tools)]
                if (plan.name in self.slow) != wanted_slow:
                    continue
                candidates = self._candidates(plan)
                while plan.cursor < len(candidates):
                    candidate = candidates[plan.cursor]
                    plan.cursor += 1
                    # A command line is judged by the screen it answers (the state alone): after "look" shows the
                    # same room again, a command already tried in that room is not tried again.
                    previous = "" if plan.command is not None else self.previous
                    key = json.dumps([plan.name, candidate, previous, self.state], sort_keys=True, default=repr)
                    if key in self.tried or schema_examples.errors(candidate, plan.schema):
                        continue
                    self.tried.add(key)
                    self.turn = (start + step + 1) % len(self.tools)
                    if plan.command is not None and candidate.get(plan.command) == "help":
                        plan.asked_help = True
                    return plan.name, candidate
        return None


def command_field(spec: dict[str, Any]) -> str | None:
    """The parameter of a free-text command tool (one plain string parameter that takes a command line)."""
    props = schema_examples.properties(spec.get("input_schema"))
    if len(props) != 1:
        return None
    name, node = next(iter(props.items()))
    if not isinstance(node, dict) or node.get("type") != "string" or any(k in node for k in ("enum", "const", "pattern", "format")):
        return None
    text = f"{spec.get('name', '')} {name} {spec.get('description') or ''} {node.get('description') or ''}".replace("_", " ")
    return name if _COMMAND.search(text) else None


def command_verbs(text: str) -> tuple[list[str], list[str]]:
    """``(bare verbs, verbs that take an object)`` a text lists: ``Commands: look, take <item>`` → ``(["look"], ["take"])``."""
    bare: list[str] = []
    takes: list[str] = []
    for match in _TEMPLATE.finditer(text):
        verb = match.group(1).lower()
        if verb not in takes and verb not in _STOPWORDS:
            takes.append(verb)
    for match in _COMMAND_LIST.finditer(text):
        for item in _split_list(match.group(1)):
            words = item.split()
            verb = words[0].lower().strip("`'\"") if words else ""
            if re.fullmatch(r"[a-z][a-z_-]{0,19}", verb) and verb not in _STOPWORDS:
                (takes if len(words) > 1 else bare).append(verb)
    for match in _QUOTED.finditer(text):
        token = next(g for g in match.groups() if g is not None).strip()
        if re.fullmatch(r"[a-z][a-z_-]{0,19}", token):
            bare.append(token)
    return list(dict.fromkeys(bare)), list(dict.fromkeys(takes))


def objects(text: str, *, exclude: Iterable[str] = ()) -> list[str]:
    """Things a text names, for a command's object: words after an article first (``a key``), then the rest."""
    skip = set(exclude) | _STOPWORDS | _NOT_OBJECTS
    placeholders = {m.group(2).lower() for m in _TEMPLATE.finditer(text)}
    words = [w.lower() for w in _WORD.findall(text)]
    named = [b for a, b in zip(words, words[1:]) if a in ("a", "an", "the", "some")]
    out: list[str] = []
    for word in named + words:
        if word not in skip and word not in placeholders and word not in out and "'" not in word:  # can't, don't
            out.append(word)
    return out


def _task_values(task: Any, limit: int = 24) -> list[Any]:
    """Short strings and integers in a task spec (an answer is often among them)."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if len(found) >= limit:
            return
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif ((isinstance(node, str) and 0 < len(node) <= 200) or type(node) is int) and node not in found:
            found.append(node)

    walk(task)
    return found
