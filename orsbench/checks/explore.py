"""The probes that use the environment as a trainer would: play, fuzz, and quality.

* ``play`` — play several tasks (first, middle, last; ``--tasks``) with inputs
  learned from the environment (:mod:`orsbench.checks.gameplay`) until a tool
  answers ``finished: true``, within ``max_play_calls`` calls and
  ``play_seconds`` per task; the session is pinged while a call runs, so a
  short TTL cannot reap it, and a session reaped anyway is reported as that.
* ``fuzz`` — a bounded, seeded, schema-driven search per tool for a *valid*
  input on which the tool raises (SSE ``error``, 5xx), hangs past
  ``--timeout``, or breaks the stream: boundary inputs first, then
  hypothesis-jsonschema examples, shrunk to the smallest failing input
  (:mod:`orsbench.schema_examples`).
* ``quality`` — what the wire checks cannot see: an empty or garbage answer
  that earns the best reward, the same calls scored differently twice.

Each is a function over the :class:`~orsbench.checks.collector.Collector`, registered
with :func:`~orsbench.checks.collector.probe`; judging stays in the checks.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from orsbench import protocol, schema_examples
from orsbench.checks.collector import Collector, probe
from orsbench.checks.evidence import NO_SUCH_TOOL, WIN_REWARD, Episode, Facts, Failure, result_of
from orsbench.checks.gameplay import Player, answer_text
from orsbench.protocol import JSON
from orsbench.wire.evidence import Exchange

#: The string a garbage answer is made of (an answer no task expects).
GARBAGE = "orsbench: not an answer ¤"
#: Keys of a task spec whose value is the expected answer.
ANSWER_KEYS = ("answer", "answers", "solution", "target", "label", "expected", "expected_answer", "ground_truth", "gold")


@dataclass
class Outcome:
    """How one call ended, as the tool-failure checks classify it."""

    kind: str  # "ok", "ok-false", "raise", "hang", "stream", "http", "reaped"
    result: Any = None
    detail: str = ""

    @property
    def failure(self) -> bool:
        return self.kind in ("raise", "hang", "stream", "http")


def classify(exchange: Exchange, timeout: float) -> Outcome:
    """Classify a ``/call`` answer: a result, a tool failure (raise, hang, broken stream, 5xx), or a reaped session."""
    kind, body = result_of(exchange)
    if kind == "result":
        return Outcome("ok" if body.get("ok") is True else "ok-false", body)
    if kind == "error":
        return Outcome("raise", None, f"SSE error event: {str(body)[:200]}")
    if kind == "http":
        if body == 404:
            return Outcome("reaped", None, "404: the session is gone")
        if isinstance(body, int) and body >= 500:
            return Outcome("http", None, f"HTTP {body}: {exchange.body[:200].decode('utf-8', 'replace')}")
        if body is None:
            hang = exchange.elapsed >= timeout * 0.9
            return Outcome("hang" if hang else "stream", None, exchange.error or "no answer")
        return Outcome("ok-false", None, f"HTTP {body}")
    if kind == "no-end":
        if exchange.elapsed >= timeout * 0.9 or "still open" in (exchange.error or ""):
            return Outcome("hang", None, f"no end event within {timeout:g} s ({exchange.error or 'stream still open'})")
        return Outcome("stream", None, f"the stream ended without an end or error event ({exchange.error or 'closed'})")
    return Outcome("stream", None, f"the end event is not a JSON object: {str(body)[:120]}")


#: ``ok: false`` reasons that say nothing about the input sent: the tool did not run, and the call tried nothing.
UNRELATED_REASONS = (protocol.REASON_EPISODE_FINISHED, protocol.REASON_NOT_FOUND, protocol.REASON_NAME_COLLISION)


def refusal_of(outcome: Outcome) -> str | None:
    """Why a call was refused without its input being judged (see :class:`~.evidence.Refusal`); ``None`` if it ran."""
    if outcome.kind == "reaped":
        return "404"
    if outcome.kind != "ok-false":
        return None
    if not isinstance(outcome.result, dict):
        return outcome.detail or "refused"  # an HTTP 4xx before any stream
    reason = outcome.result.get("reason")
    return reason if reason in UNRELATED_REASONS else None


def prompt_text(exchange: Exchange | None) -> str:
    """The text of a ``/prompt`` answer's blocks ("" unless it answered 200 with blocks)."""
    if exchange is None or exchange.status != 200:
        return ""
    try:
        body = json.loads(exchange.body)
    except ValueError:
        return ""
    blocks = body if isinstance(body, list) else body.get("blocks") if isinstance(body, dict) else None
    if not isinstance(blocks, list):
        return ""
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def _reward(result: Any) -> float | None:
    output = result.get("output") if isinstance(result, dict) else None
    reward = output.get("reward") if isinstance(output, dict) else None
    return float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None


