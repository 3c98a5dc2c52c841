"""Defect: the only tool raises on every call (the SDK answers an SSE ``error`` event)."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class AlwaysRaises(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        raise RuntimeError("grader crashed")
