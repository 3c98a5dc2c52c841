"""The ``deployment`` probe: what several sessions see through whatever stands in front of the server.

An ORS session lives in one process's memory, so a deployment of several replicas behind a balancer
must send every request of a session to the same replica, pass event streams through unbuffered, keep
its idle timeout above the keep-alive interval and let a tool's large input through (docs/protocol.md
§16). One process answering directly gets all of that for free; this probe asks for it the way a
trainer does, and records what came back for the ``deployment.*`` checks:

* *affinity* (its own probe, ``affinity``, run before the ``session`` probe so that routing is judged before what
  it breaks): ``--sessions N`` sessions (default 3), each used in rounds spread over time, every request on a new
  connection (``Connection: close``) — so a balancer that routes by connection, or by nothing at all, shows as a
  session answered "not found" after it worked, and found again later. "Not found" is 404, or whatever the server
  answers a session it never opened (asked once per route first: a server may say 400);
* *streams*: each tool with a known input called once on a fresh session (up to :data:`STREAM_TOOLS`),
  with the arrival of ``task_id`` and of ``end``; a stream closed without ``end`` is called once more,
  to see whether it is cut after the same time;
* *body size*: one ``/call`` whose body is ``--max-body`` bytes (default 2 MiB).

The streams and the large body run right after the ``call`` probe (they need its tool plan). Both probes are
leaves: no later probe reads what they found, so ``--only`` without ``deployment.*`` skips them.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.checks.collector import Collector, probe
from orsbench.checks.evidence import Options, task_id_of
from orsbench.wire.evidence import Exchange

#: Every request of the probe opens its own connection: stickiness by connection is no affinity.
NEW_CONNECTION = {"Connection": "close"}
#: Rounds each session is used in (``--sessions`` above the default: :data:`DEEP_ROUNDS`), and the pause between them.
ROUNDS, DEEP_ROUNDS = 3, 6
ROUND_PAUSE_S, DEEP_ROUND_PAUSE_S = 0.2, 0.5
#: The requests of a session's turn, in turn: what a trainer sends on an open session.
STEPS = ("prompt", "ping", "call", "task_tools")
#: Requests a session sends back to back in one turn: 1 to 3, drawn from a generator seeded by ``--seed``. Two
#: in a row reach two replicas under round-robin; a varying count keeps the sessions' turns from lining up
#: with the replica count (three sessions of one request each on three replicas would each meet their own).
TURN = (1, 3)
#: Tools timed through the front at most (the slowest is what buffering and idle timeouts show on).
STREAM_TOOLS = 6
#: The padding key of the large body (an input key no schema names; a strict schema refuses it, which is an answer).
PADDING_KEY = "orsbench_padding"


#: A server's answer to a session it does not hold: its status, and its body with the session id blanked out.
LostAnswer = tuple[int, str]


@dataclass
class Trail:
    """One session of the affinity part: what each of its requests answered, in order."""

    sid: str
    #: (evidence name, what was asked, the exchange), in the order sent.
    steps: list[tuple[str, str, Exchange]] = field(default_factory=list)
    #: Seconds from the session's create to its last request.
    span: float = 0.0
    #: What the server answers, per step, for a session it does not hold (:func:`lost_answer`; 404 where not learned).
    lost: dict[str, LostAnswer] = field(default_factory=dict)

    def found(self) -> list[bool | None]:
        """Per step: the session was found (True), answered "not found" (False), or neither can be told (None)."""
        return [session_found(ex, self.lost.get(what)) for _, what, ex in self.steps]


@dataclass
class Stream:
    """One tool call timed through the front: when ``task_id`` and ``end`` arrived (seconds after sending)."""

    tool: str
    name: str
    exchange: Exchange
    task_id_at: float | None
    end_at: float | None


@dataclass
class Deployment:
    """What the ``deployment`` probe saw (``Facts.deployment``)."""

    trails: list[Trail] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    #: The evidence name of the large ``/call`` and its size in bytes (``None`` when it was not sent).
    body: str | None = None
    body_bytes: int = 0
    #: Why a part did not run, by part ("affinity", "streams", "body").
    skipped: dict[str, str] = field(default_factory=dict)


def _blanked(exchange: Exchange) -> str:
    sid = protocol.session_in(exchange.request_headers) or ""
    text = exchange.body.decode("utf-8", errors="replace").strip()
    return text.replace(sid, "{sid}") if sid else text


def lost_answer(exchange: Exchange) -> LostAnswer | None:
    """The server's "not found" for a session it never opened, where it is a 4xx other than 404 (a server may answer
    400 "no such session"); ``None`` for a 404 (always "not found") or anything that is not a client error."""
    if exchange.status is None or not 400 <= exchange.status < 500 or exchange.status == 404:
        return None
    return exchange.status, _blanked(exchange)


def session_found(exchange: Exchange, lost: LostAnswer | None = None) -> bool | None:
    """Whether a request of a session reached a process that holds it: 404 is "not found", and so is the very answer
    the server gives a session it never opened (``lost``: same status, same body but for the session id — a 400 for
    an input it refuses says something else); an answer from the server otherwise is "found"; a transport failure or
    a proxy's 5xx tells nothing."""
    if exchange.status is None or exchange.status >= 500:
        return None
    if exchange.status == 404:
        return False
    if lost is not None and exchange.status == lost[0] and _blanked(exchange) == lost[1]:
        return False
    return True


