"""Defect: a tool raises on non-ASCII input (``str.encode("ascii")``)."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class NonAsciiRaises(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        answer = params.answer.encode("ascii").decode()
        return text("graded", reward=float(answer.strip() == self.task_spec["target"]), finished=True)
