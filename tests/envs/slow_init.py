"""Clean: a puzzle generated in ``__init__`` that takes seconds (the shape of GeneralReasoning's zebra environment,
whose generator searches for a puzzle with one solution: 13 s of CPU for train[0]), so ``/create`` answers late.

``ORSBENCH_TEST_INIT_SECONDS``: how long the generation takes (default 0). Correct: a caller that waits long enough
gets its session; one that gives up first must say the setup outlasted its timeout, not that /create was refused.
"""

import os
import time

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class SlowInit(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        time.sleep(float(os.environ.get("ORSBENCH_TEST_INIT_SECONDS", "0")))  # the puzzle's generation

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer; this ends the episode."""
        right = params.answer.strip() == self.task_spec["target"]
        return text("correct" if right else "wrong", reward=float(right), finished=True)
