"""The ``timing`` probe: resume a running call by ``task_id``, keep-alives, and the session TTL.

It runs last: waiting out a TTL holds sessions idle for seconds, and it needs
the durations the call and play probes measured (``docs/protocol.md`` §3.2, §8).
"""

from __future__ import annotations

import time

from orsbench import protocol
from orsbench.checks.collector import Collector, probe
from orsbench.checks.evidence import stream_of, task_id_of


# -- timing: resume while running, keep-alives, TTL -------------------------------------
@probe("timing")
def probe_timing(col: Collector) -> None:
    ev = col.ev
    if ev.env is None:
        return
    _resume_running(col)
    _ttl(col)


def _resume_running(col: Collector) -> None:
    """Cut a slow call's stream after its ``task_id`` and resume it, as the SDK does after a drop."""
    ev = col.ev
    slow = [(name, t) for name, t in ev.facts.durations.items() if t >= 0.5]
    plan = dict(ev.facts.call_plan)
    if not slow:
        return
    name, duration = max(slow, key=lambda item: item[1])
    if duration > col.options.timeout:
        return
    reuse = ev.facts.call_sid if not ev.facts.call_session_finished else None
    sid = reuse or col.open_session()
    if sid is None:
        return
    cut = col.call(sid, name, plan.get(name, {}), max_stream_seconds=min(duration / 4, 2.0))
    col.rec("timing.cut", cut)
    events = stream_of(cut).events if stream_of(cut) is not None else []
    if task_id_of(cut) and not any(e.event in (protocol.EVENT_END, protocol.EVENT_ERROR) for e in events):
        col.rec("timing.resume", col.call(sid, name, plan.get(name, {}), task_id=task_id_of(cut)))
    if sid != reuse:
        col.end_session(sid)


def _ttl(col: Collector) -> None:
    """Idle one session past the TTL while pinging another; only when that fits in ``--timeout``.

    When the idle one survived, wait one TTL more with nothing pinged: reaped then, it was kept
    alive by the other session's pings (``isolation.ttl_per_session``); alive still, the server
    never reaps (``session.ttl_reap``).
    """
    ev = col.ev
    ttl, reaper = col.ttl()
    if ttl is None:
        ev.facts.ttl_skip = "the server's session TTL is unknown (pass --ttl SECONDS)"
        return
    wait = ttl + reaper + 0.5
    if wait > col.options.timeout:
        ev.facts.ttl_skip = (
            f"waiting out the TTL ({ttl:g} s + {reaper:g} s reaper) would exceed --timeout {col.options.timeout:g} s; "
            "serve with a short TTL (orsbench serve --ttl 2) or raise --timeout"
        )
        return
    idle = col.open_session("timing.ttl.idle.create")
    kept = col.open_session("timing.ttl.kept.create")
    if idle is None or kept is None:
        return
    start = time.monotonic()
    while time.monotonic() - start < wait:
        col.client.ping(kept)
        time.sleep(min(ttl / 3, 1.0))
    ev.facts.ttl_waited = round(time.monotonic() - start, 3)
    idle_ping = col.rec("timing.ttl.idle.ping", col.client.ping(idle))
    col.rec("timing.ttl.kept.ping", col.client.ping(kept))
    if idle_ping.status == 200:
        # Not reaped while another session was pinged: is it reaped once nobody pings (a server-wide idle
        # clock, isolation.ttl_per_session), or never (session.ttl_reap)? Only on this failing path: one TTL more.
        time.sleep(wait)
        col.rec("timing.ttl.idle.ping.unpinged", col.client.ping(idle))
