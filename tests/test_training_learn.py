"""The learn profile's pieces: the pick scenario, the verdict, the sabotages, collapse, --url, the gpu tiny model.

Quick tests only (no GRPO run) except the last, which runs the learn profile
end to end once (``training_smoke`` marker, like the CPU smoke). The sabotages'
end-to-end runs are a benchmark: ``python -m training_smoke.bench_learn``
(numbers in BENCHMARKS.md).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from training_smoke.learning import LearningCriteria, plot_rewards, verdict
from training_smoke.config import GPU_TINY, SmokeConfig
from training_smoke.verdict import check, judge
from training_smoke.sabotage import SABOTAGES, sabotaged

ROOT = Path(__file__).resolve().parents[1]


# -- the pick scenario ---------------------------------------------------------------------
def test_pick_rewards_only_the_winning_door_and_always_finishes():
    from orsbench.scenarios import get_scenario
    from training_smoke.warmup import run_tool
    from orsbench.scenarios import Episode

    sc = get_scenario("pick")
    tasks = sc.list_tasks("train")
    assert len({t["door"] for t in tasks}) == 1, "default: the same door wins in every room"
    for task in tasks[:3]:
        episode = Episode(sc, dict(task), split="train")
        prompt = sc.prompt(episode)[0]["text"]
        assert task["room"] in prompt and "pick(door=...)" in prompt
        for door in task["doors"]:
            result = sc.session_tools(task)["pick"].fn(sc, episode, sc.session_tools(task)["pick"].params(door=door))
            assert result.finished is True
            assert result.reward == (1.0 if door == task["door"] else 0.0)
        assert run_tool(sc, Episode(sc, dict(task)), "pick", {"door": task["door"]}) == "win"
    varied = get_scenario("pick", varied=True).list_tasks("train")
    assert len({t["door"] for t in varied}) == 4
    with pytest.raises(ValueError, match="doors must be between"):
        get_scenario("pick", doors=9)


def test_learn_warmup_picks_doors_uniformly_so_it_teaches_format_not_answers():
    from orsbench.scenarios import get_scenario
    from training_smoke.warmup import WarmupConfig, scripted_episodes

    sc = get_scenario("pick")
    tasks = sc.list_tasks("train")[:4]
    config = SmokeConfig.for_profile("learn")
    assert config.scenario == "pick" and config.warmup.correct_fraction == 0.25
    episodes = scripted_episodes(sc, tasks, WarmupConfig(episodes=400, correct_fraction=config.warmup.correct_fraction))
    doors = Counter(m["tool_calls"][0]["function"]["arguments"]["door"] for e in episodes for m in e if m.get("tool_calls"))
    assert set(doors) == set(tasks[0]["doors"])
    assert all(60 <= n <= 140 for n in doors.values()), doors  # 100 each expected
    wins = sum(m["content"] == "win" for e in episodes for m in e if m["role"] == "tool")
    assert 60 <= wins <= 140, wins


# -- the verdict ------------------------------------------------------------------------------
def _steps(means: list[float], n: int = 16, seed: int = 0) -> list[list[float | None]]:
    rng = random.Random(seed)
    return [[1.0 if rng.random() < m else 0.0 for _ in range(n)] for m in means]


def test_verdict_learns_on_a_rising_curve_and_not_on_flat_falling_or_short_ones():
    criteria = LearningCriteria(window=10, alpha=0.01, min_delta=0.25)
    rising = verdict(_steps([0.25] * 10 + [0.5] * 20 + [0.8] * 10), criteria)
    assert rising["learned"] is True and rising["delta"] >= 0.25 and rising["p_value"] <= 0.01
    assert set(rising) >= {"first_mean", "last_mean", "delta", "p_value", "learned"}
    flat = verdict(_steps([0.25] * 40), criteria)
    assert flat["learned"] is False and flat["p_value"] > 0.01
    falling = verdict(_steps([0.5] * 20 + [0.1] * 20), criteria)
    assert falling["learned"] is False and falling["delta"] < 0 and falling["p_value"] > 0.5
    short = verdict(_steps([0.2, 0.9]), criteria)
    assert short["learned"] is False and "need at least 20 steps" in short["reason"]
    same = verdict([[1.0] * 8] * 20, criteria)
    assert same["p_value"] == 1.0 and same["learned"] is False


def test_verdict_needs_a_large_enough_gain_not_only_significance():
    criteria = LearningCriteria(window=10, alpha=0.01, min_delta=0.25)
    small = verdict(_steps([0.3] * 10 + [0.45] * 10, n=400), criteria)
    assert small["p_value"] <= 0.01 and small["learned"] is False and small["reason"].startswith("delta")


def test_rollouts_without_a_reward_count_as_zero():
    criteria = LearningCriteria(window=1, alpha=0.5, min_delta=0.5)
    out = verdict([[None, None, float("nan"), 0.0], [1.0, 1.0, 1.0, None]], criteria)
    assert out["first_mean"] == 0.0 and out["last_mean"] == 0.75


def test_plot_is_a_png(tmp_path):
    criteria = LearningCriteria(window=5)
    per_step = _steps([0.2] * 10 + [0.8] * 10)
    path = plot_rewards(per_step, tmp_path / "curve.png", title="t", learning=verdict(per_step, criteria))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


# -- the sabotages ------------------------------------------------------------------------------
def test_each_sabotage_corrupts_what_the_trainer_gets_and_keeps_the_name():
    def outcome_reward(environments, **_):
        return [env for env in environments]

    rewards = [1.0, 0.0, None, 0.5]
    expected = {
        "reward-shift": [0.0, None, 0.5, 1.0],
        "reward-sign": [-1.0, -0.0, None, -0.5],
        "reward-none": [None] * 4,
        "reward-constant": [1.0] * 4,
    }
    assert set(expected) == set(SABOTAGES)
    for name, want in expected.items():
        seen: list = []
        wrapped = sabotaged(outcome_reward, name, seen)
        assert wrapped.__name__ == "outcome_reward"
        assert wrapped(environments=rewards) == want and seen == [want]
    assert sabotaged(outcome_reward, None)(environments=rewards) == rewards
    with pytest.raises(ValueError, match="unknown sabotage"):
        sabotaged(outcome_reward, "reward-typo")


# -- collapse and the learn verdict in check() ----------------------------------------------------
def _summary(steps: int = 8, rewards=None, calls=None, learning=None) -> dict:
    rewards = rewards if rewards is not None else [0.25] * steps
    calls = calls if calls is not None else [16] * steps
    summary = {
        "steps": steps,
        "tool_calls": sum(calls),
        "tool_calls_rejected": 0,
        "adapter_tool_calls": sum(calls),
        "trainer_tool_calls": sum(calls),
        "trainer_tool_failures": 0,
        "rewards": rewards,
        "losses": [0.01] * steps,
        "rollouts_per_step": 16,
        "per_step": [{"frac_reward_zero_std": 0.5, "adapter_tool_calls": c} for c in calls],
        "parameters": {"tensors_changed": 24, "tensors_total": 24, "max_abs_delta": 1e-4},
        "sessions": {"open_after_training": 16, "closed_by_smoke": 16, "open_at_end": 0},
    }
    if learning is not None:
        summary["learning"] = learning
    return summary


def test_learning_fails_when_most_steps_log_no_reward():
    """Collapse is the learning verdict's (judged from 10 steps): on the cpu profile it is reported, not a run failure."""
    rewards = [0.5, 0.25, None, None, float("nan"), None, None, 0.0, None, 0.1]
    verdicts = judge(_summary(steps=10, rewards=rewards), SmokeConfig(steps=10))
    (failure,) = verdicts["learning"]["failures"]
    assert failure.startswith("collapse: 6 of 10 steps logged no reward") and verdicts["plumbing"]["passed"]
    assert check(_summary(steps=10, rewards=rewards), SmokeConfig(steps=10)) == []  # cpu: the plumbing decides the exit
    assert judge(_summary(steps=10, rewards=[0.5, None, 0.25, None, 0.1, None, 0.2, None, 0.3, 0.4]), SmokeConfig(steps=10))["learning"]["failures"] == []


