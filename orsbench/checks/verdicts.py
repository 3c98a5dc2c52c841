"""Per-exchange verdicts: what the checks over *all* traffic judge of one exchange.

``http.*`` and the per-call checks each loop over every exchange (or every fresh
call) and count or flag each one. The loop bodies live here, one public function
per check, so that the proxy's passive grader can judge an exchange it will not
keep (:class:`~orsbench.checks.evidence.Folded`) with the very rule the check
applies to the ones it keeps: one definition, the same verdict.

Each function answers ``None`` when the check does not count the exchange,
``""`` when it counts it and finds nothing wrong, else the problem as the
check's message shows it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from orsbench import protocol
from orsbench.checks.evidence import Options, block_problems, is_number, json_of, result_of, short, stream_of
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import SSEStream

Verdict = str | None
#: The :class:`~orsbench.checks.evidence.Folded` tally of folded outputs that omit ``finished`` (a warning).
MISSING_FINISHED = "reward.finished_bool.missing"

_STREAMING = ("/" + protocol.CALL, "/" + protocol.SCORE_GROUP, protocol.CREATE_SESSION)
_TERMINAL = (protocol.EVENT_END, protocol.EVENT_ERROR)
_KNOWN_EVENTS = {protocol.EVENT_TASK_ID, protocol.EVENT_CHUNK, protocol.EVENT_END, protocol.EVENT_ERROR}
#: ok:false answers the collector provoked, and the reason each must carry.
EXPECTED_REASONS = {
    "call.unknown_tool": protocol.REASON_NOT_FOUND,
    "call.invalid_input": protocol.REASON_INPUT_VALIDATION,
    "call.large": protocol.REASON_INPUT_VALIDATION,
    "latch.known": protocol.REASON_EPISODE_FINISHED,
}


def path_of(ex: Exchange) -> str:
    """The request's path (and query), as messages show it."""
    return "/" + ex.url.split("//", 1)[-1].split("/", 1)[-1]


# -- http.* -------------------------------------------------------------------------
def json_label(name: str, ex: Exchange) -> Verdict:
    """``http.json_content_type``: a JSON answer of a non-streaming route must say application/json."""
    if not ex.body or ex.status is None or path_of(ex).split("?")[0].endswith(_STREAMING) or ex.status == 503 and name == "starting":
        return None
    if not json_of(ex)[0]:
        return None
    return "" if ex.content_type.split(";")[0].strip() == protocol.JSON_CONTENT_TYPE else ex.content_type or "none"


def server_error(ex: Exchange) -> Verdict:
    """``http.no_server_errors``: every exchange counts; a 5xx is wrong, but a 503 saying the backend is starting."""
    wrong = (
        ex.status is not None
        and ex.status >= 500
        and not (ex.status == 503 and ex.headers.get(protocol.BACKEND_STATE_HEADER.lower()))
    )
    return f"{ex.status}" if wrong else ""


def error_detail(ex: Exchange) -> Verdict:
    """``http.error_detail``: a 4xx (but a bodiless 405) must carry a JSON ``detail``."""
    if ex.status is None or not 400 <= ex.status < 500 or ex.status == 405 and not ex.body:
        return None
    ok, body = json_of(ex)
    return "" if ok and isinstance(body, dict) and "detail" in body else "no JSON detail"


# -- per-call checks ------------------------------------------------------------------
#: Request bodies over this many bytes may meet a front's or a server's size limit (nginx's default, 1 MiB): a 413
#: to one is judged by ``deployment.body_size`` (docs/protocol.md §16.4), not as a refused valid call.
LARGE_BODY = 1 << 20


def call_refused(name: str, ex: Exchange) -> bool:
    """``call.sse_content_type``: a valid call (primary or played) answered anything but 200 — but a 413 to a large
    body (the deployment probe's, seen again by a proxy's passive grading) is a size limit, not a refusal."""
    if not (name == "call.primary" or name.startswith("play.")) or ex.status == 200:
        return False
    if ex.status == 413:
        length = next((v for k, v in ex.request_headers.items() if k.lower() == "content-length"), "")
        size = max(len(ex.request_body or b""), int(length) if length.isdigit() else 0)
        return size <= LARGE_BODY
    return True


def not_event_stream(ex: Exchange) -> Verdict:
    """``call.sse_content_type``: a 200 /call answer must be text/event-stream."""
    return (ex.content_type or "no content type") if ex.status == 200 and not ex.is_sse else ""


def task_id_first(ex: Exchange) -> Verdict:
    """``call.first_event_task_id``: a 200 stream starts with a non-empty task_id."""
    if ex.status != 200:
        return None
    stream = stream_of(ex)
    events = stream.events if stream else []
    if not events or events[0].event != protocol.EVENT_TASK_ID or not events[0].data.strip():
        return f"events {[e.event for e in events]}"
    return ""


