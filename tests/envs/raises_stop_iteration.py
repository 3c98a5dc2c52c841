"""Defect: the only tool raises ``StopIteration`` (a ``next()`` on an exhausted iterator in the tool's own code, the
shape of a real routing environment's bug). The environment is wrong to raise; what the server makes of it is the
openreward SDK's: asyncio cannot carry ``StopIteration`` into a Future, so the call is never answered."""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class RaisesStopIteration(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return next(iter(()))  # raises StopIteration
