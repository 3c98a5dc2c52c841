"""sparse-reward: multi-step episodes where only ``submit`` is rewarded.

The task hides a short list of digits. ``reveal(position)`` shows one digit
(reward ``null``); ``submit(total)`` ends the episode with reward 1 for the
right sum, 0 when off by one, -1 otherwise. An episode that never submits has
no reward at all, and any call after ``submit`` is refused with
``episode_finished``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool


class RevealParams(BaseModel):
    position: int = Field(ge=0, description="Zero-based position of the digit to reveal.")


class SubmitParams(BaseModel):
    total: int = Field(description="Sum of all hidden digits.")


class SparseTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    length: int = Field(ge=1, le=64)
    seed: int = Field(ge=0, le=2**31)


def digits(task: JSON) -> list[int]:
    """The hidden digits of a task, derived from its seed (never sent to clients)."""
    seed = int(task["seed"])
    return [(seed * 7 + k * 3 + 1) % 10 for k in range(int(task["length"]))]


@register
class SparseReward(Scenario):
    name = "sparse-reward"
    task_model = SparseTask
    summary = "reveal(position) returns reward null; only submit(total) is rewarded (-1 / 0 / 1) and finishes"
    params_help = {"train_size": (32, "tasks in the train split"), "test_size": (8, "tasks in the test split")}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = self.params["train_size"] if split == "train" else self.params["test_size"]
        base = 0 if split == "train" else 1000
        return [{"id": f"sparse-{split}-{i}", "length": 2 + i % 3, "seed": base + i} for i in range(size)]

    def prompt(self, episode: Episode) -> list[JSON]:
        n = episode.task["length"]
        return [text(f"{n} digits are hidden. reveal(position) shows one; submit(total) with their sum.")]

    @tool(RevealParams)
    def reveal(self, episode: Episode, args: RevealParams) -> ToolResult:
        """Reveal the digit at a position. Not rewarded."""
        hidden = digits(episode.task)
        if args.position >= len(hidden):
            return ToolResult([text(f"position out of range (0..{len(hidden) - 1})")])
        episode.state.setdefault("revealed", set()).add(args.position)
        return ToolResult([text(str(hidden[args.position]))], metadata={"position": args.position})

    @tool(SubmitParams)
    def submit(self, episode: Episode, args: SubmitParams) -> ToolResult:
        """Submit the sum. Reward 1 if right, 0 if off by one, -1 otherwise; ends the episode."""
        gap = abs(args.total - sum(digits(episode.task)))
        reward = 1.0 if gap == 0 else 0.0 if gap == 1 else -1.0
        revealed = len(episode.state.get("revealed", ()))
        return ToolResult([text(f"gap {gap}")], reward=reward, finished=True, metadata={"revealed": revealed})
