"""The GitHub Action: its metadata is valid, its inputs reach its script, and the script does the job.

No CI service is reachable here, so the action's logic (``python -m
orsbench.ci_action``) runs locally with a fake ``GITHUB_STEP_SUMMARY`` and
``GITHUB_OUTPUT``, against ``--serve echo`` and against a broken profile.
``action.yml`` and the README's workflow are validated against the action and
workflow schemas SchemaStore publishes (vendored under fixtures/schemas/ from
the check-jsonschema package: no network at test time).
"""

from __future__ import annotations

import json
import os
import re
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


def test_client_cmd_runs_check_client_and_renders_its_json(tmp_path: Path) -> None:
    """check-client writes the same JSON report model; the action renders its HTML and Markdown from it."""
    from orsbench.ci_action import Inputs, client_command, client_reports

    cmd = client_command(Inputs(client_cmd="python my_adapter.py"), tmp_path)
    assert cmd[1:5] == ["-m", "orsbench", "check-client", "--cmd"] and cmd[5] == "python my_adapter.py"
    assert "--json" in cmd and "--junit" in cmd
    document = {
        "target": "python my_adapter.py",
        "verdict": "fail",
        "exit_code": 1,
        "summary": {"total": 1, "fail": 1},
        "checks": [
            {"id": "client.deletes_session", "title": "deletes its session", "status": "fail", "severity": "required",
             "message": "the session was left open", "measured": None, "evidence": [], "remediation": "call /delete",
             "spec": "docs/protocol.md §8", "depends_on": None, "baseline": None, "duration_s": 0.1, "reproduce": None},
        ],
    }  # fmt: skip
    (tmp_path / "client-report.json").write_text(json.dumps(document))
    summary = client_reports(tmp_path)
    assert "orsbench check-client: FAIL" in summary and "`client.deletes_session`" in summary
    assert 'id="check-client-deletes_session" open' in (tmp_path / "client-report.html").read_text()
