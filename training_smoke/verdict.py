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
    else:
        failures.extend(_check_collapse(summary))
    if not any(_finite(l) for l in summary["losses"]):
        failures.append(f"no logged step has a finite loss: {summary['losses']}")
    if summary["parameters"]["tensors_changed"] == 0:
        failures.append(
            "no model parameter changed during GRPO (every group had zero reward variance?); "
            f"frac_reward_zero_std per step: {[s['frac_reward_zero_std'] for s in summary['per_step']]}"
        )
    if summary["sessions"]["open_at_end"] not in (0, None):  # None: a foreign server, which reports no sessions
        failures.append(
            f"{summary['sessions']['open_at_end']} ORS session(s) still open on the server after training "
            f"and closing the {summary['sessions']['closed_by_smoke']} the adapters held"
        )
    if config.profile == "gpu":
        failures.extend(_check_learning(summary["rewards"], config.reward_window))
    verdict = summary.get("learning")
    judged = config.profile == "learn" or (config.profile == "gpu" and config.model == "tiny")
    if judged and verdict is not None and not verdict["learned"]:
        sabotage = f" (sabotage {config.sabotage}: expected)" if config.sabotage else ""
        failures.append(f"the policy did not learn{sabotage}: {verdict.get('reason')}; "
                        f"first {verdict['first_mean']}, last {verdict['last_mean']}, p {verdict['p_value']}")
    return failures


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
