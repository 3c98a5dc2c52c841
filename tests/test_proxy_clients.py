"""The client side of ``orsbench proxy``: each client session in real traffic graded by the client checks.

* each faulty client (``tests/clients/faulty.py``) fails exactly the client check naming its rule, through
  the proxy in front of the mock serving its case (and once with the fault injected by the proxy itself);
* 16 correct clients at once through the proxy with ``flaky-5xx``: no client check fails, and Retry-After
  was judged;
* the openreward SDK and TRL's ``OpenRewardSpec`` through the proxy in front of a real environment (the
  openreward SDK's own server) are judged as ``check-client`` judges the same client on the same case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from orsbench.clientcheck import get_case, grade, run_case
from orsbench.clientcheck.checks import Role
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.reference import command as reference_command
from orsbench.servers.launch import RunningServer, serve, start_proxy

from test_check_client import SLACK_S, TRAFFIC_RULE_BROKEN, faulty  # noqa: E402  (tests/ is on sys.path)


def play(case: Case, url: str, env: str, command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` under the adapter contract for ``case``, pointed at ``url`` (the proxy)."""
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp, "script.json"), Path(tmp, "out.jsonl")
        script.write_text(json.dumps(case.script.contract_json()))
        out.touch()
        env_vars = {
            **os.environ,
            "ORSBENCH_URL": url, "ORSBENCH_ENV": env, "ORSBENCH_SPLIT": case.split, "ORSBENCH_INDEX": str(case.index),
            "ORSBENCH_SCRIPT": str(script), "ORSBENCH_OUT": str(out), "ORSBENCH_SECRETS": json.dumps(dict(case.secrets)),
            "OPENREWARD_API_URL": url, "OPENREWARD_SESSION_URL": url, "OPENREWARD_API_KEY": "unused",
            "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "HF_HUB_OFFLINE": "1", "INSPECT_LOG_DIR": str(Path(tmp, "logs")),
        }  # fmt: skip
        done = subprocess.run(command, shell=True, env=env_vars, capture_output=True, text=True, timeout=SLACK_S)
        done.stderr += out.read_text()  # what the client reported (its failures are lines of ORSBENCH_OUT)
        return done


def final_report(proxy: RunningServer, path: Path) -> dict[str, Any]:
    """Stop the proxy (SIGTERM: sessions still open are graded as left open) and read its report."""
    proxy.stop()
    return json.loads(path.read_text())


def client_checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"] if c["id"].startswith("client.")}


def failing(report: dict[str, Any]) -> set[str]:
    return {i for i, c in client_checks(report).items() if c["status"] in ("fail", "error")}


@pytest.mark.parametrize(
    "fault, case, check",
    TRAFFIC_RULE_BROKEN,
)
def test_a_faulty_client_fails_exactly_the_client_check_naming_its_rule(tmp_path, fault, case, check):
    chosen = get_case(case)
    with serve(chosen.scenario, config=chosen.config(), params=dict(chosen.params)) as upstream:
        proxy = start_proxy(upstream.url, json_report=tmp_path / "proxy.json")
        try:
            play(chosen, proxy.url, upstream.env_name, faulty(fault))
        finally:
            report = final_report(proxy, tmp_path / "proxy.json")
    if check == "client.env_name":  # held as the matrix and `clients URL` hold it: a warning naming the pinned defects
        assert failing(report) == set() and client_checks(report)[check]["status"] == "warn", client_checks(report)[check]
        return
    assert failing(report) == {check}, [(i, c["status"], c["message"]) for i, c in client_checks(report).items()]


def test_a_fault_the_proxy_injects_is_what_its_clients_are_graded_on(tmp_path):
    """``--fault rate-limit`` answers 429s outside the forwarding: the client grader sees them all the same."""
    case = get_case("sparse-reward")
    with serve(case.scenario, params=dict(case.params)) as upstream:
        proxy = start_proxy(upstream.url, faults=("rate-limit",), seed=3, json_report=tmp_path / "proxy.json")
        try:
            play(case, proxy.url, upstream.env_name, faulty("ignore-retry-after"))
        finally:
            report = final_report(proxy, tmp_path / "proxy.json")
    assert failing(report) == {"client.retry_after"}, client_checks(report)


CLIENTS = 16


def test_16_correct_clients_at_once_through_flaky_5xx_fail_no_client_check(tmp_path):
    case = get_case("sparse-reward")
    with serve(case.scenario, params=dict(case.params)) as upstream:
        proxy = start_proxy(upstream.url, faults=("flaky-5xx",), seed=3, json_report=tmp_path / "proxy.json")
        try:
            with ThreadPoolExecutor(CLIENTS) as pool:
                done = list(pool.map(lambda _: play(case, proxy.url, upstream.env_name, reference_command()), range(CLIENTS)))
        finally:
            report = final_report(proxy, tmp_path / "proxy.json")
    assert [d.returncode for d in done] == [0] * CLIENTS, [d.stderr[-800:] for d in done if d.returncode]
    checks = client_checks(report)
    assert failing(report) == set(), [(i, c["message"]) for i, c in checks.items() if c["status"] == "fail"]
    assert checks["client.session_deleted"]["measured"]["sessions"] == CLIENTS
    assert checks["client.retry_after"]["status"] == "pass" and checks["client.retry_after"]["measured"]["pass"] >= 1


# -- the same client, graded by check-client and through the proxy ------------------------------------------
REAL = "sdk"  # the openreward SDK's own Server, running the scenario: a real environment


def _adapter(target: str) -> str:
    return f"{sys.executable} -m orsbench.clients.adapter {target}"


@pytest.mark.parametrize("target, case_name", [("openreward", "sparse-reward"), ("trl", "echo")])
def test_real_clients_through_the_proxy_are_judged_as_check_client_judges_them(tmp_path, target, case_name):
    pytest.importorskip("openreward")
    if target == "trl":
        pytest.importorskip("trl.experimental.openreward")
    case = get_case(case_name)
    direct = {r.id: r.status.value for r in grade(run_case(_adapter(target), case, SLACK_S, impl=REAL), roles={Role.TRAFFIC})}
    with serve(case.scenario, impl=REAL, params=dict(case.params)) as upstream:
        proxy = start_proxy(upstream.url, json_report=tmp_path / "proxy.json")
        try:
            played = play(case, proxy.url, upstream.env_name, _adapter(target))
        finally:
            report = final_report(proxy, tmp_path / "proxy.json")
    assert played.returncode == 0, played.stderr[-2000:]
    proxied = {i: c["status"] for i, c in client_checks(report).items()}
    # Judged on both sides: the same verdict. Only a case's script lets check-client judge the script and tool runs.
    both = set(direct) & set(proxied)
    assert both >= {"client.env_name", "client.session_deleted", "client.stops_at_finished", "client.request_budget"}
    # One rule on both sides: a missing env_name where the server's default environment is the one played is a
    # warning naming the pinned defect (as `clients URL` lists it beside "works").
    assert direct["client.env_name"] == proxied["client.env_name"] == "warn"
    assert {i: proxied[i] for i in both} == {i: direct[i] for i in both}
    [judged] = report["cases"]  # the session's one verdict: works, with the rule beside it
    assert judged["words"] == "works" and "client.env_name" in judged["rules"], judged
    assert set(proxied) - set(direct) == set(), proxied
    assert set(direct) - set(proxied) <= {"client.script_followed", "client.tool_runs"}
