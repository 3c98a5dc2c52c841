"""``orsbench bench``: the mock engine, the SDK twin and the floor, measured side by side.

All servers are started first (through :mod:`orsbench.servers.launch`, so they
run exactly as users run them), then measured in alternating windows — mock,
sdk, floor, mock, sdk, floor, ... — with the same driver, scenario and
concurrency. Alternating matters on a shared machine: whatever else runs
slows every server alike, so the *ratios* stay meaningful even when the
absolute rates move. Each server is warmed up before its first window.

Figures per server: episodes/s, p50/p95/p99 episode latency, and the server's
CPU time (user+sys of its process tree, from ``/proc``) per episode — the
figure that does not depend on how many cores the driver left over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orsbench.bench.options import BenchOptions
from orsbench.bench.driver import DriverResult, drive
from orsbench.bench.locust_run import LocustResult, run_locust
from orsbench.bench.plan import EpisodePlan, resolve_plan
from orsbench.bench.procstat import loadavg, machine_facts, tree_cpu_seconds, tree_rss_bytes
from orsbench.bench.report import DRIVER_SATURATED, machine_line
from orsbench.config import ServerConfig
from orsbench.servers.implementations import benched_by_default
from orsbench.servers.launch import RunningServer, ServerStartError, start

@dataclass
class ServerFigures:
    """One server's pooled figures over all its windows."""

    impl: str
    url: str
    driver: DriverResult = field(default_factory=DriverResult)
    #: Server process-tree CPU seconds spent during the measured windows.
    cpu_seconds: float | None = 0.0
    rss_bytes: int | None = None
    windows: list[dict[str, float]] = field(default_factory=list)
    active_sessions_after: int | None = None

    @property
    def driver_core_share(self) -> float:
        """The driver's CPU seconds over its wall seconds: 1.0 is one core busy the whole time."""
        return self.driver.driver_cpu / self.driver.elapsed if self.driver.elapsed > 0 else 0.0

    @property
    def cpu_us_per_episode(self) -> float | None:
        if self.cpu_seconds is None or not self.driver.episodes:
            return None
        return self.cpu_seconds / self.driver.episodes * 1e6

    def as_dict(self) -> dict[str, Any]:
        d = self.driver
        return {
            "impl": self.impl,
            "episodes": d.episodes,
            "failures": d.failures,
            "failure_kinds": dict(d.failure_kinds),
            "retried_503": d.retried,
            "seconds": round(d.elapsed, 3),
            "episodes_per_s": round(d.rate, 1),
            "latency_ms": {f"p{p}": round(d.percentile(p) * 1000, 2) for p in (50, 95, 99)},
            "server_cpu_s": None if self.cpu_seconds is None else round(self.cpu_seconds, 3),
            "server_cpu_us_per_episode": None if self.cpu_us_per_episode is None else round(self.cpu_us_per_episode, 1),
            "driver_cpu_us_per_episode": round(d.driver_cpu / d.episodes * 1e6, 1) if d.episodes else None,
            "server_rss_mib": None if self.rss_bytes is None else round(self.rss_bytes / 2**20, 1),
            "driver_core_share": round(self.driver_core_share, 3),
            "driver_saturated": self.driver_core_share >= DRIVER_SATURATED,
            "active_sessions_after": self.active_sessions_after,
            "finished": d.finished,
            "reward_mean": round(sum(d.rewards) / len(d.rewards), 4) if d.rewards else None,
            "replicas": dict(d.replicas),
            "split_sessions": d.split_sessions,
            "windows": self.windows,
        }


