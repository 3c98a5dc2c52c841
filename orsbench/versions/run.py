"""Run a client's releases: install each once (:mod:`.envs`), play its cases there (:mod:`.play`), bisect the cells
that change between tested releases (:mod:`.bisection`), and gather a :class:`~orsbench.versions.history.History`.

The cases are the matrix's (a cell's id without its client: ``mock:reward-nan``); the yardstick each release is read
against is the pinned matrix — what a correct client gets (``expected``) and what the pinned release gets with its
pinned defects (``clients/cells.py``) — so a row's ``defects`` are the pinned defects a release shows in that case.
The installer and the runner are parameters: tests inject fakes, nothing in a test reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orsbench
from orsbench.versions.bisection import NOT_RUN, search
from orsbench.versions.envs import Built, Cache, client_python
from orsbench.versions.history import History, Row, SeriesFacts
from orsbench.versions.releases import Index, Release, Series, sort_versions

__all__ = ["Plan", "Runner", "all_cases", "default_cases", "pinned_facts", "play_in_env", "release_environ", "run_versions", "shard_of"]

#: ``runner(built, client, cases) -> {case: {"verdict", "error", "elapsed"}}`` — play one release's cases in its environment.
Runner = Callable[[Built, str, list[str]], dict[str, dict[str, Any]]]
#: Seconds one release's run may take: a base for start-up plus this much per case (a hang waits its deadline).
RUN_BASE_S, RUN_PER_CASE_S = 120.0, 45.0


@dataclass(frozen=True)
class Plan:
    """One series to run: its tested releases (anchors) and its cases."""

    series: Series
    anchors: tuple[str, ...]
    cases: tuple[str, ...]


def all_cases(client: str) -> list[str]:
    """Every case of ``client`` on the mock (every scenario, every fault profile)."""
    from orsbench.clients import cells as C

    return [c.id.split("@", 1)[1] for c in C.plan([client], ["mock"], None)]


def default_cases(client: str) -> list[str]:
    """The cases that tell releases apart: every one where a pinned defect shows, and the first plain scenario (a
    release that cannot play at all shows there)."""
    from orsbench.clients import cells as C

    cells = C.plan([client], ["mock"], None)
    chosen = [cells[0]] + [c for c in cells[1:] if C.predicted(c) != C.expected(c)]
    return [c.id.split("@", 1)[1] for c in chosen]


def pinned_facts(client: str, cases: list[str]) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, str]]:
    """Per case: what a correct client gets, what the pinned release gets and the pinned defects that explain it; and
    the defects' summaries."""
    from orsbench.clients import cells as C
    from orsbench.upstream.defects import DEFECTS

    by_case = {c.id.split("@", 1)[1]: c for c in C.plan([client], sorted({k.split(":", 1)[0] for k in cases}), None)}
    expected, pinned, summaries = {}, {}, {}
    for case in cases:
        cell = by_case[case]
        expected[case] = str(C.expected(cell))
        defects = [d.id for d in C.cell_defects(cell)]
        pinned[case] = {"verdict": str(C.predicted(cell)), "defects": defects}
        summaries.update({d: DEFECTS[d].summary for d in defects})
    return expected, pinned, summaries


