"""``orsbench versions``: bisection finds each boundary with the fewest runs, a release that cannot be installed is a
clear row, the environment cache is reused, and shards merge into the history one run would write.

Nothing here reaches the network: the package index, the installer and the runner are fakes.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from orsbench.versions.bisection import NOT_RUN, search
from orsbench.versions.envs import Built, Cache, InstallError
from orsbench.versions.history import History, load, merge
from orsbench.versions.releases import Index, Release, Series, parse_release
from orsbench.versions.run import Plan, pinned_facts, play_in_env, run_versions

RELEASES = [f"0.1.{n}" for n in range(1, 34)]  # 0.1.1 … 0.1.33
ANCHORS = ("0.1.1", "0.1.9", "0.1.17", "0.1.25", "0.1.33")
W, S = "works", "fails silently"


def _n(version: str) -> int:
    return int(version.rsplit(".", 1)[1])


#: A made-up history over real cases of the openreward target (so the pinned matrix reads them):
#: a defect that appears (at 5), one that is fixed (at 20), one that is fixed (at 11) and comes back (at 27), and one
#: that appears in the same gap as the first (at 7).
#: Without its defect a case gets what a correct client gets (``OK``): works, or a clear error under a fault profile.
OK = pinned_facts("openreward", ["mock:reward-nan", "mock:two-envs", "mock:schema-zoo", "mock:cut-before-task-id", "mock:echo"])[0]
HISTORY = {
    "mock:reward-nan": lambda n: S if n >= 5 else OK["mock:reward-nan"],
    "mock:two-envs": lambda n: S if n < 20 else OK["mock:two-envs"],
    "mock:schema-zoo": lambda n: S if n <= 10 or n >= 27 else OK["mock:schema-zoo"],
    "mock:cut-before-task-id": lambda n: S if n >= 7 else OK["mock:cut-before-task-id"],
    "mock:echo": lambda n: W,
}
CASES = tuple(HISTORY)


class FakeWorld:
    """Installs by making a folder; runs by reading :data:`HISTORY`; counts both."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.broken = broken
        self.installs: list[str] = []
        self.runs: list[tuple[str, tuple[str, ...]]] = []

    def install(self, release: Release, path: Path) -> None:
        self.installs.append(release.version)
        if release.version in self.broken:
            raise InstallError(f"pip install {release.requirements[0]} failed: no wheel for this Python")
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("")

    def run(self, built: Built, client: str, cases: list[str]) -> dict[str, dict]:
        self.runs.append((built.release.version, tuple(cases)))
        return {c: {"verdict": HISTORY[c](_n(built.release.version)), "error": None, "elapsed": 0.1} for c in cases}


def _history(tmp_path: Path, world: FakeWorld, *, shard: tuple[int, int] = (1, 1), anchors=ANCHORS, cases=CASES) -> History:
    index = Index(tmp_path, lister=lambda package, python: list(reversed(RELEASES)))
    plan = Plan(Series("openreward", "openreward"), tuple(anchors), tuple(cases))
    return run_versions([plan], cache=Cache(tmp_path, installer=world.install), index=index, runner=world.run, shard=shard)


def test_bisection_finds_each_boundary_with_the_fewest_runs(tmp_path: Path) -> None:
    world = FakeWorld()
    history = _history(tmp_path, world)
    facts = history.series["openreward"]
    changes = {(c["case"], c["last"], c["first"]) for c in facts.changes}
    assert changes == {
        ("mock:reward-nan", "0.1.4", "0.1.5"),
        ("mock:cut-before-task-id", "0.1.6", "0.1.7"),
        ("mock:two-envs", "0.1.19", "0.1.20"),
        ("mock:schema-zoo", "0.1.10", "0.1.11"),
        ("mock:schema-zoo", "0.1.26", "0.1.27"),
    }
    assert all(c["exact"] for c in facts.changes)
    # Each boundary lies in a gap of 7 releases: binary search over its 8 places takes ceil(log2(8)) = 3 runs of that
    # one case; the anchors run every case once; nothing else runs.
    per_boundary = math.ceil(math.log2(7 + 1))
    counts = history.counts()
    assert counts["cells_anchored"] == len(ANCHORS) * len(CASES) == 25
    assert counts["cells_bisected"] == 5 * per_boundary == 15
    assert counts["cells_spanned"] == 33 * 5
    # Each change is run once more at both its anchors before it is bisected (5 changes × 2 cells, one run per anchor
    # release), and each boundary once more on both sides (5 × 2 cells, ten releases).
    assert counts["cells_confirmed"] == 5 * 2 + 5 * 2 == 20
    # The two cases changing in one gap shared their first midpoint: one install and one run, not two.
    assert len(world.runs) == len(ANCHORS) + (5 * per_boundary - 1) + len(ANCHORS) + 10
    assert len(world.installs) == len({v for v, _ in world.runs})
    assert not any(i["reused"] for i in facts.installs.values())  # a second run of a release keeps its first install's record


