"""A server's releases under ``orsbench check``: which releases of openreward's ``Server`` (and ors-sdk's) pass.

An environment author asks the server-side question the client side cannot answer: "my environment pins
openreward 0.1.115 — does *that* release's server pass?". ``orsbench versions server:openreward`` answers it the
way the client side answers it for clients (:mod:`orsbench.versions.run`), with the same cache, the same bisection
and the same history:

1. each release is installed once into its cached environment (:class:`~orsbench.versions.envs.Cache`, its lock);
2. there, ``python -m orsbench.versions.servable`` says which of the chosen scenarios the release can serve — the
   SDK twin leaves out a scenario that needs what the release lacks (task-scoped tools, the index API,
   ``score_group``): those cells are :data:`NOT_SERVED`, with the reason, never a traceback;
3. for each served scenario, ``orsbench check`` runs in *this* interpreter (over HTTP, as a user runs it) against
   the twin the release's environment starts (``--server-cmd``: 127.0.0.1, a free port, stopped by its PID,
   bounded by ``--wait`` and :data:`CHECK_TIMEOUT_S`);
4. a case is ``SCENARIO:CHECK_ID`` and its verdict the check's status (``pass``, ``fail``, ``warn``, ``skip``,
   ``n/a``, ``error``), or :data:`NOT_CHECKED` where the checker stopped before it (an old ``/create`` that
   wants other fields) — a state of its own, which bisection places between releases like any other;
5. the releases asked for run every case; between two of them, a check whose status changes is bisected over the
   index's releases in between (:func:`~orsbench.versions.bisection.search`: a scenario's checks run together, so
   the checks changing in one gap share each run), and each change is run twice before it is believed;
6. per check that fails somewhere, its ``first_failing`` and ``last_failing`` release (``History.analyse``:
   ``SeriesFacts.checks``). The yardstick (``pinned``) is what the release installed beside orsbench gets — the
   one the twin was written for — so ``--strict`` says where the newest release differs from it.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbench.versions.bisection import NOT_RUN, search
from orsbench.versions.envs import Built, Cache
from orsbench.versions.history import History, Row, SeriesFacts
from orsbench.versions.releases import Index, Release, sort_versions
from orsbench.versions.run import Plan, release_environ, shard_of, versions_between

__all__ = [
    "DEFAULTS",
    "DEFAULT_SCENARIOS",
    "NOT_CHECKED",
    "NOT_SERVED",
    "SERVERS",
    "ServerKind",
    "check_in_env",
    "is_server",
    "parse_cases",
    "per_release",
    "run_servers",
    "server_cases",
    "servable_in_env",
]

#: How a server series is named on the command line (``orsbench versions server:openreward``).
PREFIX = "server:"
#: A scenario the release cannot serve (it lacks what the scenario needs): every check of it.
NOT_SERVED = "not served"
#: A check the checker did not reach at this release (it stopped before it: the reason is the row's error).
NOT_CHECKED = "not checked"
#: Seconds one ``orsbench check`` of one scenario may take (a server that hangs waits its probes' timeouts).
CHECK_TIMEOUT_S = 300.0
#: Seconds the twin may take to answer ``/health`` (an old SDK imports slowly on a loaded machine).
SERVER_WAIT_S = 90.0


@dataclass(frozen=True)
class ServerKind:
    """A server whose releases can be checked: the distribution, and the ``--impl`` twin that serves it."""

    package: str
    impl: str


SERVERS: dict[str, ServerKind] = {
    f"{PREFIX}openreward": ServerKind("openreward", "sdk"),
    f"{PREFIX}ors-sdk": ServerKind("ors-sdk", "ors-sdk"),
}

#: The default releases: the floors consumers pin (0.1.33, 0.1.109, 0.1.115, 0.1.123, 0.1.127), the client side's
#: boundary 0.1.100/0.1.101, a release every ~10–20 between, the newest. ors-sdk has one release on the index.
DEFAULTS: dict[str, tuple[str, ...]] = {
    f"{PREFIX}openreward": ("0.1.33", "0.1.80", "0.1.100", "0.1.101", "0.1.109", "0.1.115", "0.1.123", "0.1.127", "0.1.140", "0.1.150", "0.1.160", "0.1.167"),
    f"{PREFIX}ors-sdk": ("0.1.0",),
}

#: The default scenarios: a plain one, one with task-scoped tools, one that lists its tasks only by index — the three
#: shapes older releases differ on.
DEFAULT_SCENARIOS = ("echo", "task-tool", "schema-zoo-index")

#: ``servable(built, impl, scenarios) -> {"version", "left_out": {scenario: why}}`` or ``{"version", "error"}``.
Servable = Callable[[Built, str, list[str]], dict[str, Any]]
#: ``checker(built, impl, scenario) -> {"checks": {id: {"verdict", "error", "elapsed"}}, "reason", "error"}``.
Checker = Callable[[Built, str, str], dict[str, Any]]


def is_server(name: str) -> bool:
    return name in SERVERS


def check_ids() -> list[str]:
    """Every server check's id, in catalogue order."""
    from orsbench.checks.registry import CHECKS

    return [c.id for c in CHECKS.values()]


