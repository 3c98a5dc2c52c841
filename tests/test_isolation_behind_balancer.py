"""The nine planted isolation bugs stay caught behind a balancer (issue 35).

A front that routes every request of a session by its ``X-Session-ID`` must not hide a multi-session bug of the
server behind it: the same planted defect, on the SDK twin served as a deployment (``orsbench serve --replicas``:
nginx where installed, else the built-in hashing router), fails the same ``isolation.*`` checks as the bare
server does in ``tests/test_isolation.py``, and the deployment checks themselves pass.

One replica: every session meets the same process, as sessions of one replica do in any deployment. With
several replicas and correct affinity a bug of shared process state can only strike sessions that hash to the
same replica — it is still there, but whether two of the probe's sessions meet is up to the hash, so a test of
that would be a test of luck (docs/deployments.md says so).
"""

from __future__ import annotations

import pytest

from orsbench.checks import Options, Status
from orsbench.checks.runner import run_checks
from orsbench.servers import launch
from orsbench.servers.faults.violations import VIOLATIONS
from tests.test_isolation import ISOLATION, _config, _explain


@pytest.fixture(scope="module", autouse=True)
def _zygote():
    launch.use_zygote(True)  # one `import openreward`, a fork per SDK twin
    yield


@pytest.mark.parametrize("name", ISOLATION)
def test_each_planted_defect_is_caught_behind_a_balancer(name, ors_server_factory):
    pytest.importorskip("openreward")
    violation, config = VIOLATIONS[name], _config(name)
    server = ors_server_factory(violation.scenario, impl="sdk", config=config, replicas=1)
    options = Options(env=server.env_name, ttl=config.ttl, ping_interval=config.ping_interval, fuzz=0, tasks=(0, -1))
    report = run_checks(server.url, options, only=["isolation.*", "deployment.*"])
    failing = set(report.ids(Status.FAIL))
    assert set(violation.breaks) <= failing, _explain(report)
    assert failing <= set(violation.breaks) | set(violation.also), _explain(report)
    assert not any(c.startswith("deployment.") for c in failing), _explain(report)
    assert report.ids(Status.ERROR) == []
