"""How a load episode judges each answer, shared by the Locust user and the driver.

A load number is only worth something if every counted episode really
happened, so both front ends pass every answer through these functions and
count an episode only when all of them passed. Each failure names the stage and
says what came instead, which is what Locust shows in its failure table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from orsbench import protocol
from orsbench.wire.sse import SSEStream

#: The stages of one episode, in order (``call`` repeats); the model itself is :meth:`EpisodePlan.actions`.
STAGES = ("create_session", "create", "prompt", "task_tools", "call", "delete", "delete_session")

#: The response header in which a replica behind a balancer names itself (``orsbench serve --replicas``'s mock
#: replicas set it); the load front ends count episodes per replica from it. Defined once, in the protocol module.
REPLICA_HEADER = protocol.REPLICA_HEADER


def count_kind(kinds: Counter[str], message: str, count: int = 1, limit: int = 20) -> None:
    """Count ``message`` in ``kinds``, keeping at most ``limit`` distinct messages (the rest: ``(other failures)``)."""
    if message in kinds or len(kinds) < limit:
        kinds[message] += count
    else:
        kinds["(other failures)"] += count


class EpisodeFailure(Exception):
    """One stage of an episode went wrong; ``str()`` is ``"<stage>: <what happened>"``."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message


#: The longest single wait a ``Retry-After`` may ask of a load client (a bigger one is capped to this).
MAX_RETRY_AFTER_S = 10.0


def retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """Seconds to wait before sending again, when ``status`` is a 503 with ``Retry-After``; else ``None``.

    A ``503`` with ``Retry-After`` is an environment still starting (ORS: ``X-Backend-State: starting``)
    or briefly unavailable, and the clients trainers use wait and retry on exactly that, so a load
    client does the same instead of counting an error. Delta-seconds and HTTP-dates are both read;
    the wait is capped at :data:`MAX_RETRY_AFTER_S`. A 503 without the header is an error.
    """
    if status != 503:
        return None
    value = headers.get(protocol.RETRY_AFTER_HEADER)
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _snippet(body: bytes, limit: int = 200) -> str:
    text = body[:limit].decode("utf-8", errors="replace")
    return text + ("..." if len(body) > limit else "")


def json_answer(stage: str, status: int, body: bytes) -> Any:
    """The JSON body of a 200 answer; anything else is a failure."""
    if status != 200:
        raise EpisodeFailure(stage, f"HTTP {status}, expected 200: {_snippet(body)}")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise EpisodeFailure(stage, f"answer is not JSON: {_snippet(body)}") from None


def check_sid_echo(stage: str, status: int, body: bytes, sid: str) -> None:
    """``/create``, ``/delete`` and ``/delete_session`` answer ``{"sid": <the X-Session-ID>}``."""
    answer = json_answer(stage, status, body)
    if not isinstance(answer, dict) or answer.get("sid") != sid:
        raise EpisodeFailure(stage, f'expected {{"sid": {sid!r}}}, got {_snippet(body)}')


def check_list(stage: str, status: int, body: bytes) -> list[Any]:
    """``/prompt`` answers a JSON list of blocks."""
    answer = json_answer(stage, status, body)
    if not isinstance(answer, list):
        raise EpisodeFailure(stage, f"expected a JSON list, got {_snippet(body)}")
    return answer


def check_tools(stage: str, status: int, body: bytes, tool: str | Collection[str]) -> None:
    """``/task_tools`` lists every tool the episode is about to call."""
    answer = json_answer(stage, status, body)
    tools = answer.get("tools") if isinstance(answer, dict) else None
    listed = {t.get("name") for t in tools if isinstance(t, dict)} if isinstance(tools, list) else set()
    wanted = {tool} if isinstance(tool, str) else set(tool)
    missing = sorted(wanted - listed)
    if not isinstance(tools, list) or missing:
        raise EpisodeFailure(stage, f"tool {', '.join(map(repr, missing or sorted(wanted)))} is not listed: {_snippet(body)}")


def check_stream_status(stage: str, status: int, content_type: str, body: bytes = b"") -> None:
    """An SSE stage must answer 200 with ``text/event-stream`` before any event is read."""
    if status != 200:
        raise EpisodeFailure(stage, f"HTTP {status}, expected 200 with an event stream: {_snippet(body)}")
    if content_type.split(";")[0].strip() != "text/event-stream":
        raise EpisodeFailure(stage, f"content-type {content_type!r}, expected text/event-stream")


def session_id(stream: SSEStream) -> str:
    """The sid carried by ``/create_session``'s ``task_id`` event."""
    event = stream.first(protocol.EVENT_TASK_ID)
    if event is None or not event.data:
        raise EpisodeFailure("create_session", f"no task_id event carrying a sid (events: {stream.names()})")
    if stream.first(protocol.EVENT_END) is None:
        raise EpisodeFailure("create_session", f"stream ended without an end event (events: {stream.names()})")
    return event.data


def tool_output(stream: SSEStream) -> dict[str, Any]:
    """The ``output`` of a successful ``/call`` stream: ``task_id``, ``chunk``*, ``end`` with ``ok: true``."""
    if stream.first(protocol.EVENT_TASK_ID) is None:
        error = stream.first(protocol.EVENT_ERROR)
        detail = f"error event {error.data!r}" if error else f"events {stream.names()}"
        raise EpisodeFailure("call", f"no task_id event first ({detail})")
    terminal = next((e for e in stream.events if e.event in (protocol.EVENT_END, protocol.EVENT_ERROR)), None)
    if terminal is None:
        raise EpisodeFailure("call", f"truncated stream: it closed without an end event (events: {stream.names()})")
    if terminal.event == protocol.EVENT_ERROR:
        raise EpisodeFailure("call", f"error event: {terminal.data[:200]}")
    text = stream.reassembled(protocol.EVENT_CHUNK, protocol.EVENT_END) or ""
    try:
        result = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise EpisodeFailure("call", f"end data is not JSON: {text[:200]!r}") from None
    if not isinstance(result, dict) or result.get("ok") is not True:
        reason = result.get("reason") if isinstance(result, dict) else None
        error = result.get("error") if isinstance(result, dict) else result
        raise EpisodeFailure("call", f"tool call failed (reason {reason!r}): {str(error)[:200]}")
    output = result.get("output")
    if not isinstance(output, dict):
        raise EpisodeFailure("call", f"ok result has no output object: {text[:200]!r}")
    return output
