"""The measure of the checker: each protocol violation fails exactly the check(s) naming its rule.

All violations are served by one process (the ``violation-router`` fault):
each under ``/_violations/<name>/`` on its own engine with only that
violation applied — the same server ``orsbench serve <scenario> --fault
<name>`` starts, without fifty process start-ups.
"""

from __future__ import annotations

import subprocess

import pytest

from orsbench.checks import CHECKS, Options, Severity, Status, load_checks, run_checks
from orsbench.servers.faults import FAULTS
from orsbench.servers.faults.violations import ROUTER_PREFIX, VIOLATIONS

#: The broken servers the issue names, and the check that must catch each.
ISSUE_LIST = {
    "create-session-json": "session.create_session_sse",
    "call-end-missing": "call.end_event",
    "reward-bool": "reward.well_formed",
    "reason-missing": "call.error_reason",
    "unknown-tool-500": "call.unknown_tool_ok_false",
    "ping-after-delete-200": "session.ping_after_delete_404",
    "call-content-type-json": "call.sse_content_type",
    "chunk-loses-whitespace": "call.chunk_reassembly",
    "invalid-split-200": "dataset.invalid_split_400",
}


@pytest.fixture(scope="module")
def router(ors_server_factory):
    return ors_server_factory("echo", faults=("violation-router",))


#: Violations whose run waits out a timeout (~30 s each) and whose check is proven elsewhere in CI: ping-waits-for-call by
#: tests/test_isolation.py and test_isolation_reproducers.py, tool-hangs-on-long-input's tool.no_hang by
#: tests/test_user_envs.py (hangs_on_control). Behind the slow marker.
SLOW_VIOLATIONS = ("ping-waits-for-call", "tool-hangs-on-long-input")


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_VIOLATIONS else []) for n in VIOLATIONS])
def test_violation_fails_exactly_its_checks(name, router):
    violation = VIOLATIONS[name]
    report = run_checks(router.url + ROUTER_PREFIX + name, Options(env=violation.scenario))
    failing = set(report.ids(Status.FAIL))
    details = {r.id: r.message for r in report.results if r.id in failing | set(violation.breaks)}
    assert failing == set(violation.breaks) | set(violation.also), details
    breaks_required = {c for c in violation.breaks if CHECKS[c].severity is Severity.REQUIRED}
    assert set(report.ids(Status.FAIL, Severity.REQUIRED)) == breaks_required
    assert report.ids(Status.ERROR) == []
    assert report.exit_code == (1 if breaks_required else 0)
    for result in report.results:  # every finding's reproducer is a well-formed shell script (tests/test_reproducers.py runs some)
        if result.status is Status.FAIL and result.evidence:
            assert result.reproduce and result.reproduce.count("BASE=") == 1, result.id
            assert subprocess.run(["bash", "-n"], input=result.reproduce, text=True).returncode == 0, result.reproduce


def test_the_broken_servers_the_issue_lists_are_all_there():
    for fault, check_id in ISSUE_LIST.items():
        assert check_id in VIOLATIONS[fault].breaks, fault


def test_violations_are_registered_faults_naming_registered_checks():
    faults = FAULTS
    checks = load_checks()
    for name, violation in VIOLATIONS.items():
        assert faults[name].kind == "violation"
        assert set(violation.breaks) | set(violation.also) <= set(checks), name
        assert all(CHECKS[c].severity is not Severity.REQUIRED for c in violation.also), name


def test_every_required_check_is_broken_by_some_violation():
    from tests.test_deployment import PLANTED

    broken = {c for v in VIOLATIONS.values() for c in v.breaks}
    # The deployment checks judge what stands in front of a server: a planted balancer mistake breaks each
    # (``--balancer-fault``, tests/test_deployment.py), not a violation of the server's own.
    broken |= {check_id for _, check_id, _ in PLANTED.values()}
    required = {c.id for c in CHECKS.values() if c.severity is Severity.REQUIRED}
    assert required - broken == set()
