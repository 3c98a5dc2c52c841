"""Clean: the echo game written on ors-sdk 0.1.0 (``import ors``), a second ORS server implementation."""

from typing import Any

from ors import Environment, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

WORDS = ("hello", "river", "amber")


class Say(BaseModel):
    text: str = Field(description="the word to say")


class OrsEcho(Environment):
    @classmethod
    def list_splits(cls) -> list[Split]:
        return [Split(name="train", type="train")]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        return [{"id": f"w{i}", "word": w} for i, w in enumerate(WORDS)] if split == "train" else []

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Say '{self.task_spec['word']}' with the say tool.")]

    @tool
    def say(self, params: Say) -> ToolOutput:
        """Say a word; the right one wins and ends the episode."""
        correct = params.text == self.task_spec["word"]
        return ToolOutput(blocks=[TextBlock(text="yes" if correct else "no")], reward=float(correct), finished=correct)
