"""Defect (sessions at once): the environment object is cached per task — a second session on a task starts finished.

Building an environment loads the task's data, so this one reuses the object it built for a task
(``__new__`` hands out the cached instance). The SDK keeps each episode's finish latch on that object:
once a session on the task finished, every later session on it is refused its first call as
``episode_finished`` — a GRPO group of eight gets one rollout and seven refusals.
``isolation.same_task_fresh`` names it.
"""

from typing import Any

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

#: BUG: the cache outlives the session that filled it, and carries its episode's state.
_BUILT: dict[str, Any] = {}


class Answer(BaseModel):
    answer: str = Field(description="your answer, a number")


class TaskCache(ThreeTasks):
    def __new__(cls, task_spec: dict = {}, secrets: dict = {}) -> "TaskCache":
        key = str(task_spec.get("id"))
        if key not in _BUILT:
            _BUILT[key] = super().__new__(cls)
        return _BUILT[key]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; reward 1.0 when it is right."""
        correct = params.answer.strip() == self.task_spec["target"]
        return text("correct" if correct else "wrong", reward=1.0 if correct else 0.0, finished=True)
