"""The verdict of a smoke run: the expectations a working chain meets, each failure in words.

A pure function of the run's JSON summary and its :class:`~training_smoke.config.SmokeConfig`,
so a summary saved from an earlier run can be judged again (and tested) without training.
"""

from __future__ import annotations

import math
from typing import Any

from orsbench.protocol import JSON
from training_smoke.config import SmokeConfig


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def check(summary: JSON, config: SmokeConfig) -> list[str]:
    """The failures that fail the run: the plumbing verdict's, and the learning verdict's where the profile
    judges learning (learn, gpu). Each says what was expected and what came."""
    verdicts = judge(summary, config)
    failures = list(verdicts["plumbing"]["failures"])
    if config.judges_learning:
        failures += verdicts["learning"]["failures"]
    return failures


def judge(summary: JSON, config: SmokeConfig) -> JSON:
    """The run's two verdicts: ``plumbing`` (GRPO ran through the environment) and ``learning`` (the policy learned).

    They are kept apart because they fail for different reasons: a correct environment whose tiny
    policy never earns a reward has working plumbing and nothing to learn from, and saying "FAILED"
    about it sent people looking for a bug in their server.
    """
    return {"plumbing": plumbing(summary, config), "learning": learned(summary, config)}


def _environment(summary: JSON) -> JSON | None:
    """What the adapters saw of the environment (sessions, tool answers, rewards), or None in an older summary."""
    env = summary.get("environment")
    return env if isinstance(env, dict) else None


def rewards_seen(env: JSON) -> str:
    """``rewards seen (3 null, 5 numbers)``: a null reward is counted as null, never shown as 0.00."""
    return f"rewards seen ({env['rewards_null']} null, {env['rewards_number']} numbers)"


def plumbing_line(summary: JSON) -> str:
    """``GRPO ran through your environment: N sessions, M tool calls, rewards seen (x null, y numbers)``."""
    env = _environment(summary)
    where = "your environment" if summary.get("url") else f"the {summary.get('scenario') or 'served'} environment"
    if env is None:
        return f"GRPO ran through {where}: {summary['tool_calls']} tool calls"
    errors = f" ({env['tool_call_errors']} answered with an error)" if env["tool_call_errors"] else ""
    return (
        f"GRPO ran through {where}: {env['sessions_opened']} sessions, {env['tool_calls']} tool calls{errors}, "
        f"{rewards_seen(env)}"
    )


