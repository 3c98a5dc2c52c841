"""One GRPO run through ``OpenRewardSpec`` against a served scenario: the training loop and its evidence.

Its configuration is :mod:`training_smoke.config`; its verdicts, :func:`training_smoke.verdict.judge`.

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
* the run did not collapse: most steps logged a reward, and the policy did not
  stop calling tools for good (the trailing quarter of the steps);
* on the GPU profile, the mean reward of the last steps beats the first steps';
* on the ``learn`` profile, the server's rollout rewards of the last steps beat
  the first steps' by a one-sided test (:mod:`training_smoke.learning`); with
  ``sabotage`` set, a client bug sits between OpenRewardSpec and the trainer
  (:mod:`training_smoke.sabotage`) and the same verdict must come out false.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orsbench.protocol import JSON
from orsbench.clients.grpo_tools import grpo_tools
from training_smoke import learning, stop
from training_smoke.config import QUIET_ENV, SmokeConfig
from training_smoke.sabotage import sabotaged
from training_smoke.verdict import check, judge, steps_needed

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


#: Error messages kept per run (the first ones, each its first line): the evidence a failed verdict quotes.
FIRST_ERRORS = 3


class Ledger:
    """What the adapters saw of the environment: sessions opened, tool calls answered or failed, rewards.

    Read from inside the TRL adapter's own calls (:class:`TrackedFactory` wraps each instance's session),
    so it tells a tool that answered with a null reward from one that raised, which the adapter's own
    state (``rewards``: ``None`` for both) cannot.
    """

    def __init__(self) -> None:
        self.sessions_opened = 0
        self.session_errors = 0
        self.tool_calls = 0
        self.tool_call_errors = 0
        self.rewards_null = 0
        self.rewards_number = 0
        self.first_errors: list[str] = []

    def error(self, exc: BaseException) -> None:
        if len(self.first_errors) < FIRST_ERRORS:
            self.first_errors.append(_first_line(f"{type(exc).__name__}: {exc}"))

    def as_dict(self) -> JSON:
        return {
            "sessions_opened": self.sessions_opened,
            "session_errors": self.session_errors,
            "tool_calls": self.tool_calls,
            "tool_call_errors": self.tool_call_errors,
            "rewards_null": self.rewards_null,
            "rewards_number": self.rewards_number,
            "first_errors": list(self.first_errors),
        }


class TrackedFactory:
    """Wraps ``spec.environment_factory`` to remember every instance it hands to the trainer.

    The instances are needed afterwards: to read each rollout's state at the end
    of a step, and to close the sessions TRL leaves open. Each instance's ``reset`` and its
    session's ``call_tool`` are wrapped to keep the :class:`Ledger`.
    """

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.instances: list[Any] = []
        self.ledger = Ledger()

    def __call__(self) -> Any:
        instance = self.factory()
        self.instances.append(instance)
        self._watch(instance)
        return instance

    def _watch(self, instance: Any) -> None:
        ledger = self.ledger
        reset = instance.reset

        def call_tool(original: Any, *args: Any, **kwargs: Any) -> Any:
            ledger.tool_calls += 1
            try:
                out = original(*args, **kwargs)
            except BaseException as exc:
                ledger.tool_call_errors += 1
                ledger.error(exc)
                raise
            if isinstance(getattr(out, "reward", None), (int, float)) and not isinstance(out.reward, bool):
                ledger.rewards_number += 1
            else:
                ledger.rewards_null += 1
            return out

        def watched_reset(*args: Any, **kwargs: Any) -> Any:
            try:
                prompt = reset(*args, **kwargs)
            except BaseException as exc:
                ledger.session_errors += 1
                ledger.error(exc)
                raise
            ledger.sessions_opened += 1
            session = getattr(instance, "_session", None)
            original = getattr(session, "call_tool", None)
            if original is not None:
                with contextlib.suppress(AttributeError, TypeError):  # a session object that takes no attributes
                    session.call_tool = functools.partial(call_tool, original)
            return prompt

        instance.reset = watched_reset  # an instance attribute: GRPOTrainer reads tools from the class

    def close_all(self) -> int:
        """Close every open session; return how many were open."""
        open_ = [i for i in self.instances if getattr(i, "_session", None) is not None]
        for instance in open_:
            instance._close()
        return len(open_)


def mean_reward_text(rewards: list[Any]) -> str:
    """A step's server rewards in words: ``mean 0.25 over 6 (2 null)``; never a null shown as 0.00."""
    numbers = [r for r in rewards if isinstance(r, (int, float)) and not isinstance(r, bool)]
    nulls = len(rewards) - len(numbers)
    if not numbers:
        return f"no reward ({nulls} null)" if nulls else "no rollout"
    tail = f" ({nulls} null)" if nulls else ""
    return f"mean server reward {sum(numbers) / len(numbers):.2f} over {len(numbers)}{tail}"


