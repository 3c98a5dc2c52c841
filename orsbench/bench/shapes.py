"""The shapes of load a trainer makes: a ramp to the knee, and GRPO's burst then idle.

* **ramp to the knee** (:func:`ramp`): windows of episodes at concurrency 1, 2, 4, …
  (``factor``), until one has fewer than 99 % of its episodes ok or ``max_concurrency``
  is passed; the *knee* is the largest concurrency with at least 99 % ok — how many
  rollouts at once this server takes before episodes start failing.
* **GRPO burst–idle** (:func:`bursts`): a GRPO step starts ``batch`` × ``group``
  episodes at once (``group`` rollouts of each of ``batch`` prompts, the members of a
  group on the same task), waits for every one to end, then leaves the server idle
  for ``idle`` s while the trainer updates its weights; ``rounds`` steps. The figure
  a trainer feels is the *group makespan* — from the burst to its group's last
  episode's end (p50/p99) — and the step makespan, the slowest group.

Both play the one episode model (:meth:`~orsbench.bench.plan.EpisodePlan.actions`)
through the driver's :class:`~orsbench.bench.driver.EpisodePlayer`, so an episode
here is an episode of ``orsbench bench`` and of the Locust file.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from orsbench import protocol
from orsbench.bench.driver import DriverResult, EpisodePlayer, drive, ors_client_session, percentile, run_async
from orsbench.bench.plan import EpisodePlan
from orsbench.bench.report import machine_line

#: The share of ok episodes a concurrency must keep to be under the knee.
KNEE_OK_SHARE = 0.99


@dataclass
class RampResult:
    """Every window of a ramp, in order, and the knee they show."""

    threshold: float = KNEE_OK_SHARE
    steps: list[tuple[int, DriverResult]] = field(default_factory=list)
    #: Why the ramp stopped.
    stopped: str = ""

    @property
    def knee(self) -> int | None:
        """The largest concurrency with at least ``threshold`` of its episodes ok, before the first that had fewer."""
        return knee(self.steps, self.threshold)

    def as_dict(self) -> dict[str, Any]:
        return {
            "threshold_ok_share": self.threshold,
            "knee_concurrency": self.knee,
            "stopped": self.stopped,
            "steps": [
                {
                    "concurrency": c,
                    "episodes": r.episodes,
                    "failures": r.failures,
                    "ok_share": round(r.ok_share, 4),
                    "episodes_per_s": round(r.rate, 1),
                    "p50_ms": round(r.percentile(50) * 1000, 1),
                    "p99_ms": round(r.percentile(99) * 1000, 1),
                    "failure_kinds": dict(r.failure_kinds.most_common(3)),
                }
                for c, r in self.steps
            ],
        }

    def render(self) -> str:
        lines = [f"{'concurrency':>11} {'episodes':>9} {'fail':>5} {'ok %':>7} {'ep/s':>8} {'p50 ms':>9} {'p99 ms':>9}"]
        for c, r in self.steps:
            lines.append(
                f"{c:>11} {r.episodes:>9} {r.failures:>5} {r.ok_share * 100:>7.2f} {r.rate:>8.1f} "
                f"{r.percentile(50) * 1000:>9.1f} {r.percentile(99) * 1000:>9.1f}"
            )
        shown = "none (the first window already failed)" if self.knee is None else str(self.knee)
        lines.append(f"knee: {shown} concurrent episodes with >= {self.threshold:.0%} ok ({self.stopped})")
        return "\n".join(lines)


def knee(steps: list[tuple[int, DriverResult]], threshold: float = KNEE_OK_SHARE) -> int | None:
    """The largest concurrency of ``steps`` (in ramp order) with ``ok_share >= threshold``, stopping at the first below."""
    best = None
    for concurrency, result in steps:
        if result.ok_share < threshold:
            break
        best = concurrency if best is None else max(best, concurrency)
    return best


def ramp(
    base_url: str,
    plan: EpisodePlan,
    *,
    start: int = 1,
    factor: float = 2.0,
    max_concurrency: int = 1024,
    window: float = 5.0,
    threshold: float = KNEE_OK_SHARE,
    api_key: str | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> RampResult:
    """Windows of ``window`` s at rising concurrency until fewer than ``threshold`` of a window's episodes are ok."""
    if start < 1 or factor <= 1:
        raise ValueError("a ramp starts at 1 or more and rises by a factor above 1")
    result = RampResult(threshold)
    concurrency = start
    while True:
        window_result = drive(base_url, plan, concurrency=concurrency, duration=window, api_key=api_key)
        result.steps.append((concurrency, window_result))
        progress(
            f"ramp {concurrency}: {window_result.rate:.1f} episodes/s, {window_result.ok_share:.2%} ok, "
            f"p99 {window_result.percentile(99) * 1000:.0f} ms"
        )
        if window_result.ok_share < threshold:
            result.stopped = f"{concurrency} had {window_result.ok_share:.2%} ok"
            return result
        following = max(concurrency + 1, int(concurrency * factor))
        if following > max_concurrency:
            result.stopped = f"the ramp's bound, {max_concurrency}, was reached with every window ok"
            return result
        concurrency = following


