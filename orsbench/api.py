"""``orsbench.check(target, **options) -> Report``: the checker from Python.

Environment authors check their own code from a script, a notebook or a test::

    import orsbench
    from my_env import MyEnv

    report = orsbench.check(MyEnv)                 # serve the class, check it, stop it
    assert report.passed, report.summary()
    orsbench.check("my_env.py:MyEnv", fuzz=50)      # or by FILE.py:Class / module:Class
    orsbench.check("python my_env.py --port {port}", wait=120)   # or any server command
    orsbench.check("http://127.0.0.1:8080", env="myenv")          # or a running server
    orsbench.check("echo", impl="sdk")                            # or a built-in scenario

``orsbench check`` on the command line calls this same function, so a target
behaves the same from both.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orsbench.config import ServerConfig
from orsbench.extras import require
from orsbench.servers import targets
from orsbench.servers.user_app import AppTarget

if TYPE_CHECKING:
    from orsbench.checks import Baseline, Options, Report
    from orsbench.checks.model import CheckResult
    from orsbench.checks.runner import ProbeCallback, ResultCallback
    from orsbench.reports.events import Handler

StartCallback = Callable[[str, "Options"], None]


def check(
    target: Any,
    *,
    only: Iterable[str] | None = None,
    baseline: Baseline | str | os.PathLike[str] | None = None,
    impl: str = "mock",
    params: dict[str, Any] | None = None,
    faults: Iterable[str] = (),
    wait: float = 60.0,
    on_start: StartCallback | None = None,
    on_probe: ProbeCallback | None = None,
    on_result: ResultCallback | None = None,
    handlers: Iterable[Handler] = (),
    **options: Any,
) -> Report:
    """Check ``target`` against the protocol and return the :class:`~orsbench.checks.Report`.

    ``target``: a URL, a scenario name, an openreward ``Environment`` class, ``FILE.py:Class`` /
    ``module:Class`` (several classes: ``module:A,B``), or a server command containing ``{port}``
    (a string, or a list of arguments). Anything started binds 127.0.0.1 and is stopped by its PID
    before this returns.

    ``baseline``: the expected failures, a :class:`~orsbench.checks.Baseline` or the path of its YAML
    file (``orsbench check --expected-failures FILE``'s format; a file that cannot be read or names an
    unknown check is a ``ValueError`` — :class:`~orsbench.checks.BaselineError` — saying which).

    ``options`` are :class:`~orsbench.checks.Options` fields (``env``, ``split``, ``timeout``,
    ``ttl``, ``ping_interval``, ...). ``impl``, ``params`` and ``faults`` apply to a scenario;
    ``ttl`` and ``ping_interval`` also configure a scenario or an app orsbench serves; ``wait`` is
    how long a started server may take to answer ``/health``. ``on_start(url, options)`` is called
    once the target is up, before the first probe; ``on_probe`` and ``on_result`` report progress.
    ``handlers``: outputs of the run's event stream (:mod:`orsbench.reports.events`), as ``orsbench check``
    feeds its terminal and report files — ``TerminalReporter()`` prints progress and the summary,
    ``file_handlers({"junit": "junit.xml"}, title="orsbench check")`` writes JUnit at the end, or a
    handler of your own (``handle(event)``, ``shutdown()``); each is shut down before this returns.

    Raises ``ValueError`` (or ``TypeError`` for an unknown option) for a target or option that
    cannot work, naming the fix; :class:`~orsbench.extras.MissingExtra` when serving needs an extra
    that is not installed; :class:`~orsbench.servers.launch.ServerStartError` (with the server's
    output) when a started server does not come up. A server that answers but is not ORS, or
    lacks the ``env``/``split`` asked for, is a report with exit code 2 and a ``reason``.
    """
    plan = prepare(target, impl=impl, params=params, faults=faults, wait=wait, **options)
    loaded = load_baseline(baseline)
    handlers = list(handlers)
    if not handlers:
        return plan.run(only=only, baseline=loaded, on_start=on_start, on_probe=on_probe, on_result=on_result)
    from orsbench.reports.events import EventStream

    with EventStream(handlers, command="orsbench check") as stream:
        report = plan.run(
            only=only,
            baseline=loaded,
            on_start=_both(stream.on_start, on_start),
            on_probe=_both(stream.on_probe, on_probe),
            on_result=_both(stream.on_result, on_result),
        )
        stream.finish(report)
    return report


def _both(first: Callable[..., None], then: Callable[..., None] | None) -> Callable[..., None]:
    """One callback that calls ``first``, then ``then`` when there is one (the stream, then the caller's own)."""
    if then is None:
        return first

    def call(*args: Any) -> None:
        first(*args)
        then(*args)

    return call


def load_baseline(baseline: Baseline | str | os.PathLike[str] | None) -> Baseline | None:
    """``baseline`` as a :class:`~orsbench.checks.Baseline`: a path is read and checked against the known check ids.

    Why here: ``orsbench.check(MyEnv, baseline="expected-failures.yaml")`` is how the docs spell it, and
    a path must fail before a server starts, not as an ``AttributeError`` deep in the runner.
    """
    from orsbench.checks import Baseline, load_checks

    if baseline is None or isinstance(baseline, Baseline):
        return baseline
    if isinstance(baseline, (str, os.PathLike)):
        return Baseline.load(baseline, set(load_checks()))  # BaselineError (a ValueError) names the file and the fix
    raise TypeError(f"baseline must be a Baseline or the path of its YAML file, got {type(baseline).__name__}")


@dataclass
class CheckPlan:
    """A target and options that were found to make sense; :meth:`run` brings the target up and checks it."""

    target: targets.CheckTarget
    impl: str
    wait: float
    options: dict[str, Any]
    #: How orsbench serves the target (``None``: it does not configure it — a URL or a command).
    config: ServerConfig | None
    url: str = ""

    def run(
        self,
        *,
        only: Iterable[str] | None = None,
        baseline: Baseline | None = None,
        on_start: StartCallback | None = None,
        on_probe: ProbeCallback | None = None,
        on_result: ResultCallback | None = None,
    ) -> Report:
        from orsbench.checks import Options, run_checks

        options = dict(self.options)
        with targets.running(self.target, impl=self.impl, config=self.config, wait=self.wait) as server:
            url = self.url
            if server is not None:
                url = server.url
                options["env"] = options.get("env") or server.env_name or None
                if self.config is not None:  # a server of ours: its own knobs tell the timing checks what to expect
                    options["ttl"], options["ping_interval"] = self.config.ttl, self.config.ping_interval
                output = ServerOutput(server.log_path, on_probe, on_result)
                on_probe, on_result = output.on_probe, output.on_result
            resolved = Options(**options)
            if on_start is not None:
                on_start(url, resolved)
            return run_checks(url, resolved, only=only, baseline=baseline, on_probe=on_probe, on_result=on_result)


class ServerOutput:
    """Puts the server's own traceback into the finding it explains, as the run goes.

    After each probe, the tracebacks the started server wrote meanwhile are read
    (:class:`~orsbench.servers.output.OutputWindow`); a failure or warning graded next gets those
    whose exception message it shows (a tool's ``SSE error event: grader crashed`` and the
    server's ``RuntimeError: grader crashed``), or — for an answer that was a 5xx — the probe's
    tracebacks. Attached before the result is reported, so the terminal's ``-v`` shows it too.
    """

    #: At most this many tracebacks per finding.
    PER_FINDING = 2

    def __init__(self, log_path: Path, on_probe: ProbeCallback | None, on_result: ResultCallback | None) -> None:
        from orsbench.servers.output import OutputWindow

        self.window = OutputWindow(log_path)
        self.window.next()  # start-up output is not the run's
        self.recent: list[str] = []
        self._on_probe, self._on_result = on_probe, on_result

    def on_probe(self, probe: str, seconds: float, requests: int) -> None:
        self.recent = self.window.next_tracebacks()
        if self._on_probe is not None:
            self._on_probe(probe, seconds, requests)

    def on_result(self, result: CheckResult) -> None:
        from orsbench.checks import Status

        if result.status in (Status.FAIL, Status.WARN) and self.window.seen:
            found = self.matching(result)
            if found:
                result.server = {"tracebacks": found[: self.PER_FINDING]}
        if self._on_result is not None:
            self._on_result(result)

    def matching(self, result: CheckResult) -> list[str]:
        from orsbench.servers.output import exception_line

        shown = " ".join([result.message, *(str(e.get("body", "")) + str(e.get("error", "")) for e in result.evidence)])
        found: list[str] = []
        for traceback in self.window.seen:
            message = exception_line(traceback).split(": ", 1)[-1].strip()
            if len(message) >= 6 and message[:120] in shown and exception_line(traceback) not in map(exception_line, found):
                found.append(traceback)
        if not found and any((e.get("status") or 0) >= 500 for e in result.evidence):
            found = list(self.recent)
        return found[-self.PER_FINDING :]


def prepare(
    target: Any,
    *,
    impl: str = "mock",
    params: dict[str, Any] | None = None,
    faults: Iterable[str] = (),
    wait: float = 60.0,
    **options: Any,
) -> CheckPlan:
    """Validate a check before anything starts (the errors :func:`check` raises first)."""
    from orsbench.checks import Options

    known = {f.name for f in dataclasses.fields(Options)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown check option(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    if not wait > 0:
        raise ValueError(f"wait must be greater than 0 seconds, got {wait}")
    resolved = targets.resolve(target)
    faults = tuple(faults)
    if (params or faults or impl != "mock") and resolved.kind != "scenario":
        raise ValueError("impl, params and faults apply to a built-in scenario only")
    if faults:
        from orsbench.servers.faults import FAULTS

        unknown_faults = sorted(set(faults) - set(FAULTS))
        if unknown_faults:
            raise ValueError(f"unknown fault(s) {unknown_faults}; see docs/robustness.md and docs/checks.md")
    plan = CheckPlan(resolved, impl, wait, options, _server_config(resolved, impl, params or {}, faults, options))
    if resolved.kind == "url":
        from orsbench.wire.url import base_url

        plan.url = base_url(str(resolved.value))  # BadURL is a ValueError naming the fix
    elif resolved.kind == "command":
        from orsbench.servers.launch import command_argv

        command_argv(resolved.value, 0)  # ValueError: no {port} in it
    elif isinstance(resolved.value, AppTarget) and not resolved.value.path:
        app = resolved.value
        if app.is_file and not Path(app.source).is_file():
            raise ValueError(f"no such file {app.source!r} (in --app {app})")
    return plan


def _server_config(
    target: targets.CheckTarget, impl: str, params: dict[str, Any], faults: tuple[str, ...], options: dict[str, Any]
) -> ServerConfig | None:
    """The config orsbench serves a scenario or an app with (``None``: it does not configure the server)."""
    if target.kind not in ("scenario", "app"):
        return None
    knobs: dict[str, Any] = {k: options[k] for k in ("ttl", "ping_interval") if options.get(k) is not None}
    if target.kind == "app":
        require("sdk", "serving an Environment class (the openreward SDK Server)")
        return ServerConfig(**knobs, explicit=tuple(knobs))
    from orsbench.servers.implementations import IMPLEMENTATIONS

    implementation = IMPLEMENTATIONS.get(impl)  # UnknownName (a ValueError) lists the known ones
    implementation.require(f"impl={impl!r} ({implementation.summary})")
    from orsbench.scenarios import get_scenario
    from orsbench.config import effective_config

    knobs |= {"params": params, "faults": faults}
    scenario = get_scenario(str(target.value), **params)  # ValueError: unknown scenario or parameter
    return effective_config(scenario, ServerConfig(**knobs, explicit=tuple(sorted(knobs))), set(knobs))
