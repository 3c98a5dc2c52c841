"""The wire checks of ``orsbench check`` as pytest items: one test per check per target.

    pytest conformance/test_wire_checks.py --ors-url http://127.0.0.1:8080 [--ors-env NAME] [--ors-split S] [--ors-secret K=V]

parametrises every check over that server; without ``--ors-url`` they run
against embedded mocks of the core scenarios (started by the plugin's
``ors_server_factory``, one per worker; the ``slow`` scenario's checks, which
mostly wait, run in a process of their own from the start of the session:
``conformance.background``). Evidence is collected once per target
and every item grades its own check, so a failing item names exactly one rule,
with its remediation and spec section. Required checks fail the item;
recommended and advisory ones that fail, and warnings, pass with a
``UserWarning``; skips are skips (the reason names the unmet dependency).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from conformance import background
from orsbench.checks import Options, Report, load_checks, run_checks
from orsbench.checks.pytest_checks import grade
from orsbench.cli.flags import API_KEY_ENV

#: Scenarios checked when no --ors-url is given.
EMBEDDED = ("echo", "task-tool", "sparse-reward", "slow")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "wire_target" not in metafunc.fixturenames:
        return
    url = metafunc.config.getoption("--ors-url")
    targets = [("ors-url", url)] if url else [(f"mock-{s}", s) for s in EMBEDDED]
    params = [
        pytest.param(target, check_id, id=f"{label}::{check_id}", marks=pytest.mark.xdist_group(f"wire-checks-{label}"))
        for label, target in targets
        for check_id in load_checks()
    ]
    metafunc.parametrize(("wire_target", "check_id"), params)


@pytest.fixture(scope="session")
def _wire_reports() -> dict[str, Report | background.ReadReport]:
    return {}


@pytest.fixture
def wire_report(
    wire_target: str,
    request: pytest.FixtureRequest,
    ors_server_factory: Any,
    ors_secrets: dict[str, str],
    _wire_reports: dict[str, Report | background.ReadReport],
) -> Report | background.ReadReport:
    """The check run for ``wire_target`` (made once per worker and target)."""
    if wire_target not in _wire_reports:
        url = request.config.getoption("--ors-url")
        if url:
            options = Options(
                env=request.config.getoption("--ors-env"),
                split=request.config.getoption("--ors-split"),
                secrets=ors_secrets,  # the plugin's fixture (--ors-secret, --ors-secrets-file)
                api_key=os.environ.get(API_KEY_ENV) or None,  # as `orsbench check` reads it: never on a command line
            )
        elif wire_target in background.BACKGROUND and (folder := background.reports_folder(request.config)) is not None:
            _wire_reports[wire_target] = background.read(background.report_path(folder, wire_target))  # checked from the start
            return _wire_reports[wire_target]
        else:
            server = ors_server_factory(wire_target)
            url, options = server.url, Options(env=server.env_name)
        _wire_reports[wire_target] = run_checks(url, options)
    return _wire_reports[wire_target]


def test_wire_check(wire_report: Report | background.ReadReport, check_id: str) -> None:
    grade(wire_report, check_id)  # the one reading of a result as a test outcome (what `pytest --ors-url` runs too)