def test_learning_fails_when_tool_calls_stop():
    calls = [16, 16, 16, 16, 15, 14, 9, 4, 1, 0]
    (failure,) = judge(_summary(steps=10, calls=calls), SmokeConfig(steps=10))["learning"]["failures"]
    assert "collapse: tool calls stopped: 1 calls in the last 2 steps' 32 rollouts" in failure
    assert judge(_summary(steps=10, calls=[16, 16, 16, 16, 15, 14, 9, 4, 4, 3]), SmokeConfig(steps=10))["learning"]["failures"] == []


def test_learn_profile_fails_when_not_learned_and_names_a_sabotage():
    config = SmokeConfig.for_profile("learn", steps=10, sabotage="reward-sign")
    learned = {"learned": True, "first_mean": 0.2, "last_mean": 0.7, "delta": 0.5, "p_value": 1e-6}
    assert check(_summary(steps=10, learning=learned), config) == []
    not_learned = {**learned, "learned": False, "last_mean": 0.1, "delta": -0.1, "p_value": 0.99, "reason": "p 0.99 > 0.01"}
    (failure,) = check(_summary(steps=10, learning=not_learned), config)
    assert "did not learn (sabotage reward-sign: expected): p 0.99 > 0.01" in failure


def test_learn_profile_with_too_few_steps_fails_saying_how_many_it_needs():
    config = SmokeConfig.for_profile("learn", steps=8)
    (failure,) = check(_summary(steps=8), config)
    assert failure == "need at least 10 steps to compare reward windows, got 8"


