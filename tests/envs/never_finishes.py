"""Defect: no tool ever ends the episode (``finished`` is always false)."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class NeverFinishes(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        ok = params.answer.strip() == self.task_spec["target"]
        return text("correct, keep going" if ok else "try again", reward=float(ok))
