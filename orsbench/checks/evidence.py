"""Evidence: every exchange the collector made, by name, plus what it learned.

The collector (:mod:`orsbench.checks.collector`) is the only code that talks to
the target; checks only read an :class:`Evidence`. That split is what makes a
check a plain, testable function and lets one run of probes feed every check.

The helpers at the bottom read evidence the way every check must: an SSE
endpoint's body is parsed with the project's one SSE parser even when the
server sent the wrong content type (that is its own check's failure, not a
reason to go blind), and JSON is decoded without trusting the server.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from orsbench import protocol
from orsbench.protocol import JSON
from orsbench.checks.model import CheckOutcome, failed, passed, skipped
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import SSEStream, parse


#: Names the collector uses where it needs a value nothing valid can have.
NO_SUCH_SPLIT = "orsbench-no-such-split"
NO_SUCH_ENV = "orsbench-no-such-env"
NO_SUCH_TOOL = "orsbench_no_such_tool"
NO_SUCH_TASK_ID = "orsbench-unknown-task-id"


#: The one grammar of ``--tasks`` (``check`` and ``record``): which tasks to play.
TASKS_GRAMMAR = "[SPLIT:]I[-J][,K...]"
_TASK_ITEM = re.compile(r"^(-?\d+)(?:-(-?\d+))?$")


def parse_tasks(spec: str) -> tuple[str | None, list[int]]:
    """``train:0-3,7`` → ``("train", [0, 1, 2, 3, 7])``; ``0,-1`` → ``(None, [0, -1])``; ``-3--1`` → the last three.

    A negative index counts from the end of the split (resolved once its size is known); a range
    keeps both ends on one side of zero. A ``ValueError`` names the grammar.
    """
    split, sep, rest = spec.rpartition(":")
    indices: list[int] = []
    bad = ValueError(f"--tasks expects {TASKS_GRAMMAR} (e.g. train:0-3 or 0,-1; negative counts from the end), got {spec!r}")
    for part in (rest if sep else spec).split(","):
        part = part.strip()
        if not part:
            continue
        match = _TASK_ITEM.match(part)
        if match is None:
            raise bad
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if (low < 0) != (high < 0) or high < low:
            raise ValueError(f"--tasks: the range {part!r} must go up and stay on one side of zero (0-3, or -3--1 for the last three)")
        indices.extend(range(low, high + 1))
    if not indices or (sep and not split.strip()):
        raise bad
    return (split.strip() or None) if sep else None, indices


@dataclass(frozen=True)
class Options:
    """How a check run is configured (the CLI's flags, the pytest front end's options)."""

    #: Environment to check (default: the server's first).
    env: str | None = None
    #: Split to draw tasks from (default: the first split of type ``train``).
    split: str | None = None
    #: The longest a single probe may wait: request read timeout, readiness
    #: retries, and the ceiling for long checks (TTL, keep-alive).
    timeout: float = 30.0
    #: The server's session TTL, if known (orsbench servers report theirs).
    ttl: float | None = None
    #: The keep-alive cadence the server promises on long calls (default: the
    #: one an orsbench server reports, else the reference's 10 s).
    ping_interval: float | None = None
    #: At most this many tool calls while playing one task to its finish.
    max_play_calls: int = 200
    #: At most this many seconds playing one task.
    play_seconds: float = 30.0
    #: Tasks to play (indices; negative from the end); ``None``: first, middle and last.
    tasks: tuple[int, ...] | None = None
    #: Fuzz examples per tool (boundaries included); 0 turns the fuzz off.
    fuzz: int = 25
    #: At most this many seconds of fuzz per tool (a slow tool gets fewer examples; a hang costs --timeout on top).
    fuzz_seconds: float = 3.0
    #: Seed of the fuzz (the same seed tries the same inputs).
    seed: int = 0
    #: Steps of the stateful explorer over several sessions at once (``--explore N``; 0: off).
    explore: int = 0
    #: Seed of the explorer (``None``: the fuzz's ``seed``).
    explore_seed: int | None = None
    #: Where the explorer keeps hypothesis' examples database (``None``: none is kept).
    explore_db: str | None = None
    #: Count required checks that did not run as failures.
    strict: bool = False
    #: Sessions the ``deployment`` probe uses, each over time and over several connections (``--sessions N``;
    #: more than the default also uses each one longer).
    sessions: int = 3
    #: Bytes of the one large ``/call`` body the ``deployment`` probe sends (``--max-body``; 0: none).
    max_body: int = 2 * 1024 * 1024
    api_key: str | None = None
    #: Secrets sent as ``X-Secrets`` on every ``/create`` (``--secret``; never reported: docs/protocol.md §14).
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)


# -- what the probes learned ------------------------------------------------------------
@dataclass
class Failure:
    """A valid input on which a tool raised, hung or broke its stream."""

    tool: str
    kind: str
    input: dict[str, Any]
    detail: str
    exchange: str  # the evidence name of the call that showed it
    found_by: str  # "play", "boundary" or "fuzz"

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "kind": self.kind, "input": self.input, "detail": self.detail, "found_by": self.found_by}


#: The reward that means "solved" on the usual 0–1 scale: a call earning it and not finishing the episode is suspect.
WIN_REWARD = 1.0


@dataclass(frozen=True)
class Refusal:
    """A call the server answered without running its tool, for a reason that has nothing to do with the input.

    ``episode_finished``, ``not_found``, ``name_collision``, a 404 for a session gone, an HTTP 4xx
    before any stream: the probe that sent it learned nothing about the tool. An ``input_validation``
    refusal is no :class:`Refusal` — the server judged the input, which is what a probe asks.
    """

    #: The probe, or the part of one, that sent it: "play", "fuzz", "replay" or "hack" (what :attr:`Facts.ran` counts).
    probe: str
    #: The evidence name of the refused call.
    exchange: str
    #: ``episode_finished``, ``not_found``, ``name_collision``, ``404`` or ``HTTP <status>``.
    reason: str
    #: The call was the first of a session the checker had just created.
    fresh: bool

    @property
    def wrong(self) -> bool:
        """A fresh session's first call answered ``episode_finished``: the refusal is itself the defect (§5, §8)."""
        return self.fresh and self.reason == protocol.REASON_EPISODE_FINISHED


