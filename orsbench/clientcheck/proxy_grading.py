"""What ``orsbench proxy`` plugs into the traffic it forwards: its graders, composed once, here.

The proxy judges nothing itself (:mod:`orsbench.servers.proxy`); its observers
(:mod:`orsbench.wire.observe`) do. :class:`ProxyGrading` is that list, put together the one way a
front end, a benchmark or a test gets it:

* the server grader (:class:`~orsbench.checks.passive.PassiveGrader`) observes what the proxy forwards;
* the client grader (:class:`~orsbench.clientcheck.passive.PassiveClientGrader`) observes it too —
  or, when the proxy injects faults, the request-log tap outside them (:attr:`ProxyGrading.outer`),
  so clients are graded on what they got, an injected 503 included;
* ``--grade-sample``: the graders on the proxy sit behind one :class:`~orsbench.wire.sample.Sampled`
  decision per exchange, so a session is graded whole by both or by neither (the tap outside the faults
  is not sampled: the sample's counts are of what the proxy forwarded);
* then the cassette recorder and any other observer (``-v``'s printer), in that order.

:meth:`ProxyGrading.report` is the report the live route and the exit both give.
"""

from __future__ import annotations

from collections.abc import Sequence

from orsbench.checks.passive import PassiveGrader
from orsbench.checks.runner import Report
from orsbench.clientcheck.passive import PassiveClientGrader
from orsbench.config import DEFAULT_EVIDENCE_LIMIT
from orsbench.wire.observe import Observer, Observers
from orsbench.wire.sample import Sampled, SessionSample


class ProxyGrading:
    """The observers of one proxy: where each grader listens, and the report they make together."""

    def __init__(
        self,
        upstream: str,
        *,
        evidence_limit: int | None = DEFAULT_EVIDENCE_LIMIT,
        grade_sample: float | None = None,
        faults: bool = False,
        also: Sequence[Observer] = (),
    ) -> None:
        """``faults``: the proxy sits inside injected faults, and the client grader observes :attr:`outer` instead;
        ``also``: observers told after the graders (a cassette recorder, a printer)."""
        self.server = PassiveGrader(upstream, limit=evidence_limit)
        self.clients = PassiveClientGrader()
        self.sample = SessionSample(grade_sample) if grade_sample is not None else None
        graders: list[Observer] = [self.server] if faults else [self.server, self.clients]
        sampled: list[Observer] = [Sampled(self.sample, graders)] if self.sample is not None else graders
        #: What :class:`~orsbench.servers.proxy.ProxyApp` tells.
        self.inner = Observers([*sampled, *also])
        #: What a :class:`~orsbench.servers.request_log.RequestLog` outside the faults tells (nothing without faults).
        self.outer = Observers([self.clients] if faults else [])

    def report(self, *, final: bool = False) -> Report:
        """The server checks and, beside them, the client checks of every client session seen; ``final`` ends the open ones."""
        report = self.server.report()
        report.results += self.clients.results(final=final)
        report.cases = self.clients.verdicts()  # each client session's one verdict, in the words of check-client and the matrix
        if self.sample is not None:
            report.sampled = self.sample.as_dict()
        return report
