"""``orsbench bench --sessions N --held-by ping``: what N open, pinged sessions cost a server — any environment.

For each server (the implementations orsbench starts, serving ``--scenario``; or
a server of yours: ``--url``, ``--app``, ``--server-cmd``) the pinged-sessions
driver (:mod:`orsbench.bench.pinghold`) opens N sessions, pings each at the
reference cadence (every 10 s, as the SDK client does) for ``--hold`` seconds,
and closes them. The server's memory and CPU come from ``/proc`` (its process
tree): memory per session is RSS with every session open and pinged once minus
RSS before, over the sessions opened; CPU per ping is the server's CPU over the
hold after that instant, over the pings sent in it. Beside them: ping latency
p50/p99, how late pings went out against the cadence (the driver's or the
server's lag), errors, sessions left, and sessions per replica when a balancer's
replicas name themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.bench.options import BenchOptions
from orsbench.bench.pinghold import PingHoldResult, run_ping_hold
from orsbench.bench.plan import discover
from orsbench.bench.procstat import TreeReadings, loadavg, machine_facts
from orsbench.bench.report import DRIVER_SATURATED, held_json, machine_line, optional, sessions_left
from orsbench.bench.target import LoadTarget


@dataclass
class PingedFigures:
    """One server's pinged-sessions figures: the driver's result and the server's readings around it."""

    name: str
    url: str
    result: PingHoldResult
    #: The server's process tree at each probe: baseline, held, hold_end, closed.
    server: TreeReadings
    sessions_left: int | None = None
    note: str = ""

    @property
    def rss_kib_per_session(self) -> float | None:
        return self.server.rss_growth_per("baseline", "held", self.result.opened)

    @property
    def cpu_us_per_ping(self) -> float | None:
        return self.server.cpu_us_per("held", "hold_end", self.result.pings_in_hold)

    @property
    def driver_core_share(self) -> float:
        total = self.result.open_s + self.result.hold_s + self.result.close_s
        return self.result.driver_cpu_s / total if total > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.result.as_dict(),
            "sessions_left": self.sessions_left,
            "server_rss_kib": self.server.rss_kib,
            "rss_kib_per_session": None if self.rss_kib_per_session is None else round(self.rss_kib_per_session, 2),
            "server_cpu_us_per_ping": None if self.cpu_us_per_ping is None else round(self.cpu_us_per_ping, 1),
            "driver_core_share": round(self.driver_core_share, 3),
            "note": self.note,
        }


@dataclass
class PingedReport:
    sessions: int
    hold_s: float
    interval_s: float
    servers: dict[str, PingedFigures]
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return not self.servers or any(
            f.result.errors or f.sessions_left or f.result.opened < f.result.sessions for f in self.servers.values()
        )

    def ci_figures(self) -> dict[str, dict[str, float | None]]:
        """The figures ``--fail-under`` reads: ``ok`` is the share of requests (opens, pings, closes) that succeeded."""
        out: dict[str, dict[str, float | None]] = {}
        for name, f in self.servers.items():
            r = f.result
            done = r.opened + r.pings + r.closed
            out[name] = {"ok": done / (done + r.errors) * 100 if done + r.errors else 0.0, "rate": r.ping_rate}
        return out

    def to_json(self) -> str:
        servers = {name: f.as_dict() for name, f in self.servers.items()}
        return held_json("sessions-pinged", self.sessions, self.hold_s, self.interval_s, servers, self.machine)

    def render(self) -> str:
        lines = [
            f"held sessions: {self.sessions} per server, open {self.hold_s:g}s, each pinged every {self.interval_s:g}s "
            "(POST /ping, the reference client's cadence)",
            machine_line(self.machine),
            "",
            f"{'server':<8} {'opened':>7} {'errors':>6} {'left':>5} {'KiB/sess':>9} {'CPU µs/ping':>11} {'pings/s':>8} "
            f"{'asked/s':>8} {'ping p50':>9} {'ping p99':>9} {'late p99':>9} {'drv CPU':>8}",
        ]
        for f in self.servers.values():
            d = f.as_dict()
            lines.append(
                f"{f.name:<8} {d['opened']:>7} {d['errors']:>6} {optional(d['sessions_left']):>5} "
                f"{optional(d['rss_kib_per_session'], '.2f'):>9} {optional(d['server_cpu_us_per_ping'], '.0f'):>11} "
                f"{d['pings_per_s']:>8.1f} {optional(d['pings_per_s_asked'], '.1f'):>8} {d['ping_p50_ms']:>7.1f}ms "
                f"{d['ping_p99_ms']:>7.1f}ms {d['ping_late_p99_ms']:>7.0f}ms {f.driver_core_share:>7.0%}"
            )
        if self.hold_s < self.interval_s * 2:
            lines.append(
                f"note: --hold {self.hold_s:g}s is under two ping intervals ({self.interval_s:g}s): memory per session and CPU "
                "per ping need every session pinged once, then a whole interval more; raise --hold"
            )
        for f in self.servers.values():
            if f.result.replicas:
                spread = ", ".join(f"{name} {count}" for name, count in sorted(f.result.replicas.items()))
                lines.append(f"{f.name}: sessions per replica: {spread}")
            if f.driver_core_share >= DRIVER_SATURATED:
                lines.append(f"WARNING: the driver used {f.driver_core_share:.0%} of a core against {f.name}: lateness is the driver's")
            if f.note:
                lines.append(f"note: {f.name}: {f.note}")
            for kind, count in f.result.error_kinds.most_common(5):
                lines.append(f"  {f.name} error x{count}: {kind}")
        return "\n".join(lines)


def measure_pinged(
    target: LoadTarget,
    sessions: int,
    options: BenchOptions,
    *,
    interval: float = protocol.PING_INTERVAL_S,
    progress: Callable[[str], None] = lambda _line: None,
) -> PingedFigures:
    """Hold ``sessions`` pinged sessions on ``target``; its process tree read around it when its PID is known."""
    o = options
    # Discovery only (env, split, tasks): a held session calls no tool.
    plan = discover(target.url, env=o.env, split=o.split, tool=o.tool, tool_input=o.tool_input or {}, api_key=o.api_key, secrets=o.secrets)
    server = TreeReadings(target.pid)
    result = run_ping_hold(
        target.url, plan, sessions, hold=o.hold, interval=interval, ramp_concurrency=o.ramp_concurrency, api_key=o.api_key,
        probe=server.probe, progress=lambda line: progress(f"{target.name}: {line}"),
    )  # fmt: skip
    figures = PingedFigures(target.name, target.url, result, server)
    figures.sessions_left = sessions_left(target.url, o.api_key)
    if target.pid is None:
        figures.note = "no server PID: server memory and CPU not measured"
    return figures


def run_pinged_bench(
    sessions: int,
    targets: list[LoadTarget],
    options: BenchOptions = BenchOptions(),
    *,
    interval: float = protocol.PING_INTERVAL_S,
    progress: Callable[[str], None] = lambda _line: None,
) -> PingedReport:
    """Hold ``sessions`` pinged sessions on each target, one after another."""
    loadavg_before = loadavg()
    figures = {t.name: measure_pinged(t, sessions, options, interval=interval, progress=progress) for t in targets}
    return PingedReport(sessions, options.hold, interval, figures, machine_facts(loadavg_before))