@dataclass
class BurstResult:
    """A burst–idle run: every episode, each group's makespan and each step's."""

    batch: int
    group: int
    rounds: int
    idle_s: float
    episodes: DriverResult = field(default_factory=DriverResult)
    #: Seconds from a step's burst to its group's last episode's end, every group of every step.
    group_makespans: list[float] = field(default_factory=list)
    #: Seconds from a step's burst to its last episode's end.
    step_makespans: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        e = self.episodes
        return {
            "batch": self.batch,
            "group": self.group,
            "sessions_per_burst": self.batch * self.group,
            "rounds": self.rounds,
            "idle_s": self.idle_s,
            "episodes": e.episodes,
            "failures": e.failures,
            "finished": e.finished,
            "failure_kinds": dict(e.failure_kinds.most_common(5)),
            "episode_p50_ms": round(e.percentile(50) * 1000, 1),
            "episode_p99_ms": round(e.percentile(99) * 1000, 1),
            "group_makespan_p50_ms": round(percentile(self.group_makespans, 50) * 1000, 1),
            "group_makespan_p99_ms": round(percentile(self.group_makespans, 99) * 1000, 1),
            "step_makespans_ms": [round(s * 1000, 1) for s in self.step_makespans],
            "replicas": dict(e.replicas),
        }

    def render(self) -> str:
        d = self.as_dict()
        return (
            f"GRPO burst-idle: {self.rounds} step(s) of {self.batch} x {self.group} = {self.batch * self.group} episodes at "
            f"once, {self.idle_s:g}s idle between\n"
            f"episodes {d['episodes']} ok, {d['failures']} failed, {d['finished']} finished; episode p50 "
            f"{d['episode_p50_ms']:.0f} ms, p99 {d['episode_p99_ms']:.0f} ms\n"
            f"group makespan p50 {d['group_makespan_p50_ms']:.0f} ms, p99 {d['group_makespan_p99_ms']:.0f} ms; step makespans "
            f"{', '.join(f'{s:.0f}' for s in d['step_makespans_ms'])} ms"
        )