def _step_recorder(tracked: TrackedFactory, records: list[JSON], total_steps: int):
    """A TrainerCallback that snapshots every rollout's adapter state when a step ends.

    With ``steps_per_generation == 1`` each optimizer step trains on the rollouts
    generated for it, and the pool's instances still hold those rollouts' state
    (the next batch's ``reset`` has not run yet).
    """
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stop.raise_if_stopped()  # a SIGTERM whose first raise a finalizer swallowed
            envs = tracked.instances
            records.append(
                {
                    "step": state.global_step,
                    "adapter_tool_calls": sum(len(e.rewards) for e in envs),
                    "rollout_rewards": [e.reward for e in envs],
                    "finished": sum(bool(e.finished) for e in envs),
                }
            )
            every = max(1, total_steps // 10)
            if state.global_step % every == 0 or state.global_step == total_steps:
                print(
                    f"training_smoke: step {state.global_step}/{total_steps}: "
                    f"{mean_reward_text(records[-1]['rollout_rewards'])}, {records[-1]['adapter_tool_calls']} tool calls",
                    file=sys.stderr,
                    flush=True,
                )

    return StepRecorder()


# -- policies ---------------------------------------------------------------------
def local_scenario(config: SmokeConfig) -> tuple[Any, list[JSON]]:
    """An in-process copy of the served scenario and the training tasks (at most ``num_tasks``)."""
    from orsbench.scenarios import get_scenario

    scenario = get_scenario(config.scenario, **config.params)
    return scenario, scenario.list_tasks("train")[: config.num_tasks]


def warmup_episodes(config: SmokeConfig, srv: Any) -> list[list[JSON]]:
    """Scripted episodes: from the scenario's own code, or from a foreign server's prompts and tool schemas."""
    from training_smoke import remote, warmup

    if config.url is None:
        scenario, tasks = local_scenario(config)
        return warmup.scripted_episodes(scenario, tasks, config.warmup)
    prompts, tool_specs, _ = remote.published(srv, config.num_tasks)
    return remote.schema_episodes(prompts, tool_specs, config.warmup.episodes, seed=config.warmup.seed)


def tiny_policy(config: SmokeConfig, tools: list, episodes: list[list[JSON]]) -> tuple[Any, Any, JSON]:
    """Build (or load from cache) the tiny model and warm it up on ``episodes`` (the tool-call format)."""
    from trl.chat_template_utils import get_training_chat_template

    from training_smoke import tiny, warmup

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


def policy_for(config: SmokeConfig, tools: list, srv: Any) -> tuple[Any, Any, JSON]:
    if config.profile != "gpu" or config.model == "tiny":
        # cpu and learn profiles, and `--profile gpu --model tiny`: built here, no model hub.
        return tiny_policy(config, tools, warmup_episodes(config, srv))
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
        **{**profile, **config.grpo_extra},
    )


# -- the run ------------------------------------------------------------------------
def run_smoke(config: SmokeConfig) -> tuple[JSON, list[str]]:
    """Serve the scenario, train, and return ``(summary, failed expectations)``."""
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import serve

    with patched_environ(QUIET_ENV):
        _quiet_libraries()
        if config.torch_threads:
            import torch

            torch.set_num_threads(config.torch_threads)
        started = time.perf_counter()
        if config.url is not None:
            from training_smoke import remote

            server = contextlib.nullcontext(remote.connect(config.url, config.env))
        else:
            server = serve(config.scenario, impl=config.server_impl, config=ServerConfig(), params=dict(config.params))
        with server as srv:
            server_s = time.perf_counter() - started
            with patched_environ(srv.env()), folded_library_noise() as noise:
                summary = _train(config, srv)
            summary["library_warnings"] = {"total": sum(noise.values()), "by_message": dict(noise.most_common())}
        summary["wall_s"] = {
            "total": round(time.perf_counter() - started, 2),
            "server_start": round(server_s, 2),
            **summary["wall_s"],
        }
    if config.judges_learning or summary["steps"] >= steps_needed(config):
        summary["learning"] = learning.verdict([s["rollout_rewards"] for s in summary["per_step"]], config.criteria)
    if config.plot is not None:
        title = f"{config.scenario}, {config.profile} profile, seed {config.seed}" + (
            f", sabotage {config.sabotage}" if config.sabotage else ""
        )
        rollouts = [s["rollout_rewards"] for s in summary["per_step"]]
        summary["plot"] = str(learning.plot_rewards(rollouts, config.plot, title=title, learning=summary.get("learning")))
    failures = check(summary, config)
    summary["verdicts"] = judge(summary, config)
    summary["passed"] = not failures
    summary["failures"] = failures
    return summary, failures


