"""Sessions at once (docs/protocol.md §15): the isolation checks, their planted defects, and their skips.

* every isolation violation (``orsbench/servers/faults/isolation.py``) is told at the HTTP level, so the
  same planted defect is served around the SDK twin, where ``orsbench check`` must fail exactly the
  checks it names (on the mock, ``tests/test_check_violations.py`` holds each one to that);
* the correct servers — the mock, the SDK twin, ors-sdk's server — pass every isolation check that can
  run, on a fast and on a slow scenario, with and without a short TTL;
* a check that cannot be exercised is never a pass: not applicable where this environment can never show it (one
  task, tasks alike, no slow tool), a skip where the run could have and did not (no ids); both say why.
"""

from __future__ import annotations

import pytest

from orsbench.checks import Options, Severity, Status, load_checks, run_checks
from orsbench.config import ServerConfig, effective_config
from orsbench.scenarios import get_scenario
from orsbench.servers import launch
from orsbench.servers.faults.violations import VIOLATIONS

ISOLATION = sorted(n for n, v in VIOLATIONS.items() if v.breaks[0].startswith("isolation."))
GROUP = [c for c in load_checks() if c.startswith("isolation.")]


@pytest.fixture(scope="module", autouse=True)
def _zygote():
    launch.use_zygote(True)  # one `import openreward`, a fork per SDK twin
    yield


def _config(name: str) -> ServerConfig:
    violation = VIOLATIONS[name]
    knobs = {k: v for k, v in violation.knobs.items() if k != "params"}
    scenario = get_scenario(violation.scenario, **violation.knobs.get("params", {}))
    config = effective_config(scenario, ServerConfig(**knobs), set(knobs))
    return config.replace(faults=(name,), params=violation.knobs.get("params", {}))


def _explain(report) -> str:
    return "\n".join(f"{r.id}: {r.status.value} — {r.message}" for r in report.results if r.status is not Status.PASS)


def test_every_isolation_check_has_a_planted_defect():
    broken = {c for n in ISOLATION for c in VIOLATIONS[n].breaks}
    assert broken == set(GROUP)


@pytest.mark.parametrize("name", ISOLATION)
def test_each_planted_defect_is_caught_around_the_sdk_twin(name, ors_server_factory):
    pytest.importorskip("openreward")
    violation, config = VIOLATIONS[name], _config(name)
    server = ors_server_factory(violation.scenario, impl="sdk", config=config)
    options = Options(env=server.env_name, ttl=config.ttl, ping_interval=config.ping_interval, fuzz=0, tasks=(0, -1))
    report = run_checks(server.url, options)
    assert set(report.ids(Status.FAIL)) == set(violation.breaks) | set(violation.also), _explain(report)
    assert report.ids(Status.ERROR) == []
    for check_id in violation.breaks:
        script = report.result(check_id).reproduce
        assert script and script.count("BASE=") == 1, script
        if '"$BASE"/create ' in script:  # every session the script opens is deleted at the end
            assert "trap '" in script, script


@pytest.mark.parametrize("impl", ["mock", "sdk", "ors-sdk"])
def test_correct_servers_pass_every_isolation_check_that_can_run(impl, ors_server_factory):
    if impl != "mock":
        pytest.importorskip("openreward" if impl == "sdk" else "ors")
    server = ors_server_factory("echo", impl=impl)
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0), only=["isolation.*"])
    results = {r.id: r for r in report.results if r.id.startswith("isolation.")}
    for check_id, result in results.items():
        assert result.status in (Status.PASS, Status.SKIP, Status.NOT_APPLICABLE), f"{check_id}: {result.message}"
    passed = {c for c, r in results.items() if r.status is Status.PASS}
    assert passed == set(GROUP) - {"isolation.ping_during_call", "isolation.ttl_per_session"}, _explain(report)
    ping = results["isolation.ping_during_call"]  # echo has no slow tool: not applicable, saying why
    assert ping.status is Status.NOT_APPLICABLE and "no tool call took" in ping.message


# the SDK twin's row repeats the mock's with a real slow tool and TTL (22 s): behind the slow marker
@pytest.mark.parametrize("impl", ["mock", pytest.param("sdk", marks=pytest.mark.slow)])
def test_a_slow_tool_and_a_short_ttl_exercise_the_liveness_checks(impl, ors_server_factory):
    if impl != "mock":
        pytest.importorskip("openreward")
    knobs = {"ttl": 2.0, "reaper_interval": 0.2}
    scenario = get_scenario("slow", setup=0.0, long_call=0.8)
    config = effective_config(scenario, ServerConfig(**knobs), set(knobs)).replace(params={"setup": 0.0, "long_call": 0.8})
    server = ors_server_factory("slow", impl=impl, config=config)
    options = Options(env=server.env_name, ttl=2.0, ping_interval=config.ping_interval, fuzz=0, tasks=(0,))
    report = run_checks(server.url, options, only=["isolation.ping_during_call", "isolation.ttl_per_session"])
    for check_id in ("isolation.ping_during_call", "isolation.ttl_per_session"):
        assert report.result(check_id).status is Status.PASS, _explain(report)


def test_one_task_is_a_skip_that_says_why(ors_server_factory):
    server = ors_server_factory("echo", params={"train_size": 1})
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0), only=["isolation.*"])
    for check_id in ("isolation.interleaved_tasks", "isolation.concurrent_calls_own_task"):
        result = report.result(check_id)
        assert result.status is Status.NOT_APPLICABLE and "only one task" in result.message, result.message
    assert report.result("isolation.same_task_fresh").status is Status.PASS  # one task is enough for that one


def test_tasks_that_look_alike_are_a_skip_that_says_why(ors_server_factory):
    server = ors_server_factory("slow", params={"setup": 0.0, "long_call": 0.3})
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0, tasks=(0, -1)), only=["isolation.interleaved_tasks"])
    result = report.result("isolation.interleaved_tasks")
    assert result.status is Status.NOT_APPLICABLE and "look alike" in result.message, result.message


def test_no_ids_from_create_session_skip_the_id_race(ors_server_factory):
    server = ors_server_factory("echo", faults=("create-session-json",))
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0), only=["isolation.concurrent_create_distinct"])
    result = report.result("isolation.concurrent_create_distinct")
    assert result.status is Status.SKIP, result.message


def test_the_group_is_required_where_a_rollout_trains_on_wrong_data():
    checks = load_checks()
    assert {c for c in GROUP if checks[c].severity is Severity.REQUIRED} == set(GROUP) - {"isolation.ttl_per_session"}


def test_a_run_without_the_group_skips_its_probe_and_a_run_with_it_runs_it(ors_server_factory):
    # The isolation probe is a leaf (nothing after it reads its facts): `--only` without the group saves its time,
    # while the timing probe after it still runs for the checks that need it.
    server = ors_server_factory("echo")
    without = run_checks(server.url, Options(env=server.env_name, fuzz=0), only=["http.*"])
    assert "timing" in without.evidence.probes_run and "isolation" not in without.evidence.probes_run
    assert "quality" in without.evidence.probes_run  # not a leaf: it still runs before the timing probe
    only_ttl = run_checks(server.url, Options(env=server.env_name, fuzz=0), only=["isolation.ttl_per_session"])
    assert "timing" in only_ttl.evidence.probes_run