def _finished(result: Any) -> bool:
    output = result.get("output") if isinstance(result, dict) else None
    return isinstance(output, dict) and output.get("finished") is True


def task_indices(count: int | None, wanted: tuple[int, ...] | None) -> list[int]:
    """The tasks to play: ``--tasks`` (negative counts from the end), else first, middle and last."""
    if not count:
        return []
    if wanted:
        return sorted({i % count for i in wanted if -count <= i < count})
    return sorted({0, count // 2, count - 1})


def play_one(col: Collector, sid: str, index: int | None, label: str, *, fresh: bool = True) -> Episode:
    """Play one episode on ``sid`` until ``finished: true``, the call budget, or the time budget.

    ``fresh``: ``sid`` was just created and no call was made in it (its first call must run).
    """
    ev, options = col.ev, col.options
    episode = Episode(index, col.task_at(index))
    episode.prompt = prompt_text(col.ready(lambda: col.client.prompt(ev.env or "", sid)))
    player = Player.build(col.session_tools(sid), episode.prompt, episode.task)
    started = time.monotonic()
    durations: dict[str, float] = ev.facts.durations
    while True:
        if len(episode.calls) >= options.max_play_calls:
            episode.stopped = f"the call budget ({options.max_play_calls}) was spent"
            break
        if time.monotonic() - started > options.play_seconds:
            episode.stopped = f"the time budget ({options.play_seconds:g} s) was spent"
            break
        step = player.next_input()
        if step is None:
            episode.stopped = "every input the checker could derive was tried"
            break
        tool, value = step
        name = f"{label}{len(episode.calls)}"
        exchange = col.fresh(name, col.kept_call(sid, tool, value))
        episode.calls.append((tool, value))
        durations.setdefault(tool, exchange.elapsed)
        if exchange.elapsed >= 1.0:
            player.slow.add(tool)
        outcome = classify(exchange, options.timeout)
        _count_answer(ev.facts, tool, outcome)
        episode.answers.append(answer_of(outcome))
        sent = outcome.result.get("output") if not outcome.failure and isinstance(outcome.result, dict) else None
        episode.sent_rewards.append(sent.get("reward") if isinstance(sent, dict) else None)
        refusal = ev.facts.note_call("play", name, refusal_of(outcome), fresh=fresh and len(episode.calls) == 1)
        if refusal is not None:
            episode.refused.add(len(episode.calls) - 1)
            if refusal.wrong:
                episode.stopped = f"{name}: the session's first call was answered {refusal.reason}, so it started finished"
                break
        if outcome.kind == "reaped":
            episode.reaped = f"{name}: {tool} answered 404 after {len(episode.calls)} call(s) in {time.monotonic() - started:.1f} s"
            break
        if outcome.failure:
            ev.facts.tool_failures.append(
                Failure(tool, outcome.kind, value, outcome.detail, name, "play")
            )
            if outcome.kind == "hang":
                episode.stopped = f"{tool} hung"
                break
            continue
        player.observe(tool, outcome.result)
        reward = _reward(outcome.result)
        if reward is not None:
            episode.rewards.append(reward)
            flag = (outcome.result.get("output") or {}).get("finished") if isinstance(outcome.result, dict) else None
            if reward >= WIN_REWARD and flag in (False, None) and episode.unfinished_win is None:
                episode.unfinished_win = name  # a flag that is not a bool is reward.finished_bool's finding
        if outcome.kind == "ok" and _finished(outcome.result):
            episode.finished, episode.reward = True, reward
            break
        output = outcome.result.get("output") if isinstance(outcome.result, dict) else None
        if isinstance(output, dict) and output.get("finished") not in (False, None):
            episode.stopped = "finished is not a bool"
            break  # not a bool: no way to tell whether it finished
    episode.seconds = time.monotonic() - started
    return episode


@probe("play")
def probe_play(col: Collector) -> None:
    """Play the tasks under test to ``finished: true``, then probe the finish latch on the first."""
    ev = col.ev
    if ev.env is None or not ev.facts.call_plan:
        return
    if col.options.fuzz > 0:
        schema_examples.preload()  # the fuzz's libraries import while this probe waits on the server
    indices: list[int | None] = list(task_indices(ev.facts.count, col.options.tasks)) or [ev.index]
    wanted = col.options.tasks or ()
    missing = [i for i in wanted if ev.facts.count is not None and not -ev.facts.count <= i < ev.facts.count]
    if missing:
        ev.facts.tasks_not_played = f"--tasks {missing}: the split has {ev.facts.count} task(s)"
    play_sid, ev.facts.play_sid = ev.facts.play_sid, None  # opened early by the session probe, on the task under test
    episodes: list[Episode] = []
    for index in indices:
        if episodes and not episodes[0].finished:
            ev.facts.tasks_not_played = (
                f"tasks {[i for i in indices if i != episodes[0].index]} not played: task {episodes[0].index} never "
                f"finished ({episodes[0].stopped or episodes[0].reaped})"
            )
            break
        sid = play_sid if play_sid is not None and index == ev.index else col.open_on(index)
        if sid is None:
            continue
        if sid == play_sid:
            play_sid = None
            sid = col.still_open(sid)  # opened early and idle since: a short TTL may have reaped it
            if sid is None:
                continue
        label = "play." if not episodes else f"play.task{index}."
        episode = play_one(col, sid, index, label)
        episodes.append(episode)
        if len(episodes) == 1:
            ev.facts.play_calls = len(episode.calls)
            if episode.reaped:
                ev.facts.play_reaped = episode.reaped
            if episode.finished:
                finisher = episode.calls[-1]
                ev.facts.finisher = finisher
                col.fresh("latch.known", col.call(sid, finisher[0], finisher[1]))
                col.fresh("latch.unknown_tool", col.call(sid, NO_SUCH_TOOL, {}))
                invalid = ev.facts.invalid_input
                if invalid is not None:
                    col.fresh("latch.invalid_input", col.call(sid, invalid[0], invalid[1]))
        col.end_session(sid)
    if play_sid is not None:
        col.end_session(play_sid)
    ev.facts.episodes = episodes
    _cover_unplayed(col, episodes, indices[0] if indices else None)


def _cover_unplayed(col: Collector, episodes: list[Episode], index: int | None) -> None:
    """Call every listed tool no episode called, once, with a valid input on a fresh session.

    An episode can end before its player reached a tool (a submit tool that finishes on the
    first try); a tool only the fuzz called was never used the way a trainer uses it, so each
    gets one call as a player would make it (the player's first choice for it).
    """
    ev = col.ev
    report: dict[str, JSON] = {}
    best = max((e.reward for e in episodes if e.finished and e.reward is not None), default=None)
    for episode in episodes:
        for n, (tool, _value) in enumerate(episode.calls):
            report.setdefault(tool, {"played": 0, "won": False})["played"] += n not in episode.refused
        if episode.finished and best is not None and episode.reward == best:
            report[episode.calls[-1][0]]["won"] = True
    for name, why in ev.facts.unbuildable.items():
        report.setdefault(name, {"played": 0, "won": False, "unbuildable": why})
    for spec in ev.facts.tools:
        tool = spec.get("name")
        if not isinstance(tool, str) or tool in report:
            continue
        entry = report[tool] = {"played": 0, "won": False}
        sid = col.open_on(index)
        if sid is None:
            break
        try:
            step = Player.build([spec], prompt_text(col.ready(lambda: col.client.prompt(ev.env or "", sid))), col.task_at(index)).next_input()
            if step is None:
                entry["unbuildable"] = "no valid input could be built"
                continue
            name = f"play.cover.{tool}"
            outcome = classify(col.fresh(name, col.kept_call(sid, tool, step[1])), col.options.timeout)
            _count_answer(ev.facts, tool, outcome)
            refused = refusal_of(outcome)
            ev.facts.note_call("play", name, refused, fresh=True)
            entry["covered"] = outcome.kind if refused is None else f"refused: {refused}"
            if outcome.failure:
                ev.facts.tool_failures.append(Failure(tool, outcome.kind, step[1], outcome.detail, name, "play"))
        finally:
            col.end_session(sid)
    ev.facts.tool_play = report


# -- fuzz ----------------------------------------------------------------------------
@probe("fuzz")
def probe_fuzz(col: Collector) -> None:
    """Per tool: boundary inputs, then up to ``--fuzz`` hypothesis examples; keep the smallest failure."""
    ev, options = col.ev, col.options
    if ev.env is None or options.fuzz <= 0 or not ev.facts.call_plan:
        return
    specs = {s["name"]: s for s in ev.facts.tools}
    failed_tools = {f.tool for f in ev.facts.tool_failures if f.kind != "hang"}
    hung_tools = {f.tool for f in ev.facts.tool_failures if f.kind == "hang"}
    report: dict[str, Any] = {}
    for tool, base in ev.facts.call_plan:
        if tool in hung_tools:
            continue  # every further call could cost --timeout
        schema = (specs.get(tool) or {}).get("input_schema")
        fuzzer = _ToolFuzz(col, tool, schema, options.fuzz)
        fuzzer.run(base, skip_search=tool in failed_tools)
        report[tool] = {"calls": fuzzer.calls, "failure": fuzzer.found.to_json() if fuzzer.found else None}
        if fuzzer.found is not None:
            ev.facts.tool_failures.append(fuzzer.found)
        fuzzer.close()
    ev.facts.fuzz = report


# -- quality -------------------------------------------------------------------------
@probe("quality")
def probe_quality(col: Collector) -> None:
    """Replay a finished episode (same calls, same task) and try empty/garbage answers on its finisher."""
    ev = col.ev
    episodes: list[Episode] = ev.facts.episodes
    done = next((e for e in episodes if e.finished), None)
    if done is None:
        return
    replays: list[JSON] = []
    for attempt in range(REPLAYS if len(done.calls) <= SECOND_REPLAY_MAX_CALLS else 1):
        replay = _replay(col, done, f"quality.replay{attempt + 1}." if attempt else "quality.replay.")
        if replay is None:
            break
        replays.append(replay)
        if replay["reward"] != done.reward:
            break  # a different reward is the finding; a further replay adds nothing
    if replays:
        differing = next((r for r in replays if r["reward"] != done.reward), replays[-1])
        ev.facts.replay = {
            "index": done.index,
            "first": done.reward,
            "again": differing["reward"],
            "replays": [r["reward"] for r in replays],
            "diverged_at": differing["diverged_at"],
            "answers": differing["answers"],
        }
    tool, value = done.calls[-1]
    schema = next((s.get("input_schema") for s in ev.facts.tools if s.get("name") == tool), None)
    probes = _hack_inputs(schema, value, done.task)
    seen: dict[str, float | None] = {}
    for label, hack in probes:
        sid = col.open_on(done.index)
        if sid is None:
            break
        _fetch_prompt(col, sid)
        name = f"quality.hack.{label}"
        result = classify(col.rec(name, col.kept_call(sid, tool, hack)), col.options.timeout)
        ev.facts.note_call("hack", name, refusal_of(result), fresh=True)
        seen[label] = _reward(result.result) if result.kind == "ok" and _finished(result.result) else None
        col.end_session(sid)
    ev.facts.hacks = {"tool": tool, "inputs": dict(probes), "rewards": seen}


#: How many times the quality probe replays a finished episode looking for a different reward: a
#: stochastic environment shows itself on most replays, and each costs one episode's calls.
REPLAYS = 2
#: The second replay only for episodes up to this many calls: a long game costs a whole episode per replay.
SECOND_REPLAY_MAX_CALLS = 20


def _replay(col: Collector, done: Episode, label: str) -> JSON | None:
    """Play ``done``'s calls again on a fresh session of its task: the reward, and where the answers first differed."""
    sid = col.open_on(done.index)
    if sid is None:
        return None
    _fetch_prompt(col, sid)  # as the episode did: an environment may deal its game in get_prompt
    rewards: list[float | None] = []
    diverged: JSON | None = None
    try:
        for n, (tool, value) in enumerate(done.calls):
            result = classify(col.rec(f"{label}{n}", col.kept_call(sid, tool, value)), col.options.timeout)
            col.ev.facts.note_call("replay", f"{label}{n}", refusal_of(result), fresh=n == 0)
            answer = answer_of(result)
            if diverged is None and n < len(done.answers) and answer != done.answers[n]:
                diverged = {"call": n, "tool": tool, "first": done.answers[n][:200], "again": answer[:200]}
            if result.kind != "ok":
                break
            rewards.append(_reward(result.result))
            if _finished(result.result):
                break
    finally:
        col.end_session(sid)
    return {"reward": rewards[-1] if rewards else None, "diverged_at": diverged, "answers": len(rewards)}


def _fetch_prompt(col: Collector, sid: str) -> None:
    """Fetch ``sid``'s prompt before its first call, as every real client does (and as the played episode did)."""
    col.ready(lambda: col.client.prompt(col.ev.env or "", sid))


def answer_of(outcome: Outcome) -> str:
    """What a call answered, comparable between two plays of the same calls."""
    if outcome.kind == "ok":
        output = outcome.result.get("output") if isinstance(outcome.result, dict) else None
        return answer_text(output)
    if outcome.kind == "ok-false" and isinstance(outcome.result, dict):
        return f"ok:false {outcome.result.get('error')}"
    return outcome.kind


def _count_answer(facts: Facts, tool: str, outcome: Outcome) -> None:
    """Count the tool's well-formed answers: a stream broken on *every* call is the server's framing
    (the call.* checks' finding), one broken on some inputs only is the tool's."""
    if outcome.kind in ("ok", "ok-false"):
        answered = facts.tool_answers
        answered[tool] = answered.get(tool, 0) + 1


def _hack_inputs(schema: Any, played: dict[str, Any], task: Any) -> list[tuple[str, dict[str, Any]]]:
    """The finishing tool's input with every string emptied, garbage, minimal; and task answers for contrast."""
    props = schema_examples.properties(schema)
    strings = [n for n, node in props.items() if n in played and isinstance(played[n], str)]
    out: list[tuple[str, dict[str, Any]]] = []
    if strings:
        out.append(("empty", {**played, **{n: "" for n in strings}}))
        out.append(("garbage", {**played, **{n: GARBAGE for n in strings}}))
        answers = [task.get(k) for k in ANSWER_KEYS if isinstance(task, dict) and isinstance(task.get(k), (str, int, float))]
        for n, value in enumerate(answers[:2]):
            out.append((f"task_answer{n}", {**played, **{s: str(value) for s in strings}}))
    try:
        minimal = schema_examples.minimal_input(schema)
        if minimal != played and all(minimal != v for _, v in out):
            out.append(("minimal", minimal))
    except schema_examples.NoInput:
        pass
    return [(label, value) for label, value in out if not schema_examples.errors(value, schema)]


class _ToolFuzz:
    """One tool's fuzz: its own sessions (a finished or hung session is replaced), a call budget."""

    def __init__(self, collector: Collector, tool: str, schema: Any, examples: int) -> None:
        self.c = collector
        self.tool = tool
        self.schema = schema
        self.examples = examples
        self.calls = 0
        self.budget = examples * 3  # generation plus shrinking
        self.deadline = time.monotonic() + collector.options.fuzz_seconds
        self.sid: str | None = None
        #: No call was made yet in :attr:`sid` (its first call must run).
        self.fresh = False
        self.found: Failure | None = None
        self.hang: Failure | None = None
        #: Inputs that ran without a failure (the shrinker does not send them again).
        self.passed: set[str] = set()
        #: Fresh sessions in a row whose first call was answered episode_finished.
        self.wrong_starts = 0
        #: Set when sessions keep starting finished: every further call would be refused too.
        self.blocked = False

    def close(self) -> None:
        if self.sid is not None:
            self.c.end_session(self.sid)
            self.sid = None

    @property
    def spent(self) -> bool:
        return self.blocked or self.calls >= self.budget or time.monotonic() > self.deadline

    def attempt(self, value: dict[str, Any], found_by: str) -> Failure | None:
        """Call the tool once with ``value``; a Failure when it raised, hung or broke the stream."""
        if self.sid is None:
            self.sid = self.c.open_session()
            if self.sid is None:
                return None
            self.fresh = True
            # The prompt first, as every real client does (an environment may deal its game in get_prompt), fetched by
            # waiting out the session's setup(): that wait is not the fuzz's time — a slow setup (9 s on a text
            # adventure) must neither read as a hang nor spend the budget the boundaries need.
            self.deadline += self.c.wait_setup(self.sid)
        self.calls += 1
        name = f"fuzz.{self.tool}.{self.calls}"
        exchange = self.c.rec(name, self.c.kept_call(self.sid, self.tool, value))
        outcome = classify(exchange, self.c.options.timeout)
        _count_answer(self.c.ev.facts, self.tool, outcome)
        refusal = self.c.ev.facts.note_call("fuzz", name, refusal_of(outcome), fresh=self.fresh)
        self.fresh = False
        if refusal is not None and refusal.wrong:
            # A new session started finished. Twice in a row means they all do: stop spending calls on it.
            self.wrong_starts += 1
            self.blocked = self.wrong_starts >= 2
        elif refusal is None:
            self.wrong_starts = 0
        if outcome.kind in ("ok", "ok-false") and (outcome.kind == "ok-false" or not _finished(outcome.result)):
            if isinstance(outcome.result, dict) and outcome.result.get("reason") == "episode_finished":
                self.close()
            return None
        if outcome.kind == "reaped" or outcome.kind == "ok" or outcome.kind == "hang":
            self.close()  # finished, gone, or blocked by a call that never ends: a fresh session next
        if outcome.failure:
            return Failure(self.tool, outcome.kind, value, outcome.detail, name, found_by)
        return None

    def run(self, base: dict[str, Any], *, skip_search: bool) -> None:
        # The boundaries are not cut by the fuzz's time budget unless the tool is slow (only by --fuzz N):
        # they are what found real bugs, and a busy machine must not decide which of them run. For a
        # slow tool the first round still runs whole (every class once on every property).
        slow = self.c.ev.facts.durations.get(self.tool, 0.0) >= SLOW_TOOL_S
        rounds = [(0, base), *schema_examples.boundary_rounds(self.schema, base)]
        for round_, value in rounds[: self.examples]:
            if self.blocked or self.calls >= self.budget or (slow and round_ and self.spent):
                return
            failure = self.attempt(value, "boundary")
            if failure is not None:
                self.found = self.shrink(failure, base, slow=slow)
                return
            self.passed.add(_key(value))
        if skip_search:
            return
        strategy = schema_examples.input_strategy(self.schema, base)
        if strategy is None:
            return
        left = max(0, self.examples - self.calls)
        if left == 0 or self.spent:
            return

        def fails(value: Any) -> bool:
            if self.spent or self.hang is not None:
                return False  # budget spent (or a hang seen): stop shrinking
            failure = self.attempt(value, "fuzz")
            if failure is None:
                return False
            if failure.kind == "hang":
                self.hang = failure  # do not shrink a hang: each try costs --timeout
                return False
            if self.found is None or len(json.dumps(value, default=repr)) <= len(json.dumps(self.found.input, default=repr)):
                self.found = failure
            return True

        schema_examples.search(strategy, fails, examples=left, seed=self.c.options.seed)
        if self.found is None and self.hang is not None:
            self.found = self.hang

    def shrink(self, failure: Failure, base: dict[str, Any], *, slow: bool) -> Failure:
        """The simplest input that fails the same way as ``failure`` (a boundary value is reported as drawn otherwise).

        Greedy over :func:`~orsbench.schema_examples.simpler_inputs`, smallest first, at most
        :data:`SHRINK_CALLS` calls; a hang is never shrunk (each try costs ``--timeout``).
        """
        if failure.kind == "hang":
            return failure
        tries = 0
        improved = True
        while improved:
            improved = False
            for candidate in schema_examples.simpler_inputs(self.schema, failure.input, base):
                if tries >= SHRINK_CALLS or self.blocked or self.calls >= self.budget or (slow and self.spent):
                    return failure
                if _key(candidate) in self.passed:
                    continue
                tries += 1
                again = self.attempt(candidate, failure.found_by)
                if again is not None and again.kind == failure.kind and _same_failure(again.detail, failure.detail):
                    failure, improved = again, True
                    break
                if again is None:
                    self.passed.add(_key(candidate))
        return failure


#: A tool whose first call took this long keeps the fuzz's time budget even for the first round of boundaries.
SLOW_TOOL_S = 1.0
#: At most this many calls spent shrinking one failing boundary input.
SHRINK_CALLS = 24
#: How :func:`classify` introduces a failure's own message (not part of the message).
_HOW = re.compile(r"^(SSE error event|HTTP \d+): ")
#: Quoted values (not an apostrophe inside a word: "can't") and numbers, which differ from one input to the next.
_QUOTED_OR_DIGITS = re.compile(r"(?<!\w)'[^']*'(?!\w)|(?<!\w)\"[^\"]*\"(?!\w)|\d+")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _same_failure(a: str, b: str) -> bool:
    """Whether two failure messages tell of the same bug: most of their words agree once the values in them
    (quoted text, numbers) are taken out — "can't encode characters in position 0-3" and "can't encode
    character '\\xe9' in position 0" do, "'int' object is not subscriptable" and "list index out of range" do not."""
    words_a, words_b = (set(_QUOTED_OR_DIGITS.sub(" ", _HOW.sub("", text)[:300]).lower().split()) for text in (a, b))
    if not words_a or not words_b:
        return words_a == words_b
    return len(words_a & words_b) / len(words_a | words_b) >= 0.5
