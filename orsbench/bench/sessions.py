"""``orsbench bench --sessions N``: what N held sessions cost each server.

For every server — the implementations orsbench starts itself (serving the
``slow`` scenario, whose ``wait(seconds)`` is a long tool call streaming
keep-alives) or a server of yours at ``--url`` — the held-sessions driver
(:mod:`orsbench.bench.hold`) opens N sessions, holds one streaming call in
each, and deletes them all. The server's resident memory and CPU time come
from ``/proc`` (its whole process tree) at three instants: before the first
request, when every stream has its first byte, and after the last delete.

Per server: ``sessions_ok``, ``errors``, ``sessions_left`` (``active_sessions``
from ``/_orsbench/stats`` after the run, where the server has that route),
``rss_kib_per_session`` (RSS while held minus RSS before, over the streams
held), ``cpu_us_per_session`` (server CPU over the whole cycle, per session),
the longest keep-alive gap seen on any stream and p50/p99 time to the call's
first byte under that load. The driver's own CPU and RSS are reported beside
them, with a warning when it ran at a core's limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.bench.hold import DURATION_ARG, HoldResult, duration_arg, run_hold
from orsbench.bench.options import BenchOptions
from orsbench.bench.plan import EpisodePlan, PlanError, discover
from orsbench.bench.procstat import TreeReadings, loadavg, machine_facts
from orsbench.bench.report import DRIVER_SATURATED, held_json, machine_line, optional, sessions_left
from orsbench.bench.target import LoadTarget
from orsbench.config import ServerConfig
from orsbench.servers.implementations import holding_sessions
from orsbench.servers.launch import RunningServer, ServerStartError, start
from orsbench.wire import WireClient

#: The scenario served for held sessions, and its long tool.
HOLD_SCENARIO, HOLD_TOOL = "slow", "wait"


def holdable_impls() -> tuple[str, ...]:
    """Every registered implementation that can hold a session (the registry's order)."""
    return holding_sessions()


@dataclass
class HeldFigures:
    """One server's held-sessions figures."""

    name: str
    url: str
    hold: HoldResult
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    cpu_s: dict[str, float | None] = field(default_factory=dict)
    sessions_left: int | None = None
    note: str = ""

    @property
    def rss_kib_per_session(self) -> float | None:
        base, held = self.rss_kib.get("baseline"), self.rss_kib.get("held")
        if base is None or held is None or not self.hold.streaming:
            return None
        return (held - base) / self.hold.streaming

    @property
    def cpu_us_per_session(self) -> float | None:
        before, after = self.cpu_s.get("baseline"), self.cpu_s.get("closed")
        if before is None or after is None or not self.hold.opened:
            return None
        return (after - before) / self.hold.opened * 1e6

    @property
    def driver_core_share(self) -> float:
        """The driver's CPU time over its wall time: 1.0 is one core busy all along."""
        return self.hold.driver_cpu_s / self.hold.total_s if self.hold.total_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        h = self.hold.as_dict()
        per_rss, per_cpu = self.rss_kib_per_session, self.cpu_us_per_session
        return {
            "server": self.name,
            "sessions": self.hold.sessions,
            "sessions_ok": self.hold.sessions_ok,
            "errors": self.hold.errors,
            "sessions_left": self.sessions_left,
            "rss_kib_per_session": None if per_rss is None else round(per_rss, 2),
            "cpu_us_per_session": None if per_cpu is None else round(per_cpu, 1),
            "max_keepalive_gap_s": h["max_keepalive_gap_s"],
            "ttfb_ms": h["ttfb_ms"],
            "server_rss_kib": self.rss_kib,
            "server_cpu_s": {k: None if v is None else round(v, 3) for k, v in self.cpu_s.items()},
            "driver_core_share": round(self.driver_core_share, 3),
            "driver_saturated": self.driver_core_share >= DRIVER_SATURATED,
            "note": self.note,
            **{k: v for k, v in h.items() if k not in ("sessions", "sessions_ok", "errors", "ttfb_ms", "max_keepalive_gap_s")},
        }


@dataclass
class HeldReport:
    sessions: int
    hold_s: float
    ping_interval_s: float | None
    servers: dict[str, HeldFigures]
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(f.hold.errors or f.sessions_left or f.hold.sessions_ok < f.hold.sessions for f in self.servers.values())

    def ci_figures(self) -> dict[str, dict[str, float | None]]:
        """The figures ``--fail-under`` reads: ``ok`` is the share of sessions held and closed cleanly."""
        return {name: {"ok": f.hold.sessions_ok / f.hold.sessions * 100 if f.hold.sessions else 0.0} for name, f in self.servers.items()}

    def to_json(self) -> str:
        servers = {name: f.as_dict() for name, f in self.servers.items()}
        return held_json("sessions", self.sessions, self.hold_s, self.ping_interval_s, servers, self.machine)

    def render(self) -> str:
        lines = [
            f"held sessions: {self.sessions} per server, each in one streaming call held {self.hold_s:g}s"
            + (f", keep-alives every {self.ping_interval_s:g}s" if self.ping_interval_s else ""),
            machine_line(self.machine),
            "",
            f"{'server':<8} {'ok':>6} {'errors':>6} {'left':>5} {'KiB/sess':>9} {'CPU µs/sess':>11} "
            f"{'max gap s':>9} {'TTFB p50':>9} {'TTFB p99':>9} {'held s':>7} {'drv CPU':>8} {'drv MiB':>8}",
        ]
        for f in self.servers.values():
            d = f.as_dict()
            lines.append(
                f"{f.name:<8} {d['sessions_ok']:>6} {d['errors']:>6} {optional(d['sessions_left']):>5} "
                f"{optional(d['rss_kib_per_session'], '.1f'):>9} {optional(d['cpu_us_per_session'], '.0f'):>11} "
                f"{d['max_keepalive_gap_s']:>9.2f} {d['ttfb_ms']['p50']:>7.1f}ms {d['ttfb_ms']['p99']:>7.1f}ms "
                f"{d['held_all_s']:>7.1f} {f.driver_core_share:>7.0%} "
                f"{(f.hold.driver_rss_held_kib or 0) / 1024:>8.1f}"
            )
        for f in self.servers.values():
            if f.driver_core_share >= DRIVER_SATURATED:
                lines.append(
                    f"WARNING: the driver used {f.driver_core_share:.0%} of a core against {f.name}: it, not the server, "
                    "set the pace; TTFB and throughput say little about the server here"
                )
            if f.hold.timed_calls and f.hold.held_all_s < self.hold_s / 2:
                lines.append(
                    f"WARNING: {f.name}: starting the calls took {f.hold.ramp_s:.1f}s, so all streams were open together "
                    f"for only {f.hold.held_all_s:.1f}s of the {self.hold_s:g}s asked: per-session memory is undercounted; "
                    "raise --hold or lower --sessions"
                )
            if not f.hold.timed_calls:
                lines.append(f"note: {f.name}'s tool takes no '{DURATION_ARG}': each call was held as long as the tool ran")
            if f.note:
                lines.append(f"note: {f.name}: {f.note}")
            if f.hold.retried:
                lines.append(f"note: {f.name}: {f.hold.retried} request(s) answered 503 + Retry-After were waited out and resent")
            for kind, count in f.hold.error_kinds.most_common(5):
                lines.append(f"  {f.name} error x{count}: {kind}")
        return "\n".join(lines)


def hold_plan(
    url: str,
    *,
    env: str | None = None,
    split: str | None = None,
    tool: str | None = None,
    tool_input: dict[str, Any] | None = None,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
) -> tuple[EpisodePlan, str | None]:
    """The plan for held calls on ``url`` and the duration argument to set, if the tool has one.

    With no ``tool`` named, the first tool whose schema takes a numeric
    ``seconds`` is chosen (a long call the driver can time), else the first tool.
    """
    plan = discover(url, env=env, split=split, tool=tool, tool_input=tool_input, api_key=api_key, secrets=secrets)
    with WireClient(url, api_key=api_key, timeout=15) as client:
        exchange = client.tools(plan.env)
        tools = exchange.json().get("tools", []) if exchange.ok else []
    schemas = {t["name"]: t.get("input_schema") for t in tools if isinstance(t, dict) and "name" in t}
    if tool is None:
        timed = next((name for name, schema in schemas.items() if duration_arg(schema)), None)
        if timed is not None and timed != plan.tool:
            plan = discover(url, env=plan.env, split=plan.split, tool=timed, tool_input=tool_input, api_key=api_key, secrets=secrets)
    arg = duration_arg(schemas.get(plan.tool))
    if arg is not None and tool_input is not None and arg in tool_input:
        arg = None  # the user set the duration themselves
    return plan, arg


def measure_held(
    name: str,
    url: str,
    pid: int | None,
    sessions: int,
    hold: float,
    *,
    plan: EpisodePlan,
    timed_arg: str | None,
    ramp_concurrency: int,
    warmup: int = 20,
    progress: Callable[[str], None] = lambda _line: None,
    api_key: str | None = None,
) -> HeldFigures:
    """Warm ``url`` up with a few held sessions, then hold ``sessions`` and read ``pid``'s tree around it."""
    if warmup > 0:
        warm = run_hold(url, plan, warmup, hold=0.2, timed_arg=timed_arg, ramp_concurrency=ramp_concurrency, api_key=api_key)
        progress(f"{name}: warm-up {warm.sessions_ok}/{warmup} sessions ok")
    server = TreeReadings(pid)
    result = run_hold(
        url,
        plan,
        sessions,
        hold=hold,
        timed_arg=timed_arg,
        ramp_concurrency=ramp_concurrency,
        api_key=api_key,
        probe=server.probe,
        progress=lambda line: progress(f"{name}: {line}"),
    )
    figures = HeldFigures(name, url, result, server.rss_kib, server.cpu_s)
    figures.sessions_left = sessions_left(url, api_key)
    if pid is None:
        figures.note = "no --server-pid: server memory and CPU not measured"
    return figures


def run_held_bench(
    sessions: int,
    options: BenchOptions = BenchOptions(),
    *,
    target: LoadTarget | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> HeldReport:
    """Hold ``sessions`` on each of ``options.impls`` (started here, one after another) or on ``target`` (sent
    ``options.api_key``), ``options.hold`` seconds together."""
    o = options
    hold, impls, ping_interval, ramp_concurrency, warmup = o.hold, o.impls, o.ping_interval, o.ramp_concurrency, o.hold_warmup
    tool, tool_input, split, secrets, api_key = o.tool, o.tool_input, o.split, o.secrets, o.api_key
    loadavg_before = loadavg()
    figures: dict[str, HeldFigures] = {}
    if target is not None:
        plan, arg = hold_plan(target.url, split=split, tool=tool, tool_input=tool_input, secrets=secrets, api_key=api_key)
        progress(f"{target.url}: holding calls of {plan.tool} {plan.tool_input}" + (f" ({arg} set per call)" if arg else ""))
        figures[target.name] = measure_held(
            target.name, target.url, target.pid, sessions, hold,
            plan=plan, timed_arg=arg, ramp_concurrency=ramp_concurrency, warmup=warmup, progress=progress, api_key=api_key,
        )  # fmt: skip
        ping = None
    else:
        ping = ping_interval
        # ttl well past the run: a held session must never be reaped mid-hold.
        config = ServerConfig(ping_interval=ping_interval, ttl=max(protocol.SESSION_TTL_S, hold * 4))
        for impl in impls or holdable_impls():
            progress(f"starting {impl} server ({HOLD_SCENARIO}) ...")
            try:
                server = start(HOLD_SCENARIO, impl=impl, config=config, params={"setup": 0.0})
            except ServerStartError as exc:
                progress(f"{impl} did not start; left out:\n{str(exc)[-1500:]}")
                continue
            try:
                figures[impl] = _measure_started(server, sessions, hold, ramp_concurrency, tool_input, warmup, progress)
            finally:
                server.stop()
    machine = machine_facts(loadavg_before)
    return HeldReport(sessions, hold, ping, figures, machine)


def _measure_started(
    server: RunningServer,
    sessions: int,
    hold: float,
    ramp_concurrency: int,
    tool_input: dict[str, Any] | None,
    warmup: int,
    progress: Callable[[str], None],
) -> HeldFigures:
    try:
        plan = discover(server.url, tool=HOLD_TOOL, tool_input=tool_input or {})
    except PlanError as exc:
        raise ServerStartError(f"{server.impl}: {exc}") from None
    return measure_held(
        server.impl, server.url, server.pid, sessions, hold,
        plan=plan, timed_arg=DURATION_ARG, ramp_concurrency=ramp_concurrency, warmup=warmup, progress=progress,
    )  # fmt: skip
