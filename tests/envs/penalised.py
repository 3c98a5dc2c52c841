"""Clean: one answer ends the episode, reward 1.0 when right and -1.0 when wrong (a penalty is a valid ORS reward)."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class Penalised(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer: a wrong one costs a point."""
        right = params.answer.strip() == self.task_spec["target"]
        return text("right" if right else "wrong", reward=1.0 if right else -1.0, finished=True)