def server_cases(scenarios: Iterable[str]) -> list[str]:
    """``SCENARIO:CHECK_ID`` for every check of every scenario."""
    ids = check_ids()
    return [f"{s}:{i}" for s in scenarios for i in ids]


def parse_cases(given: list[str] | None) -> list[str]:
    """``--cases`` of a server series: scenario names (every check of each), ``SCENARIO:CHECK_ID``, or ``all`` (the
    default scenarios); ValueError naming what is unknown."""
    from orsbench.scenarios import SCENARIOS

    if not given or given == ["all"]:
        return server_cases(DEFAULT_SCENARIOS)
    ids, out = set(check_ids()), []
    for spec in given:
        scenario, _, check = spec.partition(":")
        if scenario not in SCENARIOS.names():
            raise ValueError(f"no scenario {scenario!r} (a server case is SCENARIO or SCENARIO:CHECK_ID; scenarios: {', '.join(SCENARIOS.names())})")
        if check and check not in ids:
            raise ValueError(f"no check {check!r} (see orsbench check --list)")
        out += [spec] if check else server_cases([scenario])
    return list(dict.fromkeys(out))


def _scenario_of(case: str) -> tuple[str, str]:
    scenario, _, check = case.partition(":")
    return scenario, check


def servable_in_env(built: Built, impl: str, scenarios: list[str]) -> dict[str, Any]:
    """Ask the release's environment which scenarios its twin can serve (:mod:`orsbench.versions.servable`)."""
    assert built.python is not None
    argv = [str(built.python), "-m", "orsbench.versions.servable", impl, ",".join(scenarios)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False, env=release_environ())
    except subprocess.TimeoutExpired:
        return {"error": "asking which scenarios it serves took more than 180 s"}
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[-400:]
        return {"error": f"asking which scenarios it serves ended (exit {done.returncode}) without an answer: {tail}"}


def check_in_env(built: Built, impl: str, scenario: str, *, log: Path | None = None) -> dict[str, Any]:
    """``orsbench check --server-cmd`` (this interpreter) against the twin the release's environment starts."""
    assert built.python is not None
    serve = shlex.join([str(built.python), "-m", "orsbench", "serve", scenario, "--impl", impl, "--port", "0"]).replace("--port 0", "--port {port}")
    with tempfile.TemporaryDirectory(prefix="orsbench-versions-server-") as tmp:
        out = Path(tmp) / "check.json"
        argv = [sys.executable, "-m", "orsbench", "check", "--server-cmd", serve, "--wait", str(SERVER_WAIT_S), "--no-fuzz", "-q", "--json", str(out)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False, env=release_environ())
            said, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            said, code = f"{exc.stdout or ''}{exc.stderr or ''}", None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(said if isinstance(said, str) else said.decode(errors="replace"))
        if code is None:
            return {"error": f"orsbench check took more than {CHECK_TIMEOUT_S:g} s"}
        try:
            report = json.loads(out.read_text())
        except (OSError, ValueError):
            tail = " / ".join(str(said).strip().splitlines()[-3:])[-400:]
            return {"error": f"orsbench check ended (exit {code}) without a report: {tail}"}
    checks = {
        c["id"]: {"verdict": c["status"], "error": None if c["status"] == "pass" else str(c.get("message") or "")[:300], "elapsed": c.get("duration_s")}
        for c in report.get("checks", [])
    }  # fmt: skip
    reason = None if report.get("verdict") in ("pass", "fail") else str(report.get("reason") or "")[:400]
    return {"checks": checks, "reason": reason}


