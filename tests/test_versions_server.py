"""``orsbench versions server:openreward``: a server's releases under ``orsbench check``.

Bisection finds where each check's status changes over a made-up server history with the fewest runs, and gives
each failing check its first and last failing release; a release that cannot be installed is a clear row; a release
that lacks what a scenario needs serves the rest and says which it left out and why. Nothing here reaches the
network: the package index, the installer, the "which scenarios can it serve" probe and the checker are fakes —
except where the SDK twin itself is built in-process, on the openreward release installed here.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import httpx
import pytest

from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.versions.bisection import NOT_RUN
from orsbench.versions.envs import Built, Cache, InstallError
from orsbench.versions.history import History, load, merge
from orsbench.versions.releases import Index, Release, Series
from orsbench.versions.run import Plan
from orsbench.versions.servers import NOT_CHECKED, NOT_SERVED, parse_cases, run_servers

RELEASES = [f"0.1.{n}" for n in range(1, 41)]  # 0.1.1 … 0.1.40
ANCHORS = ("0.1.1", "0.1.10", "0.1.20", "0.1.30", "0.1.40")
PINNED = "0.1.40"


def _n(version: str) -> int:
    return int(version.rsplit(".", 1)[1])


#: A made-up server history: ``discovery.version`` fails before 0.1.14 (it appears), ``call.finish_latch`` fails from
#: 0.1.4 up to 0.1.23 (it is fixed at 0.1.24), ``dataset.num_tasks`` never fails; ``task-tool`` cannot be served before
#: 0.1.7 (the release lacks task-scoped tools); on 0.1.1 the checker stops before the session checks (an old
#: /create), so ``echo:session.create`` is not checked there; and ``http.error_detail`` goes through three statuses
#: inside one gap — skip up to 0.1.22, fail 0.1.23–0.1.26, pass from 0.1.27 — so both of its changes must be placed.
def _status(version: str, check: str) -> str | None:
    n = _n(version)
    if check == "discovery.version":
        return "fail" if n < 14 else "pass"
    if check == "call.finish_latch":
        return "fail" if 4 <= n <= 23 else "pass"
    if check == "session.create":
        return None if n == 1 else "pass"
    if check == "http.error_detail":
        return "skip" if n <= 22 else "fail" if n <= 26 else "pass"
    return "pass"


CHECKS = ("discovery.version", "call.finish_latch", "dataset.num_tasks", "session.create", "http.error_detail")
CASES = tuple(f"{s}:{c}" for s in ("echo", "task-tool") for c in CHECKS)


class FakeServerWorld:
    """Installs by making a folder; says task-tool is not served before 0.1.7; checks by reading :func:`_status`."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.broken = broken
        self.installs: list[str] = []
        self.probes: list[str] = []
        self.checks: list[tuple[str, str]] = []

    def install(self, release: Release, path: Path) -> None:
        self.installs.append(release.version)
        if release.version in self.broken:
            raise InstallError(f"pip install {release.requirements[0]} failed: no matching distribution")
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("")

    def servable(self, built: Built, impl: str, scenarios: list[str]) -> dict:
        self.probes.append(built.release.version)
        left = {"task-tool": "the openreward SDK has no task-scoped tools"} if _n(built.release.version) < 7 and "task-tool" in scenarios else {}
        return {"version": built.release.version, "left_out": left}

    def check(self, built: Built, impl: str, scenario: str) -> dict:
        assert scenario != "task-tool" or _n(built.release.version) >= 7, "a scenario left out must never be checked"
        self.checks.append((built.release.version, scenario))
        statuses = {c: _status(built.release.version, c) for c in CHECKS}
        return {
            "checks": {c: {"verdict": s, "error": None if s == "pass" else f"{c} failed", "elapsed": 0.01} for c, s in statuses.items() if s},
            "reason": "the checker stopped: POST /create answered 422" if None in statuses.values() else None,
        }


def _history(tmp_path: Path, world: FakeServerWorld, *, anchors=ANCHORS, cases=CASES, shard=(1, 1)) -> History:
    index = Index(tmp_path, lister=lambda package, python: list(reversed(RELEASES)))
    plan = Plan(Series("server:openreward", "openreward"), tuple(anchors), tuple(cases))
    return run_servers([plan], cache=Cache(tmp_path, installer=world.install), index=index, servable=world.servable,
                       checker=world.check, shard=shard, pinned=lambda package: PINNED)  # fmt: skip


