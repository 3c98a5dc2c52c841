"""``orsbench check-client`` grades a client that is not Python: the JavaScript adapter in ``examples/adapters``.

The adapter contract promises "any language"; this holds orsbench to it with a Node.js client that
speaks ORS itself (fetch and its own SSE parser, no orsbench code). The correct adapter passes every
case; a subclass with one rule broken fails exactly the check naming that rule, as the Python faulty
clients do (``tests/test_check_client.py``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from orsbench.checks.model import Status
from orsbench.clientcheck import cases, check_client, get_case, grade, run_case
from tests.test_check_client import SLACK_S, failing

ADAPTER = Path(__file__).resolve().parents[1] / "examples" / "adapters" / "adapter.mjs"
NODE = shutil.which("node")


def _node_major() -> int:
    if NODE is None:
        return 0
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30).stdout
    return int(out.strip().lstrip("v").split(".")[0] or 0)


pytestmark = pytest.mark.skipif(_node_major() < 18, reason="needs Node.js 18 or later (fetch) on PATH")

#: One rule broken each: (name, the JavaScript subclass body overriding one method).
FAULTS = {
    "no-delete": "async close() {}",
    "ignore-retry-after": "retryDelay() { return 0; }",
    "retry-4xx": "shouldRetry(response) { return response.status >= 400; }",
    "no-resume": "async afterCut(tool, input) { return this.stream({ name: tool, input }); }",
    # takes a JSON boolean reward as a number (true -> 1)
    "bool-reward": "validate(output) { if (typeof output.reward === 'boolean') output.reward = Number(output.reward); super.validate(output); }",
    # ignores finished: true and makes one more call (an eager model's)
    "call-after-finished": "shouldStop() { return false; } async play() { this.calls.push(this.calls.at(-1)); return super.play(); }",
}


def faulty(tmp_path: Path, fault: str) -> str:
    """A command running the adapter with one method overridden (an ES module importing the real one)."""
    script = tmp_path / f"{fault}.mjs"
    script.write_text(
        f"import {{ Adapter, main }} from {ADAPTER.as_uri()!r};\n"
        f"class Faulty extends Adapter {{ {FAULTS[fault]} }}\n"
        "process.exitCode = await main(Faulty);\n",
        encoding="utf-8",
    )
    return shlex.join([str(NODE), str(script)])


def test_the_javascript_adapter_passes_every_case():
    report = check_client(shlex.join([str(NODE), str(ADAPTER)]), cases(), timeout=SLACK_S, jobs=2)
    assert report.exit_code == 0, [(r.id, r.message) for r in report.results if r.status is not Status.PASS]
    judged = {r.id.split("[")[0] for r in report.results}
    assert {"client.resume_by_task_id", "client.retry_after", "client.no_4xx_retry", "client.secrets"} <= judged


@pytest.mark.parametrize(
    "fault, case, check",
    [
        ("no-delete", "echo", "client.session_deleted"),
        ("ignore-retry-after", "sparse-reward+rate-limit", "client.retry_after"),
        ("retry-4xx", "echo+missing-task", "client.no_4xx_retry"),
        ("no-resume", "sparse-reward+stream-drop", "client.resume_by_task_id"),
        ("bool-reward", "echo+reward-bool", "client.reward_as_sent"),
        ("call-after-finished", "echo", "client.stops_at_finished"),
    ],
)
def test_a_javascript_client_with_one_rule_broken_fails_that_check(tmp_path, fault, case, check):
    results = grade(run_case(faulty(tmp_path, fault), get_case(case), timeout=SLACK_S))
    assert failing(results) == {check}, [(r.id, r.status.value, r.message) for r in results]


def test_the_adapter_refuses_to_run_outside_check_client():
    done = subprocess.run([str(NODE), str(ADAPTER)], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "orsbench check-client" in done.stderr and "ORSBENCH_URL" in done.stderr
