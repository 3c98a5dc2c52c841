"""Clean: a lab with three tools, whose main one (``weigh``) must be played before the answer.

The tool that ends the episode sorts first (``answer``); a player that took the tools in listing
order would answer before ever weighing. Won by weighing the sample the prompt names and
answering its weight.
"""

from typing import Any

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

WEIGHTS = {"A": 12, "B": 17, "C": 23}


class Value(BaseModel):
    value: str = Field(description="the weight in grams")


class Sample(BaseModel):
    sample: str = Field(description="the sample's letter")


class MultiToolLab(ThreeTasks):
    TASKS: list[dict[str, Any]] = [{"id": f"t{n}", "sample": s} for n, s in enumerate(WEIGHTS)]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Weigh sample '{self.task_spec['sample']}' on the scale, then answer its weight in grams.")]

    @tool
    def answer(self, params: Value) -> ToolOutput:
        """Answer the weight; this ends the episode."""
        correct = params.value.strip() == str(WEIGHTS[self.task_spec["sample"]])
        return text("recorded", reward=float(correct), finished=True)

    @tool
    def list_samples(self) -> ToolOutput:
        """List the samples on the bench."""
        return text(f"Samples on the bench: {', '.join(WEIGHTS)}.")

    @tool
    def weigh(self, params: Sample) -> ToolOutput:
        """Put one sample on the scale."""
        weight = WEIGHTS.get(params.sample.strip().upper())
        if weight is None:
            return text(f"There is no sample {params.sample!r} on the bench.")
        return text(f"Sample {params.sample.strip().upper()} weighs {weight} g.")
