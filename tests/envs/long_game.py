"""Clean: a counting game that ends only after 50 legal moves; each answer says the next legal move."""

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

GOAL = 50


class Say(BaseModel):
    number: int = Field(description="the next number of the count")


class LongGame(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.count = 0

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Count from 1 to {GOAL}, one number per call of the say tool. Start with 1.")]

    @tool
    def say(self, params: Say) -> ToolOutput:
        """Say the next number."""
        if params.number != self.count + 1:
            return text(f"Not legal: the next number is {self.count + 1}.")
        self.count += 1
        if self.count == GOAL:
            return text("Done!", reward=1.0, finished=True)
        return text(f"Good. Next: {self.count + 1}", reward=0.0)
