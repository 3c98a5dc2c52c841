"""SIGTERM unwinds a training run like Ctrl-C, even where Python swallows the first raise.

Python's default SIGTERM ends the process at once — no ``finally``, no ``atexit`` — and would leave
the ``orsbench serve`` child running with no parent to stop it; so the handler raises ``SystemExit``
(exit status 143, 128 + SIGTERM, as a shell reports it) and ``with serve(...)`` stops the server.

But a signal handler runs in whatever frame the main thread is in, and when that is a finalizer
(``__del__`` of an asyncio transport, a weakref callback) Python reports the ``SystemExit`` as
"Exception ignored" and carries on: the run then trained to its end and exited 0 (seen in CI, once in
a few runs). So the handler also records the signal, and :func:`raise_if_stopped` raises it again at
safe points — after each training step and when the run returns.
"""

from __future__ import annotations

import signal

__all__ = ["install", "raise_if_stopped", "received"]

_received: int | None = None


def received() -> int | None:
    """The signal that asked this run to stop, or None."""
    return _received


def install() -> None:
    """Turn SIGTERM into ``SystemExit(143)``; a second SIGTERM ends the process for good."""

    def handler(signum: int, _frame: object) -> None:
        global _received
        signal.signal(signum, signal.SIG_DFL)
        _received = signum
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def raise_if_stopped() -> None:
    """Raise the ``SystemExit`` a swallowed handler could not (a no-op when no signal came)."""
    if _received is not None:
        raise SystemExit(128 + _received)
