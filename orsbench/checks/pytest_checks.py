"""Every server check as a pytest test: what ``pytest --ors-url URL`` runs, in any directory.

The orsbench pytest plugin adds this module to the run when ``--ors-url`` is given (alone it is
the whole run; beside paths given on the command line, it runs with those tests), so an
environment's own repository needs no test file to check its server::

    pytest --ors-url http://127.0.0.1:8080 [--ors-env NAME] [--ors-split S] [--ors-secret K=V]

One test per check, named after it (``test_ors_check[discovery.tools_listing]``). Evidence is
collected once (session scope) and every item grades its own check, so a failing item names
exactly one rule with its remediation and protocol section. :func:`grade` is the one reading of a
result as a test's outcome; ``conformance/test_wire_checks.py`` grades its embedded mocks with it.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

import pytest

from orsbench.checks.model import Severity, Status
from orsbench.checks.registry import load_checks
from orsbench.config import API_KEY_ENV

if TYPE_CHECKING:
    from orsbench.checks.runner import Report


class ServerCheckWarning(UserWarning):
    """A recommended or advisory server check that failed (or warned): reported, not fatal."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "ors_check_id" in metafunc.fixturenames:
        ids = list(load_checks())
        metafunc.parametrize("ors_check_id", ids, ids=ids)


@pytest.fixture(scope="session")
def ors_url_report(request: pytest.FixtureRequest, pytestconfig: pytest.Config, ors_secrets: dict[str, str]) -> Report:
    """The selected checks run once against ``--ors-url`` (the plugin's options; the API key from ``$ORSBENCH_API_KEY``).

    Only the checks of the items this run kept (``-k``, ``--deselect``) run, with the checks they depend on,
    as ``orsbench check --only`` runs them: ``-k discovery`` does not wait for the timing probes.
    """
    from orsbench.checks import Options, run_checks

    selected = sorted({item.callspec.params["ors_check_id"] for item in request.session.items if "ors_check_id" in getattr(getattr(item, "callspec", None), "params", {})})
    url = pytestconfig.getoption("ors_url")
    if not url:
        pytest.skip("no --ors-url given")
    options = Options(
        env=pytestconfig.getoption("ors_env"),
        split=pytestconfig.getoption("ors_split"),
        secrets=ors_secrets,
        api_key=os.environ.get(API_KEY_ENV) or None,  # as `orsbench check` reads it: never on a command line
    )
    return run_checks(url, options, only=selected or None)


def test_ors_check(ors_url_report: Report, ors_check_id: str) -> None:
    grade(ors_url_report, ors_check_id)


def grade(report: Report, check_id: str) -> None:
    """``check_id``'s result in ``report`` as a test outcome.

    Required checks that fail fail the item; recommended and advisory ones that fail, and warnings,
    pass with a :class:`ServerCheckWarning`; skips and checks with nothing to judge are skips (the
    reason names the unmet dependency); an error of orsbench itself fails, saying so.
    """
    if report.reason:
        pytest.fail(report.reason, pytrace=False)
    result = report.result(check_id)
    text = f"{result.message}\n  fix:  {result.remediation}\n  spec: {result.spec}  (orsbench explain {check_id})"
    if result.status in (Status.SKIP, Status.NOT_APPLICABLE):
        pytest.skip(result.message)
    if result.status is Status.ERROR:
        pytest.fail(f"orsbench internal error: {result.message}", pytrace=False)
    if result.status is Status.FAIL and result.severity is Severity.REQUIRED:
        pytest.fail(f"{check_id}: {text}", pytrace=False)
    if result.status in (Status.FAIL, Status.WARN):
        warnings.warn(ServerCheckWarning(f"{check_id} ({result.severity.value}, {result.status.value}): {text}"), stacklevel=1)
