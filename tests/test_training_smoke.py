"""The training smoke: GRPOTrainer trains through OpenRewardSpec against orsbench's mock servers.

* ``training_smoke`` tests run the CPU profile end to end, one scenario per test,
  each in its own process (``python -m training_smoke``), and assert on its JSON
  summary: tool calls reached the server and match the trainer's count, the
  logged rewards are real numbers, the parameters changed, no session is left open;
* the ``gpu`` test runs the nightly profile and skips without CUDA;
* the rest are quick: the tiny tokenizer is one TRL accepts, the warm-up scripts
  replay real scenario results, the verdict catches each broken expectation, and
  the CLI explains itself.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from training_smoke.config import SmokeConfig
from training_smoke.verdict import check, judge

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("echo", "sparse-reward", "task-tool")


def smoke(tmp_path: Path, *args: str, timeout: float = 600) -> tuple[dict, subprocess.CompletedProcess]:
    """Run ``python -m training_smoke ARGS --output FILE``; return its JSON summary and the process."""
    output = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "training_smoke", *args, "--output", str(output)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert output.exists(), f"no JSON summary written; exit {proc.returncode}\n{proc.stderr[-4000:]}"
    return json.loads(output.read_text()), proc


# -- the CPU profile, end to end --------------------------------------------------------
#: The tools OpenRewardSpec binds per scenario (task-tool: the union of every training task's task-scoped tools).
TOOLS_BOUND = {"echo": ["echo"], "sparse-reward": ["reveal", "submit"], "task-tool": ["add", "answer", "hint", "lookup"]}
#: At least one of these must have run on the server (task-tool: a task-scoped tool, not just the shared answer).
MUST_EXECUTE_ONE_OF = {"echo": {"echo"}, "sparse-reward": {"submit"}, "task-tool": {"add", "hint", "lookup"}}


@pytest.mark.training_smoke
# task-tool (task-scoped tools) is the longest of the three: behind the slow marker; echo and sparse-reward stay in CI
@pytest.mark.parametrize("scenario", [pytest.param(s, marks=[pytest.mark.slow] if s == "task-tool" else []) for s in SCENARIOS])
def test_grpo_through_openrewardspec_reaches_the_server_and_learns(scenario, tmp_path):
    summary, proc = smoke(tmp_path, "--profile", "cpu", "--scenario", scenario)
    assert summary["failures"] == [], f"{scenario}: expectations failed:\n" + "\n".join(summary["failures"])
    assert proc.returncode == 0, proc.stderr[-4000:]

    assert summary["steps"] >= 3 and summary["num_generations"] >= 2
    assert summary["tools_bound"] == TOOLS_BOUND[scenario]
    executed = set(summary["tool_calls_by_name"])
    assert summary["tool_calls"] > 0 and executed & MUST_EXECUTE_ONE_OF[scenario], summary["tool_calls_by_name"]
    received = summary["tool_calls"] + summary["tool_calls_rejected"]
    assert received == summary["adapter_tool_calls"] == summary["trainer_tool_calls"] - summary["trainer_tool_failures"]
    assert any(isinstance(r, float) and math.isfinite(r) for r in summary["rewards"]), summary["rewards"]
    assert summary["parameters"]["tensors_changed"] > 0

    # Pins trl 1.16.0: GRPOTrainer never calls the adapter's `_close()`, so the last batch keeps one session per
    # rollout open on the server until the smoke closes them. If this fails, TRL closes them itself now.
    sessions = summary["sessions"]
    assert sessions["open_after_training"] == sessions["closed_by_smoke"] == summary["rollouts_per_step"], sessions
    assert sessions["open_at_end"] == 0, sessions


# -- the GPU profile --------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_profile_improves_echo_reward(tmp_path):
    from training_smoke.gpu import gpu_missing_reason

    reason = gpu_missing_reason()
    if reason:
        pytest.skip(f"the gpu training smoke needs CUDA: {reason}")
    model = os.environ.get("ORSBENCH_GPU_MODEL", "Qwen/Qwen3-0.6B")
    summary, proc = smoke(tmp_path, "--profile", "gpu", "--model", model, "--require-gpu", timeout=3600)
    assert summary["failures"] == [], "\n".join(summary["failures"])
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_gpu_profile_skips_with_a_reason_without_cuda(tmp_path):
    from training_smoke.gpu import gpu_missing_reason

    if gpu_missing_reason() is None:
        pytest.skip("a CUDA device is present; the skip path is not taken here")
    summary, proc = smoke(tmp_path, "--profile", "gpu", "--model", "unused", timeout=120)
    assert proc.returncode == 0 and summary["skipped"] is True
    assert "CUDA" in summary["reason"] and "skipping the gpu profile" in proc.stderr
    _, strict = smoke(tmp_path, "--profile", "gpu", "--model", "unused", "--require-gpu", timeout=120)
    assert strict.returncode == 2


# -- quick checks of the pieces -----------------------------------------------------------
def test_tiny_tokenizer_carries_trls_qwen3_template_and_parses_tool_calls(tmp_path):
    pytest.importorskip("trl")
    from trl.chat_template_utils import add_response_schema, parse_response, qwen3_chat_template

    from training_smoke import tiny

    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "hello"}}\n</tool_call><|im_end|>'
    path = tiny.ensure_tiny([call, "Echo 'hello' to win."] * 4, tiny.TinyConfig(vocab_size=300), tmp_path)
    model, tokenizer = tiny.load(path)
    assert tokenizer.chat_template == qwen3_chat_template, "the template must equal TRL's byte for byte"
    add_response_schema(tokenizer)  # raises "Unrecognized chat template" otherwise
    # The prompt before generation, as GRPOTrainer passes it (without `prefix=`, parsing falls back to plain text).
    prefix = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, enable_thinking=False, return_dict=True
    )["input_ids"]
    parsed = parse_response(tokenizer, tokenizer(call)["input_ids"], prefix=prefix)
    assert parsed["tool_calls"][0]["function"] == {"name": "echo", "arguments": {"text": "hello"}}
    assert model.config.model_type == "qwen3" and model.config.vocab_size == len(tokenizer)
    assert tiny.ensure_tiny([call, "Echo 'hello' to win."] * 4, tiny.TinyConfig(vocab_size=300), tmp_path) == path


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_warmup_episodes_replay_real_scenario_results(scenario):
    from orsbench.scenarios import get_scenario
    from training_smoke.warmup import FINAL_MESSAGE, WarmupConfig, scripted_episodes

    sc = get_scenario(scenario)
    tasks = sc.list_tasks("train")[:4]
    episodes = scripted_episodes(sc, tasks, WarmupConfig(episodes=8, correct_fraction=1.0))
    for messages in episodes:
        calls = [m for m in messages if m.get("tool_calls")]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        assert calls and len(calls) == len(results)
        assert messages[-1] == {"role": "assistant", "content": FINAL_MESSAGE}
        # correct_fraction=1.0: every scripted final answer wins
        assert results[-1] in {"match", "correct", "gap 0"}, results


def _summary(**changes) -> dict:
    base = {
        "steps": 3,
        "tool_calls": 6,
        "tool_calls_rejected": 0,
        "adapter_tool_calls": 6,
        "trainer_tool_calls": 7,
        "trainer_tool_failures": 1,
        "rewards": [0.5, None, 0.25],
        "losses": [0.0, 0.01, -0.02],
        "per_step": [{"frac_reward_zero_std": 0.5}] * 3,
        "parameters": {"tensors_changed": 24, "tensors_total": 24, "max_abs_delta": 1e-4},
        "sessions": {"open_after_training": 8, "closed_by_smoke": 8, "open_at_end": 0},
        "environment": {
            "sessions_opened": 24, "session_errors": 0, "tool_calls": 6, "tool_call_errors": 0,
            "rewards_null": 2, "rewards_number": 4, "first_errors": [],
        },
    }  # fmt: skip
    return {**base, **changes}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),
        ({"tool_calls": 0, "adapter_tool_calls": 0, "trainer_tool_calls": 1}, "no tool call ran on the server"),
        ({"tool_calls": 5}, "the server received 5 tool calls"),
        ({"trainer_tool_failures": 0}, "the trainer logged 7 tool calls with 0 local failures"),
        ({"rewards": [None, float("nan"), None]}, "every logged step reward is NaN/None"),
        ({"parameters": {"tensors_changed": 0, "tensors_total": 24, "max_abs_delta": 0.0}}, "no model parameter changed"),
        ({"sessions": {"open_after_training": 8, "closed_by_smoke": 8, "open_at_end": 2}}, "2 ORS session(s) still open"),
        ({"steps": 2}, "expected 3 logged training steps, got 2"),
    ],
)
def test_verdict_names_each_broken_expectation(changes, expected):
    failures = check(_summary(**changes), SmokeConfig(steps=3))
    if expected is None:
        assert failures == []
    else:
        assert len(failures) == 1 and expected in failures[0], failures


#: What the adapters saw of a correct multi-step environment whose tiny policy never earns a reward (LongGame: a
#: count to 50; a legal move answers 0.0, an illegal one null): every group's rewards equal, no parameter moved.
NEVER_EARNS = {
    "rewards": [None, 0.0, None],
    "per_step": [{"frac_reward_zero_std": 1.0}] * 3,
    "parameters": {"tensors_changed": 0, "tensors_total": 24, "max_abs_delta": 0.0},
    "environment": {
        "sessions_opened": 24, "session_errors": 0, "tool_calls": 6, "tool_call_errors": 0,
        "rewards_null": 5, "rewards_number": 1, "first_errors": [],
    },
}  # fmt: skip


def test_plumbing_passes_on_a_correct_environment_whose_policy_never_earns_a_reward():
    """Issue 37: this run said "FAILED: no model parameter changed" although every tool call reached the server."""
    summary = _summary(url="http://127.0.0.1:8000", **NEVER_EARNS)
    verdicts = judge(summary, SmokeConfig(steps=3))
    assert verdicts["plumbing"] == {
        "passed": True,
        "line": "GRPO ran through your environment: 24 sessions, 6 tool calls, rewards seen (5 null, 1 numbers)",
        "failures": [],
    }
    assert check(summary, SmokeConfig(steps=3)) == []
    learning = verdicts["learning"]
    assert learning["judged"] is False and learning["passed"] is None and learning["steps_needed"] == 10
    assert "needs at least 10 steps" in learning["line"] and "this run had 3" in learning["line"] and "--steps 10" in learning["line"]
    # With enough steps it is judged, and says why nothing was learned.
    ten = _summary(url="http://127.0.0.1:8000", steps=10, **{**NEVER_EARNS, "rewards": [None, 0.0] * 5, "per_step": [{"frac_reward_zero_std": 1.0}] * 10})
    judged = judge(ten, SmokeConfig(steps=10))["learning"]
    assert judged["judged"] is True and judged["passed"] is False and "zero variance" in judged["line"]


def test_plumbing_fails_when_the_environments_tools_never_answer():
    env = {**NEVER_EARNS["environment"], "tool_call_errors": 6, "rewards_null": 0, "rewards_number": 0,
           "first_errors": ["ToolError: grader crashed"]}  # fmt: skip
    summary = _summary(**{**NEVER_EARNS, "rewards": [None] * 3, "environment": env})
    (failure,) = check(summary, SmokeConfig(steps=3))
    assert failure.startswith("no tool call was answered: all 6 ended in an error (first: ToolError: grader crashed)")
    assert judge(summary, SmokeConfig(steps=3))["plumbing"]["line"].endswith("6 tool calls (6 answered with an error), rewards seen (0 null, 0 numbers)")


def test_rewards_the_server_gave_but_the_trainer_lost_fail_the_plumbing():
    (failure,) = check(_summary(rewards=[None, None, None]), SmokeConfig(steps=3))
    assert failure.startswith("every logged step reward is NaN/None although the server gave 4 numeric rewards")


def test_a_null_reward_is_never_printed_as_zero():
    from training_smoke.run import mean_reward_text

    assert mean_reward_text([None, None]) == "no reward (2 null)"
    assert mean_reward_text([None, 0.5, 0.0]) == "mean server reward 0.25 over 2 (1 null)"


def test_gpu_verdict_requires_the_reward_to_improve():
    config = SmokeConfig.for_profile("gpu", steps=10, reward_window=3)
    rising = _summary(steps=10, rewards=[0.1, 0.2, None, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    assert check(rising, config) == []
    flat = _summary(steps=10, rewards=[1.0] * 10)
    (failure,) = check(flat, config)
    assert "does not exceed" in failure and "saturated" in failure


def test_cli_help_describes_profiles_and_output():
    proc = subprocess.run(
        [sys.executable, "-m", "training_smoke", "--help"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    for needle in ("--profile", "--scenario", "--steps", "--model", "tool_calls", "vLLM colocate"):
        assert needle in proc.stdout, needle


def _children(pid: int) -> dict[int, str]:
    """The live child processes of ``pid`` and their command lines (from /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return out


def _gone(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # exited, not yet reaped (its parent is gone too: init reaps it)


def test_a_sigterm_a_finalizer_swallows_still_stops_the_run() -> None:
    """Seen in CI: the SIGTERM handler ran inside an asyncio transport's ``__del__``; Python printed
    "Exception ignored" for its SystemExit, and the smoke trained to the end and exited 0. The signal is
    recorded, and the next safe point (each training step, the end of the run) raises it again."""
    code = (
        "import os, signal, time\n"
        "from training_smoke import stop\n"
        "stop.install()\n"
        "class Finalized:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        for _ in range(2000):\n"
        "            time.sleep(0.001)  # the handler runs here, inside the finalizer\n"
        "Finalized()\n"
        "print('went on after the signal', stop.received(), flush=True)\n"
        "stop.raise_if_stopped()\n"
        "print('not reached', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in done.stderr and "SystemExit: 143" in done.stderr, done.stderr
    assert f"went on after the signal {int(signal.SIGTERM)}" in done.stdout and "not reached" not in done.stdout
    assert done.returncode == 143


@pytest.mark.parametrize("after", [0.0, 8.0], ids=["while-it-starts", "while-training"])
def test_sigterm_stops_the_server_the_smoke_started(after: float) -> None:
    """SIGTERM to ``python -m training_smoke`` unwinds the run: the ``orsbench serve`` child stops too (exit 143),
    whether it comes while the server is still starting or once training is under way."""
    pytest.importorskip("trl")
    import time

    env = {**os.environ, "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "training_smoke", "--profile", "cpu", "--steps", "50"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    server: int | None = None
    try:
        deadline = time.monotonic() + 180
        while server is None and proc.poll() is None and time.monotonic() < deadline:
            server = next((pid for pid, line in _children(proc.pid).items() if "orsbench serve" in line), None)
            time.sleep(0.2)
        assert server is not None, f"no orsbench serve child appeared; exit {proc.poll()}"
        time.sleep(after)
        assert proc.poll() is None, "the smoke run ended before the signal"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        assert code == 143, proc.stderr.read().decode()[-2000:] if proc.stderr else code
        deadline = time.monotonic() + 15
        while not _gone(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(server), f"the server (pid {server}) outlived the smoke run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if server is not None and not _gone(server):
            os.kill(server, signal.SIGKILL)


# -- --url on a user's own environment: plumbing told from learning (issue 37) -----------------------
def _smoke_against(tmp_path: Path, target: str, env: str) -> tuple[dict, subprocess.CompletedProcess, str]:
    from orsbench.servers.launch import serve
    from orsbench.servers.user_app import AppTarget

    with serve(AppTarget.parse(target)) as srv:
        summary, proc = smoke(tmp_path, "--url", srv.url, "--env", env, "--steps", "3", timeout=900)
        return summary, proc, srv.url


@pytest.mark.training_smoke
def test_url_plumbing_passes_on_a_correct_multi_step_env_whose_policy_never_earns_a_reward(tmp_path):
    """LongGame counts to 50, one legal move per call: the tiny policy never reaches the reward, every GRPO group's
    rewards are equal and no parameter moves. That is working plumbing and nothing to learn, not a failure."""
    summary, proc, url = _smoke_against(tmp_path, "tests/envs/long_game.py:LongGame", "longgame")
    assert proc.returncode == 0 and summary["failures"] == [], proc.stderr[-4000:]
    plumbing, learning = summary["verdicts"]["plumbing"], summary["verdicts"]["learning"]
    env = summary["environment"]
    assert plumbing["passed"] and env["tool_calls"] > 0 and env["tool_call_errors"] == 0 and env["sessions_opened"] > 0
    assert plumbing["line"] == (
        f"GRPO ran through your environment: {env['sessions_opened']} sessions, {env['tool_calls']} tool calls, "
        f"rewards seen ({env['rewards_null']} null, {env['rewards_number']} numbers)"
    )
    assert learning["judged"] is False and "needs at least 10 steps" in learning["line"]
    assert summary["server"] == {"url": url, "env": "longgame", "impl": "yours (not started by orsbench)"}
    assert summary["server_impl"] is None
    assert f"training_smoke: trained against {url}" in proc.stderr and "plumbing PASSED" in proc.stderr
    assert "0.00" not in "".join(l for l in proc.stderr.splitlines() if "no reward" in l), "a null reward printed as 0.00"


@pytest.mark.training_smoke
def test_url_plumbing_fails_on_an_env_whose_tools_never_answer(tmp_path):
    summary, proc, _ = _smoke_against(tmp_path, "tests/envs/always_raises.py:AlwaysRaises", "alwaysraises")
    assert proc.returncode == 1, proc.stderr[-4000:]
    plumbing = summary["verdicts"]["plumbing"]
    assert not plumbing["passed"] and summary["environment"]["tool_call_errors"] == summary["environment"]["tool_calls"] > 0
    assert any(f.startswith("no tool call was answered: all ") for f in plumbing["failures"]), plumbing["failures"]
    assert "plumbing FAILED" in proc.stderr