@dataclass
class Episode:
    """One task played by the ``play`` probe."""

    index: int | None
    task: Any
    prompt: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: What each call answered, as a model would read it (the text of an ok answer, else its error or kind):
    #: a replay compares them to tell random transitions from a random grader.
    answers: list[str] = field(default_factory=list)
    finished: bool = False
    reward: float | None = None
    rewards: list[float] = field(default_factory=list)
    #: Each call's reward exactly as sent (null, a number, anything else), beside ``answers``: None for a failed call.
    sent_rewards: list[Any] = field(default_factory=list)
    reaped: str | None = None
    stopped: str = ""
    seconds: float = 0.0
    #: Indices of :attr:`calls` the server refused without running the tool (a :class:`Refusal` each).
    refused: set[int] = field(default_factory=set)
    #: The first call that earned the top reward (``WIN_REWARD`` or more) with ``finished: false``: its exchange name.
    unfinished_win: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "calls": len(self.calls),
            "finished": self.finished,
            "reward": self.reward,
            "reaped": self.reaped,
            "stopped": self.stopped,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Facts:
    """What the probes learned beyond the exchanges: the typed probe → check contract.

    Written by the collector (:mod:`.probes`, :mod:`.explore`), read by the
    checks; a field is ``None`` (or empty) when the probe that sets it did not
    get that far.
    """

    # discovery
    #: The tool listing's well-formed entries (dicts with a string ``name``).
    tools: list[JSON] = field(default_factory=list)
    #: ``GET /_orsbench/stats`` of an orsbench server (its config: TTL, keep-alive cadence).
    orsbench_stats: JSON | None = None
    # dataset
    tasks: list[JSON] | None = None
    task0: JSON | None = None
    count: int | None = None
    # session
    create_session_works: bool = False
    sid: str | None = None
    spare_sids: list[str] = field(default_factory=list)
    # call
    call_blocked: str | None = None
    call_sid: str | None = None
    play_sid: str | None = None
    #: (tool name, minimal input) for every tool an input could be built for.
    call_plan: list[tuple[str, JSON]] = field(default_factory=list)
    unbuildable: dict[str, str] = field(default_factory=dict)
    invalid_input: tuple[str, JSON] | None = None
    padding: str | None = None
    padding_unit: str | None = None
    call_session_finished: bool = False
    #: Names of the exchanges that started a new tool call (what the per-call checks grade).
    fresh_calls: list[str] = field(default_factory=list)
    # play
    episodes: list[Episode] = field(default_factory=list)
    play_calls: int = 0
    play_reaped: str | None = None
    tasks_not_played: str | None = None
    finisher: tuple[str, JSON] | None = None
    #: The first duration seen per tool (seconds).
    durations: dict[str, float] = field(default_factory=dict)
    # play and fuzz
    tool_failures: list[Failure] = field(default_factory=list)
    #: Well-formed answers (ok:true or ok:false) per tool.
    tool_answers: dict[str, int] = field(default_factory=dict)
    #: Per tool: {"calls": n, "failure": Failure.to_json() | None}.
    fuzz: dict[str, JSON] = field(default_factory=dict)
    #: Per listed tool, how play exercised it: {"played": calls in an episode, "covered": a call made on a
    #: fresh session because no episode called it, "won": it finished an episode with its best reward,
    #: "unbuildable": why no valid input could be built}. Fuzz calls are in :attr:`fuzz`.
    tool_play: dict[str, JSON] = field(default_factory=dict)
    # quality
    replay: JSON | None = None
    hacks: JSON | None = None
    # play, fuzz and quality: what ran, and what was refused without running
    #: Per probe ("play", "fuzz", "replay", "hack"): the calls that ran the tool (or failed in it) or were judged on their input.
    ran: Counter[str] = field(default_factory=Counter)
    #: The calls refused for a reason unrelated to their input, in the order sent.
    refusals: list[Refusal] = field(default_factory=list)
    # isolation: the scenes of several sessions at once (an orsbench.checks.scenes.Isolation)
    isolation: Any = None
    # deployment: what several sessions over several connections saw through the front (an
    # orsbench.checks.deployment_probe.Deployment)
    deployment: Any = None
    # timing
    ttl_skip: str | None = None
    ttl_waited: float | None = None

    def note_call(self, probe: str, exchange: str, refused: str | None, *, fresh: bool) -> Refusal | None:
        """Count a call of ``probe`` as run, or as refused for ``refused`` (see :class:`Refusal`); the refusal, if any."""
        if refused is None:
            self.ran[probe] += 1
            return None
        refusal = Refusal(probe, exchange, refused, fresh)
        self.refusals.append(refusal)
        return refusal