@dataclass
class BenchReport:
    scenario: str
    plan: str
    concurrency: int
    window_seconds: float
    rounds: int
    servers: dict[str, ServerFigures]
    locust: LocustResult | None = None
    #: The driver on the same mock just before and just after the Locust run (pooled).
    locust_driver: DriverResult | None = None
    machine: dict[str, Any] = field(default_factory=dict)

    def ci_figures(self) -> dict[str, dict[str, float | None]]:
        """The figures ``--fail-under`` reads, per server (not the floor, which plays no environment)."""
        return {
            name: {
                "ok": f.driver.ok_share * 100,
                "rate": f.driver.rate,
                "finished": f.driver.finished / f.driver.episodes * 100 if f.driver.episodes else 0.0,
            }
            for name, f in self.servers.items()
            if f.impl != "floor"
        }

    def ratio(self, a: str, b: str) -> dict[str, float | None]:
        """``a``/``b``: throughput ratio and server-CPU-per-episode ratio."""
        fa, fb = self.servers.get(a), self.servers.get(b)
        if fa is None or fb is None:
            return {}
        rate = fa.driver.rate / fb.driver.rate if fb.driver.rate else None
        ca, cb = fa.cpu_us_per_episode, fb.cpu_us_per_episode
        cpu = ca / cb if ca is not None and cb else None
        return {"throughput": _round(rate), "cpu_per_episode": _round(cpu)}

    def locust_ratio(self) -> float | None:
        """Locust's episode rate over the driver's on the same mock, measured right around it."""
        driver = self.locust_driver
        if self.locust is None or driver is None or not driver.rate:
            return None
        return _round(self.locust.rate / driver.rate)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": self.scenario,
            "plan": self.plan,
            "concurrency": self.concurrency,
            "window_seconds": self.window_seconds,
            "rounds": self.rounds,
            "machine": self.machine,
            "servers": {k: v.as_dict() for k, v in self.servers.items()},
            "ratios": {f"mock/{other}": self.ratio("mock", other) for other in self.servers if other != "mock"},
        }
        if self.locust is not None:
            out["locust"] = {
                "users": self.locust.users,
                "seconds": self.locust.seconds,
                "episodes": self.locust.episodes,
                "failures": self.locust.failures,
                "episodes_per_s": round(self.locust.rate, 1),
                "latency_ms": self.locust.latency_ms,
                "finished": self.locust.finished,
                "replicas": self.locust.replicas,
                "driver_episodes_per_s_around_it": round(self.locust_driver.rate, 1) if self.locust_driver else None,
                "driver_latency_ms_around_it": (
                    {f"p{p}": round(self.locust_driver.percentile(p) * 1000, 1) for p in (50, 95, 99)} if self.locust_driver else None
                ),
                "ratio_to_driver_on_mock": self.locust_ratio(),
                "exit_code": self.locust.exit_code,
                "errors": self.locust.errors,
            }
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def render(self) -> str:
        lines = [
            (
                f"orsbench bench: scenario {self.scenario}, {self.concurrency} concurrent episodes, "
                f"{self.rounds} x {self.window_seconds:g}s windows per server (alternating)"
            ),
            f"episode: {self.plan}",
            machine_line(self.machine),
            "",
            (
                f"{'server':<8} {'episodes':>9} {'fail':>5} {'ep/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
                f"{'srv CPU µs/ep':>14} {'drv CPU µs/ep':>14} {'RSS MiB':>8}"
            ),
        ]
        for figures in self.servers.values():
            d = figures.as_dict()
            cpu = d["server_cpu_us_per_episode"]
            lines.append(
                f"{figures.impl:<8} {d['episodes']:>9} {d['failures']:>5} {d['episodes_per_s']:>8.1f} "
                f"{d['latency_ms']['p50']:>8.2f} {d['latency_ms']['p95']:>8.2f} {d['latency_ms']['p99']:>8.2f} "
                f"{'n/a' if cpu is None else f'{cpu:.0f}':>14} {d['driver_cpu_us_per_episode'] or 0:>14.0f} "
                f"{d['server_rss_mib'] or 0:>8.1f}"
            )
        lines.append("")
        for other in self.servers:
            if other == "mock" or "mock" not in self.servers:
                continue
            r = self.ratio("mock", other)
            lines.append(
                f"mock/{other}: throughput {_fmt(r.get('throughput'))}x, server CPU per episode {_fmt(r.get('cpu_per_episode'))}x"
            )
        if self.locust is not None:
            driver_rate = self.locust_driver.rate if self.locust_driver else 0.0
            lines.append(
                f"locust (1 process, {self.locust.users} users, {self.locust.seconds:g}s) on mock: "
                f"{self.locust.rate:.1f} episodes/s, {self.locust.failures} failed; driver just before and after: "
                f"{driver_rate:.1f} episodes/s; locust/driver {_fmt(self.locust_ratio())}x"
            )
            if self.locust_driver is not None:
                lo, dr = self.locust.latency_ms, self.locust_driver
                lines.append(
                    f"  same episode, same settings: locust p50 {lo.get('p50', 0):.0f} ms, p99 {lo.get('p99', 0):.0f} ms, "
                    f"{self.locust.finished} finished; driver p50 {dr.percentile(50) * 1000:.0f} ms, "
                    f"p99 {dr.percentile(99) * 1000:.0f} ms, {dr.finished} finished"
                )
            if self.locust.exit_code not in (0, None) or self.locust.errors:
                lines.append(f"  locust exit code {self.locust.exit_code}; failures: {self.locust.errors or '(see log)'}")
        for figures in self.servers.values():
            if figures.driver_core_share >= DRIVER_SATURATED:
                lines.append(
                    f"WARNING: the driver used {figures.driver_core_share:.0%} of a core while measuring {figures.impl}: "
                    "it was the bottleneck, so throughput (and ratios against the floor) say nothing about that server"
                )
        for figures in self.servers.values():
            d = figures.driver
            if d.episodes and figures.impl != "floor":
                mean = f", mean reward {sum(d.rewards) / len(d.rewards):.3g}" if d.rewards else ""
                lines.append(f"{figures.impl}: {d.finished} of {d.episodes} episodes finished{mean} (the reward path)")
            if d.replicas:
                spread = ", ".join(f"{name} {count}" for name, count in sorted(d.replicas.items()))
                lines.append(f"{figures.impl}: episodes per replica: {spread}" + (f"; {d.split_sessions} split across replicas" if d.split_sessions else ""))
        for figures in self.servers.values():
            for kind, count in figures.driver.failure_kinds.most_common(5):
                lines.append(f"  {figures.impl} failure x{count}: {kind}")
        return "\n".join(lines)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def record_window(
    figures: ServerFigures,
    round_no: int,
    result: DriverResult,
    cpu: float | None,
    label: str,
    progress: Callable[[str], None],
) -> None:
    """Add one measured window to ``figures`` and say it under ``label`` (``"round 2 mock"``).

    Episodes per second, failures, the server's CPU per episode where its PID is known, and a note when
    the driver itself was at a core's limit (then the figure measures the driver, not the server).
    """
    figures.driver = figures.driver.merge(result)
    figures.cpu_seconds = None if cpu is None or figures.cpu_seconds is None else figures.cpu_seconds + cpu
    per_episode = cpu / result.episodes * 1e6 if cpu is not None and result.episodes else None
    figures.windows.append(
        {
            "round": round_no,
            "episodes": result.episodes,
            "episodes_per_s": round(result.rate, 1),
            "server_cpu_us_per_episode": None if per_episode is None else round(per_episode, 1),
        }
    )
    share = result.driver_cpu / result.elapsed if result.elapsed else 0.0
    progress(
        f"{label}: {result.rate:.0f} episodes/s, {result.failures} failures"
        + (f", {per_episode:.0f} µs server CPU/episode" if per_episode is not None else "")
        + (" (driver at a core's limit)" if share >= DRIVER_SATURATED else "")
    )


