"""Defect: a tool hangs (never answers) when its input is long."""

import asyncio

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Note(BaseModel):
    note: str = Field(description="a note to keep")


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class HangsOnLong(ThreeTasks):
    @tool
    async def remember(self, params: Note) -> ToolOutput:
        """Keep a note for later."""
        if len(params.note) > 200:
            await asyncio.sleep(3600)
        return text(f"noted ({len(params.note)} characters)")

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return text("graded", reward=float(params.answer.strip() == self.task_spec["target"]), finished=True)