def end_event(ex: Exchange) -> Verdict:
    """``call.end_event``: a 200 stream ends with exactly one terminal event, and closes."""
    if ex.status != 200:
        return None
    stream = stream_of(ex)
    names = stream.names() if stream else []
    terminal = [i for i, n in enumerate(names) if n in _TERMINAL]
    if ex.error:
        return f"the stream did not close ({ex.error})"
    if not terminal:
        return f"no end or error event (events {names})"
    if len(terminal) > 1 or terminal[0] != len(names) - 1:
        return f"events after the terminal one: {names}"
    if stream is not None and stream.incomplete:
        return f"an unterminated event after the end: {stream.incomplete}"
    return ""


def end_json(ex: Exchange) -> Verdict:
    """``call.end_json``: the end of a 200 stream (one without an error event) is a RunToolOutput."""
    if ex.status != 200:
        return None
    kind, body = result_of(ex)
    if kind == "error":
        return None
    if kind != "result":
        return f"end data is not a JSON object: {short(body, 80)}"
    if not isinstance(body.get("ok"), bool):
        return f'"ok" is {body.get("ok")!r}, not a bool'
    if body["ok"] and not isinstance(body.get("output"), dict):
        return 'ok:true without an "output" object'
    if not body["ok"] and not isinstance(body.get("error"), str):
        return 'ok:false without an "error" string'
    return ""


def framing_problems(stream: SSEStream) -> list[str]:
    """Departures from the reference's SSE framing, as the one SSE parser recorded them."""
    problems = []
    if len(stream.line_endings) > 1:
        problems.append(f"mixed line endings {sorted(repr(e) for e in stream.line_endings)}")
    problems += [f"line without a colon: {short(line, 40)!r}" for line in stream.bare_lines]
    problems += [f"unknown field {line.partition(':')[0]!r}" for line in stream.unknown_fields]
    problems += [f"unknown event name {name!r}" for name in stream.event_fields if name not in _KNOWN_EVENTS]
    problems += [f"no space after '{name}:'" for name in stream.unspaced_fields]
    return list(dict.fromkeys(problems))


def sse_framing(ex: Exchange) -> Verdict:
    """``call.sse_framing``: a 200 stream is framed as the reference frames it."""
    stream = stream_of(ex)
    if stream is None:
        return None
    found = framing_problems(stream)
    if stream.incomplete and not ex.error:
        found.append("the last event is not terminated by an empty line")
    return "; ".join(found)


def output_shape(body: dict[str, Any]) -> Verdict:
    """``call.tool_output_shape``: an ok:true result's output is a ToolOutput with valid blocks."""
    if body.get("ok") is not True:
        return None
    output = body["output"]
    found = block_problems(output.get("blocks"), "blocks")
    if "metadata" in output and output["metadata"] is not None and not isinstance(output["metadata"], dict):
        found.append(f"metadata is a JSON {type(output['metadata']).__name__}, not an object or null")
    return "; ".join(found[:3])


def error_reason(name: str, body: dict[str, Any]) -> Verdict:
    """``call.error_reason``: an ok:false result carries a known reason, the expected one where the probe knows it."""
    if body.get("ok") is not False:
        return None
    reason = body.get("reason")
    expected = EXPECTED_REASONS.get(name)
    if reason is None:
        return "no reason"
    if reason not in protocol.REASONS:
        return f"unknown reason {reason!r}"
    if expected is not None and reason != expected:
        return f"reason {reason!r}, expected {expected!r}"
    return ""


def reward(output: dict[str, Any]) -> Verdict:
    """``reward.well_formed``: a reward is a finite number or null."""
    value = output.get("reward")
    if value is None or is_number(value):
        return ""
    kind = "a bool" if isinstance(value, bool) else "not finite" if isinstance(value, float) else f"a JSON {type(value).__name__}"
    return f"reward {value!r} is {kind}"


def finished_flag(output: dict[str, Any]) -> Verdict:
    """``reward.finished_bool``: ``finished`` is a bool (``None`` when it is omitted: a warning, not a failure)."""
    if "finished" not in output:
        return None
    return "" if isinstance(output["finished"], bool) else f"finished is {output['finished']!r}, not a bool"


def keepalive_allowed(options: Options, stats: dict[str, Any] | None) -> tuple[float, float]:
    """``call.keepalive_interval``: the promised cadence and the longest silence it allows."""
    stats_config = (stats or {}).get("config") or {}
    interval = options.ping_interval or stats_config.get("ping_interval") or protocol.PING_INTERVAL_S
    return interval, 1.5 * interval + 0.5  # half a second of slack for scheduling on a busy machine


def longest_gap(ex: Exchange) -> float:
    """``call.keepalive_interval``: the longest silence of a stream (its whole duration when it has no events)."""
    stream = stream_of(ex)
    if stream is None:
        return ex.elapsed
    times = sorted([ex.started_at + ex.elapsed_headers] + [e.at for e in stream.events] + [c.at for c in stream.comments])
    return max((b - a for a, b in pairwise(times)), default=ex.elapsed)


def outputs_of(results: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The ok:true outputs among call results (what the reward checks read)."""
    return [(name, body["output"]) for name, body in results if body.get("ok") is True and isinstance(body.get("output"), dict)]
