"""Clean: a lookup whose answer reads "Error: ..." (an ok answer, the environment's own words), then a submit that wins.

Real environments answer like this (a shell tool's stderr, a search with no hit): the call succeeded; a client that
takes the text for its own failure path misreads the environment.
"""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Key(BaseModel):
    key: str = Field(description="what to look up")


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class ErrorText(ThreeTasks):
    @tool
    def lookup(self, params: Key) -> ToolOutput:
        """Look a key up: an unknown one is answered with an error message, as a shell prints one."""
        return text(f"Error: no such key {params.key!r}", reward=0.0)

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        right = params.answer.strip() == self.task_spec["target"]
        return text("right" if right else "wrong", reward=1.0 if right else 0.0, finished=True)
