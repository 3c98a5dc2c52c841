"""The project's one SSE parser: strict WHATWG ``text/event-stream`` rules.

Every consumer of event streams in orsbench — the wire client, the checks, the
load driver — parses with :class:`SSEParser`, so a framing bug is found (or
made) in exactly one place. The rules are the HTML standard's
(https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream):

* lines end with CRLF, LF or CR (a CR at the end of one chunk may pair with an
  LF at the start of the next);
* a line starting with ``:`` is a comment (ORS keep-alives: ``: ping - <ts>``);
* ``field: value`` strips exactly one leading space from the value, never more
  (the reference client's ``lstrip()`` loses data here);
* ``data`` lines accumulate joined by ``\\n``; an empty line dispatches;
* a block with no ``data`` line dispatches nothing;
* an event that is not terminated by an empty line when the stream closes is
  *not* dispatched — we keep it aside as ``incomplete`` so checks can say so.

Unlike a browser we also record what a conformance checker needs: the line
terminators seen and when each item arrived.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
#: Looked up once: a proxy builds a parser per stream, and the codec registry lookup is not free.
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


@dataclass(frozen=True)
class SSEEvent:
    """A dispatched event. ``event`` is ``"message"`` when no ``event:`` field came."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None
    at: float = 0.0  # time.monotonic() when the dispatching empty line arrived


@dataclass(frozen=True)
class SSEComment:
    text: str  # without the leading colon
    at: float = 0.0


@dataclass
class SSEStream:
    """Everything parsed from one stream."""

    events: list[SSEEvent] = field(default_factory=list)
    comments: list[SSEComment] = field(default_factory=list)
    #: Fields of a block still open when the stream ended (never dispatched).
    incomplete: dict[str, str] | None = None
    #: Line terminators seen, e.g. ``{"\\r\\n"}``.
    line_endings: set[str] = field(default_factory=set)
    #: Lines whose field name is not one of event/data/id/retry.
    unknown_fields: list[str] = field(default_factory=list)
    #: Lines with no colon at all (a field with an empty value, by the rules; rarely meant).
    bare_lines: list[str] = field(default_factory=list)
    #: Field names written ``name:value`` without the customary single space.
    unspaced_fields: list[str] = field(default_factory=list)
    #: Every ``event:`` value, in order, whether or not its block dispatched.
    event_fields: list[str] = field(default_factory=list)

    def first(self, name: str) -> SSEEvent | None:
        return next((e for e in self.events if e.event == name), None)

    def names(self) -> list[str]:
        return [e.event for e in self.events]

    def reassembled(self, chunk: str, end: str) -> str | None:
        """The result these events carry in pieces (:func:`reassemble`): ``chunk`` data, then ``end`` data."""
        return reassemble(((e.event, e.data) for e in self.events), chunk, end)


def reassemble(events: Iterable[tuple[str, str]], chunk: str, end: str) -> str | None:
    """A result sent in pieces: the data of every ``chunk`` event, then the ``end`` event's, concatenated exactly as sent.

    An ORS ``/call`` answer cuts its result into ``chunk`` events and an ``end`` (docs/protocol.md §3.3):
    nothing goes between the pieces and no whitespace is touched (the reference client's ``lstrip()`` loses
    data here). ``None`` when no ``end`` came (a stream cut short). The names are the caller's (this module
    knows SSE, not ORS): orsbench's one reassembly, used by the checker's evidence, the cassette recorder,
    the load driver and the reference client alike.
    """
    parts: list[str] = []
    for name, data in events:
        if name == chunk:
            parts.append(data)
        elif name == end:
            parts.append(data)
            return "".join(parts)
    return None


class SSEParser:
    """Incremental parser: :meth:`feed` bytes as they arrive, then :meth:`close`."""

    def __init__(self, clock: "callable[[], float] | None" = None) -> None:
        self._decoder = _UTF8_DECODER(errors="replace")
        self._buffer = ""
        self._first = True
        self._clock = clock or time.monotonic
        self._reset_block()
        self.stream = SSEStream()

    def _reset_block(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._open = False  # any field line seen in the current block

    def feed(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        """Parse ``chunk``; return the events and comments it completed, in order."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        return self._consume(self._buffer + text, final=False)

    def close(self) -> SSEStream:
        """End of stream: flush the decoder and the last line; keep an unterminated block aside."""
        tail = self._decoder.decode(b"", final=True)
        self._consume(self._buffer + tail, final=True)
        if self._open:
            block = {"event": self._event, "data": "\n".join(self._data)}
            self.stream.incomplete = block
        return self.stream

    def _consume(self, text: str, *, final: bool) -> list[SSEEvent | SSEComment]:
        out: list[SSEEvent | SSEComment] = []
        now = self._clock()  # the lines of one read arrived together
        if "\r" not in text:  # LF only (what servers send): a split, not a regex match per line
            lines = text.split("\n")
            rest = lines.pop()
            if lines:
                self.stream.line_endings.add("\n")
                for line in lines:
                    item = self._line(line, now)
                    if item is not None:
                        out.append(item)
        else:
            pos = 0
            for match in _LINE_BREAK.finditer(text):
                brk = match.group()
                # A lone CR at the very end may be the first half of a CRLF.
                if brk == "\r" and match.end() == len(text) and not final:
                    break
                self.stream.line_endings.add(brk)
                item = self._line(text[pos : match.start()], now)
                if item is not None:
                    out.append(item)
                pos = match.end()
            rest = text[pos:]
        if final and rest:
            # A last line with no terminator is processed, but its block can't dispatch.
            self._line(rest, now)
            rest = ""
        self._buffer = rest
        return out

    def _line(self, line: str, now: float) -> SSEEvent | SSEComment | None:
        if line == "":
            return self._dispatch(now)
        if line[0] == ":":
            comment = SSEComment(line[1:], now)
            self.stream.comments.append(comment)
            return comment
        name, sep, value = line.partition(":")
        if not sep:
            self.stream.bare_lines.append(line)
        elif value.startswith(" "):
            value = value[1:]
        elif value:
            self.stream.unspaced_fields.append(name)
        self._open = True
        if name == "event":
            self._event = value
            self.stream.event_fields.append(value)
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        elif sep:
            self.stream.unknown_fields.append(line)
        return None

    def _dispatch(self, now: float) -> SSEEvent | None:
        if not self._data:
            self._reset_block()
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry, now)
        self.stream.events.append(event)
        self._reset_block()
        return event


def parse(raw: bytes) -> SSEStream:
    """Parse a whole stream at once."""
    parser = SSEParser()
    parser.feed(raw)
    return parser.close()
