"""Defect: the grader raises on an answer longer than 100 characters (a fixed-size buffer, a regex gone slow).

The boundary inputs find it with a 10,000-character string; the finding should show the simplest
failing input instead (issue 27: crash inputs were reported as drawn, not shrunk).
"""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

LIMIT = 100


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class LongAnswerRaises(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        if len(params.answer) > LIMIT:
            raise ValueError(f"answer of {len(params.answer)} characters does not fit the grader's buffer")
        return text("graded", reward=float(params.answer.strip() == self.task_spec["target"]), finished=True)