def test_each_pinned_defect_gets_its_first_and_last_failing_release(tmp_path: Path) -> None:
    history = _history(tmp_path, FakeWorld())
    defects = {d["id"]: d for d in history.series["openreward"].defects}
    nan, envs, chunk = defects["nan-reward-taken"], defects["env-name-not-sent"], defects["chunk-lstrip"]
    assert (nan["first_failing"], nan["last_failing"], nan["since_oldest_tested"], nan["still_failing"]) == ("0.1.5", "0.1.33", False, True)
    assert (envs["first_failing"], envs["last_failing"], envs["since_oldest_tested"], envs["still_failing"]) == ("0.1.1", "0.1.19", True, False)
    # Fixed at 0.1.11, back at 0.1.27: two ranges.
    assert [(r["from"], r["to"]) for r in chunk["ranges"]] == [("0.1.1", "0.1.10"), ("0.1.27", "0.1.33")]
    rows = {(r.version, r.case): r for r in history.rows}
    assert rows[("0.1.33", "mock:reward-nan")].defects == ["nan-reward-taken"]
    assert rows[("0.1.1", "mock:reward-nan")].defects == []
    assert rows[("0.1.5", "mock:reward-nan")].bisected and not rows[("0.1.9", "mock:reward-nan")].bisected


def test_search_drops_a_release_it_cannot_run_and_tries_its_neighbour() -> None:
    versions = [str(n) for n in range(10)]
    seen: list[str] = []

    def observe(version: str, cases: list[str]) -> dict[str, str]:
        seen.append(version)
        return {c: NOT_RUN if version == "5" else (S if int(version) >= 6 else W) for c in cases}

    found = search(versions, ["0", "9"], ["c"], observe)
    assert [(b.last, b.first) for b in found.boundaries] == [("4", "6")]
    assert "5" in seen


def test_a_release_that_cannot_be_installed_is_a_clear_row(tmp_path: Path) -> None:
    from orsbench.versions import report

    history = _history(tmp_path, FakeWorld(broken=frozenset({"0.1.9"})), anchors=("0.1.1", "0.1.9", "0.1.17"))
    rows = [r for r in history.rows if r.version == "0.1.9"]
    assert rows and all(r.verdict == NOT_RUN and r.defects == [] for r in rows)
    assert all("cannot be installed here: pip install openreward==0.1.9 failed: no wheel" in (r.error or "") for r in rows)
    assert history.series["openreward"].installs["0.1.9"]["error"]
    text = "\n".join(report.summary(history)) + report.markdown(history)
    assert "0.1.9: not run — cannot be installed here" in text and "**0.1.9**: cannot be installed here" in text and "Traceback" not in text
    # Its neighbours' boundaries are still found, across the whole gap 0.1.1–0.1.17.
    assert ("mock:reward-nan", "0.1.4", "0.1.5") in {(c["case"], c["last"], c["first"]) for c in history.series["openreward"].changes}


