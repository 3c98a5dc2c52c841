"""Defect: a tool raises on a boundary value (``n = 0``: ZeroDivisionError); every other n works."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Divisor(BaseModel):
    n: int = Field(description="a whole number to divide 100 by")


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class BoundaryRaises(ThreeTasks):
    @tool
    def divide(self, params: Divisor) -> ToolOutput:
        """Divide 100 by n."""
        return text(f"100 / {params.n} = {100 / params.n}")

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return text("graded", reward=float(params.answer.strip() == self.task_spec["target"]), finished=True)