def event_times(exchange: Exchange) -> tuple[float | None, float | None]:
    """Seconds after sending when the ``task_id`` and the closing ``end`` (or ``error``) event arrived."""
    stream = exchange.sse
    if stream is None:
        return None, None
    first = stream.first(protocol.EVENT_TASK_ID)
    last = next((e for e in stream.events if e.event in (protocol.EVENT_END, protocol.EVENT_ERROR)), None)
    start = exchange.started_at
    return (first.at - start if first else None), (last.at - start if last else None)


def found_of(col: Collector) -> Deployment:
    """What the deployment probes found so far (made on first use: ``--only`` may run one of them alone)."""
    if not isinstance(col.ev.facts.deployment, Deployment):
        col.ev.facts.deployment = Deployment()
    return col.ev.facts.deployment


def affinity(col: Collector, plan: list[tuple[str, Any]]) -> None:
    """The affinity part (the ``affinity`` probe, :mod:`orsbench.checks.probes`): first what the server answers a
    session it never opened, per route, then sessions used over time and connections. ``plan``: tool inputs built
    from the shared listing (a call is one of the steps; without one, a ping stands in)."""
    found = found_of(col)
    if col.ev.env is None:
        found.skipped["affinity"] = "no environment to use"
        return
    _affinity(col, found, plan)


@probe("deployment", leaf=True)
def probe_deployment(col: Collector) -> None:
    """Each tool's stream and one large body: what the front does to streams and bodies."""
    ev = col.ev
    found = found_of(col)
    if ev.env is None:
        found.skipped.update(dict.fromkeys(("streams", "body"), "no environment to use"))
        return
    plan = list(ev.facts.call_plan)
    # The large call's session is created first, so that its setup() runs while the streams are timed.
    body_session = _create(col, "deployment.body.create") if plan and col.options.max_body > 0 else None
    if plan:
        _streams(col, found, plan)
        _body(col, found, plan, body_session)
    else:
        found.skipped["streams"] = found.skipped["body"] = "no tool input could be built"


def _create(col: Collector, name: str) -> tuple[str, Exchange]:
    sid = col.new_sid()
    body = {"env_name": col.ev.env, **col.task_source()}
    exchange = col.rec(name, col.client.request("POST", protocol.CREATE, sid=sid, json_body=body, headers=NEW_CONNECTION))
    if exchange.status == 200:
        col.adopt(sid)
    return sid, exchange


def _step(col: Collector, sid: str, what: str, plan: list[tuple[str, Any]]) -> Exchange:
    env = col.ev.env or ""
    if what == "prompt":
        return col.ready(lambda: col.client.request("GET", protocol.env_path(env, protocol.PROMPT), sid=sid, headers=NEW_CONNECTION))
    if what == "task_tools":
        return col.client.request("GET", protocol.env_path(env, protocol.TASK_TOOLS), sid=sid, headers=NEW_CONNECTION)
    if what == "call" and plan:
        tool, value = plan[0]
        return _call(col, sid, tool, value)
    return col.client.request("POST", protocol.PING, sid=sid, headers=NEW_CONNECTION)


def _call(col: Collector, sid: str, tool: str, value: Any) -> Exchange:
    path = protocol.env_path(col.ev.env or "", protocol.CALL)
    timeout = col.options.timeout
    return col.ready(
        lambda: col.client.request(
            "POST", path, sid=sid, json_body={"name": tool, "input": value}, headers=NEW_CONNECTION,
            stream=True, read_timeout=timeout, max_stream_seconds=timeout,
        )
    )  # fmt: skip


