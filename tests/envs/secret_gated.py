"""Needs a secret: every session reads ``WEATHER_API_KEY`` from ``X-Secrets`` and refuses to start without it.

The shape of a real env that calls a paid API: the key arrives with ``/create``
(the openreward SDK hands ``X-Secrets`` to the constructor); a wrong or missing
key fails the session with a message naming the secret. The tool answers only
with the key in hand, so a run that got past ``/create`` without it would show.
"""

from typing import Any

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

SECRET_NAME = "WEATHER_API_KEY"
#: The key this env accepts (a test value: the env stands for a service that checks it).
SECRET_VALUE = "wx-test-4f1c9a77e2"


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class SecretGated(ThreeTasks):
    def __init__(self, task_spec: Any = {}, secrets: dict[str, str] = {}) -> None:
        super().__init__(task_spec, secrets)
        if secrets.get(SECRET_NAME) != SECRET_VALUE:
            missing = "is missing" if SECRET_NAME not in secrets else "was not accepted"
            raise PermissionError(f"secret {SECRET_NAME} {missing}: send it in the X-Secrets header")
        self.key = secrets[SECRET_NAME]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; it ends the episode."""
        correct = params.answer.strip() == self.task_spec["target"]
        return text("correct" if correct else "wrong", reward=float(correct), finished=True)
