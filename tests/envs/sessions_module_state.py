"""Defect (sessions at once): the task lives in a module-level variable — the newest session's task serves them all.

A grader written for one episode at a time: ``__init__`` files the session's task where the prompt and the
grader look it up. Played one session at a time (create, play, delete) nothing shows; with a second session
on another task created in between, the first is shown the second's question and graded against its target.
``isolation.interleaved_tasks`` names it.
"""

from typing import Any

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

#: BUG: one slot for the whole server process, overwritten by every new session.
CURRENT_TASK: dict[str, Any] = {}


class Answer(BaseModel):
    answer: str = Field(description="your answer, a number")


class ModuleState(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        CURRENT_TASK.update(task_spec)  # "the grader needs the task: keep it handy"

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"{CURRENT_TASK['question']} Answer with the submit tool.")]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; reward 1.0 when it is right."""
        correct = params.answer.strip() == CURRENT_TASK["target"]
        return text("correct" if correct else "wrong", reward=1.0 if correct else 0.0, finished=True)