def _affinity(col: Collector, found: Deployment, plan: list[tuple[str, Any]]) -> None:
    options = col.options
    deep = options.sessions > Options().sessions
    rounds, pause = (DEEP_ROUNDS, DEEP_ROUND_PAUSE_S) if deep else (ROUNDS, ROUND_PAUSE_S)
    started: dict[str, float] = {}
    for i in range(options.sessions):
        sid, exchange = _create(col, f"deployment.affinity.{i}.create")
        if exchange.status != 200:
            continue
        trail = Trail(sid, [(f"deployment.affinity.{i}.create", "create", exchange)])
        found.trails.append(trail)
        started[sid] = exchange.started_at
    if not found.trails:
        found.skipped["affinity"] = "/create refused every session it asked for"
        return
    # What the server answers a session it never opened, per route: "not found" is that answer, whatever its status.
    lost: dict[str, LostAnswer] = {}
    for what in STEPS:
        if what == "call" and not plan:
            continue
        name = f"deployment.affinity.unknown.{what}"
        answer = lost_answer(col.rec(name, _step(col, f"orsbench-never-opened-{uuid.uuid4()}", what, plan)))
        if answer is not None:
            lost[what] = answer
    for trail in found.trails:
        trail.lost = lost
    draw = random.Random(options.seed)
    for r in range(rounds):
        if r:
            time.sleep(pause)
        for i, trail in enumerate(found.trails):
            for k in range(draw.randint(*TURN)):
                what = STEPS[(r + i + k) % len(STEPS)]
                name = f"deployment.affinity.{i}.{r}.{k}.{what}"
                trail.steps.append((name, what, col.rec(name, _step(col, trail.sid, what, plan))))
    for trail in found.trails:
        trail.span = round(trail.steps[-1][2].started_at - started[trail.sid], 3)
        col.end_session(trail.sid)


def _streams(col: Collector, found: Deployment, plan: list[tuple[str, Any]]) -> None:
    bound = max(col.options.timeout, 10.0)
    # Every session is created before any is used, so that a slow setup() runs for all of them at once.
    opened = [(tool, value, *_create(col, f"deployment.stream.{tool}.create")) for tool, value in plan[:STREAM_TOOLS]]
    budget = time.monotonic() + bound
    for tool, value, sid, created in opened:
        if created.status != 200:
            continue
        if time.monotonic() > budget:
            found.skipped["streams"] = f"the stream budget ({bound:g} s) was spent before {tool}"
            col.end_session(sid)
            continue
        for attempt in ("", ".again"):
            if attempt:
                sid, created = _create(col, f"deployment.stream.{tool}.create{attempt}")
                if created.status != 200:
                    break
            name = f"deployment.stream.{tool}{attempt}"
            # Setup first: a server that holds the call while setup() runs sends task_id and end together after it,
            # which is no buffering in front (a text adventure's 9 s setup read as a buffered stream).
            col.wait_setup(sid)
            with col.keepalive(sid):
                exchange = col.rec(name, _call(col, sid, tool, value))
            col.end_session(sid)
            task_at, end_at = event_times(exchange)
            found.streams.append(Stream(tool, name, exchange, task_at, end_at))
            # A stream closed without its end after its task_id is called once more: cut after the same time again
            # is a timeout in front, not chance.
            if end_at is not None or task_id_of(exchange) is None or (exchange.error or "").startswith("stream still open"):
                break


def _body(col: Collector, found: Deployment, plan: list[tuple[str, Any]], session: tuple[str, Exchange] | None) -> None:
    size = col.options.max_body
    if size <= 0 or session is None:
        found.skipped["body"] = "--max-body 0"
        return
    tool, value = plan[0]
    base = dict(value) if isinstance(value, dict) else {}
    sid, created = session
    if created.status != 200:
        found.skipped["body"] = f"/create answered {created.status}"
        return
    overhead = len(f'{{"name": "{tool}", "input": {{"{PADDING_KEY}": ""}}}}') + 64
    tool_input = {**base, PADDING_KEY: "x" * max(0, size - overhead)}
    found.body = "deployment.body"
    exchange = col.rec(found.body, _call(col, sid, tool, tool_input))
    found.body_bytes = len(exchange.request_body)
    col.end_session(sid)
