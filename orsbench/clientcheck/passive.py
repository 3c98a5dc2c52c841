"""The client side of ``orsbench proxy``: grade each client session in the traffic a proxy forwards.

:class:`~orsbench.checks.passive.PassiveGrader` judges the *server* from what passes through
the proxy; :class:`PassiveClientGrader` judges the *clients* from the same exchanges: each session
a trainer's workers open is filed on its own (:mod:`.attribution`, by session id and by
connection), graded when it ends by every client check that needs nothing but traffic — deleted or
left open, Retry-After honoured, no 4xx retried, no call after ``finished``, cut streams resumed by
``task_id``, ``env_name`` and secrets sent, no request storm — and tallied (:mod:`.live`). The
proxy knows no case: which environment, script or secrets a client was meant to use is unknown,
so those checks judge what the traffic shows (``Context.run`` is ``None``).

It is an observer (:mod:`orsbench.wire.observe`), told of each request as it starts and as its answer
ends — by :class:`~orsbench.servers.proxy.ProxyApp` itself, or, when the proxy injects faults, by a
:class:`~orsbench.servers.request_log.RequestLog` tap outside them, so the graded traffic is what the
clients got (an injected 503 included); :mod:`.proxy_grading` plugs it in. Safe to read from another thread: :meth:`results` is the
report so far — ended sessions tallied, open ones graded as they stand but not yet judged on
deletion — and :meth:`results` with ``final=True`` ends every open session ("still open at exit").
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from orsbench import protocol
from orsbench.checks.model import CheckResult
from orsbench.clientcheck.attribution import UNOPENED_S, Attributor, Episode
from orsbench.clientcheck.checks import ClientCheck
from orsbench.clientcheck.live import Judgements, Tallies, judge_episode, label, traffic_checks, traffic_judgement
from orsbench.clientcheck.traffic import Seen, seen_of, session_of
from orsbench.verdict import Judgement
from orsbench.wire.observe import Observing

if TYPE_CHECKING:
    from orsbench.wire.evidence import Exchange

#: Seconds between sweeps for idle connections and abandoned sessions (on the traffic's own thread).
SWEEP_S = 0.5
#: The check a live report leaves out for sessions still open: they may yet be deleted.
_DELETED = "client.session_deleted"


class PassiveClientGrader(Observing):
    """Files forwarded exchanges under client sessions and grades each session when it ends (an observer)."""

    def __init__(self, checks: list[ClientCheck] | None = None, *, abandoned_s: float = protocol.SESSION_TTL_S) -> None:
        """``abandoned_s``: a session with no request for this long is graded as left open (a server reaps it)."""
        self.checks = checks if checks is not None else traffic_checks()
        self.abandoned_s = abandoned_s
        self.tallies = Tallies()
        #: Each ended session's one verdict (:func:`~orsbench.clientcheck.live.traffic_judgement`), counted.
        self.judgements = Judgements()
        self.attributor = Attributor(self._ended, unopened_s=UNOPENED_S)  # a loaded trainer is slow to /create, as in hosted mode
        self._lock = threading.Lock()
        self._next_sweep = 0.0
        self.closed = False

    # -- observing ---------------------------------------------------------------------------
    def request_started(self, peer: str | None, at: float, path: str, sid: str | None = None) -> None:
        """A request for ``path`` (in session ``sid``) began, before its answer: how a busy client host is told
        from a quiet one, and a session waiting on an answer from an idle one."""
        with self._lock:
            self.attributor.started(peer, at, path, sid)

    def observe(self, request: Seen) -> None:
        """A request's answer ended: file it under its session (grading the sessions that end)."""
        with self._lock:
            if self.closed:
                return
            self.attributor.seen(request)
            now = time.monotonic()
            if now >= self._next_sweep:
                self._next_sweep = now + SWEEP_S
                self.attributor.sweep(now, abandoned_s=self.abandoned_s)

    # -- the observer: the one way a source feeds it (the proxy's own exchanges, or a request log's) ----------
    def started(self, exchange: Exchange, path: str) -> None:
        """A request began (forwarded by the proxy, or arriving at a request log outside injected faults)."""
        self.request_started(exchange.peer, exchange.started_at, path, session_of(exchange))

    def ended(self, exchange: Exchange, path: str) -> None:
        """A request's answer ended: what the client got, an injected fault's answer included."""
        self.observe(seen_of(exchange, path))

    def _ended(self, episode: Episode) -> None:
        name = label(episode) + _why(episode)
        pending = judge_episode(episode, self.checks)
        self.tallies.add("", name, pending)
        self.judgements.add("", traffic_judgement(pending, name))
        for request in episode.requests:  # both graders have read these exchanges: the server's evidence keeps
            request.exchange.derived = None  # them, not what was parsed from them (a report parses again)

    # -- the report ----------------------------------------------------------------------------
    def results(self, *, final: bool = False) -> list[CheckResult]:
        """One result per client check over every session so far; ``final`` ends the open ones first."""
        with self._lock:
            if final and not self.closed:
                self.attributor.close()
                self.closed = True
            if final or not self.attributor.open:
                return self.tallies.results()
            tallies = self.tallies.copy()
            live = [c for c in self.checks if c.id != _DELETED]
            for episode in self.attributor.open.values():
                tallies.add("", label(episode) + " (still open)", judge_episode(episode, live))
            return tallies.results()

    def verdicts(self) -> list[Judgement]:
        """The verdicts of the sessions ended so far: one judgement per verdict, with how many sessions got it."""
        with self._lock:
            return self.judgements.cases()

    @property
    def sessions(self) -> int:
        """Sessions graded so far (ended ones)."""
        return self.tallies.sessions[""]


def _why(episode: Episode) -> str:
    return f" ({episode.ended})" if episode.ended and episode.ended != "deleted" else ""