def _train(config: SmokeConfig, srv: Any) -> JSON:
    from transformers import set_seed
    from trl.experimental.openreward import OpenRewardSpec

    set_seed(config.seed)
    if config.url is None:
        num_tasks = len(local_scenario(config)[1])
    else:
        from training_smoke import remote

        num_tasks = min(config.num_tasks, remote.published(srv, 0)[2])
    spec = OpenRewardSpec(srv.url, env_name=srv.env_name, indices=list(range(num_tasks)))
    tracked = TrackedFactory(spec.environment_factory)
    tools = grpo_tools(spec.environment_factory())  # a spare instance: never reset, so it opens no session

    t = time.perf_counter()
    model, tokenizer, policy = policy_for(config, tools, srv)
    policy_s = time.perf_counter() - t
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    stats_before = srv.stats()
    t = time.perf_counter()
    trainer_rewards: list[list[float | None]] = []
    reward_func = sabotaged(spec.reward_funcs, config.sabotage, trainer_rewards)
    log_history, records = _grpo(config, spec, tracked, model, tokenizer, reward_func)
    train_s = time.perf_counter() - t
    stats_after = srv.stats()
    closed = tracked.close_all()
    stats_end = _settled_stats(srv)

    deltas = {n: (p.detach().float().cpu() - before[n].float().cpu()).abs().max().item() for n, p in model.named_parameters()}
    steps = _steps(log_history, records, config.rollouts_per_step)
    for step, seen in zip(steps, trainer_rewards):
        step["trainer_rollout_rewards"] = seen
    server_calls = _diff(stats_after.get("calls", {}), stats_before.get("calls", {}))
    server_errors = _diff(stats_after.get("call_errors", {}), stats_before.get("call_errors", {}))
    counted = getattr(srv, "counts_calls", True)
    if not counted:
        # A foreign server keeps no counters orsbench can read: what the adapter forwarded stands in for them.
        adapter_calls = sum(s["adapter_tool_calls"] for s in steps)
        server_calls, server_errors = {"(all tools, as forwarded by the adapter)": adapter_calls} if adapter_calls else {}, {}
    return {
        "scenario": config.scenario if config.url is None else None,
        "url": config.url,
        "env": srv.env_name,
        "server_counts_calls": counted,
        "profile": config.profile,
        # What it trained against, by its address: the user's own server, or the one orsbench served.
        "server": {"url": srv.url, "env": srv.env_name, "impl": "yours (not started by orsbench)" if config.url else config.server_impl},
        "server_impl": None if config.url is not None else config.server_impl,
        "policy": policy,
        "device": str(model.device),
        "steps": len(steps),
        "rollouts_per_step": config.rollouts_per_step,
        "num_generations": config.num_generations,
        "tools_bound": [t.__name__ for t in tools],
        "adapter_instances": len(tracked.instances),
        "environment": tracked.ledger.as_dict(),
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
        "sabotage": config.sabotage,
        "wall_s": {"policy": round(policy_s, 2), "train": round(train_s, 2)},
        "peak_rss_mb": _peak_rss_mb(),
    }


def _grpo(
    config: SmokeConfig, spec: Any, tracked: TrackedFactory, model: Any, tokenizer: Any, reward_func: Any
) -> tuple[list[JSON], list[JSON]]:
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
            reward_funcs=reward_func,
            callbacks=[_step_recorder(tracked, records, config.steps)],
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


#: Loggers whose repeated warnings are folded into a count (TRL logs one per unscorable rollout, kwargs and all).
NOISY_LOGGERS = ("trl", "accelerate")


def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0][:160] if lines else ""


@contextlib.contextmanager
def folded_library_noise() -> Iterator[Counter]:
    """Collect Python warnings and TRL/accelerate log warnings instead of printing them; yield their counts.

    Keys are ``"Category: first line of the message"``. TRL warns once per
    step with an unscorable rollout and prints the rollout's whole kwargs, which
    buries a run's output; the summary keeps the count and the first line.
    """
    import logging

    counts: Counter = Counter()

    class _Counting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            counts[f"{record.levelname} {record.name}: {_first_line(record.getMessage())}"] += 1

    handler = _Counting(logging.WARNING)
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    saved = [(lg.handlers[:], lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.handlers = [handler]
        lg.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield counts
    finally:
        for lg, (handlers, propagate) in zip(loggers, saved):
            lg.handlers, lg.propagate = handlers, propagate
        counts.update(f"{w.category.__name__}: {_first_line(str(w.message))}" for w in caught)


def _quiet_libraries() -> None:
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
