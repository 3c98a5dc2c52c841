"""Every scenario, on the mock engine and on the SDK twin, passes every required check.

The SDK twin is the reference implementation (openreward 0.1.167's own
``Server``) serving the same scenario, so a check that failed here on the twin
would be a check that is wrong about the protocol, not a server defect.
"""

from __future__ import annotations

import pytest

from orsbench.checks import Options, Severity, Status, run_checks
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.config import effective_config

SCENARIOS = ("echo", "task-tool", "sparse-reward", "slow")
#: Checks that only have something to measure on the slow scenario; there they must really run and pass.
TIMING = ("session.starting_503", "call.keepalive_interval", "call.resume_running")


def _options(scenario: str, env: str, **knobs) -> Options:
    # The twin does not report its config in /_orsbench/stats, so say what the scenario promises.
    config = effective_config(get_scenario(scenario), ServerConfig(**knobs), set(knobs))
    return Options(env=env, ping_interval=config.ping_interval, ttl=knobs.get("ttl"))


def _explain(report) -> str:
    return "\n".join(f"{r.id}: {r.status.value} — {r.message}" for r in report.results if r.status in (Status.FAIL, Status.ERROR))


@pytest.mark.parametrize("impl", ["mock", "sdk"])
#: the slow scenario waits out its sleeping tool on purpose (35 s a server): behind the slow marker
@pytest.mark.parametrize("scenario", [pytest.param(s, marks=[pytest.mark.slow] if s == "slow" else []) for s in SCENARIOS])
def test_scenario_passes_every_required_check(scenario, impl, ors_server_factory):
    server = ors_server_factory(scenario, impl=impl)
    report = run_checks(server.url, _options(scenario, server.env_name))
    assert report.ids(Status.FAIL, Severity.REQUIRED) == [], _explain(report)
    assert report.ids(Status.ERROR) == [], _explain(report)
    assert report.exit_code == 0
    passed_required = report.ids(Status.PASS, Severity.REQUIRED)
    assert len(passed_required) >= 45, f"only {len(passed_required)} required checks ran and passed"
    for check_id in ("call.chunk_reassembly", "call.finish_latch", "call.resume_by_task_id", "reward.well_formed"):
        assert check_id in passed_required
    if scenario == "slow":
        for check_id in TIMING:
            assert report.result(check_id).status is Status.PASS, report.result(check_id).message


def test_ttl_reaping_is_checked_when_the_ttl_is_short(ors_server_factory):
    server = ors_server_factory("echo", ttl=1.0, reaper_interval=0.2)
    report = run_checks(server.url, Options(env=server.env_name), only=["session.ttl_reap"])
    result = report.result("session.ttl_reap")
    assert result.status is Status.PASS, result.message
    assert result.measured["waited_s"] < 3


def test_ttl_reaping_is_skipped_not_waited_for_when_it_exceeds_the_timeout(ors_server_factory):
    server = ors_server_factory("echo")  # the reference TTL: 900 s
    report = run_checks(server.url, Options(env=server.env_name, timeout=5), only=["session.ttl_reap"])
    assert report.result("session.ttl_reap").status is Status.SKIP
    assert report.duration_s < 5