def release_environ() -> dict[str, str]:
    """The environment a release's process runs in: orsbench (this checkout) first on ``PYTHONPATH``, nothing online."""
    root = str(Path(orsbench.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
            "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "HF_HUB_OFFLINE": "1"}  # fmt: skip


def play_in_env(built: Built, client: str, cases: list[str], *, log: Path | None = None) -> dict[str, dict[str, Any]]:
    """Run ``python -m orsbench.versions.play`` in the release's environment, orsbench on its ``PYTHONPATH``."""
    assert built.python is not None
    env = {**release_environ(), **built.environ}  # a 3.12 release environment names itself to the target
    timeout = RUN_BASE_S + RUN_PER_CASE_S * len(cases)
    with tempfile.TemporaryDirectory(prefix="orsbench-versions-") as tmp:
        out = Path(tmp) / "out.json"
        argv = [str(built.python), "-m", "orsbench.versions.play", client, "--cases", ",".join(cases), "--out", str(out), "--budget", str(timeout - 60)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, start_new_session=True)
            said = done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            said, done = f"{exc.stdout or ''}{exc.stderr or ''}", None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(said if isinstance(said, str) else said.decode(errors="replace"))
        if done is None:
            return {c: {"verdict": NOT_RUN, "error": f"the release's run took more than {timeout:g} s"} for c in cases}
        try:
            report = json.loads(out.read_text())
        except (OSError, ValueError):
            tail = " / ".join(str(said).strip().splitlines()[-3:])[-400:]
            return {c: {"verdict": NOT_RUN, "error": f"the release's run ended (exit {done.returncode}) without a result: {tail}"} for c in cases}
    wanted = built.release.version
    if built.release.series.package == _package_of(client) and report.get("version") not in (wanted, None):
        return {c: {"verdict": NOT_RUN, "error": f"its environment runs {report.get('version')}, not {wanted}"} for c in cases}
    if report.get("error"):
        return {c: {"verdict": NOT_RUN, "error": str(report["error"])} for c in cases}
    return {c["case"]: c for c in report["cells"]}


def _package_of(client: str) -> str:
    from orsbench.clients.targets import CLIENT_TARGETS

    return CLIENT_TARGETS.get(client).package


def shard_of(anchors: list[str], shard: tuple[int, int]) -> list[str]:
    """Shard ``k`` of ``n``'s anchors: a contiguous run of the gaps, sharing its edges with its neighbours (so every gap
    is bisected by exactly one shard, and an edge release is run by both: two rows that merge into one)."""
    k, n = shard
    if n == 1:
        return anchors
    gaps = len(anchors) - 1
    if gaps <= 0:
        return anchors if k == 1 else []
    cut = [round(i * gaps / n) for i in range(n + 1)]
    return anchors[cut[k - 1] : cut[k] + 1] if cut[k] > cut[k - 1] else []


def versions_between(index: Index, package: str, anchors: list[str], progress: Callable[[str], None], *, python: str | None = None) -> list[str]:
    """The index's releases from the oldest to the newest anchor (pre-releases only where an anchor is one), as a
    ``python`` (the client's own, where it is not this one) is offered them."""
    from packaging.version import Version

    try:
        listed = index.versions(package, python=python)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        progress(f"{package}: the package index's list is not available ({exc}); no bisection between tested releases")
        listed = []
    lo, hi = Version(anchors[0]), Version(anchors[-1])
    chosen = [v for v in listed if lo <= Version(v) <= hi and (not Version(v).is_prerelease or v in anchors)]
    return sort_versions([*chosen, *anchors])


def run_versions(
    plans: list[Plan],
    *,
    cache: Cache,
    index: Index,
    runner: Runner | None = None,
    progress: Callable[[str], None] = lambda line: None,
    shard: tuple[int, int] = (1, 1),
) -> History:
    """Install, run and bisect every plan's releases (this shard's share of them) into one :class:`History`."""
    started = time.monotonic()
    history = History(shard=None if shard == (1, 1) else f"{shard[0]}/{shard[1]}")
    play = runner or (lambda built, client, cases: play_in_env(built, client, cases, log=cache.folder / "logs" / f"{built.release.key}.log"))
    for plan in plans:
        series, cases = plan.series, list(plan.cases)
        anchors = shard_of(sort_versions(plan.anchors), shard)
        if not anchors:
            continue
        versions = versions_between(index, series.package, anchors, progress, python=client_python(series.client))
        expected, pinned, summaries = pinned_facts(series.client, cases)
        facts = SeriesFacts(series.client, series.package, list(series.pins), versions, anchors, cases, expected, pinned, summaries)
        history.series[series.name] = facts
        elapsed: dict[tuple[str, str], tuple[str | None, float | None]] = {}

        def observe(version: str, wanted: list[str], series: Series = series, facts: SeriesFacts = facts, elapsed: dict = elapsed) -> dict[str, str]:
            release = Release(series, version)
            built = cache.ensure(release)
            runs = facts.installs.get(version, {}).get("run_s", 0.0)
            if version not in facts.installs:  # the first time it is asked for (a second run finds it built by this one)
                facts.installs[version] = {"seconds": round(built.seconds, 1), "reused": built.reused, "error": built.error, "run_s": runs}
            if built.error is not None:
                progress(f"{series.name} {version}: cannot be installed here: {built.error}")
                got: dict[str, dict[str, Any]] = {c: {"verdict": NOT_RUN, "error": f"cannot be installed here: {built.error}"} for c in wanted}
            else:
                t0 = time.monotonic()
                got = play(built, series.client, wanted)
                took = time.monotonic() - t0
                facts.installs[version]["run_s"] = round(runs + took, 1)  # every run of this release, bisection's too
                progress(f"{series.name} {version}: {len(wanted)} case(s) in {took:.0f} s")
            for case in wanted:
                cell = got.get(case) or {"verdict": NOT_RUN, "error": "the run gave no verdict for this case"}
                elapsed.setdefault((version, case), (cell.get("error"), cell.get("elapsed")))  # the row's verdict is the first run's
            return {case: str((got.get(case) or {}).get("verdict", NOT_RUN)) for case in wanted}

        found = search(versions, anchors, cases, observe)
        for (version, case), verdict in found.seen.items():
            error, took = elapsed.get((version, case), (None, None))
            history.rows.append(
                Row(series.client, series.name, facts.label(version), version, case, verdict, error=error,
                    bisected=(version, case) in found.bisected, elapsed=took, again=found.again.get((version, case)))  # fmt: skip
            )
    history.rows.sort(key=lambda r: (r.series, history.series[r.series].versions.index(r.version), r.case))
    history.seconds = time.monotonic() - started
    return history.analyse()
