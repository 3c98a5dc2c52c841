"""One GRPO run through ``OpenRewardSpec`` against a served scenario, with its evidence and verdict.

:func:`run_smoke` starts the scenario's server, builds the spec, prepares a
policy (the tiny warmed-up model on the CPU profile, a real instruct model on
the GPU profile), trains with ``GRPOTrainer`` and returns a JSON-able summary
plus the list of expectations that failed (empty when the chain works):

* tool calls reached the server and ran there; the calls the server received
  (executed plus rejected) equal the calls the TRL adapter forwarded, which
  equal the trainer's own count less the calls that failed before leaving it;
* the rewards GRPO logged are real numbers, not all NaN;
* the policy's parameters changed;
* no ORS session is left open once training is over (TRL never closes the last
  batch's sessions, so the smoke closes them and reports how many it closed);
* on the GPU profile, the mean reward of the last steps beats the first steps'.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbench import protocol
from orsbench.protocol import JSON
from training_smoke.tiny import TinyConfig
from training_smoke.warmup import WarmupConfig


PROFILES = ("cpu", "gpu")
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "orsbench-training-smoke"
#: Environment every run needs: offline hub, quiet SDK and TRL.
QUIET_ENV = {
    protocol.ENV_DISABLE_UPDATE_CHECK: "1",
    "HF_HUB_OFFLINE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class SmokeConfig:
    """Everything one smoke run depends on. ``for_profile`` fills in the profile's defaults."""

    scenario: str = "echo"
    profile: str = "cpu"
    steps: int = 3
    num_generations: int = 4
    prompts_per_step: int = 2
    #: Train on the first ``num_tasks`` tasks of the split (all probed for task-scoped tools).
    num_tasks: int = 4
    max_completion_length: int = 128
    max_tool_calling_iterations: int = 4
    learning_rate: float = 1e-4
    temperature: float = 1.0
    seed: int = 0
    #: GPU profile: a local path or a hub name already in the local cache.
    model: str | None = None
    #: GPU profile: the number of first and last steps whose mean rewards are compared.
    reward_window: int = 5
    #: ``"mock"`` (orsbench's engine) or any other implementation ``orsbench.servers.launch`` knows.
    server_impl: str = "mock"
    #: Scenario parameters, passed to the server (and to the in-process copy the warm-up uses).
    params: dict[str, Any] = field(default_factory=dict)
    tiny: TinyConfig = field(default_factory=TinyConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    #: Where built tiny models and warm-up checkpoints are kept; ``None`` builds afresh in a temporary directory.
    cache_dir: Path | None = DEFAULT_CACHE_DIR

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any) -> SmokeConfig:
        """The defaults of ``profile`` with ``overrides`` (``None`` values mean "keep the default")."""
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        defaults: JSON = {"profile": profile}
        if profile == "gpu":
            defaults.update(
                steps=40,
                num_generations=8,
                prompts_per_step=4,
                num_tasks=48,
                max_completion_length=256,
                max_tool_calling_iterations=3,
                learning_rate=5e-6,
            )
        defaults.update({k: v for k, v in overrides.items() if v is not None})
        seed = defaults.get("seed", cls.seed)
        defaults.setdefault("tiny", TinyConfig(seed=seed))
        defaults.setdefault("warmup", WarmupConfig(seed=seed))
        return cls(**defaults)

    @property
    def rollouts_per_step(self) -> int:
        return self.num_generations * self.prompts_per_step


# -- server and environment plumbing ---------------------------------------------
@contextlib.contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def env_tools(instance: Any) -> list:
    """The tools GRPOTrainer exposes for an environment instance, in its order.

    Mirrors ``GRPOTrainer.__init__``: public functions of the instance's class,
    minus ``reset`` and ``get_reward``, sorted by name (``inspect.getmembers``).
    """
    import inspect

    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


class TrackedFactory:
    """Wraps ``spec.environment_factory`` to remember every instance it hands to the trainer.

    The instances are needed afterwards: to read each rollout's state at the end
    of a step, and to close the sessions TRL leaves open.
    """

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.instances: list[Any] = []

    def __call__(self) -> Any:
        instance = self.factory()
        self.instances.append(instance)
        return instance

    def close_all(self) -> int:
        """Close every open session; return how many were open."""
        open_ = [i for i in self.instances if getattr(i, "_session", None) is not None]
        for instance in open_:
            instance._close()
        return len(open_)