async def run_bursts(
    base_url: str,
    plan: EpisodePlan,
    *,
    batch: int,
    group: int,
    rounds: int = 3,
    idle: float = 5.0,
    read_timeout: float = protocol.CLIENT_READ_TIMEOUT_S,
    api_key: str | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> BurstResult:
    """``rounds`` GRPO steps: ``batch`` × ``group`` episodes at once, then ``idle`` s of nothing."""
    if batch < 1 or group < 1 or rounds < 1:
        raise ValueError("batch, group and rounds must each be at least 1")
    out = BurstResult(batch, group, rounds, idle)
    size = batch * group
    out.episodes.concurrency = size
    connector = aiohttp.TCPConnector(limit=size, limit_per_host=size)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    async with ors_client_session(base_url, connector, timeout, api_key) as http:
        player = EpisodePlayer(http, plan, out.episodes, read_timeout)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for step in range(rounds):
            burst = time.perf_counter()

            async def member(task: int) -> float:
                await player.counted(task)
                return time.perf_counter() - burst

            # The members of a group play one task (a prompt's G rollouts); the groups of a step, B tasks.
            ends = await asyncio.wait_for(
                asyncio.gather(*(member(step * batch + g) for g in range(batch) for _ in range(group))),
                timeout=read_timeout * (len(plan.steps()) + 4) + plan.think_time * len(plan.actions()),
            )
            groups = [max(ends[g * group : (g + 1) * group]) for g in range(batch)]
            out.group_makespans.extend(groups)
            out.step_makespans.append(max(groups))
            progress(f"step {step + 1}: {size} episodes, makespan {max(groups) * 1000:.0f} ms; idle {idle:g}s")
            if step + 1 < rounds and idle > 0:
                await asyncio.sleep(idle)
        out.episodes.elapsed = time.perf_counter() - t0
        out.episodes.driver_cpu = time.process_time() - cpu0
    return out


def bursts(base_url: str, plan: EpisodePlan, **kwargs: Any) -> BurstResult:
    """:func:`run_bursts` from synchronous code."""
    result: BurstResult = run_async(run_bursts(base_url, plan, **kwargs))
    return result


@dataclass
class ShapeReport:
    """``orsbench bench --shape ramp|burst``: one shape's result per server measured."""

    shape: str
    plan: str
    results: dict[str, RampResult | BurstResult]
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """A burst with a failed episode; a ramp whose very first window already failed."""
        for result in self.results.values():
            if isinstance(result, BurstResult) and result.episodes.failures:
                return True
            if isinstance(result, RampResult) and result.knee is None:
                return True
        return False

    def ci_figures(self) -> dict[str, dict[str, float | None]]:
        """The figures ``--fail-under`` reads, per server."""
        out: dict[str, dict[str, float | None]] = {}
        for name, result in self.results.items():
            if isinstance(result, RampResult):
                at = next((r for c, r in result.steps if c == result.knee), None)
                out[name] = {
                    "knee": float(result.knee or 0),
                    "ok": at.ok_share * 100 if at else 0.0,
                    "rate": at.rate if at else 0.0,
                    "finished": at.finished / at.episodes * 100 if at and at.episodes else 0.0,
                }
            else:
                e = result.episodes
                out[name] = {
                    "ok": e.ok_share * 100,
                    "rate": e.episodes / e.elapsed if e.elapsed else 0.0,
                    "finished": e.finished / e.episodes * 100 if e.episodes else 0.0,
                }
        return out

    def to_json(self) -> str:
        import json

        return json.dumps(
            {
                "mode": self.shape,
                "plan": self.plan,
                "servers": {name: result.as_dict() for name, result in self.results.items()},
                "machine": self.machine,
            },
            indent=2,
        )

    def render(self) -> str:
        title = "ramp to the knee" if self.shape == "ramp" else "GRPO burst-idle"
        lines = [
            f"orsbench bench --shape {self.shape}: {title}",
            f"episode: {self.plan}",
            machine_line(self.machine, "a shared machine: compare servers measured in one run"),
        ]
        for name, result in self.results.items():
            lines += ["", f"[{name}]", result.render()]
            episodes = [r for _, r in result.steps] if isinstance(result, RampResult) else [result.episodes]
            replicas = sum((r.replicas for r in episodes), start=type(episodes[0].replicas)()) if episodes else {}
            if replicas:
                lines.append("episodes per replica: " + ", ".join(f"{k} {v}" for k, v in sorted(replicas.items())))
            kinds = sum((r.failure_kinds for r in episodes), start=type(episodes[0].failure_kinds)()) if episodes else {}
            for kind, count in kinds.most_common(5):
                lines.append(f"  failure x{count}: {kind}")
        return "\n".join(lines)
