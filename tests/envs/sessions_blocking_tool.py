"""Defect (sessions at once): a tool blocks the event loop — a ping sent while it runs waits for it.

``run_tests`` is ``async def`` but calls the blocking ``time.sleep`` (as a sync subprocess or HTTP client
would): the server's one event loop stops for the whole call, and every request of every session
waits — a trainer's keep-alive ``/ping`` for that very call included, so pings keep nothing alive.
``isolation.ping_during_call`` names it. (Blocking work belongs in ``asyncio.to_thread``, or in a sync
tool, which the SDK runs in a thread.)
"""

import time

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

TEST_SECONDS = 1.0


class Answer(BaseModel):
    answer: str = Field(description="your answer, a number")


class BlockingTool(ThreeTasks):
    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"{self.task_spec['question']} Run the tests with run_tests, then answer with submit.")]

    @tool
    async def run_tests(self) -> ToolOutput:
        """Run the task's test suite (takes a moment)."""
        time.sleep(TEST_SECONDS)  # BUG: blocks the event loop inside async def
        return text("3 tests passed.")

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; reward 1.0 when it is right."""
        correct = params.answer.strip() == self.task_spec["target"]
        return text("correct" if correct else "wrong", reward=1.0 if correct else 0.0, finished=True)
