"""The GitHub Action: its metadata is valid, its inputs reach its script, and the script does the job.

No CI service is reachable here, so the action's logic (``python -m
orsbench.ci_action``) runs locally with a fake ``GITHUB_STEP_SUMMARY`` and
``GITHUB_OUTPUT``, against ``--scenario echo`` and against a broken profile.
``action.yml`` and the README's workflow are validated against the action and
workflow schemas SchemaStore publishes (vendored under fixtures/schemas/ from
the check-jsonschema package: no network at test time).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from orsbench.ci_action import main

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "fixtures" / "schemas"


def _schema(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / f"{name}.json").read_text()))


def _action() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text())


# -- metadata --------------------------------------------------------------------------
def test_action_yml_is_valid_action_metadata() -> None:
    errors = [e.message for e in _schema("github-actions").iter_errors(_action())]
    assert errors == []


def test_the_schema_rejects_a_broken_action() -> None:
    """The control: a composite step without ``shell`` and an input without a description are refused."""
    action = _action()
    del action["runs"]["steps"][1]["shell"]
    action["inputs"]["url"] = {"required": False}
    assert len(list(_schema("github-actions").iter_errors(action))) >= 2


def test_every_input_reaches_the_script() -> None:
    """Each input the script reads is passed as ``INPUT_*`` by the check step, and each of those is declared."""
    action = _action()
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    passed = {k for k in step["env"] if k.startswith("INPUT_")}
    script = (ROOT / "orsbench" / "ci_action.py").read_text()
    read = {"INPUT_" + name.upper().replace("-", "_") for name in re.findall(r'get\("([a-z-]+)"\)', script)}
    assert read == passed
    for name in passed:
        value = step["env"][name]
        match = re.fullmatch(r"\$\{\{ inputs\.([a-z-]+) \}\}", value)
        assert match and match.group(1) in action["inputs"], name
    setup = {"python-version", "extras", "upload-artifact"}
    assert set(action["inputs"]) == {m.group(1) for v in step["env"].values() if (m := re.fullmatch(r"\$\{\{ inputs\.([a-z-]+) \}\}", v))} | setup
    assert {"url", "serve", "app", "cmd", "expected-failures", "strict", "python-version", "extras", "client-cmd"} <= set(action["inputs"])


def _readme_workflow() -> dict[str, Any]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Check your env on every push", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "the README section has a workflow file"
    workflow = yaml.safe_load(block.group(1))
    # PyYAML reads the key `on` as YAML 1.1's boolean True; GitHub (YAML 1.2) reads the string "on".
    workflow["on"] = workflow.pop(True)
    return workflow


def test_the_readme_workflow_is_a_valid_workflow_using_the_action() -> None:
    workflow = _readme_workflow()
    assert [e.message for e in _schema("github-workflows").iter_errors(workflow)] == []
    steps = workflow["jobs"]["orsbench"]["steps"]
    ours = next(s for s in steps if str(s.get("uses", "")).endswith("/orsbench@main"))
    assert set(ours["with"]) <= set(_action()["inputs"])


# -- the script, run locally -------------------------------------------------------------
def _run(tmp_path: Path, **inputs: str) -> tuple[int, str, dict[str, str], Path]:
    summary, output, out = tmp_path / "summary.md", tmp_path / "output.txt", tmp_path / "reports"
    summary.write_text("previous step's summary\n")
    env = {
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "INPUT_OUTPUT_DIR": str(out),
        **{"INPUT_" + k.upper(): v for k, v in inputs.items()},
    }
    code = main({**os.environ, **env})
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() else {}
    return code, summary.read_text(), outputs, out


def test_a_healthy_server_passes_with_every_artifact(tmp_path: Path) -> None:
    code, summary, outputs, out = _run(tmp_path, serve="echo", args="--no-fuzz")
    assert code == 0
    assert summary.startswith("previous step's summary\n")  # appended, never overwritten
    assert "PASS" in summary and "orsbench check" in summary
    assert outputs["verdict"] == "pass" and outputs["exit-code"] == "0"
    for key in ("report-json", "junit", "html", "markdown"):
        assert Path(outputs[key]).is_file() and Path(outputs[key]).parent == out, key
    assert json.loads(Path(outputs["report-json"]).read_text())["verdict"] == "pass"
    assert "<testsuites" in Path(outputs["junit"]).read_text()
    assert 'id="verdict">PASS<' in Path(outputs["html"]).read_text()


def test_a_broken_server_fails_the_job_and_says_why(tmp_path: Path) -> None:
    code, summary, outputs, out = _run(tmp_path, serve="echo", args="--fault reward-bool --no-fuzz")
    assert code == 1
    assert outputs["verdict"] == "fail" and outputs["exit-code"] == "1"
    assert "FAIL" in summary and "`reward.well_formed`" in summary
    assert "reproduce <code>reward.well_formed</code>" in summary and "curl " in summary
    page = (out / "report.html").read_text()
    assert 'id="check-reward-well_formed" open' in page


def test_strict_passes_a_correct_server(tmp_path: Path) -> None:
    """``strict: "true"`` is usable: the echo mock has no long tool, so keep-alives and resuming a running call
    are not applicable there — no coverage is missing, and the job passes (issue 27)."""
    code, summary, outputs, out = _run(tmp_path, serve="echo", strict="true", args="--no-fuzz")
    assert code == 0 and outputs["verdict"] == "pass", summary
    report = json.loads(Path(outputs["report-json"]).read_text())
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["call.keepalive_interval"] == statuses["call.resume_running"] == "n/a"
    assert report["summary"]["required_not_run"] == [] and report["summary"]["n/a"] >= 2


def test_the_baseline_input_turns_a_known_failure_green(tmp_path: Path) -> None:
    code, summary, outputs, _ = _run(
        tmp_path,
        serve="echo",
        args="--fault reward-bool --no-fuzz",
        expected_failures=str(ROOT / "fixtures" / "expected-failures" / "reward-bool.yaml"),
    )
    assert code == 0 and outputs["verdict"] == "pass"
    assert "XFAIL" in summary


@pytest.mark.parametrize(
    ("inputs", "says"),
    [({"url": "http://127.0.0.1:9", "serve": "echo"}, "give one of"), ({}, "give one of"), ({"serve": "echo", "strict": "yes"}, "strict")],
)
def test_bad_inputs_are_a_usage_error_naming_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], inputs: dict[str, str], says: str) -> None:
    code, _, _, _ = _run(tmp_path, **inputs)
    printed = capsys.readouterr().out
    assert code == 2
    assert "::error" in printed and says in printed


def test_client_cmd_runs_check_client_with_every_report(tmp_path: Path) -> None:
    """client-cmd runs ``orsbench check-client --client-cmd`` on a faulty client: exit 1, its summary and HTML written."""
    client = ROOT / "tests" / "clients" / "faulty.py"  # tests/test_check_client.py's faulty client
    code, summary, outputs, out = _run(tmp_path, client_cmd=f"{sys.executable} {client} drop-env-name", client_args="--cases two-envs")
    assert code == 1
    assert "orsbench check-client: FAIL" in summary and "client.env_name" in summary
    assert outputs["client-verdict"] == "fail" and Path(outputs["client-html"]).is_file()


@pytest.mark.parametrize("path", sorted((ROOT / ".github" / "workflows").glob("*.yml")), ids=lambda p: p.name)
def test_the_repositorys_workflows_are_valid(path: Path) -> None:
    """ci.yml uses the action on a healthy and a broken server; every workflow must at least be well-formed."""
    workflow = yaml.safe_load(path.read_text())
    workflow["on"] = workflow.pop(True)
    assert [e.message for e in _schema("github-workflows").iter_errors(workflow)] == []
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            if step.get("uses") == "./":
                assert set(step.get("with", {})) <= set(_action()["inputs"]), step
