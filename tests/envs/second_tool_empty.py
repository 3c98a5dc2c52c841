"""Defect: the second tool raises on an empty string (``key[0]``); the first tool is fine."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class Key(BaseModel):
    key: str = Field(description="a word to look up")


class SecondToolEmpty(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return text("graded", reward=float(params.answer.strip() == self.task_spec["target"]), finished=True)

    @tool
    def lookup(self, params: Key) -> ToolOutput:
        """Look a word up in the dictionary."""
        return text(f"{params.key!r} starts with {params.key[0]!r}")