def test_bisection_finds_where_each_check_changes_with_the_fewest_runs(tmp_path: Path) -> None:
    world = FakeServerWorld()
    history = _history(tmp_path, world)
    facts = history.series["server:openreward"]
    changes = {(c["case"], c["last"], c["first"], c["before"], c["after"]) for c in facts.changes}
    assert changes == {
        ("echo:discovery.version", "0.1.13", "0.1.14", "fail", "pass"),
        ("task-tool:discovery.version", "0.1.13", "0.1.14", "fail", "pass"),
        ("echo:call.finish_latch", "0.1.3", "0.1.4", "pass", "fail"),
        ("echo:call.finish_latch", "0.1.23", "0.1.24", "fail", "pass"),
        ("task-tool:call.finish_latch", "0.1.23", "0.1.24", "fail", "pass"),
        # task-tool is served from 0.1.7: its checks change from "not served" there, and bisection places it.
        *{(f"task-tool:{c}", "0.1.6", "0.1.7", NOT_SERVED, _status("0.1.7", c)) for c in CHECKS},
        # Three statuses in the gap 0.1.20–0.1.30: the first change is placed, then the rest of the gap is searched.
        *{(f"{s}:http.error_detail", "0.1.22", "0.1.23", "skip", "fail") for s in ("echo", "task-tool")},
        *{(f"{s}:http.error_detail", "0.1.26", "0.1.27", "fail", "pass") for s in ("echo", "task-tool")},
        # "not checked" is a state of its own: bisection places it too.
        ("echo:session.create", "0.1.1", "0.1.2", NOT_CHECKED, "pass"),
    }
    assert all(c["exact"] for c in facts.changes)
    # Per failing check, its first and last failing release, in the client side's vocabulary.
    spans = {c["id"]: (c["first_failing"], c["last_failing"], c["since_oldest_tested"], c["still_failing"]) for c in facts.checks}
    assert spans == {
        "echo:discovery.version": ("0.1.1", "0.1.13", True, False),
        "task-tool:discovery.version": ("0.1.7", "0.1.13", False, False),
        "echo:call.finish_latch": ("0.1.4", "0.1.23", False, False),
        "task-tool:call.finish_latch": ("0.1.7", "0.1.23", False, False),
        "echo:http.error_detail": ("0.1.23", "0.1.26", False, False),
        "task-tool:http.error_detail": ("0.1.23", "0.1.26", False, False),
    }
    # The fewest runs: each release is installed once; the anchors run every case; a gap's changing checks share
    # each bisection step (ceil(log2(g + 1)) for a gap of g); every change is confirmed on its two anchors, and each
    # boundary on its two sides — far fewer than every release × case.
    assert sorted(set(world.installs), key=_n) == sorted(world.installs, key=_n)
    steps = math.ceil(math.log2(8 + 1))  # gaps of 8 releases
    bisected = {v for v, _ in world.checks} - set(ANCHORS)
    assert len(bisected) <= 5 * steps  # five searches: 1–10 twice over, 10–20, 20–30 twice over (three statuses)
    counts = history.counts()
    assert counts["cells_bisected"] > 0 and counts["cells_run"] < counts["cells_spanned"] / 2
    # The pinned release is the yardstick: the newest agrees with it, so --strict has nothing to say.
    assert facts.pinned["echo:call.finish_latch"]["verdict"] == "pass"


def test_a_release_that_cannot_be_installed_is_a_clear_row(tmp_path: Path) -> None:
    history = _history(tmp_path, FakeServerWorld(broken=frozenset({"0.1.20"})))
    rows = [r for r in history.rows if r.version == "0.1.20"]
    assert rows and {r.verdict for r in rows} == {NOT_RUN}
    assert all("cannot be installed here: pip install openreward==0.1.20 failed: no matching distribution" in (r.error or "") for r in rows)
    facts = history.series["server:openreward"]
    assert facts.installs["0.1.20"]["error"]
    # Its neighbours still bound every change: finish_latch's fix is found across the gap it leaves.
    assert ("echo:call.finish_latch", "0.1.23", "0.1.24") in {(c["case"], c["last"], c["first"]) for c in facts.changes}


def test_a_scenario_the_release_cannot_serve_is_a_row_naming_why_and_the_rest_is_checked(tmp_path: Path) -> None:
    world = FakeServerWorld()
    history = _history(tmp_path, world, anchors=("0.1.1",))
    rows = {r.case: r for r in history.rows if r.version == "0.1.1"}
    assert {rows[f"task-tool:{c}"].verdict for c in CHECKS} == {NOT_SERVED}
    assert rows["task-tool:discovery.version"].error == "the openreward SDK has no task-scoped tools"
    assert rows["echo:discovery.version"].verdict == "fail" and rows["echo:dataset.num_tasks"].verdict == "pass"
    assert rows["echo:session.create"].verdict == NOT_CHECKED and "POST /create answered 422" in (rows["echo:session.create"].error or "")
    assert ("0.1.1", "task-tool") not in world.checks


def test_the_history_round_trips_and_renders_a_release_by_check_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orsbench.cli import main

    history = _history(tmp_path / "c", FakeServerWorld())
    (tmp_path / "h.json").write_text(history.dumps())
    again = merge(load(tmp_path))
    assert again.series["server:openreward"].checks == history.series["server:openreward"].checks
    assert main(["versions", "--merge", str(tmp_path), "--html", str(tmp_path / "h.html"), "--markdown", str(tmp_path / "h.md")]) == 0
    page = (tmp_path / "h.html").read_text()
    # The grid's columns are the checks that tell releases apart; the ones that pass everywhere are counted, not shown.
    assert "echo:call.finish_latch" in page and "echo:dataset.num_tasks" not in page
    assert "check(s) with one status at every release that checked them, none failing, are not shown" in page
    # session.create only goes from "not checked" to pass: no column of its own.
    assert "echo:session.create<" not in page
    md = (tmp_path / "h.md").read_text()
    assert "| `echo:call.finish_latch` | 0.1.4 | 0.1.23 |" in md
    assert "| 0.1.1 |" in md and "`echo:discovery.version`" in md
    said = capsys.readouterr().out
    assert "echo:call.finish_latch fails: first failing 0.1.4, last failing 0.1.23" in said


