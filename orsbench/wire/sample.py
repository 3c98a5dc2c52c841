"""Which sessions a live grader sees: a fixed fraction of whole sessions (``orsbench proxy --grade-sample F``).

Grading every exchange is most of what the proxy costs under heavy load (BENCHMARKS.md). Sampling
*exchanges* would break the checks, which judge a session as a whole (its ``/create`` before its calls,
its ``/delete``), so the sample is of sessions: a session is in or out by a hash of its id, so every
request of it — and its ``/create_session``, whose answer hands the id out — is decided alike, with no
per-session state. Requests in no session (discovery: ``/list_environments``, ``/{env}/tools``) are
always graded; they are few. The counts say how many sessions were seen and how many graded.
:class:`Sampled` puts the graders behind the sample as one observer (:mod:`orsbench.wire.observe`).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from orsbench import protocol
from orsbench.wire.evidence import Exchange
from orsbench.wire.observe import Observer, Wrapping

_SESSION_HEADERS = (protocol.SESSION_HEADER.lower(), protocol.SESSION_HEADER)


class SessionSample:
    """Decides, per exchange, whether the graders see it: ``fraction`` of the sessions, whole."""

    def __init__(self, fraction: float) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"--grade-sample must be a fraction in (0, 1], got {fraction:g}")
        self.fraction = fraction
        self._bound = int(fraction * 2**32)
        #: Sessions handed out (``/create_session`` answered 200) and, of those, sessions in the sample.
        self.sessions_seen = 0
        self.sessions_graded = 0

    def takes(self, sid: str) -> bool:
        """Whether session ``sid`` is in the sample (the same answer for every request of it, in any process)."""
        return self.fraction >= 1.0 or zlib.crc32(sid.encode("utf-8", "replace")) < self._bound

    def starting(self, exchange: Exchange) -> bool:
        """As a request starts (no answer yet): graded unless its session header names a session out of the sample."""
        sid = _session_header(exchange)
        return sid is None or self.takes(sid)

    def __call__(self, exchange: Exchange, path: str) -> bool:
        """A finished exchange: graded when its session is in the sample (a ``/create_session``: the one it handed out)."""
        sid = _session_header(exchange)
        if sid is None and path == protocol.CREATE_SESSION and exchange.status == 200:
            sid = exchange.task_id
            if sid is not None:
                self.sessions_seen += 1
                taken = self.takes(sid)
                self.sessions_graded += taken
                return taken
        return sid is None or self.takes(sid)

    def as_dict(self) -> dict[str, float | int]:
        return {"fraction": self.fraction, "sessions_seen": self.sessions_seen, "sessions_graded": self.sessions_graded}


class Sampled(Wrapping):
    """``observers`` told only of the sessions in ``sample``: one decision per exchange, for all of them alike
    (a session is graded whole, by every grader, or not at all)."""

    def __init__(self, sample: SessionSample, observers: Sequence[Observer]) -> None:
        super().__init__(observers)
        self.sample = sample

    def started(self, exchange: Exchange, path: str) -> None:
        if self.sample.starting(exchange):
            self.observers.started(exchange, path)

    def ended(self, exchange: Exchange, path: str) -> None:
        if self.sample(exchange, path):
            self.observers.ended(exchange, path)


def _session_header(exchange: Exchange) -> str | None:
    headers = exchange.request_headers
    for name in _SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None