def plumbing(summary: JSON, config: SmokeConfig) -> JSON:
    """Did GRPO run through the environment: sessions opened, tool calls answered, rewards back to the trainer?

    Passes on a correct environment whatever its rewards are (all null, all equal): what is judged is the
    chain, not the policy. Parameters must change only where some GRPO group had unequal rewards.
    """
    failures = []
    if summary["steps"] != config.steps:
        failures.append(f"expected {config.steps} logged training steps, got {summary['steps']}")
    env = _environment(summary)
    if env is not None and env["sessions_opened"] == 0:
        failures.append(f"no ORS session was opened ({env['session_errors']} attempts failed: {env['first_errors']})")
    if summary["tool_calls"] <= 0:
        failures.append(
            f"no tool call ran on the server (the trainer parsed {summary['trainer_tool_calls']}, of which "
            f"{summary['trainer_tool_failures']} failed before reaching the adapter, and the server rejected "
            f"{summary['tool_calls_rejected']}): the policy emits no valid tool call"
        )
    elif env is not None and env["tool_calls"] and env["tool_call_errors"] == env["tool_calls"]:
        failures.append(
            f"no tool call was answered: all {env['tool_calls']} ended in an error "
            f"(first: {'; '.join(env['first_errors']) or 'none recorded'}): the environment's tools never answer"
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
    numbers = env["rewards_number"] if env is not None else None
    if not any(_finite(r) for r in summary["rewards"]) and (numbers is None or numbers > 0):
        given = f" although the server gave {numbers} numeric rewards" if numbers else ""
        failures.append(f"every logged step reward is NaN/None{given}: {summary['rewards']}")
    if not any(_finite(l) for l in summary["losses"]):
        failures.append(f"no logged step has a finite loss: {summary['losses']}")
    zero_std = [s.get("frac_reward_zero_std") for s in summary.get("per_step", [])]
    some_variance = any(_learnable(s) for s in summary["per_step"]) if summary.get("per_step") else True
    if summary["parameters"]["tensors_changed"] == 0 and some_variance:
        failures.append(
            "no model parameter changed during GRPO although some group's rewards differed (the reward does not reach "
            f"the loss); frac_reward_zero_std per step: {zero_std}"
        )
    if summary["sessions"]["open_at_end"] not in (0, None):  # None: a foreign server, which reports no sessions
        failures.append(
            f"{summary['sessions']['open_at_end']} ORS session(s) still open on the server after training "
            f"and closing the {summary['sessions']['closed_by_smoke']} the adapters held"
        )
    return {"passed": not failures, "line": plumbing_line(summary), "failures": failures}


def _learnable(step: JSON) -> bool:
    """Whether a step gave GRPO something to learn from: some group's rewards differed.

    ``frac_reward_zero_std`` alone says too much: TRL turns a null reward into NaN, and a group with one
    0.0 and three nulls has a NaN spread, not a zero one, while its advantages are all zero. Where the
    server's rollout rewards are known, at least two different numbers must have come in the step too.
    """
    z = step.get("frac_reward_zero_std")
    if "rollout_rewards" in step:
        values = {r for r in step["rollout_rewards"] if _finite(r)}
        return len(values) >= 2 and not (_finite(z) and z >= 1.0)
    return not _finite(z) or z < 1.0


def steps_needed(config: SmokeConfig) -> int:
    """Steps the learning verdict needs: two windows of ``reward_window`` steps, the first and the last."""
    return 2 * config.reward_window


def learned(summary: JSON, config: SmokeConfig) -> JSON:
    """Did the policy learn? Judged only with enough steps (:func:`steps_needed`); otherwise says how many it needs.

    ``judged`` False is neither a pass nor a failure. Where a profile judges learning (learn, gpu), a
    failed verdict fails the run; on the cpu profile it is reported beside the plumbing verdict.
    """
    need = steps_needed(config)
    steps = summary["steps"]
    out: JSON = {"judged": False, "passed": None, "steps_needed": need, "failures": []}
    if steps < need:
        more = "" if config.profile != "cpu" else f", or --profile learn ({LEARN_HINT})"
        out["line"] = (
            f"learning not judged: it needs at least {need} steps (the first {config.reward_window} against the last "
            f"{config.reward_window}), this run had {steps}; run with --steps {need} or more{more}"
        )
        if config.judges_learning:  # these profiles promise a learning verdict: too few steps fails them
            out["failures"] = [f"need at least {need} steps to compare reward windows, got {steps}"]
        return out
    failures: list[str] = []
    if not any(_finite(r) for r in summary["rewards"]):
        failures.append(f"every logged step reward is NaN/None: {summary['rewards']}")
    else:
        failures.extend(_check_collapse(summary))
    if config.profile == "gpu":
        failures.extend(_check_learning(summary["rewards"], config.reward_window))
    verdict = summary.get("learning")
    # The gpu profile with a real model is judged by its mean rewards alone (_check_learning); the one-sided test
    # belongs to the tiny policies (cpu, learn, gpu --model tiny), whose thresholds were tuned for it.
    tested = config.profile != "gpu" or config.model == "tiny"
    if tested and verdict is not None and verdict.get("p_value") is not None and not verdict["learned"]:
        sabotage = f" (sabotage {config.sabotage}: expected)" if config.sabotage else ""
        failures.append(f"the policy did not learn{sabotage}: {verdict.get('reason')}; "
                        f"first {verdict['first_mean']}, last {verdict['last_mean']}, p {verdict['p_value']}")
    if summary.get("per_step") and not any(_learnable(s) for s in summary["per_step"]):
        failures.append("nothing to learn from: every GRPO group's rewards were equal in every step (zero variance)")
    out.update(judged=True, passed=not failures, failures=failures)
    if failures:
        out["line"] = "the policy did not learn: " + failures[0]
    elif verdict is not None and verdict.get("p_value") is not None:
        out["line"] = f"the policy learned (delta {verdict['delta']:.2f}, p {verdict['p_value']:.2g})"
    else:
        out["line"] = "the policy learned (the last steps' mean reward beats the first steps')"
    return out


#: Where the learn profile is described (the cpu profile's hint when it has too few steps).
LEARN_HINT = "50 steps on the pick scenario"


#: Below this fraction of rollouts calling a tool (over the trailing quarter of the steps), tool calls "stopped".
COLLAPSE_CALL_RATE = 0.1


def _check_collapse(summary: JSON) -> list[str]:
    """A run that collapsed: most steps logged no reward, or the policy stopped calling tools for good.

    Both happen with a learning rate that is too high: the policy unlearns the
    tool-call format, so its rollouts earn no reward and GRPO (which gives an
    unscorable rollout zero advantage) has nothing left to learn from, while
    the run still "completes".
    """
    failures = []
    rewards = summary["rewards"]
    missing = sum(not _finite(r) for r in rewards)
    if missing * 2 > len(rewards):
        failures.append(f"collapse: {missing} of {len(rewards)} steps logged no reward (the policy stopped earning any)")
    calls = [s.get("adapter_tool_calls") or 0 for s in summary.get("per_step", [])]
    tail = max(2, len(calls) // 4)
    rollouts = summary.get("rollouts_per_step") or 1
    tail_rate = sum(calls[-tail:]) / (tail * rollouts) if calls else 0.0
    if len(calls) >= 2 * tail and any(calls) and tail_rate < COLLAPSE_CALL_RATE:
        failures.append(
            f"collapse: tool calls stopped: {sum(calls[-tail:])} calls in the last {tail} steps' {tail * rollouts} rollouts "
            f"(< {COLLAPSE_CALL_RATE:.0%}; {sum(calls[:tail])} in the first {tail} steps)"
        )
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