def test_verdict_lines():
    from training_smoke.__main__ import verdict_lines

    config = SmokeConfig.for_profile("learn", steps=10, sabotage="reward-sign")
    summary = _summary(steps=10, learning={"learned": True, "first_mean": 0.2, "last_mean": 0.6, "delta": 0.412, "p_value": 0.0021})
    summary.update(sabotage="reward-sign", wall_s={"total": 38.2}, server={"url": "http://127.0.0.1:8000", "env": "pick", "impl": "mock"})
    summary["verdicts"] = judge(summary, config)
    lines = verdict_lines(summary, [])
    assert lines[0] == "training_smoke: trained against http://127.0.0.1:8000 (env pick; server: mock)"
    assert lines[1].startswith("training_smoke: plumbing PASSED: GRPO ran through the served environment: ")
    assert lines[2] == "training_smoke: the policy learned (delta 0.41, p 0.0021) (under sabotage reward-sign)"
    assert lines[-1] == "training_smoke: passed (38 s)"
    summary["library_warnings"] = {"total": 12}
    assert verdict_lines(summary, ["x"])[-1] == (
        "training_smoke: FAILED (1 failure(s) above, 38 s); 12 library warnings folded into the JSON's library_warnings"
    )


# -- the gpu profile without a hub ----------------------------------------------------------------
def test_gpu_tiny_config_and_model_construction(tmp_path):
    from training_smoke import tiny

    config = SmokeConfig.for_profile("gpu", model="tiny", seed=3)
    assert config.tiny == GPU_TINY.__class__(**{**GPU_TINY.__dict__, "seed": 3})
    assert config.scenario == "pick" and config.learning_rate == SmokeConfig.for_profile("learn").learning_rate
    assert SmokeConfig.for_profile("gpu", model="tiny", learning_rate=1e-5, scenario="echo").learning_rate == 1e-5
    assert SmokeConfig.for_profile("gpu", model="some/local/path").tiny == tiny.TinyConfig(seed=0)

    corpus = ['<tool_call>\n{"name": "pick", "arguments": {"door": "green"}}\n</tool_call>', "Room north: one door wins."] * 8
    tokenizer = tiny.build_tokenizer(corpus, GPU_TINY)
    model = tiny.build_model(tokenizer, GPU_TINY)
    params = sum(p.numel() for p in model.parameters())
    assert model.config.model_type == "qwen3" and model.config.num_hidden_layers == 4
    assert 1_000_000 < params < 10_000_000, params
    small = tiny.build_model(tokenizer, tiny.TinyConfig())
    assert params > 10 * sum(p.numel() for p in small.parameters())


