"""Defect: the right answer earns reward 1.0 and "solved!", but the episode never ends (``finished`` stays false).

The author set the reward and forgot ``finished=True``. A client reads the episode as still open:
TRL keeps asking the model for more turns until its limit, and every turn after the win is trained
on as part of a task that looks unsolved. Issue 27: this was only an advisory warning
(``call.episode_finishes``); ``reward.win_finishes`` (recommended) fails on it now.
"""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class WinsWithoutFinishing(ThreeTasks):
    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        if params.answer.strip() == self.task_spec["target"]:
            return text("solved!", reward=1.0)
        return text("not yet, try again", reward=0.0)