def _step_recorder(tracked: TrackedFactory, records: list[JSON]):
    """A TrainerCallback that snapshots every rollout's adapter state when a step ends.

    With ``steps_per_generation == 1`` each optimizer step trains on the rollouts
    generated for it, and the pool's instances still hold those rollouts' state
    (the next batch's ``reset`` has not run yet).
    """
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            envs = tracked.instances
            records.append(
                {
                    "step": state.global_step,
                    "adapter_tool_calls": sum(len(e.rewards) for e in envs),
                    "rollout_rewards": [e.reward for e in envs],
                    "finished": sum(bool(e.finished) for e in envs),
                }
            )

    return StepRecorder()


# -- policies ---------------------------------------------------------------------
def local_scenario(config: SmokeConfig) -> tuple[Any, list[JSON]]:
    """An in-process copy of the served scenario and the training tasks (at most ``num_tasks``)."""
    from orsbench.scenarios import get_scenario

    scenario = get_scenario(config.scenario, **config.params)
    return scenario, scenario.list_tasks("train")[: config.num_tasks]


def tiny_policy(config: SmokeConfig, tools: list) -> tuple[Any, Any, JSON]:
    """Build (or load from cache) the tiny model and warm it up on the scenario's tool-call format."""
    from trl.chat_template_utils import get_training_chat_template

    from training_smoke import tiny, warmup

    scenario, tasks = local_scenario(config)
    episodes = warmup.scripted_episodes(scenario, tasks, config.warmup)
    corpus = tiny.render_corpus({"messages": m, "tools": tools} for m in episodes)
    with contextlib.ExitStack() as stack:
        cache_dir = Path(config.cache_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="orsbench-smoke-")))
        base = tiny.ensure_tiny(corpus, config.tiny, cache_dir)
        _, tokenizer = tiny.load(base)
        encoded = warmup.encode(tokenizer, episodes, tools, get_training_chat_template(tokenizer))
        result = warmup.warm_up(base, encoded, config.warmup, cache_dir)
        model, tokenizer = tiny.load(result.path)
    info = {"kind": "tiny", "parameters": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer)}
    info["warmup"] = {"steps": config.warmup.steps, "episodes": len(episodes), **result.summary()}
    return model, tokenizer, info


def policy_for(config: SmokeConfig, tools: list) -> tuple[Any, Any, JSON]:
    if config.profile == "cpu":
        return tiny_policy(config, tools)
    from training_smoke.gpu import pretrained_policy

    if not config.model:
        raise ValueError("the gpu profile needs a model: a local path or a hub name in the local cache")
    return pretrained_policy(config.model)


def grpo_args(config: SmokeConfig, output_dir: str):
    """GRPOConfig for the profile: CPU and fp32 with plain ``generate``, or bf16 on GPU with vLLM colocate if present."""
    from trl import GRPOConfig

    from training_smoke import gpu

    profile: JSON = gpu.grpo_kwargs() if config.profile == "gpu" else {"bf16": False, "use_cpu": True, "use_vllm": False}
    return GRPOConfig(
        output_dir=output_dir,
        max_steps=config.steps,
        per_device_train_batch_size=config.rollouts_per_step,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
        # Qwen3 templates: put the empty think block in the prompt, so completions start with the tool call.
        chat_template_kwargs={"enable_thinking": False},
        learning_rate=config.learning_rate,
        temperature=config.temperature,
        seed=config.seed,
        data_seed=config.seed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        **profile,
    )


# -- the run ------------------------------------------------------------------------
def run_smoke(config: SmokeConfig) -> tuple[JSON, list[str]]:
    """Serve the scenario, train, and return ``(summary, failed expectations)``."""
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import serve

    with patched_environ(QUIET_ENV):
        _quiet_libraries()
        started = time.perf_counter()
        with serve(config.scenario, impl=config.server_impl, config=ServerConfig(), params=dict(config.params)) as srv:
            server_s = time.perf_counter() - started
            with patched_environ(srv.env()):
                summary = _train(config, srv)
        summary["wall_s"] = {
            "total": round(time.perf_counter() - started, 2),
            "server_start": round(server_s, 2),
            **summary["wall_s"],
        }
    failures = check(summary, config)
    summary["passed"] = not failures
    summary["failures"] = failures
    return summary, failures


