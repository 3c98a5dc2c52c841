"""Deployment checks: what a balancer, a proxy or a CDN in front of the server does to ORS (docs/protocol.md §16).

Every finding here is about the deployment, not the environment's code: the same server answering
directly would pass. Each says so, shows what was seen, and its remediation names the fix in the
balancers people use (nginx, ingress-nginx, Envoy). The evidence is the ``deployment`` probe's
(:mod:`orsbench.checks.deployment_probe`) and, for the answers from something in front and the
failing backend, every exchange of the run so far.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set as AbstractSet
from typing import Any

from orsbench import protocol
from orsbench.checks import verdicts
from orsbench.checks.deployment_probe import Deployment, Stream, Trail
from orsbench.checks.evidence import Evidence, answer
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.checks.registry import check
from orsbench.wire.evidence import Exchange

#: What every finding of this group begins with.
NOT_THE_CODE = "the deployment in front of the server, not the environment's code"
#: Why the findings on sessions' requests are not judged once ``deployment.affinity`` fails (``voids_sessions``).
ROUTING_VOIDS = "requests of one session reach different replicas"
#: A stream whose end came later than this after sending can show a buffered stream (task_id arriving with end).
BUFFER_TELLS_S = 0.5
#: task_id arriving this close to the end, as a share of the call's time, is a buffered stream.
BUFFERED_SHARE = 0.1
#: Streams closed without end whose durations differ by at most this ratio were cut "after about the same time".
SAME_CUT = 1.25

#: The checks of this group (each shown failing against a planted balancer mistake: tests/test_deployment.py).
DEPLOYMENT_CHECKS = (
    "deployment.affinity",
    "deployment.front_answers",
    "deployment.streams_unbuffered",
    "deployment.stream_idle_timeout",
    "deployment.stream_compression",
    "deployment.body_size",
    "deployment.backend_errors",
)


def _found(ev: Evidence) -> Deployment | None:
    found = ev.facts.deployment
    return found if isinstance(found, Deployment) else None


_path = verdicts.path_of


# -- affinity -----------------------------------------------------------------------------------------------
def _trail_text(trail: Trail) -> str:
    return ", ".join(f"{what} {ex.status or 'no answer'}" for _, what, ex in trail.steps)


def _never_found(trails: list[Trail]) -> set[str]:
    """The routes that answered "not found" every time, in every session: one route of the server that cannot find
    a session (``session.*`` judges that), not requests spread over replicas — those find it now and then."""
    seen: dict[str, set[bool]] = {}
    for trail in trails:
        for (_, what, _), found in zip(trail.steps, trail.found()):
            if found is not None:
                seen.setdefault(what, set()).add(found)
    return {what for what, values in seen.items() if values == {False}}


def _seen(trail: Trail, skip: AbstractSet[str]) -> list[bool]:
    return [s for (_, what, _), s in zip(trail.steps, trail.found()) if s is not None and what not in skip]


def _flipped(trail: Trail, skip: AbstractSet[str] = frozenset()) -> bool:
    """Found, then "not found", then found again: its requests reach different processes."""
    seen = _seen(trail, skip)
    first_lost = next((i for i, s in enumerate(seen) if not s and any(seen[:i])), None)
    return first_lost is not None and any(seen[first_lost:])


def _lost(trail: Trail, skip: AbstractSet[str] = frozenset()) -> bool:
    seen = _seen(trail, skip)
    return any(not s and any(seen[:i]) for i, s in enumerate(seen))


@check(
    "deployment.affinity",
    severity=Severity.REQUIRED,
    title="every request of a session reaches the process that holds it, whatever the connection",
    probe="affinity",
    spec="§16.1, §8",
    voids_sessions=ROUTING_VOIDS,
    remediation="Route every request of a session by its X-Session-ID header, never round-robin or by connection: nginx "
    "`hash $http_x_session_id consistent;` in the upstream; ingress-nginx the annotation "
    "`nginx.ingress.kubernetes.io/upstream-hash-by: \"$http_x_session_id\"`; Envoy `lb_policy: RING_HASH` with a route "
    "`hash_policy` on the header `x-session-id`; a cloud balancer's stickiness by that header, not by cookie or client IP.",
)
def affinity(ev: Evidence) -> CheckOutcome:
    found = _found(ev)
    if found is None or not found.trails:
        return skipped((found.skipped.get("affinity") if found else None) or "the deployment probe did not run")
    skip = _never_found(found.trails)
    flipped = [t for t in found.trails if _flipped(t, skip)]
    requests = sum(len(t.steps) for t in found.trails)
    measured = {t.sid: [ex.status for _, _, ex in t.steps] for t in found.trails}
    if flipped:
        shown = flipped[0]
        lost = next(ex for (_, what, ex), seen in zip(shown.steps, shown.found()) if seen is False and what not in skip)
        return failed(
            f"{NOT_THE_CODE}: {len(flipped)} of {len(found.trails)} session(s) were answered \"not found\" after they worked "
            f"and found again later — their requests reach different replicas (one session, each request on a new "
            f"connection: {_trail_text(shown)})",
            measured,
            shown.steps[0][2], lost,
        )  # fmt: skip
    lost = [t for t in found.trails if _lost(t, skip)]
    if lost:
        ttl = ev.facts.orsbench_stats and ((ev.facts.orsbench_stats.get("config") or {}).get("ttl"))
        ttl = ev.options.ttl if ev.options.ttl is not None else ttl
        span = max(t.span for t in lost)
        if isinstance(ttl, (int, float)) and span >= ttl:
            return passed(f"{len(lost)} session(s) were reaped by the TTL ({ttl:g} s) and never answered again: no sign of routing", measured)
        return warned(
            f"{len(lost)} of {len(found.trails)} session(s) answered \"not found\" within {span:g} s of working and never again "
            f"({_trail_text(lost[0])}): that is a session lost, not requests spread over replicas — a replica that restarted, "
            "a TTL shorter than that, or a server that forgets sessions (the session.* checks judge the server directly)",
            measured,
            lost[0].steps[0][2],
        )
    if skip:
        return passed(
            f"{len(found.trails)} session(s), {requests} requests on as many connections: found every time but on "
            f"{', '.join(sorted(skip))}, which never found any session — the server's route, not the routing (session.* judges it)",
            measured,
        )
    return passed(f"{len(found.trails)} session(s), {requests} requests on as many connections, each found every time", measured)


# -- answers from something in front --------------------------------------------------------------------------
def _html(exchange: Exchange) -> bool:
    kind = exchange.content_type.split(";")[0].strip().lower()
    return kind == "text/html" or exchange.body.lstrip()[:64].lower().startswith((b"<!doctype html", b"<html"))


def _own_errors_plain(ev: Evidence) -> bool:
    """The server answers its own ordinary 4xx (not a 413) in something other than JSON: a plain-text 413 is then
    its own too (``http.error_detail`` judges that shape), not evidence of a front."""
    return any(
        ex.status is not None and 400 <= ex.status < 500 and ex.status != 413 and not ex.is_sse and not _html(ex)
        and ex.json_or_none() is None
        for ex in ev.exchanges.values()
    )


def _not_the_server(exchange: Exchange, plain_server: bool = False) -> str | None:
    """Why an answer looks like a balancer's own (an HTML page, a non-JSON 413/502/504), or ``None``."""
    if exchange.status is None or exchange.is_sse:
        return None
    if _html(exchange):
        return f"an HTML page ({exchange.status})"
    if exchange.status in (413, 502, 504) and exchange.json_or_none() is None and not (plain_server and exchange.status == 413):
        return f"a {exchange.status} that is not JSON"
    return None


