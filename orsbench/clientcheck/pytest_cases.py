"""Every client case as a pytest test: what ``pytest --ors-client-cmd "CMD"`` runs.

The orsbench pytest plugin adds this module to the run when ``--ors-client-cmd``
is given (alone, or beside your own tests), so a client's CI needs no test
file of its own. One test per case, named after it (``test_client_case[echo]``);
a test fails when a required client check fails, with each failing check's
message, section and fix in the report; recommended findings are warnings.
"""

from __future__ import annotations

import warnings

import pytest

from orsbench.checks.model import Severity, Status
from orsbench.clientcheck import Case, cases, get_case, grade, run_case
from orsbench.clientcheck.judgement import judge


class ClientCheckWarning(UserWarning):
    """A recommended client check that failed (or warned): reported, not fatal."""


def selected_cases(config: pytest.Config) -> list[Case]:
    names = [n.strip() for n in (config.getoption("ors_client_cases") or "").split(",") if n.strip()]
    try:
        return [get_case(name) for name in names] if names else cases()
    except KeyError as exc:  # UnknownName lists the known cases
        raise pytest.UsageError(f"--ors-client-cases: {exc}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "client_case" in metafunc.fixturenames:
        chosen = selected_cases(metafunc.config)
        metafunc.parametrize("client_case", chosen, ids=[c.name for c in chosen])


def test_client_case(client_case: Case, request: pytest.FixtureRequest) -> None:
    command = request.config.getoption("ors_client_cmd")
    if not command:
        pytest.skip("no --ors-client-cmd given")
    timeout = request.config.getoption("ors_client_timeout")
    run = run_case(command, client_case, timeout)
    if run.server_error:
        pytest.fail(f"orsbench could not serve the case: {run.server_error}", pytrace=False)
    results = grade(run)
    judged = judge(run, results)  # the case's one verdict, in the words of check-client, the matrix and `clients URL`
    request.node.user_properties.append(("verdict", judged.words))
    for result in results:
        request.node.user_properties.append((result.id, result.status.value))
    blocking = [r for r in results if r.blocking]
    for r in results:
        if r not in blocking and r.status in (Status.FAIL, Status.WARN) and r.severity is not Severity.ADVISORY:
            warnings.warn(ClientCheckWarning(f"{client_case.name}: {r.id}: {r.message}"), stacklevel=1)
    if blocking:
        lines = [f"{client_case.name}: {judged.words} — {len(blocking)} required client check(s) failed:"]
        for r in blocking:
            lines += [f"  {r.id}: {r.message}", f"      fix:  {r.remediation}", f"      spec: {r.spec}"]
        if run.stderr.strip():
            lines.append("stderr (tail):\n" + run.stderr[-1500:])
        pytest.fail("\n".join(lines), pytrace=False)