def _train(config: SmokeConfig, srv: Any) -> JSON:
    from transformers import set_seed
    from trl.experimental.openreward import OpenRewardSpec

    set_seed(config.seed)
    _, tasks = local_scenario(config)
    spec = OpenRewardSpec(srv.url, env_name=srv.env_name, indices=list(range(len(tasks))))
    tracked = TrackedFactory(spec.environment_factory)
    tools = env_tools(spec.environment_factory())  # a spare instance: never reset, so it opens no session

    t = time.perf_counter()
    model, tokenizer, policy = policy_for(config, tools)
    policy_s = time.perf_counter() - t
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    stats_before = srv.stats()
    t = time.perf_counter()
    log_history, records = _grpo(config, spec, tracked, model, tokenizer)
    train_s = time.perf_counter() - t
    stats_after = srv.stats()
    closed = tracked.close_all()
    stats_end = _settled_stats(srv)

    deltas = {n: (p.detach().float().cpu() - before[n].float().cpu()).abs().max().item() for n, p in model.named_parameters()}
    steps = _steps(log_history, records, config.rollouts_per_step)
    server_calls = _diff(stats_after.get("calls", {}), stats_before.get("calls", {}))
    server_errors = _diff(stats_after.get("call_errors", {}), stats_before.get("call_errors", {}))
    return {
        "scenario": config.scenario,
        "profile": config.profile,
        "server_impl": config.server_impl,
        "policy": policy,
        "device": str(model.device),
        "steps": len(steps),
        "rollouts_per_step": config.rollouts_per_step,
        "num_generations": config.num_generations,
        "tools_bound": [t.__name__ for t in tools],
        "adapter_instances": len(tracked.instances),
        "tool_calls": sum(server_calls.values()),
        "tool_calls_by_name": server_calls,
        "tool_calls_rejected": sum(server_errors.values()),
        "tool_calls_rejected_by_name": server_errors,
        "adapter_tool_calls": sum(s["adapter_tool_calls"] for s in steps),
        "trainer_tool_calls": sum(s["trainer_tool_calls"] for s in steps),
        "trainer_tool_failures": sum(s["trainer_tool_failures"] for s in steps),
        "rewards": [s["reward"] for s in steps],
        "losses": [s["loss"] for s in steps],
        "per_step": steps,
        "parameters": {
            "tensors_changed": sum(d > 0 for d in deltas.values()),
            "tensors_total": len(deltas),
            "max_abs_delta": max(deltas.values(), default=0.0),
        },
        "sessions": {
            "created_during_training": stats_after.get("sessions_created", 0) - stats_before.get("sessions_created", 0),
            "open_after_training": stats_after.get("active_sessions"),
            "closed_by_smoke": closed,
            "open_at_end": stats_end.get("active_sessions"),
        },
        "wall_s": {"policy": round(policy_s, 2), "train": round(train_s, 2)},
        "peak_rss_mb": _peak_rss_mb(),
    }


def _grpo(config: SmokeConfig, spec: Any, tracked: TrackedFactory, model: Any, tokenizer: Any) -> tuple[list[JSON], list[JSON]]:
    """Train with GRPOTrainer on the spec's dataset, factory and reward; return its log history and step records."""
    from trl import GRPOTrainer

    records: list[JSON] = []
    with tempfile.TemporaryDirectory(prefix="orsbench-grpo-") as output_dir:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=grpo_args(config, output_dir),
            train_dataset=spec.train_dataset,
            environment_factory=tracked,
            reward_funcs=spec.reward_funcs,
            callbacks=[_step_recorder(tracked, records)],
        )
        trainer.train()
    return list(trainer.state.log_history), records