@check(
    "deployment.front_answers",
    severity=Severity.RECOMMENDED,
    title="every answer is the server's own JSON: no balancer error pages, one kind of server behind the URL",
    probe="deployment",
    spec="§16.2, §1.1",
    remediation="Let the server's own answers through: nginx without `proxy_intercept_errors on` and `error_page` for the "
    "ORS routes; ingress-nginx without `custom-http-errors` (or `default-backend`) on them; Envoy without `local_reply_config` "
    "rewriting them. Put one implementation and one version behind a URL (a Server header that changes between answers "
    "is two deployments mixed).",
)
def front_answers(ev: Evidence) -> CheckOutcome:
    plain = _own_errors_plain(ev)
    pages = [(name, ex, why) for name, ex in ev.exchanges.items() if (why := _not_the_server(ex, plain))]
    servers = Counter(ex.headers["server"] for ex in ev.exchanges.values() if ex.status is not None and "server" in ex.headers)
    problems = []
    if pages:
        shown = "; ".join(f"{ex.method} {_path(ex)} → {why}: {answer(ex)[:80]}" for _, ex, why in pages[:3])
        problems.append(f"{len(pages)} answer(s) came from something in front ({shown})")
    if len(servers) > 1:
        problems.append("the Server header changes between answers: " + ", ".join(f"{v!r} ×{n}" for v, n in servers.most_common()))
    measured = {"pages": [f"{ex.method} {_path(ex)} {ex.status}" for _, ex, _ in pages], "server": dict(servers)}
    if problems:
        return failed(f"{NOT_THE_CODE}: " + "; ".join(problems), measured, *(ex for _, ex, _ in pages[:3]))
    return passed(f"{len(ev.exchanges)} answers, none a balancer's page; Server: {', '.join(servers) or 'none sent'}", measured)


