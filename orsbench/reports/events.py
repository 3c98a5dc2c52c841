"""One stream of typed events per run, and the :class:`Handler` protocol every output format implements.

A run (``orsbench check``, ``orsbench check-client``, a hosted case) says what happens as it
happens — it started, a probe finished, a check was graded, a case's client ended, the run ended
with its :class:`~orsbench.checks.runner.Report` — as frozen events on one :class:`EventStream`.
Every output format is a handler of that one stream (:mod:`orsbench.reports.handlers`): the
terminal renders each event as it comes (progress on a long run), the file formats (JSON, JUnit,
Markdown, HTML) write at :class:`RunFinished`. So every format renders the same run, and a front
end only builds the list of handlers its flags ask for and feeds them the stream.

Why events and not more callbacks: the run's callbacks used to carry pre-rendered text (check-client
forged a probe line per case for the terminal), so only the terminal could read them. An event
carries the typed facts — a case's :class:`~orsbench.verdict.Judgement`, a check's
:class:`~orsbench.checks.model.CheckResult` — and each handler decides how its format says them.

The checker's runner (``checks/runner.run_checks``, a floor below) keeps its two callbacks
(``on_probe``, ``on_result``): :meth:`EventStream.on_probe` and :meth:`EventStream.on_result` are
those callbacks, turning each into its event, so the events come from the one run and no handler
runs anything again. The pattern is schemathesis' (an engine's event stream, a handler per output
with ``handle_event``/``shutdown``); the events are ours.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from types import TracebackType

    from orsbench.checks.evidence import Options
    from orsbench.checks.model import CheckResult
    from orsbench.checks.runner import Report
    from orsbench.verdict import Judgement


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Event:
    """Something that happened in a run; handlers tell the kinds apart by type."""


@dataclass(frozen=True)
class RunStarted(Event):
    """A run began: what is checked, and how (the first event of ``check`` and ``check-client``).

    ``check-client --hosted`` has none: it announces its ports and manifest itself, once they are bound.
    """

    #: The command that runs (``orsbench check``, ``orsbench check-client``); reports use it as their title.
    command: str
    #: What is checked: the server's URL, or the client's command.
    target: str
    #: The checker's resolved options (``env``, ``split``, ...); ``None`` for a client run.
    options: Options | None = None
    #: A client run: how many cases, and how many run at a time.
    cases: int | None = None
    jobs: int | None = None
    started_at: str = field(default_factory=_now)


@dataclass(frozen=True)
class ProbeFinished(Event):
    """A probe of the server checker collected its evidence: the checks that read it are graded next."""

    probe: str
    seconds: float
    requests: int


@dataclass(frozen=True)
class CaseFinished(Event):
    """A client command ended on one case (check-client), with its one verdict when it has one.

    ``judgement`` is ``None`` when no verdict on the client exists: the case's server failed
    (``server_error``), or the shell could not run the command at all.
    """

    case: str
    exit_code: int | None
    stopped_for: str | None
    duration_s: float
    requests: int
    judgement: Judgement | None = None
    server_error: str | None = None


@dataclass(frozen=True)
class SessionGraded(Event):
    """A client session of a hosted case ended and was graded (``check-client --hosted``)."""

    case: str
    #: Which session (its client's label) and why it ended (``deleted``, ``reaped by the server``, ...).
    label: str
    ended: str
    results: tuple[CheckResult, ...]
    duration_s: float
    requests: int
    judgement: Judgement | None = None


@dataclass(frozen=True)
class CheckFinished(Event):
    """One check was graded: its result, as the report will hold it (a baseline already applied)."""

    result: CheckResult
    #: The case it judged (check-client; the report's id then names it: ``client.tool_runs[echo]``).
    case: str | None = None


@dataclass(frozen=True)
class RunFinished(Event):
    """The run ended: its report, the one record every file format writes."""

    report: Report

    @property
    def duration_s(self) -> float:
        return self.report.duration_s


@runtime_checkable
class Handler(Protocol):
    """An output of a run: it is handed every event, in order, then shut down once."""

    def handle(self, event: Event) -> None: ...

    def shutdown(self) -> None: ...


class EventStream:
    """Hands each event of one run to every handler, in order, one event at a time.

    A check-client run grades cases on worker threads and a hosted case grades sessions on the
    server's: the lock makes every handler see one event after another, never two at once.
    A handler's error is not caught: writing a report the user asked for is part of the run.
    Used as a context manager, it shuts every handler down on the way out, however the run ended.
    """

    def __init__(self, handlers: Iterable[Handler], *, command: str = "orsbench") -> None:
        self.handlers = list(handlers)
        self.command = command
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            for handler in self.handlers:
                handler.handle(event)

    # -- the run's callbacks (checks/runner.run_checks, api.CheckPlan.run), each as its event -----
    def on_start(self, target: str, options: Options | None = None, *, cases: int | None = None, jobs: int | None = None) -> None:
        """The run began (the checker's ``on_start(url, options)``; a client run gives its ``cases`` and ``jobs``)."""
        self.emit(RunStarted(self.command, target, options, cases=cases, jobs=jobs))

    def on_probe(self, probe: str, seconds: float, requests: int) -> None:
        self.emit(ProbeFinished(probe, seconds, requests))

    def on_result(self, result: CheckResult) -> None:
        self.emit(CheckFinished(result))

    def finish(self, report: Report) -> None:
        self.emit(RunFinished(report))

    def shutdown(self) -> None:
        """Shut every handler down (each one, even when an earlier one raised; the first error is raised after)."""
        errors: list[BaseException] = []
        for handler in self.handlers:
            try:
                handler.shutdown()
            except Exception as exc:  # noqa: BLE001 - every handler gets its shutdown; the first error is raised below
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.shutdown()


class Recorder:
    """A handler that keeps every event: a run's stream, to read in a test or hand to other handlers later."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.closed = False

    def handle(self, event: Event) -> None:
        self.events.append(event)

    def shutdown(self) -> None:
        self.closed = True

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)


def replay(events: Iterable[Event], handlers: Iterable[Handler]) -> None:
    """Feed recorded ``events`` to ``handlers`` as a run would, then shut them down."""
    with EventStream(handlers) as stream:
        for event in events:
            stream.emit(event)
