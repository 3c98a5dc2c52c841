"""The shared boilerplate of the test environments: three tasks, one train split, a text prompt."""

from __future__ import annotations

from typing import Any

from openreward.environments import Environment, Split, TextBlock, ToolOutput


def text(value: str, *, reward: float | None = None, finished: bool = False) -> ToolOutput:
    """A one-block ToolOutput."""
    return ToolOutput(blocks=[TextBlock(text=value)], reward=reward, finished=finished)


class ThreeTasks(Environment):
    """Base (never served itself): ``TASKS`` in one train split, prompt = the task's ``question``."""

    TASKS: list[dict[str, Any]] = [
        {"id": "t0", "question": "What is 2 + 2?", "target": "4"},
        {"id": "t1", "question": "What is 3 + 4?", "target": "7"},
        {"id": "t2", "question": "What is 5 + 6?", "target": "11"},
    ]

    @classmethod
    def list_splits(cls) -> list[Split]:
        return [Split(name="train", type="train")]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        return list(cls.TASKS) if split == "train" else []

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=str(self.task_spec["question"]) + " Answer with the submit tool.")]