# -- streams through the front --------------------------------------------------------------------------------
def _timed(found: Deployment) -> list[Stream]:
    return [s for s in found.streams if s.task_id_at is not None and s.end_at is not None]


def _times(stream: Stream) -> dict[str, Any]:
    return {"task_id_s": round(stream.task_id_at or 0, 3), "end_s": round(stream.end_at or 0, 3), "encoding": stream.exchange.content_encoding}


@check(
    "deployment.streams_unbuffered",
    severity=Severity.RECOMMENDED,
    title="a slow tool's task_id arrives at once, long before its end (the stream is not buffered in front)",
    probe="deployment",
    spec="§16.3, §3.2, §8",
    remediation="Pass event streams through as they come: nginx `proxy_buffering off;` (and no `proxy_ignore_headers "
    "X-Accel-Buffering`), ingress-nginx `nginx.ingress.kubernetes.io/proxy-buffering: \"off\"`, no gzip of text/event-stream "
    "(nginx `gzip_types` without it), no CDN or cache on /call; Envoy streams by default (no buffer filter on the route).",
)
def streams_unbuffered(ev: Evidence) -> CheckOutcome:
    found = _found(ev)
    if found is None:
        return skipped("the deployment probe did not run")
    timed = _timed(found)
    if not timed:
        return skipped(found.skipped.get("streams") or "no tool call streamed both task_id and end")
    slowest = max(timed, key=lambda s: s.end_at or 0)
    measured = {s.tool: _times(s) for s in timed}
    if (slowest.end_at or 0) < BUFFER_TELLS_S:
        return not_applicable(f"the slowest tool ({slowest.tool}) ended in {slowest.end_at:.2f} s: too fast to tell a buffered stream", measured)
    held = [s for s in timed if (s.end_at or 0) >= BUFFER_TELLS_S and (s.end_at or 0) - (s.task_id_at or 0) < BUFFERED_SHARE * (s.end_at or 0)]
    if held:
        s = held[0]
        zipped = f" (the stream came {s.exchange.content_encoding}-compressed: a compressor holds events back)" if s.exchange.content_encoding else ""
        return failed(
            f"{NOT_THE_CODE}: {s.tool}'s task_id arrived {s.task_id_at:.2f} s after the call, with its end at {s.end_at:.2f} s — "
            f"the stream is buffered in front{zipped}; a client cannot resume a call it never got the task_id of, and keep-alives "
            "never reach it (a server that itself held task_id back would look the same: call.* judge it directly)",
            measured,
            s.exchange,
        )  # fmt: skip
    return passed(f"{slowest.tool}: task_id at {slowest.task_id_at:.2f} s, end at {slowest.end_at:.2f} s", measured)


def _keepalive(ev: Evidence) -> float:
    if ev.options.ping_interval is not None:
        return ev.options.ping_interval
    reported = ((ev.facts.orsbench_stats or {}).get("config") or {}).get("ping_interval")
    return float(reported) if isinstance(reported, (int, float)) else protocol.PING_INTERVAL_S


#: Seconds of silence before a cut below which a stream closed without its end is the server's, not an idle timeout.
IDLE_CUT_MIN_S = 1.0


