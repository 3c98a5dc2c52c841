"""Defect: the reward is random (the same answer on the same task scores differently)."""

import random

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class RandomReward(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return text("graded", reward=random.random(), finished=True)