#: How many rewards of folded outputs :class:`Folded` keeps: ``reward.well_formed`` shows 80 characters of them.
REWARD_SAMPLE = 40


@dataclass
class Folded:
    """What was judged of the exchanges a bounded grader did not keep (``orsbench proxy --evidence-limit``).

    A proxy in front of a trainer sees millions of exchanges; keeping them all grows its memory without
    bound. Past the limit, traffic is *folded*: each exchange is judged on arrival by the same
    per-exchange rules the checks apply (:mod:`orsbench.checks.verdicts`) and only the tallies stay here,
    so the checks that count all traffic count it all. An offending exchange is kept instead (a few per
    check: all a message shows), so a failure is never folded away. Empty for ``orsbench check``.
    """

    #: How many exchanges were folded.
    exchanges: int = 0
    #: Per check id: how many folded exchanges the check would have counted.
    counts: Counter[str] = field(default_factory=Counter)
    #: Per check id: offending folded exchanges beyond the ones kept as examples.
    offending: Counter[str] = field(default_factory=Counter)
    #: ``call.sse_framing``: the line endings of the folded streams.
    line_endings: set[str] = field(default_factory=set)
    #: ``reward.well_formed``: the first rewards of folded outputs (its message shows a prefix).
    rewards: list[Any] = field(default_factory=list)
    #: ``call.keepalive_interval``: folded calls longer than the allowed silence, their comments, the longest.
    long_calls: int = 0
    comments: int = 0
    longest: float = 0.0
    #: ``call.keepalive_interval``: the folded long call with the longest silence (name, seconds, exchange).
    slowest: tuple[str, float, Exchange] | None = None