@check(
    "deployment.stream_idle_timeout",
    severity=Severity.REQUIRED,
    title="a long call's stream is not cut by an idle timeout in front (timeouts above the keep-alive interval)",
    probe="deployment",
    spec="§16.3, §8",
    remediation="Keep every idle and read timeout in front above the server's keep-alive interval (10 s; a long tool call "
    "sends nothing else between its keep-alives): nginx `proxy_read_timeout 3600s; proxy_send_timeout 3600s;`, "
    "ingress-nginx `nginx.ingress.kubernetes.io/proxy-read-timeout: \"3600\"`, Envoy route `timeout: 0s` and a stream "
    "`idle_timeout` above it, a cloud balancer's idle timeout likewise.",
)
def stream_idle_timeout(ev: Evidence) -> CheckOutcome:
    found = _found(ev)
    if found is None:
        return skipped("the deployment probe did not run")
    unended = [
        s for s in found.streams
        if s.end_at is None and s.task_id_at is not None and not (s.exchange.error or "").startswith("stream still open")
    ]  # fmt: skip
    # An idle timeout cuts a stream that has been silent for seconds; one closed right after its events is the
    # server's own stream without its end (call.end_event judges that), never a front's timeout.
    cut = [s for s in unended if s.exchange.elapsed - (s.task_id_at or 0.0) >= IDLE_CUT_MIN_S]
    measured = {s.name: round(s.exchange.elapsed, 3) for s in found.streams}
    keepalive = _keepalive(ev)
    if len(cut) >= 2:
        times = sorted(s.exchange.elapsed for s in cut)
        if times[-1] <= SAME_CUT * max(times[0], 1e-3):
            shorter = f", shorter than the server's keep-alive interval ({keepalive:g} s)" if times[-1] < keepalive else ""
            how = cut[0].exchange.error or "the connection closed"
            return failed(
                f"{NOT_THE_CODE}: {len(cut)} streams of {cut[0].tool} were closed without their end after "
                f"{', '.join(f'{t:.1f}' for t in times)} s — about the same time{shorter}: an idle timeout in front cuts "
                f"calls mid-stream ({how})",
                measured,
                *(s.exchange for s in cut[:2]),
            )  # fmt: skip
    if cut:
        return warned(f"{cut[0].tool}'s stream was closed without its end after {cut[0].exchange.elapsed:.1f} s, not always at the same time", measured, cut[0].exchange)
    longest = max((s.exchange.elapsed for s in found.streams), default=0.0)
    if unended:
        return passed(
            f"{len(unended)} stream(s) of {unended[0].tool} closed without their end right after their events "
            f"({unended[0].exchange.elapsed:.2f} s): the server's own streams (call.end_event judges them), not a front's timeout",
            measured,
        )
    if longest < 1.0:
        return not_applicable(f"no tool runs long enough to meet an idle timeout (the longest call took {longest:.2f} s)", measured)
    return passed(f"{len(found.streams)} stream(s) ended with their end; the longest took {longest:.1f} s", measured)


@check(
    "deployment.stream_compression",
    severity=Severity.ADVISORY,
    title="event streams arrive uncompressed (a compressed stream is decoded and reported, never misread)",
    probe="deployment",
    spec="§16.3",
    remediation="Do not compress text/event-stream: nginx `gzip_types` without text/event-stream (or `gzip off;` on the ORS "
    "routes), ingress-nginx `gzip-types` likewise, Envoy's compressor filter with `content_type` that leaves it out. A "
    "client that reads the raw bytes (curl without --compressed, some SSE libraries) misreads a compressed stream, and a "
    "compressor may hold events back.",
)
def stream_compression(ev: Evidence) -> CheckOutcome:
    streams = [(name, ex) for name, ex in ev.exchanges.items() if ex.is_sse and ex.status == 200]
    if not streams:
        return skipped("no event stream was answered")
    zipped = [(name, ex) for name, ex in streams if ex.content_encoding]
    if zipped:
        kinds = Counter(ex.content_encoding for _, ex in zipped)
        return failed(
            f"{NOT_THE_CODE}: {len(zipped)} of {len(streams)} event stream(s) came compressed "
            f"({', '.join(f'Content-Encoding: {k} ×{n}' for k, n in kinds.items())}); orsbench decoded them as httpx and "
            "aiohttp do and judged the decoded events",
            {name: ex.content_encoding for name, ex in zipped},
            zipped[0][1],
        )
    return passed(f"{len(streams)} event stream(s), none compressed", len(streams))


