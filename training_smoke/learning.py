"""Did the policy learn? A one-sided test on the server's per-rollout rewards, and a picture of them.

The evidence is the reward the *server* gave each rollout (read from the TRL
adapter's state after every step, before anything between OpenRewardSpec and
the trainer can touch it), not what the trainer logged: a client bug that
corrupts the trainer's reward must show up as a policy that does not improve
on the server's own scale.

Verdict: the rollout rewards of the last ``window`` steps against those of the
first ``window`` steps, Mann–Whitney U with the alternative "last is greater"
(``scipy.stats.mannwhitneyu``; ties — rewards are mostly 0/1 — are handled by
its normal approximation with tie correction). ``learned`` needs both a small
p-value and a mean gain of at least ``min_delta``: with hundreds of rollouts a
tiny drift can be "significant" without being learning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class LearningCriteria:
    """What counts as learned."""

    #: Steps at the start and at the end whose rollout rewards are compared.
    window: int = 10
    #: Largest one-sided p-value accepted.
    alpha: float = 0.01
    #: Smallest gain in mean rollout reward accepted.
    min_delta: float = 0.25


def rollout_values(rewards: list[Any]) -> list[float]:
    """Rollout rewards as numbers: a rollout that earned no reward (never called a rewarding tool) counts 0.0."""
    return [float(r) if isinstance(r, (int, float)) and math.isfinite(r) else 0.0 for r in rewards]


def verdict(per_step_rollouts: list[list[Any]], criteria: LearningCriteria) -> JSON:
    """``{"first_mean", "last_mean", "delta", "p_value", "learned", ...}`` for per-step rollout rewards."""
    from scipy.stats import mannwhitneyu

    k = criteria.window
    result: JSON = {"window_steps": k, "alpha": criteria.alpha, "min_delta": criteria.min_delta, "test": "mann-whitney-u, one-sided (last > first)"}
    if len(per_step_rollouts) < 2 * k:
        return {
            **result,
            "first_mean": None,
            "last_mean": None,
            "delta": None,
            "p_value": None,
            "learned": False,
            "reason": f"need at least {2 * k} steps to compare two windows of {k}, got {len(per_step_rollouts)}",
        }
    first = [v for step in per_step_rollouts[:k] for v in rollout_values(step)]
    last = [v for step in per_step_rollouts[-k:] for v in rollout_values(step)]
    first_mean, last_mean = sum(first) / len(first), sum(last) / len(last)
    delta = last_mean - first_mean
    if len(set(first + last)) == 1:
        p = 1.0  # every reward identical: no evidence of a difference (scipy would divide by zero)
    else:
        p = float(mannwhitneyu(last, first, alternative="greater").pvalue)
    learned = p <= criteria.alpha and delta >= criteria.min_delta
    result.update(
        first_mean=round(first_mean, 4),
        last_mean=round(last_mean, 4),
        delta=round(delta, 4),
        p_value=float(f"{p:.3g}"),
        learned=learned,
        rollouts_per_window=[len(first), len(last)],
    )
    if not learned:
        result["reason"] = (
            f"p {p:.3g} > {criteria.alpha:g}" if p > criteria.alpha else f"delta {delta:.3f} < {criteria.min_delta:g}"
        )
    return result


def plot_rewards(per_step_rollouts: list[list[Any]], path: Path, *, title: str, learning: JSON | None = None) -> Path:
    """A PNG reward curve: every rollout's server reward as a faint point, the per-step mean as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = range(1, len(per_step_rollouts) + 1)
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=100)
    for step, rewards in zip(steps, per_step_rollouts):
        values = rollout_values(rewards)
        # A small deterministic jitter so rollouts with equal rewards do not hide each other.
        jitter = [((i % 7) - 3) * 0.012 for i in range(len(values))]
        ax.scatter([step] * len(values), [v + j for v, j in zip(values, jitter)], s=6, alpha=0.25, color="tab:blue", linewidths=0)
    means = [sum(rollout_values(r)) / len(r) if r else 0.0 for r in per_step_rollouts]
    ax.plot(list(steps), means, color="tab:red", linewidth=1.6, label="mean reward per step")
    if learning and learning.get("first_mean") is not None:
        k = learning["window_steps"]
        n = len(per_step_rollouts)
        ax.hlines(learning["first_mean"], 1, k, colors="gray", linestyles="--", label=f"first/last {k} steps")
        ax.hlines(learning["last_mean"], n - k + 1, n, colors="gray", linestyles="--")
        verdict_text = "learned" if learning["learned"] else "did not learn"
        title = f"{title}\n{verdict_text}: delta {learning['delta']:+.2f}, p {learning['p_value']:.2g}"
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("server reward per rollout")
    ax.set_ylim(-0.08, 1.08) if all(0 <= v <= 1 for r in per_step_rollouts for v in rollout_values(r)) else None
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