def _steps(log_history: list[JSON], records: list[JSON], rollouts: int) -> list[JSON]:
    """Join the trainer's per-step logs with the recorder's snapshots."""
    by_step = {r["step"]: r for r in records}
    steps = []
    for entry in log_history:
        if "loss" not in entry or "step" not in entry:
            continue  # the closing summary entry (train_runtime, ...) has no per-step loss
        calls = round((entry.get("tools/call_frequency") or 0.0) * rollouts)
        failures = round((entry.get("tools/failure_frequency") or 0.0) * calls)
        record = by_step.get(entry["step"], {})
        steps.append(
            {
                "step": entry["step"],
                "loss": entry.get("loss"),
                "reward": entry.get("reward"),
                "reward_std": entry.get("reward_std"),
                "frac_reward_zero_std": entry.get("frac_reward_zero_std"),
                "trainer_tool_calls": calls,
                "trainer_tool_failures": failures,
                "adapter_tool_calls": record.get("adapter_tool_calls", 0),
                "rollout_rewards": record.get("rollout_rewards", []),
                "finished": record.get("finished", 0),
            }
        )
    return steps


def _diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] - before.get(k, 0)}


def _settled_stats(srv: Any, timeout: float = 2.0) -> JSON:
    """Server stats once no session is open, or after ``timeout`` seconds (deletes may land a beat late)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = srv.stats()
        if not stats.get("active_sessions") or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def _peak_rss_mb() -> float:
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def _quiet_libraries() -> None:
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


# -- the verdict ----------------------------------------------------------------------
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def check(summary: JSON, config: SmokeConfig) -> list[str]:
    """The expectations a working chain meets; each failure says what was expected and what came."""
    failures = []
    if summary["steps"] != config.steps:
        failures.append(f"expected {config.steps} logged training steps, got {summary['steps']}")
    if summary["tool_calls"] <= 0:
        failures.append(
            f"no tool call ran on the server (the trainer parsed {summary['trainer_tool_calls']}, of which "
            f"{summary['trainer_tool_failures']} failed before reaching the adapter, and the server rejected "
            f"{summary['tool_calls_rejected']}): the policy emits no valid tool call"
        )
    received = summary["tool_calls"] + summary["tool_calls_rejected"]
    if received != summary["adapter_tool_calls"]:
        failures.append(
            f"the server received {received} tool calls ({summary['tool_calls']} executed, "
            f"{summary['tool_calls_rejected']} rejected) but the TRL adapter forwarded {summary['adapter_tool_calls']}"
        )
    local = summary["trainer_tool_calls"] - summary["trainer_tool_failures"]
    if local != summary["adapter_tool_calls"]:
        failures.append(
            f"the trainer logged {summary['trainer_tool_calls']} tool calls with "
            f"{summary['trainer_tool_failures']} local failures ({local} dispatched) but the adapter forwarded "
            f"{summary['adapter_tool_calls']}"
        )
    if not any(_finite(r) for r in summary["rewards"]):
        failures.append(f"every logged step reward is NaN/None: {summary['rewards']}")
    if not any(_finite(l) for l in summary["losses"]):
        failures.append(f"no logged step has a finite loss: {summary['losses']}")
    if summary["parameters"]["tensors_changed"] == 0:
        failures.append(
            "no model parameter changed during GRPO (every group had zero reward variance?); "
            f"frac_reward_zero_std per step: {[s['frac_reward_zero_std'] for s in summary['per_step']]}"
        )
    if summary["sessions"]["open_at_end"] != 0:
        failures.append(
            f"{summary['sessions']['open_at_end']} ORS session(s) still open on the server after training "
            f"and closing the {summary['sessions']['closed_by_smoke']} the adapters held"
        )
    if config.profile == "gpu":
        failures.extend(_check_learning(summary["rewards"], config.reward_window))
    return failures


def _check_learning(rewards: list[Any], window: int) -> list[str]:
    # A step where no rollout earned a reward (no tool call at all) counts as 0: on echo that is a loss.
    values = [r if _finite(r) else 0.0 for r in rewards]
    if len(values) < 2 * window:
        return [f"need at least {2 * window} steps to compare reward windows, got {len(values)}"]
    first = sum(values[:window]) / window
    last = sum(values[-window:]) / window
    if last > first:
        return []
    note = " (already saturated at the start: pick a harder scenario or a weaker model)" if first >= 0.95 else ""
    return [f"mean reward of the last {window} steps ({last:.3f}) does not exceed the first {window} ({first:.3f}){note}"]
