"""Clean, stochastic by design: an MDP with random transitions (a patient simulator, as ICU-sepsis is).

The same decisions on the same task end in a different state, so a different reward: that is the
environment, not a defect. Each session draws its own random stream from a process-wide session
counter, so the checker's replay differs from its first play on every run (the test is not flaky),
while any one session is an ordinary random walk.
"""

import itertools
import random

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

STEPS = 3
_SESSIONS = itertools.count()


class Decision(BaseModel):
    option: str = Field(description="the decision, one of: treat, wait")


class StochasticMdp(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.rng = random.Random(next(_SESSIONS))
        self.health = 50.0
        self.step = 0

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Keep the patient stable for {STEPS} steps: decide treat or wait at each step.")]

    @tool
    def decide(self, params: Decision) -> ToolOutput:
        """Make the decision of this step; the patient's health then moves at random."""
        if params.option not in ("treat", "wait"):
            return text("Unknown option: decide treat or wait.")
        self.step += 1
        self.health += (5.0 if params.option == "treat" else 0.0) + self.rng.gauss(0.0, 10.0)
        if self.step < STEPS:
            return text(f"Step {self.step}: health {self.health:.1f}.", reward=0.0)
        return text(f"Final health {self.health:.1f}.", reward=round(max(0.0, min(1.0, self.health / 100)), 4), finished=True)