def _observe_release(
    built: Built, kind: ServerKind, wanted: list[str], scenarios: list[str], servable: Servable, checker: Checker, probes: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """One release's cells: which of the series' ``scenarios`` it serves (asked once per release), then one check run
    per served scenario among the ``wanted`` cells."""
    version = built.release.version
    if version not in probes:
        probes[version] = servable(built, kind.impl, scenarios)
    probe = probes[version]
    if probe.get("error"):
        return {c: {"verdict": NOT_SERVED, "error": str(probe["error"])} for c in wanted}
    if probe.get("version") not in (version, None):
        return {c: {"verdict": NOT_RUN, "error": f"its environment runs {kind.package} {probe['version']}, not {version}"} for c in wanted}
    left = dict(probe.get("left_out") or {})
    got: dict[str, dict[str, Any]] = {}
    for scenario in dict.fromkeys(_scenario_of(c)[0] for c in wanted):
        cases = [c for c in wanted if _scenario_of(c)[0] == scenario]
        if scenario in left:
            got.update({c: {"verdict": NOT_SERVED, "error": left[scenario]} for c in cases})
            continue
        ran = checker(built, kind.impl, scenario)
        if ran.get("error"):
            got.update({c: {"verdict": NOT_RUN, "error": str(ran["error"])} for c in cases})
            continue
        for case in cases:
            cell = ran["checks"].get(_scenario_of(case)[1])
            got[case] = cell or {"verdict": NOT_CHECKED, "error": ran.get("reason") or "orsbench check reported no such check"}
    return got


def per_release(history: History, name: str) -> list[tuple[str, dict[str, int], list[str]]]:
    """Per release run of a server series: how many of its cells got each status, and the checks that failed.

    Only the releases asked for (and bisection's, on its few checks) run every check, so the counts are of the
    cells run at that release."""
    facts = history.series[name]
    out: dict[str, tuple[dict[str, int], list[str]]] = {}
    for row in history.rows:
        if row.series == name:
            counts, failed = out.setdefault(row.version, ({}, []))
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
            if row.verdict == "fail":
                failed.append(row.case)
    return [(facts.label(v), *out[v]) for v in sorted(out, key=facts.versions.index)]


def pinned_release(package: str) -> str | None:
    """The release installed beside orsbench (the one its twin was written for): the yardstick."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_servers(
    plans: list[Plan],
    *,
    cache: Cache,
    index: Index,
    servable: Servable | None = None,
    checker: Checker | None = None,
    progress: Callable[[str], None] = lambda line: None,
    shard: tuple[int, int] = (1, 1),
    pinned: Callable[[str], str | None] = pinned_release,
) -> History:
    """Install, check and bisect every server plan's releases into one :class:`History` (cases ``SCENARIO:CHECK``)."""
    started = time.monotonic()
    history = History(shard=None if shard == (1, 1) else f"{shard[0]}/{shard[1]}")
    ask = servable or servable_in_env
    for plan in plans:
        series, cases, kind = plan.series, list(plan.cases), SERVERS[plan.series.client]
        check = checker or (lambda built, impl, scenario: check_in_env(built, impl, scenario, log=cache.folder / "logs" / f"server-{built.release.key}-{scenario}.log"))
        yardstick = pinned(kind.package)
        asked = sort_versions([*plan.anchors, *([yardstick] if yardstick else [])])  # the pinned release is always run
        anchors = shard_of(asked, shard)
        if not anchors:
            continue
        versions = versions_between(index, series.package, anchors, progress)
        facts = SeriesFacts(series.client, series.package, list(series.pins), versions, anchors, cases,
                            {c: "pass" for c in cases}, {c: {"verdict": "pass", "defects": []} for c in cases})  # fmt: skip
        history.series[series.name] = facts
        scenarios = list(dict.fromkeys(_scenario_of(c)[0] for c in cases))
        details: dict[tuple[str, str], tuple[str | None, float | None]] = {}
        probes: dict[str, dict[str, Any]] = {}

        def observe(version: str, wanted: list[str], series=series, facts=facts, kind=kind, check=check, details=details, probes=probes, scenarios=scenarios) -> dict[str, str]:
            built = cache.ensure(Release(series, version))
            facts.installs.setdefault(version, {"seconds": round(built.seconds, 1), "reused": built.reused, "error": built.error, "run_s": 0.0})
            if built.error is not None:
                progress(f"{series.name} {version}: cannot be installed here: {built.error}")
                got = {c: {"verdict": NOT_RUN, "error": f"cannot be installed here: {built.error}"} for c in wanted}
            else:
                t0 = time.monotonic()
                got = _observe_release(built, kind, wanted, scenarios, ask, check, probes)
                took = time.monotonic() - t0
                facts.installs[version]["run_s"] = round(facts.installs[version]["run_s"] + took, 1)
                failed = sorted(c for c, cell in got.items() if cell["verdict"] == "fail")
                progress(f"{series.name} {version}: {len(wanted)} check(s) in {took:.0f} s, {len(failed)} failed{': ' + ', '.join(failed[:6]) if failed else ''}{' …' if len(failed) > 6 else ''}")
            for case in wanted:
                details.setdefault((version, case), (got[case].get("error"), got[case].get("elapsed")))
            return {case: str(got[case]["verdict"]) for case in wanted}

        found = search(versions, anchors, cases, observe)
        for (version, case), verdict in found.seen.items():
            error, took = details.get((version, case), (None, None))
            history.rows.append(Row(series.client, series.name, facts.label(version), version, case, verdict, error=error,
                                    bisected=(version, case) in found.bisected, elapsed=took, again=found.again.get((version, case))))  # fmt: skip
        if yardstick in anchors:
            facts.pinned = {c: {"verdict": found.seen.get((yardstick, c), "pass"), "defects": []} for c in cases}
    history.rows.sort(key=lambda r: (r.series, history.series[r.series].versions.index(r.version), r.case))
    history.seconds = time.monotonic() - started
    return history.analyse()