def test_server_cases_and_flags() -> None:
    from orsbench.cli import main

    assert parse_cases(["echo:call.finish_latch"]) == ["echo:call.finish_latch"]
    every = parse_cases(["echo"])
    assert "echo:discovery.health" in every and all(c.startswith("echo:") for c in every)
    for argv, said in [
        (["versions", "server:openreward", "--cases", "nope"], "no scenario 'nope'"),
        (["versions", "server:openreward", "--cases", "echo:nope.check"], "no check 'nope.check'"),
        (["versions", "server:openreward", "--vary", "trl"], "leave out --vary"),
        (["versions", "server:openreward,openreward", "--cases", "echo"], "run clients and servers separately"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2


# -- the twin on a release that lacks a feature ----------------------------------------------------------------------
pytest.importorskip("openreward")


def _old_sdk():
    """The installed SDK's types as an old release sees them: no task-scoped tools (openreward 0.1.33's ``@tool``
    takes the bare function and has no ``shared=``)."""
    from orsbench.servers import sdk_twin
    from orsbench.servers.twin_support import Lack, needs_task_tools

    def bare_tool(fn):  # 0.1.33's decorator: no keyword arguments at all
        fn._env_tool = True
        return fn

    return dataclasses.replace(sdk_twin.SDK, label="the openreward SDK 0.1.33", tool=bare_tool, task_tools=False,
                               lacks=(Lack("task-scoped tools (@tool(shared=False), list_task_tools)", needs_task_tools),))  # fmt: skip


def _build(scenarios: list[str]):
    from orsbench.servers import sdk_twin
    from orsbench.servers.twin_support import build_twin_app

    return build_twin_app([get_scenario(s) for s in scenarios], ServerConfig(), impl="sdk", twin="SDK twin", server_class=sdk_twin.Server,
                          environment_class=lambda s, c, st: _environment(s, c, st), apply_config=sdk_twin.apply_config, sdk=_old_sdk())  # fmt: skip


def _environment(scenario, config, stats):
    from orsbench.servers.twin_support import generated_environment

    return generated_environment(scenario, config, stats, _old_sdk(), __name__)


def test_a_release_lacking_task_tools_serves_the_rest_and_says_what_it_left_out(capfd: pytest.CaptureFixture[str]) -> None:
    import asyncio

    app = _build(["echo", "task-tool"])
    assert "leaves a scenario out: the openreward SDK 0.1.33 has no task-scoped tools" in capfd.readouterr().err

    async def ask() -> tuple[dict, dict, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://twin") as client:
            stats = (await client.get("/_orsbench/stats")).json()
            tools = (await client.get("/echo/tools")).json()
            return stats, tools, (await client.get("/task-tool/tools")).status_code

    stats, tools, missing = asyncio.run(ask())
    assert stats["left_out"] == {"task-tool": "the openreward SDK 0.1.33 has no task-scoped tools (@tool(shared=False), list_task_tools), which scenario 'task-tool' needs"}
    assert [t["name"] for t in tools["tools"]] == ["echo"]
    assert missing != 200  # the SDK redirects a path of no environment it serves (308) or answers 404


def test_a_release_that_can_serve_none_of_the_scenarios_says_so() -> None:
    from orsbench.servers.twin_support import NothingToServe

    with pytest.raises(NothingToServe, match="has no task-scoped tools.*'task-tool' needs: serve another scenario, or a newer release"):
        _build(["task-tool"])


def test_the_servable_probe_reads_the_installed_release(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata
    import json

    from orsbench.versions import servable

    assert servable.main(["sdk", "echo,task-tool,schema-zoo-index"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said == {"version": importlib.metadata.version("openreward"), "left_out": {}}


def test_a_release_is_checked_over_http_by_this_interpreter_against_the_server_its_environment_starts() -> None:
    """The real path, on this interpreter as the "release environment": the probe, then ``orsbench check --server-cmd``
    against ``orsbench serve`` (the mock here, so it is quick), its JSON read back into cells."""
    import sys

    from orsbench.versions.servers import check_in_env, servable_in_env

    built = Built(Release(Series("server:openreward", "openreward"), "0"), Path(sys.executable))
    assert servable_in_env(built, "sdk", ["echo"])["left_out"] == {}
    ran = check_in_env(built, "mock", "echo")
    assert ran.get("error") is None and ran["reason"] is None
    assert ran["checks"]["discovery.health"]["verdict"] == "pass"
    assert ran["checks"]["call.finish_latch"]["verdict"] == "pass"
    assert {c["verdict"] for c in ran["checks"].values()} <= {"pass", "warn", "skip", "n/a"}