def test_gpu_grpo_args_use_vllm_colocate_when_installed(monkeypatch):
    from training_smoke import gpu

    monkeypatch.setattr(gpu, "vllm_available", lambda: True)
    kwargs = gpu.grpo_kwargs()
    assert kwargs["use_vllm"] is True and kwargs["vllm_mode"] == "colocate" and kwargs["bf16"] is True
    monkeypatch.setattr(gpu, "vllm_available", lambda: False)
    assert gpu.grpo_kwargs()["use_vllm"] is False


# -- --url: your own server ---------------------------------------------------------------------
def test_url_warmup_is_built_from_the_servers_prompts_and_schemas():
    from orsbench.servers.launch import serve
    from training_smoke import remote

    with serve("sparse-reward") as srv:
        server = remote.connect(srv.url, None)
        assert server.env_name == srv.env_name and server.counts_calls is False
        prompts, specs, total = remote.published(server, 3)
        assert total == 32 and len(prompts) == 3 and all("digits are hidden" in p for p in prompts)
        assert sorted(s["name"] for s in specs) == ["reveal", "submit"]
        episodes = remote.schema_episodes(prompts, specs, 40)
        with pytest.raises(remote.CannotScript, match="has no environment 'nope'"):
            remote.connect(srv.url, "nope")
        assert srv.stats()["active_sessions"] == 0, "the prompt sessions are closed"
    import jsonschema

    calls = [m["tool_calls"][0]["function"] for e in episodes for m in e if m.get("tool_calls")]
    assert {c["name"] for c in calls} == {"reveal", "submit"}
    schemas = {s["name"]: s["input_schema"] for s in specs}
    for call in calls:
        jsonschema.validate(call["arguments"], schemas[call["name"]])
    # the minimal input and variants carrying the prompt's numbers ("2 digits are hidden"), so some answers differ
    assert {"position": 0} in [c["arguments"] for c in calls]
    assert len({repr(c["arguments"]) for c in calls if c["name"] == "submit"}) > 1
    with pytest.raises(remote.CannotScript, match="no tool call can be scripted"):
        remote.schema_episodes(prompts, [], 4)


def test_prompt_seeds_put_quoted_words_first():
    from training_smoke.remote import prompt_seeds, quoted_seeds

    assert prompt_seeds("Echo 'falcon' to win. 3 digits.") == ["falcon", "Echo", "to", "win", 3, "digits"]
    assert quoted_seeds("""Say 'a b' or "c".""") == ["a b", "c"]


