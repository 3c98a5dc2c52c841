"""Clean: a long control task with a signed reward on every step and no end (the shape of mobile-env's ORS wrapper).

Each step pays the step's utility in [-1, 1] — a bad step costs -1.0 — and the episode runs until the caller stops,
as a simulation with a step budget of its own far away does. A consumer that refuses a reward outside [0, 1]
(benchflow) refuses it on the first bad step, however the episode ends: that refusal is the client's, not the
checker's player's, even where the player stopped at its own budget.
"""

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Move(BaseModel):
    x: int = Field(ge=0, le=9, description="the cell's column")
    y: int = Field(ge=0, le=9, description="the cell's row")


class SignedSteps(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.steps = 0

    @tool
    def move(self, params: Move) -> ToolOutput:
        """Move to a cell; the step's utility is 0.5, or -1.0 on every third step (the traffic the simulation brings).
        The simulation runs until you stop."""
        self.steps += 1
        good = self.steps % 3 != 0
        return text(f"step {self.steps}: {'a good' if good else 'a bad'} step to ({params.x}, {params.y})", reward=0.5 if good else -1.0)
