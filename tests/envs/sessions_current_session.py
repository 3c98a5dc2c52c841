"""Defect (sessions at once): the grader parks the session in a module-level variable across an await.

``submit`` files ``self`` as the current session, awaits its (remote) grader, and then reads the task
from the current session — which another call, sent meanwhile, has replaced. One call at a time nothing
shows; calls at once are graded against one another's tasks. ``isolation.concurrent_calls_own_task``
names it.
"""

import asyncio
from typing import Any

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

GRADER_SECONDS = 0.05
#: BUG: "the session being graded", one for the whole process.
CURRENT: Any = None


class Answer(BaseModel):
    answer: str = Field(description="your answer, a number")


class CurrentSession(ThreeTasks):
    @tool
    async def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; reward 1.0 when it is right."""
        global CURRENT
        CURRENT = self
        await asyncio.sleep(GRADER_SECONDS)  # the grader is a remote service
        correct = params.answer.strip() == CURRENT.task_spec["target"]  # BUG: CURRENT may be another session now
        if not correct:
            return text("wrong, try again", reward=0.0)
        return text("correct", reward=1.0, finished=True)