def run_bench(
    scenario: str = "echo",
    options: BenchOptions = BenchOptions(),
    *,
    progress: Callable[[str], None] = lambda _line: None,
) -> BenchReport:
    """Start every server in ``options.impls`` (default: the implementations registered as ``benched``), measure
    them in alternating windows, stop them; return the report."""
    o = options
    concurrency, window_seconds, rounds, warmup_seconds = o.concurrency, o.window_seconds, o.rounds, o.warmup_seconds
    max_episodes_per_window, params, locust_seconds = o.max_episodes_per_window, o.params, o.locust_seconds
    impls = o.impls or benched_by_default()
    loadavg_before = loadavg()
    servers: dict[str, RunningServer] = {}
    try:
        for impl in impls:
            progress(f"starting {impl} server for {scenario} ...")
            try:
                servers[impl] = start(scenario, impl=impl, config=ServerConfig(), params=params)
            except ServerStartError as exc:
                if not servers and impl == impls[-1]:
                    raise
                progress(f"{impl} server did not start; it is left out of this run:\n{str(exc)[-1500:]}")
        if not servers:
            raise ServerStartError("no server started")
        impls = tuple(servers)
        first = servers[impls[0]]
        plan = resolve_plan(
            first.url, env=o.env or first.env_name, split=o.split, tool=o.tool, tool_input=o.tool_input, calls=o.calls,
            think_time=o.think_time,
        )  # fmt: skip
        progress(f"episode: {plan.describe()}")
        figures = {impl: ServerFigures(impl, srv.url) for impl, srv in servers.items()}
        for impl, srv in servers.items():
            if warmup_seconds > 0:
                warm = drive(srv.url, plan, concurrency=concurrency, duration=warmup_seconds)
                progress(f"warm-up {impl}: {warm.episodes} episodes, {warm.failures} failures")
        for round_no in range(1, rounds + 1):
            for impl, srv in servers.items():
                result, cpu = _window(srv, plan, concurrency, window_seconds, max_episodes_per_window)
                record_window(figures[impl], round_no, result, cpu, f"round {round_no} {impl}", progress)
        locust_result = locust_driver = None
        if locust_seconds > 0 and "mock" in servers:
            # The driver runs right before and right after Locust, so a busy machine slows both alike.
            mock_url = servers["mock"].url
            locust_driver = drive(mock_url, plan, concurrency=concurrency, duration=locust_seconds / 2)
            progress(f"locust: one process, {locust_seconds:g}s against the mock ...")
            locust_result = run_locust(mock_url, plan, users=o.locust_users or concurrency, seconds=locust_seconds)
            locust_driver = locust_driver.merge(drive(mock_url, plan, concurrency=concurrency, duration=locust_seconds / 2))
            progress(f"locust: {locust_result.rate:.0f} episodes/s; driver around it {locust_driver.rate:.0f} episodes/s")
        for impl, srv in servers.items():
            figures[impl].rss_bytes = tree_rss_bytes(srv.pid)
            try:
                figures[impl].active_sessions_after = srv.stats().get("active_sessions")
            except Exception:  # noqa: BLE001 - a server without stats is still measured
                figures[impl].active_sessions_after = None
    finally:
        for srv in servers.values():
            srv.stop()
    machine = machine_facts(loadavg_before)
    return BenchReport(
        scenario, plan.describe(), concurrency, window_seconds, rounds, figures, locust_result, locust_driver, machine
    )


def _window(
    server: RunningServer, plan: EpisodePlan, concurrency: int, seconds: float, max_episodes: int | None
) -> tuple[DriverResult, float | None]:
    before = tree_cpu_seconds(server.pid)
    result = drive(server.url, plan, concurrency=concurrency, duration=seconds, max_episodes=max_episodes)
    after = tree_cpu_seconds(server.pid)
    cpu = after - before if before is not None and after is not None else None
    return result, cpu

