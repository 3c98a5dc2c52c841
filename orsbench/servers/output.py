"""What a server orsbench started wrote: its log read in windows, and the Python tracebacks in it.

The launcher (:mod:`orsbench.servers.launch`) sends a started server's stdout and stderr to one
file. A tool that raises shows up on the wire as an SSE ``error`` event or a 500 with a line of
text; the server's own traceback says where. :class:`OutputWindow` reads what the server wrote
since the last look, and :func:`tracebacks` picks the tracebacks out of it, so a finding can carry
the traceback of the failure it reports (``orsbench check --serve/--app/--cmd``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: At most this many characters of server output are read per window (a chatty server is cut at its tail).
WINDOW_CHARS = 200_000
#: At most this many lines of one traceback are kept (its head and its last lines: where, and what).
TRACEBACK_LINES = 40

_START = "Traceback (most recent call last):"
#: The lines Python puts between the tracebacks of chained exceptions.
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def tracebacks(text: str) -> list[str]:
    """The Python tracebacks in ``text``, each up to and including its exception line, in order.

    A chained traceback ("During handling of the above exception ...") is kept whole: its last
    exception line is the one raised. Long tracebacks keep their head and tail
    (:data:`TRACEBACK_LINES`).
    """
    lines = text.splitlines()
    found: list[str] = []
    i = 0
    while i < len(lines):
        if _START not in lines[i]:
            i += 1
            continue
        block = [lines[i][lines[i].index(_START) :]]
        i += 1
        while i < len(lines):
            line = lines[i]
            block.append(line)
            i += 1
            if line.startswith((" ", "\t")) or not line.strip() or _START in line or line.startswith(_CHAINED):
                continue
            # the exception line: it ends the traceback, unless the next one chains another to it
            following = next((later for later in lines[i:] if later.strip()), "")
            if not following.startswith(_CHAINED):
                break
        if len(block) > TRACEBACK_LINES:
            head, tail = block[:10], block[-(TRACEBACK_LINES - 11) :]
            block = [*head, f"  ... ({len(block) - len(head) - len(tail)} lines) ...", *tail]
        found.append("\n".join(block))
    return found


def exception_line(traceback: str) -> str:
    """The last line of a traceback: ``ValueError: ...``."""
    return traceback.rstrip().splitlines()[-1].strip() if traceback.strip() else ""


@dataclass
class OutputWindow:
    """Reads a server's output file a window at a time: each :meth:`next` returns what was written since the last."""

    path: Path
    offset: int = 0
    #: Every traceback read so far, in order.
    seen: list[str] = field(default_factory=list)

    def next(self) -> str:
        """The output written since the last call (at most :data:`WINDOW_CHARS` of it, the tail)."""
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return ""
        self.offset += len(data)
        text = data.decode("utf-8", errors="replace")
        return text[-WINDOW_CHARS:]

    def next_tracebacks(self) -> list[str]:
        """The tracebacks written since the last call."""
        found = tracebacks(self.next())
        self.seen += found
        return found
