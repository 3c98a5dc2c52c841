"""``fixtures/expected-failures/ors-sdk.yaml`` is exactly what ors-sdk fails, on every scenario.

Each built-in scenario is served with ``--impl ors-sdk`` and checked with the
baseline, as ``orsbench check --scenario S --impl ors-sdk --expected-failures
fixtures/expected-failures/ors-sdk.yaml`` does: no failure may fall outside it
and no entry may be stale (a listed check that passes). ``broken-session``
breaks sessions on purpose, so there the only failures allowed outside the
baseline are the ones the SDK twin (openreward's own Server) has on it too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ors")

from orsbench.checks import Baseline, Options, Status, load_checks, run_checks  # noqa: E402
from orsbench.config import ServerConfig  # noqa: E402
from orsbench.scenarios import Scenario, get_scenario, playable_scenarios  # noqa: E402
from orsbench.config import effective_config  # noqa: E402

BASELINE = Path(__file__).parent.parent / "fixtures" / "expected-failures" / "ors-sdk.yaml"
#: Scenarios that fail checks on every implementation by design.
#: Scenarios that fail required checks on purpose, on every implementation: broken-session breaks its sessions;
#: schema-zoo's `explode` tool raises (the SSE error-event hazard) and its unbounded `echo(times)` overflows,
#: which the checker's fuzz finds (tool.no_crash_on_valid_input).
BROKEN_BY_DESIGN = ("broken-session", "schema-zoo")


def _options(scenario: str, env: str) -> Options:
    """What ``check --serve`` passes: the scenario's own keep-alive cadence and TTL."""
    config = effective_config(get_scenario(scenario), ServerConfig(), set())
    return Options(env=env, ttl=config.ttl, ping_interval=config.ping_interval)


def _baseline() -> Baseline:
    return Baseline.load(BASELINE, set(load_checks()))


def _check(factory, scenario: str, impl: str, baseline: Baseline | None):
    server = factory(scenario, impl=impl)
    return run_checks(server.url, _options(scenario, server.env_name), baseline=baseline)


def _unexpected(report) -> list[str]:
    return sorted(r.id for r in report.results if r.status in (Status.FAIL, Status.ERROR) and r.baseline != "expected")


def _explain(report) -> str:
    lines = [f"{r.id}: {r.status.value} ({r.baseline}) — {r.message}" for r in report.results if r.status is not Status.PASS]
    return "\n".join(lines)


def _scenarios() -> list:
    """Every playable scenario; one that needs what ``orsbench check`` does not send (a secret) is left out, saying why."""
    out = []
    for name in playable_scenarios():
        scenario = get_scenario(name)
        hostile, refuses = scenario.fails_by_design, type(scenario).admit is not Scenario.admit
        why = f"fails {sorted(hostile)} by design on every server (tests/test_hazards.py checks that)" if hostile else ""
        why = why or ("refuses sessions without a secret: the ors-sdk twin ignores X-Secrets (a listed difference)" if refuses else "")
        marks = [pytest.mark.skip(reason=why)] if why else []
        if name in SLOW_SCENARIOS:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(name, marks=marks))
    return out


#: Long against ors-sdk's server (schema-zoo: every tool fuzzed; slow: a tool that sleeps): behind the slow marker.
SLOW_SCENARIOS = ("schema-zoo", "slow")


@pytest.mark.parametrize("scenario", _scenarios())
def test_ors_sdk_fails_exactly_the_baseline(ors_server_factory, scenario: str) -> None:
    report = _check(ors_server_factory, scenario, "ors-sdk", _baseline())
    stale = [r.id for r in report.results if r.baseline == "stale"]
    assert stale == [], _explain(report)
    if scenario in BROKEN_BY_DESIGN:
        reference = _check(ors_server_factory, scenario, "sdk", None)
        assert _unexpected(report) == _unexpected(reference) != [], _explain(report)
    else:
        assert _unexpected(report) == [], _explain(report)
        assert report.exit_code == 0


def test_every_entry_is_expected_somewhere(ors_server_factory) -> None:
    """On echo every listed id is an expected failure: the file lists nothing that only fails elsewhere."""
    report = _check(ors_server_factory, "echo", "ors-sdk", _baseline())
    expected = {r.id for r in report.results if r.baseline == "expected"}
    assert expected == set(_baseline().entries), _explain(report)


def test_the_cli_command_exits_0(tmp_path: Path) -> None:
    """The command the issue names, as a user runs it (a fresh server, not the fixture's)."""
    command = [sys.executable, "-m", "orsbench", "check", "--scenario", "echo", "--impl", "ors-sdk", "--quiet",
               "--expected-failures", str(BASELINE), "--json", str(tmp_path / "report.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