def test_the_cache_is_reused_on_the_second_run(tmp_path: Path) -> None:
    world = FakeWorld(broken=frozenset({"0.1.17"}))
    first = _history(tmp_path, world)
    installed = list(world.installs)
    assert len(installed) == len(set(installed))
    second = _history(tmp_path, world)
    assert world.installs == installed  # nothing installed again, the failed one not tried again either
    assert all(i["reused"] for i in second.series["openreward"].installs.values())
    assert [vars(r) for r in second.rows] == [vars(r) for r in first.rows]
    assert Index(tmp_path, lister=lambda p, python: pytest.fail("the index was asked again")).versions("openreward")


def test_parallel_runs_build_one_environment_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def slow(release: Release, path: Path) -> None:
        calls.append(1)
        time.sleep(0.3)
        (path / "bin").mkdir(parents=True)

    release = parse_release("openreward", "0.1.109")
    results: list[Built] = []
    threads = [threading.Thread(target=lambda: results.append(Cache(tmp_path, installer=slow).ensure(release))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sum(not b.reused for b in results) == 1 and all(b.python for b in results)


def test_shards_merge_into_the_history_of_one_run(tmp_path: Path) -> None:
    whole = _history(tmp_path / "whole", FakeWorld())
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in (1, 2, 3):
        part = _history(tmp_path / f"cache{k}", FakeWorld(), shard=(k, 3))
        (folder / f"shard-{k}.json").write_text(part.dumps())
    merged = merge(load(folder))
    key = lambda h: sorted((r.version, r.case, r.verdict, tuple(r.defects), r.bisected) for r in h.rows)  # noqa: E731
    assert key(merged) == key(whole)
    assert merged.series["openreward"].changes == whole.series["openreward"].changes
    assert merged.series["openreward"].defects == whole.series["openreward"].defects
    assert merged.counts() == whole.counts()
    # And the JSON round trip keeps it.
    assert History.from_json(json.loads(merged.dumps())).analyse().to_json() == merged.to_json()


def test_the_cli_merges_and_renders_and_refuses_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orsbench.cli import main

    (tmp_path / "h.json").write_text(_history(tmp_path / "c", FakeWorld()).dumps())
    assert main(["versions", "--merge", str(tmp_path), "--html", str(tmp_path / "h.html"), "--markdown", str(tmp_path / "h.md")]) == 0
    page = (tmp_path / "h.html").read_text()
    assert "0.1.27" in page and "chunk-lstrip" in page and 'class="changed' in page
    assert "| `nan-reward-taken` | 0.1.5 | 0.1.33 (still) |" in (tmp_path / "h.md").read_text()
    # The newest release run (0.1.33) no longer shows env-name-not-sent: --strict says so and exits 1.
    assert main(["versions", "--merge", str(tmp_path), "--strict", "-v"]) == 1
    said = capsys.readouterr().out
    assert "openreward 0.1.33 mock:two-envs: works, the pinned matrix says fails silently" in said
    assert "  openreward 0.1.5 mock:reward-nan: fails silently (bisection)" in said
    for argv, said in [
        (["versions"], "name the clients"),
        (["versions", "openreward,trl", "--releases", "1.0"], "give one client"),
        (["versions", "openreward", "--releases", "x.y"], "not a version"),
        (["versions", "openreward", "--cases", "mock:nope"], "has no case mock:nope"),
        (["versions", "openreward", "--shard", "3/2"], "1 <= K <= N"),
        (["versions", "openreward", "--merge", str(tmp_path)], "runs nothing"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and said in capsys.readouterr().err


def test_a_run_that_writes_no_result_is_a_clear_row(tmp_path: Path) -> None:
    built = Built(parse_release("openreward", "0.1.109"), Path("/bin/false"))
    got = play_in_env(built, "openreward", ["mock:echo"])
    assert got["mock:echo"]["verdict"] == NOT_RUN and "without a result" in got["mock:echo"]["error"]


def test_a_release_that_cannot_play_hides_a_defect_rather_than_fixing_it(tmp_path: Path) -> None:
    """Before 0.1.4 the client cannot play at all (its plain case fails clearly, as openreward before 0.1.101 did):
    there a case that a correct client also fails clearly says nothing about the defect."""

    class Unplayable(FakeWorld):
        def run(self, built: Built, client: str, cases: list[str]) -> dict[str, dict]:
            if _n(built.release.version) >= 4:
                return super().run(built, client, cases)
            self.runs.append((built.release.version, tuple(cases)))
            return {c: {"verdict": "fails clearly", "error": "RuntimeError: Event loop is closed"} for c in cases}

    history = _history(tmp_path, Unplayable(), cases=("mock:echo", "mock:reward-nan", "mock:two-envs"))
    defects = {d["id"]: d for d in history.series["openreward"].defects}
    envs = defects["env-name-not-sent"]  # two-envs: fails silently from 0.1.4 to 0.1.19
    assert (envs["first_failing"], envs["since_oldest_tested"]) == ("0.1.4", True)
    assert [(m["from"], m["to"], m["verdict"]) for m in envs["masked"]] == [("0.1.1", "0.1.3", "fails clearly")]
    nan = defects["nan-reward-taken"]  # reward-nan: a correct client fails clearly — but 0.1.1–0.1.3 cannot play at all
    assert nan["first_failing"] == "0.1.5" and not nan["since_oldest_tested"]
    assert [(a["from"], a["to"]) for a in nan["absent"]] == [("0.1.4", "0.1.4")]
    assert [(m["from"], m["to"]) for m in nan["masked"]] == [("0.1.1", "0.1.3")]


def _broken_play(episode: object) -> None:
    raise TypeError("OpenRewardSpec.__init__() got an unexpected keyword argument 'task_tools_discovery_index'")


def test_a_release_the_adapter_cannot_drive_is_no_verdict_on_the_client(tmp_path: Path) -> None:
    """The in-environment player: an adapter that errs before any request (an old release without the API it calls)
    makes every cell 'cannot drive', naming the error; a client that plays gets its verdicts, as the matrix gives them."""
    pytest.importorskip("openreward")
    from architecture_dummies import DUMMY_CLIENT

    from orsbench.clients.targets import CLIENT_TARGETS, ClientTarget
    from orsbench.versions import play

    old = ClientTarget("old-release", "openreward", "an old release", _broken_play, modules=("openreward",), extra="sdk")
    with CLIENT_TARGETS.temporarily(old):
        assert play.main(["old-release", "--cases", "mock:two-envs", "--out", str(tmp_path / "old.json")]) == 0
    [cell] = json.loads((tmp_path / "old.json").read_text())["cells"]
    assert cell["verdict"] == play.CANNOT_DRIVE and "task_tools_discovery_index" in cell["error"], cell
    with CLIENT_TARGETS.temporarily(DUMMY_CLIENT):
        assert play.main([DUMMY_CLIENT.name, "--cases", "mock:two-envs", "--out", str(tmp_path / "ok.json")]) == 0
    [cell] = json.loads((tmp_path / "ok.json").read_text())["cells"]
    assert cell["verdict"] == "fails silently", cell  # env-name-not-sent, as the matrix's openreward cell


def test_a_case_two_defects_share_does_not_decide_either_where_another_case_shows_one_alone() -> None:
    """firehorse: second-setup-fails carries a leaked session and an average over the scored; setup-failure the leak
    alone. The leak's first failing release is read from setup-failure, not from the case both share."""
    from orsbench.versions.history import Row, SeriesFacts

    facts = SeriesFacts(
        "firehorse", "firehorse-cli", [], ["0.1.0", "0.1.2"], ["0.1.0", "0.1.2"], ["shared", "alone"],
        {"shared": "fails clearly", "alone": "fails clearly"},
        {"shared": {"verdict": S, "defects": ["leak", "average"]}, "alone": {"verdict": S, "defects": ["leak"]}},
    )  # fmt: skip
    seen = {("0.1.0", "shared"): S, ("0.1.2", "shared"): S, ("0.1.0", "alone"): "fails clearly", ("0.1.2", "alone"): S}
    rows = [Row("firehorse", "firehorse", v, v, c, verdict) for (v, c), verdict in seen.items()]
    defects = {d["id"]: d for d in History({"firehorse": facts}, rows).analyse().series["firehorse"].defects}
    assert (defects["leak"]["decided_by"], defects["leak"]["first_failing"], defects["leak"]["since_oldest_tested"]) == (["alone"], "0.1.2", False)
    assert (defects["average"]["decided_by"], defects["average"]["first_failing"]) == (["shared"], "0.1.0")


def test_a_cell_that_flips_between_two_runs_is_unstable_not_a_change(tmp_path: Path) -> None:
    """trl 1.16.0's url-only hung once on a loaded machine (its retries outlasted the deadline) and failed clearly the
    next time: without a second run, bisection placed a false boundary at 1.14.0/1.14.1."""
    from orsbench.versions import report

    class Flaky(FakeWorld):
        def run(self, built: Built, client: str, cases: list[str]) -> dict[str, dict]:
            got = super().run(built, client, cases)
            first_time = sum(1 for v, _ in self.runs if v == "0.1.33") == 1
            if built.release.version == "0.1.33" and "mock:echo" in got and first_time:
                got["mock:echo"]["verdict"] = "hangs"
            return got

    world = Flaky()
    history = _history(tmp_path, world, anchors=("0.1.25", "0.1.33"), cases=("mock:echo", "mock:schema-zoo"))
    facts = history.series["openreward"]
    assert facts.unstable == [{"release": "0.1.33", "case": "mock:echo", "verdict": "hangs", "again": "works"}]
    assert [(c["case"], c["last"], c["first"]) for c in facts.changes] == [("mock:schema-zoo", "0.1.26", "0.1.27")]
    assert not any(c == "mock:echo" for _, cases in world.runs[3:] for c in cases if _ not in ("0.1.25", "0.1.33"))
    assert "unstable: 0.1.33 mock:echo gave hangs, then works" in "\n".join(report.summary(history))
    from orsbench.versions.html import render_history

    page = render_history(history)
    assert 'class="hangs unstable"' in page and 'class="hangs changed' not in page


def test_a_forked_episode_of_a_release_without_a_ping_thread_has_nothing_to_forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """openreward 0.1.109's ``_session.ping`` has no ``ping_thread``: every forked episode of it crashed (exit 70)."""
    import sys
    from types import SimpleNamespace

    from orsbench.clients.run import forget_parent_ping_thread

    monkeypatch.setitem(sys.modules, "openreward.api._session", SimpleNamespace(ping=SimpleNamespace()))
    forget_parent_ping_thread()
    reset: list[bool] = []
    thread = SimpleNamespace(__init__=lambda: reset.append(True))
    monkeypatch.setitem(sys.modules, "openreward.api._session", SimpleNamespace(ping=SimpleNamespace(ping_thread=thread)))
    forget_parent_ping_thread()
    assert reset == [True]


def test_the_cli_plans_a_series_per_set_of_companion_pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--releases`` with and without a companion pin, ``--with``, ``--vary``: the series each release joins."""
    import orsbench.versions.run as R
    from orsbench.cli import main

    planned: list[list[Plan]] = []

    def fake(plans: list[Plan], **kwargs: object) -> History:
        planned.append(plans)
        return History()

    monkeypatch.setattr(R, "run_versions", fake)
    base = ["versions", "--cache", str(tmp_path), "-q"]
    assert main([*base, "trl", "--releases", "1.9.0,1.16.0,1.16.0+openreward==0.1.109", "--cases", "mock:echo"]) == 0
    assert [(p.series.name, p.anchors, p.cases) for p in planned[-1]] == [
        ("trl", ("1.9.0", "1.16.0"), ("mock:echo",)),
        ("trl+openreward==0.1.109", ("1.16.0",), ("mock:echo",)),
    ]
    assert main([*base, "trl", "--vary", "openreward", "--with", "trl==1.16.0", "--releases", "0.1.109,0.1.167"]) == 0
    [plan] = planned[-1]
    assert plan.series.name == "trl over openreward+trl==1.16.0" and plan.series.release("0.1.109").requirements == ("openreward==0.1.109", "trl==1.16.0")
    assert "mock:url-only" in plan.cases  # the default cases: where a pinned defect shows
    assert main([*base, "openreward,firehorse"]) == 0  # the default releases
    assert [p.series.name for p in planned[-1]] == ["openreward", "firehorse"] and "0.1.101" not in planned[-1][0].anchors


# -- the "since" column: recorded from a history, read by orsbench matrix -------------------------------------------
def test_the_matrix_shows_since_when_each_defect_fails_from_a_recorded_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``orsbench versions --merge DIR --record FILE`` writes each pinned defect's boundaries from the made-up history
    (one that appears at 0.1.5, one fixed at 0.1.20, one fixed at 0.1.11 that comes back at 0.1.27); the matrix reads
    that file and links each to its change; a defect the history did not decide says "not bisected"."""
    from orsbench.cli import main
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.reports.clients import matrix_markdown
    from orsbench.upstream import since as recorded

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "h.json").write_text(_history(tmp_path / "c", FakeWorld()).dumps())
    record = tmp_path / "since.json"
    monkeypatch.setenv("ORSBENCH_VERSIONS_CACHE", str(tmp_path / "c"))  # the index's cached list: 0.1.1 is the first release
    assert main(["versions", "--merge", str(tmp_path / "runs"), "--record", str(record), "-q"]) == 0
    found = recorded.load(record)["openreward"]
    nan, envs, chunk = found["nan-reward-taken"], found["env-name-not-sent"], found["chunk-lstrip"]
    assert (nan.words, nan.url, nan.fix_url) == ("since 0.1.5", "https://pypi.org/project/openreward/0.1.5/", None)
    assert nan.appeared is not None and (nan.appeared.last, nan.appeared.first, nan.appeared.exact) == ("0.1.4", "0.1.5", True)
    # From the first release on the index (0.1.1), fixed at 0.1.20: the link to the fix is the fixing release's page.
    assert (envs.words, envs.fix_url) == ("0.1.1–0.1.19", "https://pypi.org/project/openreward/0.1.20/")
    assert chunk.words == "0.1.1–0.1.10, since 0.1.27"
    # Another client's record is kept when one client is recorded again.
    recorded.dump({"trl": {}}, record)
    assert set(recorded.load(record)) == {"openreward", "trl"} and recorded.load(record)["openreward"]["chunk-lstrip"] == chunk

    monkeypatch.setattr(recorded, "SINCE_FILE", record)
    result = M.predicted(C.plan(["openreward"], ["mock"]), ["openreward"], ["mock"])
    page = matrix_markdown(result)
    assert "| [since 0.1.5](https://pypi.org/project/openreward/0.1.5/) |" in page
    assert "[0.1.1–0.1.19](https://pypi.org/project/openreward/0.1.1/) ([fixed](https://pypi.org/project/openreward/0.1.20/))" in page
    assert "`secret-names` |" in page and "| not bisected |" in page  # a rule defect no verdict of the history decides
    assert result.to_json()["clients"]["openreward"]["since"]["nan-reward-taken"]["words"] == "since 0.1.5"
    # The history page says the same words with the same link.
    assert main(["versions", "--merge", str(tmp_path / "runs"), "--html", str(tmp_path / "h.html"), "-q"]) == 0
    assert '<a href="https://pypi.org/project/openreward/0.1.5/">since 0.1.5</a>' in (tmp_path / "h.html").read_text()
    with pytest.raises(SystemExit) as exit_:
        main(["versions", "--merge", str(tmp_path / "runs"), "--record", "-"])
    assert exit_.value.code == 2


def test_a_since_without_a_boundary_seen_says_so() -> None:
    from orsbench.upstream.since import NOT_BISECTED, Change, Since

    oldest = Since("firehorse", "d", "firehorse-cli", "0.1.0", "0.1.4", (("0.1.0", "0.1.4"),), True, True, ("0.1.0", "0.1.4"), "0.1.0")
    assert oldest.words == "since 0.1.0 (first release)" and oldest.url == "https://pypi.org/project/firehorse-cli/0.1.0/"
    # Older releases could not be played: not "since 0.1.101", which would claim 0.1.100 was seen without it.
    masked = Since("openreward", "d", "openreward", "0.1.101", "0.1.167", (("0.1.101", "0.1.167"),), True, True, ("0.1.33", "0.1.167"), "0.0.1",
                   appeared=Change("0.1.100", "0.1.101", "cannot drive", "fails silently"))  # fmt: skip
    assert masked.words == "since ≤ 0.1.101" and masked.url == "https://pypi.org/project/openreward/0.1.101/"
    trl = Since("trl", "d", "trl", "1.5.0", "1.16.0", (), False, True, ("1.4.0", "1.16.0"), "0.1", appeared=Change("1.4.0", "1.5.0", "works", "fails silently"))
    assert trl.url == "https://github.com/huggingface/trl/compare/v1.4.0...v1.5.0"
    assert Since("x", "d", "x", None, None, tested=("1", "2")).words == "not seen in 1–2"
    assert Since("x", "d", "x", None, None).words == NOT_BISECTED


# -- a client on its own Python: each release its own 3.12 environment ---------------------------------------------
def test_a_release_of_a_3_12_client_gets_an_environment_on_that_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """platoon needs Python 3.12: its release is built as its own environment is (no system packages, the release
    pinned in place of 0.4.0, without its dependencies), on the 3.12 found here; it is played by this Python pointed at
    it, where the target then reports the release's version. The index is asked as 3.12 is offered releases."""
    import subprocess
    import sys

    from orsbench.clients import interpreters
    from orsbench.clients.targets import CLIENT_TARGETS
    from orsbench.versions.run import versions_between

    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append([str(a) for a in argv])
        if argv[1:3] == ["-m", "venv"]:
            (Path(argv[-1]) / "bin").mkdir(parents=True)
            (Path(argv[-1]) / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(interpreters, "find_python", lambda version: f"/opt/python{version}/bin/python{version}" if version == "3.12" else None)
    monkeypatch.setattr(interpreters.subprocess, "run", fake_run)
    release = parse_release("platoon", "0.3.0")
    built = Cache(tmp_path).ensure(release)
    path = tmp_path / "envs" / "platoon-0.3.0"
    assert built.error is None and built.python == Path(sys.executable)
    assert built.environ == {"ORSBENCH_VENV_TRAINERS_3_12": str(path)}
    assert calls[0] == ["/opt/python3.12/bin/python3.12", "-m", "venv", str(path)]  # its own Python, no system packages
    pip = [c for c in calls if c[1:4] == ["-m", "pip", "install"]]
    assert pip[0][0] == str(path / "bin" / "python") and pip[0][-3:] == ["--no-deps", "platoon==0.3.0", "benchflow==0.7.11"]
    assert "openreward==0.1.167" in pip[1]  # the pinned environment's companions, as the pinned release runs with
    # Played with that variable set, the target runs that environment and names its release.
    monkeypatch.setenv("ORSBENCH_VENV_TRAINERS_3_12", str(path))
    target = CLIENT_TARGETS.get("platoon")
    assert target.installed and target.version == "0.3.0" and target.command.venv.interpreter == path / "bin" / "python"
    monkeypatch.delenv("ORSBENCH_VENV_TRAINERS_3_12")
    assert target.version == "0.4.0"
    # A second run finds it built; the index is asked for 3.12's releases (this Python's pip lists no platoon).
    assert Cache(tmp_path, installer=lambda r, p: pytest.fail("built again")).ensure(release).reused
    asked: list[tuple[str, str | None]] = []
    index = Index(tmp_path, lister=lambda package, python: asked.append((package, python)) or ["0.2.0", "0.3.0", "0.4.0"])
    assert versions_between(index, "platoon", ["0.3.0", "0.4.0"], lambda line: None, python="3.12") == ["0.3.0", "0.4.0"]
    assert asked == [("platoon", "3.12")]


def test_a_3_12_client_without_a_3_12_here_is_a_clear_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orsbench.clients import interpreters

    monkeypatch.setattr(interpreters, "find_python", lambda version: None)
    built = Cache(tmp_path).ensure(parse_release("benchflow", "0.7.5"))
    assert built.python is None and "runs on Python 3.12, and there is none here" in (built.error or "")