@dataclass
class Evidence:
    target: str
    options: Options
    env: str | None = None
    split: str | None = None
    index: int | None = None
    exchanges: dict[str, Exchange] = field(default_factory=dict)
    #: What probes learned: parsed tools, tasks, the tool inputs they built, ...
    facts: Facts = field(default_factory=Facts)
    probes_run: list[str] = field(default_factory=list)
    #: probe name → error text, when a probe itself crashed (an orsbench bug).
    probe_errors: dict[str, str] = field(default_factory=dict)
    #: Set when the target cannot be reached (connection error on ``/health``).
    unreachable: str | None = None
    #: Set when the target answers HTTP but does not look like an ORS server.
    not_ors: str | None = None
    #: Set when the run's options name what the server does not have (an unknown
    #: ``--env`` or ``--split``) or nothing can be played (an empty split): the fix
    #: is the user's, so it is a usage error, never a failed check.
    usage_error: str | None = None

    #: Every exchange of the run in the order it was made, named or not (what a reproducer
    #: replays a session's set-up from); empty when only the named exchanges are known.
    history: list[Exchange] = field(default_factory=list)
    #: Tallies of the traffic a bounded passive grader did not keep (empty otherwise).
    folded: Folded = field(default_factory=Folded)

    def get(self, name: str) -> Exchange | None:
        return self.exchanges.get(name)

    def record(self, name: str, exchange: Exchange) -> Exchange:
        self.exchanges[name] = exchange
        return exchange

    def matching(self, prefix: str) -> list[tuple[str, Exchange]]:
        """Exchanges whose name starts with ``prefix``, in the order they were made."""
        return [(k, v) for k, v in self.exchanges.items() if k.startswith(prefix)]


# -- reading evidence -----------------------------------------------------------
def json_of(exchange: Exchange | None) -> tuple[bool, Any]:
    """``(True, value)`` when the body is JSON, else ``(False, None)``."""
    if exchange is None or exchange.status is None:
        return False, None
    try:
        return True, loads(exchange.body)
    except ValueError:
        return False, None


#: 19 digits in a row: perhaps an integer past 64 bits, which orjson reads as a float (json.loads: an int).
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19}")


def loads(data: bytes | str) -> Any:
    """JSON as :func:`json.loads` reads it, through orjson where orjson can (several times faster).

    Every answer a proxy forwards is read by the graders, so this is on its hot path. orjson reads
    the rest identically; what it refuses (``NaN``, ``1e400``, lone surrogates, bytes that are not
    UTF-8) falls back to :func:`json.loads`, and so does a text with 19 digits in a row, because
    orjson turns an integer past 64 bits into a float where :func:`json.loads` keeps it exact. So a
    value is never read differently, and malformed JSON raises ``ValueError`` either way.
    """
    if (_LONG_DIGITS if isinstance(data, bytes) else _LONG_DIGITS_TEXT).search(data) is not None:
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def stream_of(exchange: Exchange | None) -> SSEStream | None:
    """The parsed event stream of an answer that was meant to be SSE (whatever its content type)."""
    if exchange is None or exchange.status != 200:
        return None
    if exchange.sse is not None:
        return exchange.sse
    if not exchange.body:
        return SSEStream()
    return parse(exchange.body)


def task_id_of(exchange: Exchange | None) -> str | None:
    """Data of the first ``task_id`` event of a stream (whatever its content type)."""
    if exchange is None or exchange.status != 200:
        return None
    return _derive(exchange, "task_id", _task_id)


def _task_id(exchange: Exchange) -> str | None:
    stream = stream_of(exchange)
    event = stream.first(protocol.EVENT_TASK_ID) if stream is not None else None
    return event.data if event is not None and event.data else None


def request_json(exchange: Exchange) -> Any:
    """The request body as JSON (``None`` for an empty body); raises ``ValueError`` when it is not JSON.

    Read once per exchange: the server checks and the client checks behind a proxy both read it.
    """
    value = _derive_request(exchange)
    if value is _NOT_JSON:
        raise ValueError("the request body is not JSON")
    return value


_NOT_JSON = object()


def _derive_request(exchange: Exchange) -> Any:
    return _cached(exchange, "request", exchange.request_body, 0, _request_value)


def _request_value(exchange: Exchange) -> Any:
    body = exchange.request_body
    try:
        return loads(body) if body else None
    except ValueError:
        return _NOT_JSON


def _derive(exchange: Exchange, key: str, read: Any) -> Any:
    """``read(exchange)``, computed once per body and stream (a body or a stream that changed is read again)."""
    sse = exchange.sse
    if sse is not None:
        return _cached(exchange, key, sse, len(sse.events), read)
    return _cached(exchange, key, exchange.body, 0, read)


