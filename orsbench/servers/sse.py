"""Server-side SSE framing exactly as the reference (sse-starlette) writes it.

Lines end with CRLF, an empty line ends each event, ``event:`` comes before
``data:``, and data containing line breaks is split over several ``data:``
lines. Parsing lives in :mod:`orsbench.wire.sse`; this module only writes.
"""

from __future__ import annotations

from datetime import datetime, timezone

from orsbench import protocol

HEADERS: list[tuple[bytes, bytes]] = [
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
    (b"content-type", protocol.SSE_CONTENT_TYPE.encode()),
]


def frame(event: str, data: str) -> bytes:
    """One event: ``event: <name>\\r\\ndata: <line>\\r\\n...\\r\\n``."""
    if "\n" in data or "\r" in data:
        lines = data.splitlines() or [""]
        body = "".join(f"data: {line}\r\n" for line in lines)
    else:
        body = f"data: {data}\r\n"
    return f"event: {event}\r\n{body}\r\n".encode()


def ping_comment() -> bytes:
    """The keep-alive comment the reference sends: ``: ping - <utc timestamp>``."""
    return f": ping - {datetime.now(timezone.utc)}\r\n\r\n".encode()


def result_frames(result: str, chunk_size: int) -> bytes:
    """A result cut into ``chunk`` events of ``chunk_size`` characters and a final ``end``."""
    if len(result) <= chunk_size:
        return frame(protocol.EVENT_END, result)
    parts = [result[i : i + chunk_size] for i in range(0, len(result), chunk_size)]
    out = [frame(protocol.EVENT_CHUNK, p) for p in parts[:-1]]
    out.append(frame(protocol.EVENT_END, parts[-1]))
    return b"".join(out)
