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

:class:`Player` turns those candidates into inputs, one call at a time, and
never repeats an input in the same state (same last answer). Pure: it talks to
nothing; the collector makes the calls.
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


def _text_of(output: Any) -> str:
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
            plans.append(ToolPlan(spec["name"], schema, base, own))
            general += mine(str(spec.get("description") or ""))
        general = mine(prompt, words=True)[:40] + general + _task_values(task)
        unique: list[Any] = []
        for value in general:
            if value not in unique:
                unique.append(value)
        return cls(plans, unique)

    def observe(self, tool: str, result: Any) -> None:
        """Learn from an answer: output values go first next time; validator hints go to their parameter."""
        if not isinstance(result, dict):
            return
        if result.get("ok") is True:
            text = _text_of(result.get("output"))
            self.previous, self.state = self.state, text
            self.recent = mine(text)
            for plan in self.tools:
                plan.cursor = 0
            return
        error = str(result.get("error") or "")
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
        props = schema_examples.properties(plan.schema)
        fields = [n for n in props if n in plan.base] or list(plan.base)
        lists: dict[str, list[Any]] = {}
        for name in fields:
            own = plan.own.get(name, [])
            # The last answer's suggestions first, but where the parameter has known allowed values, only those.
            ordered = [v for v in self.recent if v in own] + own + self.recent + self.general if own else self.recent + self.general
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
                    key = json.dumps([plan.name, candidate, self.previous, self.state], sort_keys=True, default=repr)
                    if key in self.tried or schema_examples.errors(candidate, plan.schema):
                        continue
                    self.tried.add(key)
                    self.turn = (start + step + 1) % len(self.tools)
                    return plan.name, candidate
        return None


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