def _cached(exchange: Exchange, key: str, source: Any, size: int, read: Any) -> Any:
    """``read(exchange)`` kept in ``exchange.derived[key]`` beside the ``source`` (and its ``size``) it was read from."""
    derived = exchange.derived
    if derived is not None:
        hit = derived.get(key)
        if hit is not None and hit[0] is source and hit[1] == size:
            return hit[2]
    else:
        derived = exchange.derived = {}
    value = read(exchange)
    derived[key] = (source, size, value)
    return value


def result_of(exchange: Exchange | None) -> tuple[str, Any]:
    """Classify a ``/call`` answer.

    ``("result", obj)`` — an ``end`` whose reassembled data is a JSON object;
    ``("error", text)`` — an SSE ``error`` event;
    ``("bad-json", text)`` — an ``end`` that is not a JSON object;
    ``("no-end", None)`` — a 200 stream with neither ``end`` nor ``error``;
    ``("http", status)`` — not a 200 answer (or no answer at all).
    """
    if exchange is None or exchange.status != 200:
        return "http", None if exchange is None else exchange.status
    return _derive(exchange, "result", _result)


def _result(exchange: Exchange) -> tuple[str, Any]:
    stream = stream_of(exchange)
    assert stream is not None
    for event in stream.events:
        if event.event == protocol.EVENT_ERROR:
            return "error", event.data
        if event.event == protocol.EVENT_END:
            text = stream.reassembled(protocol.EVENT_CHUNK, protocol.EVENT_END)
            try:
                value = loads(text or "")
            except ValueError:
                return "bad-json", text
            return ("result", value) if isinstance(value, dict) else ("bad-json", text)
    return "no-end", None


def is_number(value: Any) -> bool:
    """A finite JSON number that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def short(value: Any, limit: int = 160) -> str:
    """A compact one-line rendering of ``value`` for messages."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answer(exchange: Exchange | None) -> str:
    """``"<status> <body excerpt>"`` (or the transport error) for messages."""
    if exchange is None:
        return "no request was made"
    if exchange.status is None:
        return f"no answer ({exchange.error})"
    body = short(exchange.body, 120)
    return f"{exchange.status} {body}" if body else str(exchange.status)


_BLOCK_FIELDS = {"text": {"text": str}, "image": {"data": str, "mimeType": str}}


def block_problems(blocks: object, where: str, allowed: tuple[str, ...] = ("text", "image")) -> list[str]:
    """What is wrong with a list of content blocks (empty when it is well-formed)."""
    if not isinstance(blocks, list):
        return [f"{where} is a JSON {type(blocks).__name__}, not an array of blocks"]
    problems = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            problems.append(f"{where}[{i}] is not an object")
            continue
        kind = block.get("type")
        if kind not in allowed:
            problems.append(f"{where}[{i}].type is {kind!r}, not one of {list(allowed)}")
            continue
        for key, typ in _BLOCK_FIELDS.get(kind, {}).items():
            if not isinstance(block.get(key), typ):
                problems.append(f"{where}[{i}] ({kind}) has no string {key!r}")
    return problems


def call_streams(ev: Evidence, *, resumes: bool = False) -> list[tuple[str, Exchange]]:
    """The 200 answers of every fresh tool call (and of resumes, if asked)."""
    names = list(ev.facts.fresh_calls)
    if resumes:
        names += [n for n in ("call.resume",) if ev.get(n) is not None]
    return [(n, ev.exchanges[n]) for n in names if n in ev.exchanges and ev.exchanges[n].status == 200]


def call_results(ev: Evidence) -> list[tuple[str, dict[str, Any]]]:
    """Every fresh tool call that answered a JSON result (ok:true or ok:false), by exchange name."""
    out = []
    for name, ex in call_streams(ev):
        kind, body = result_of(ex)
        if kind == "result":
            out.append((name, body))
    return out


def call_label(name: str) -> str:
    """How an exchange name reads in a finding (``play.3`` → ``play #3``)."""
    return name.replace("call.", "").replace("play.", "play #").replace("latch.", "after finish: ")


def expect_status(ex: Exchange | None, expected: int, label: str = "", *more: Exchange | None) -> CheckOutcome:
    """Pass when ``ex`` was answered ``expected``; fail saying what came instead; skip when it was never sent."""
    if ex is None:
        return skipped("not probed")
    prefix = f"{label}: " if label else ""
    if ex.status == expected:
        return passed(f"{prefix}{expected}", expected, ex)
    return failed(f"{prefix}expected {expected}, got {answer(ex)}", ex.status, ex, *more)