# -- body size ------------------------------------------------------------------------------------------------
def _ors_shaped(exchange: Exchange) -> bool:
    if exchange.status == 200 and exchange.sse is not None:
        return any(e.event in (protocol.EVENT_END, protocol.EVENT_ERROR) for e in exchange.sse.events)
    # The server's own JSON error, with or without its `detail` (http.error_detail judges the shape).
    return exchange.status is not None and exchange.status >= 400 and isinstance(exchange.json_or_none(), dict)


@check(
    "deployment.body_size",
    severity=Severity.RECOMMENDED,
    title="a /call with a large input (--max-body, default 2 MiB) gets an ORS answer, not the front's refusal",
    probe="deployment",
    spec="§16.4",
    remediation="Let tool inputs as large as your environment takes through the front: nginx `client_max_body_size 64m;` "
    "(its default is 1m), ingress-nginx `nginx.ingress.kubernetes.io/proxy-body-size: \"64m\"`, Envoy's "
    "`max_request_bytes` of a buffer filter; the server itself may still refuse with its own JSON 413.",
)
def body_size(ev: Evidence) -> CheckOutcome:
    found = _found(ev)
    if found is None or found.body is None:
        return skipped((found.skipped.get("body") if found else None) or "the deployment probe did not run")
    exchange = ev.get(found.body)
    if exchange is None:
        return skipped("the large call was not recorded")
    size = f"{found.body_bytes / 1048576:.1f} MiB"
    if exchange.status == 413 and not _html(exchange) and _own_errors_plain(ev):
        return passed(
            f"a {size} /call was answered 413 in plain text, as the server answers its other errors (http.error_detail "
            "judges their shape): the server's own limit, not a front's",
            found.body_bytes,
            exchange,
        )
    if _ors_shaped(exchange):
        if exchange.status == 200:
            return passed(f"a {size} /call was answered by the server (an event stream)", found.body_bytes, exchange)
        return passed(f"a {size} /call was answered {exchange.status} with the server's own JSON detail", found.body_bytes, exchange)
    return failed(
        f"{NOT_THE_CODE}: a {size} /call was answered {answer(exchange)[:160]} — not the server's JSON or event stream: a body "
        "limit in front refuses large tool inputs",
        {"bytes": found.body_bytes, "status": exchange.status, "content_type": exchange.content_type},
        exchange,
    )


# -- a failing backend ----------------------------------------------------------------------------------------
def _gateway_error(exchange: Exchange) -> bool:
    """A 502/504, or a 503 that is not the server's JSON (its own 503 is "setup still running", §2.3)."""
    if exchange.status in (502, 504):
        return True
    return exchange.status == 503 and not isinstance(exchange.json_or_none(), dict)


@check(
    "deployment.backend_errors",
    severity=Severity.REQUIRED,
    title="no request is answered 502/504 (or a balancer's 503): every replica behind the front answers",
    probe="deployment",
    spec="§16.5, §1.1",
    remediation="Take dead or failing replicas out of the upstream and drain a replica before stopping it: health checks on "
    "GET /health (nginx `max_fails`/`fail_timeout` or an active check, ingress-nginx readiness probes, Envoy outlier "
    "detection and active health checks); a 502 loses the request, and a session whose replica is gone is lost with it.",
)
def backend_errors(ev: Evidence) -> CheckOutcome:
    bad = [(name, ex) for name, ex in ev.exchanges.items() if _gateway_error(ex)]
    total = len(ev.exchanges)
    if bad:
        sessions = {ex.request_headers.get(protocol.SESSION_HEADER) for _, ex in bad} - {None}
        counts = Counter(f"{ex.method} {_path(ex)} {ex.status}" for _, ex in bad)
        return failed(
            f"{NOT_THE_CODE}: {len(bad)} of {total} requests were answered by a failing backend (in {len(sessions)} "
            f"session(s)): " + "; ".join(f"{k} ×{n}" for k, n in counts.most_common(3)) + " — one healthy server never answers so",
            dict(counts),
            *(ex for _, ex in bad[:3]),
        )
    return passed(f"{total} requests, none answered 502/504 or a balancer's 503", total)