def test_url_cli_errors_are_clear(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "training_smoke", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )

    proc = run("--env", "echo")
    assert proc.returncode == 2 and "--env needs --url" in proc.stderr
    proc = run("--url", "http://127.0.0.1:9", "--output", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "cannot train against http://127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- one shared copy of GRPO's tool collection ------------------------------------------------------
def test_conformance_and_the_smoke_share_one_grpo_tool_collection():
    pytest.importorskip("trl")
    from conformance import adapter
    from orsbench.clients import grpo_tools
    from training_smoke import run

    assert adapter.grpo_tool_surface is grpo_tools.grpo_tool_surface
    assert run.grpo_tools is grpo_tools.grpo_tools

    class Env:
        def reset(self): ...
        def get_reward(self): ...
        def _close(self): ...
        def zeta(self): ...
        def alpha(self): ...

    env = Env()
    assert [f.__name__ for f in grpo_tools.grpo_tools(env)] == ["alpha", "zeta"]


# -- the learn profile, end to end (once, one seed) --------------------------------------------------
@pytest.mark.training_smoke
def test_learn_profile_learns_pick_through_openrewardspec(tmp_path):
    output = tmp_path / "learn.json"
    proc = subprocess.run(
        [sys.executable, "-m", "training_smoke", "--profile", "learn", "--seed", "0", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    summary = json.loads(output.read_text())
    learning = summary["learning"]
    assert summary["failures"] == [] and proc.returncode == 0, proc.stderr[-3000:]
    assert learning["learned"] is True and learning["p_value"] <= 0.01 and learning["delta"] >= 0.25
    assert all(math.isfinite(r) for r in summary["rewards"])
    assert Path(summary["plot"]).read_bytes()[:4] == b"\x89PNG"
    assert "training_smoke: the policy learned (delta " in proc.stderr, proc.stderr[-3000:]
    assert "All reward functions returned None" not in proc.stderr, "TRL's repeated warnings are folded"


@pytest.mark.parametrize("impl", ["mock", "sdk"])
def test_pick_is_served_by_the_mock_and_the_sdk_twin_and_passes_every_required_check(impl, ors_server_factory):
    from orsbench.checks import Options, Severity, Status, run_checks
    from orsbench.config import ServerConfig
    from orsbench.scenarios import get_scenario
    from orsbench.config import effective_config

    server = ors_server_factory("pick", impl=impl)
    config = effective_config(get_scenario("pick"), ServerConfig(), set())
    report = run_checks(server.url, Options(env=server.env_name, ping_interval=config.ping_interval))
    failed = [f"{r.id}: {r.message}" for r in report.results if r.status in (Status.FAIL, Status.ERROR)]
    assert report.ids(Status.FAIL, Severity.REQUIRED) == [] and report.ids(Status.ERROR) == [], failed
    assert "reward.well_formed" in report.ids(Status.PASS, Severity.REQUIRED)


@pytest.mark.training_smoke
@pytest.mark.slow  # a second full training run (45 s); the learn profile above proves learning in CI
def test_url_mode_trains_against_a_server_the_user_runs(tmp_path):
    """``--url``: the warm-up comes from the server's prompts and schemas; the calls the adapter counted all arrived."""
    from orsbench.servers.launch import serve

    output = tmp_path / "url.json"
    with serve("echo") as srv:
        before = srv.stats()
        proc = subprocess.run(
            [sys.executable, "-m", "training_smoke", "--url", srv.url, "--steps", "3", "--output", str(output)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        after = srv.stats()
    summary = json.loads(output.read_text())
    assert summary["env"] == "echo" and summary["server_counts_calls"] is False, proc.stderr[-3000:]
    received = sum(after["calls"].values()) - sum(before.get("calls", {}).values())
    rejected = sum(after.get("call_errors", {}).values()) - sum(before.get("call_errors", {}).values())
    assert summary["adapter_tool_calls"] > 0 and received + rejected == summary["adapter_tool_calls"], (received, summary)
    assert summary["steps"] == 3 and any(isinstance(r, float) and math.isfinite(r) for r in summary["rewards"])
    assert after["active_sessions"] == 0, "the smoke closed the sessions TRL left open"


@pytest.mark.gpu
def test_gpu_profile_with_the_self_made_model_learns_without_a_hub(tmp_path):
    """``--profile gpu --model tiny``: no download, vLLM colocate when installed; skips without CUDA (never run yet)."""
    from training_smoke.gpu import gpu_missing_reason

    reason = gpu_missing_reason()
    if reason:
        pytest.skip(f"the gpu training smoke needs CUDA: {reason}")
    output = tmp_path / "gpu-tiny.json"
    proc = subprocess.run(
        [sys.executable, "-m", "training_smoke", "--profile", "gpu", "--model", "tiny", "--require-gpu", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    summary = json.loads(output.read_text())
    assert summary["failures"] == [] and proc.returncode == 0, proc.stderr[-4000:]
    assert summary["policy"]["kind"] == "tiny" and summary["learning"]["learned"] is True
