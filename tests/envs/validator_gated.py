"""Clean: a calculator whose ``operator`` must be one of + - * /, said only in the description and the
validator's error (the JSON Schema says just ``string``)."""

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field, field_validator

from tests.envs._base import ThreeTasks, text

OPERATORS = ("+", "-", "*", "/")


class Step(BaseModel):
    operator: str = Field(description="the operation, one of: +, -, *, /")
    a: float = Field(description="left operand")
    b: float = Field(description="right operand")

    @field_validator("operator")
    @classmethod
    def known(cls, value: str) -> str:
        if value not in OPERATORS:
            raise ValueError(f"operator must be one of {', '.join(repr(o) for o in OPERATORS)}")
        return value


class ValidatorGated(ThreeTasks):
    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"{self.task_spec['question']} Use the calculate tool; it ends the episode.")]

    @tool
    def calculate(self, params: Step) -> ToolOutput:
        """Apply one arithmetic operation and submit its result as your answer."""
        if params.operator == "/" and params.b == 0:
            return text("cannot divide by zero: pick another b", reward=0.0, finished=True)
        value = {"+": params.a + params.b, "-": params.a - params.b, "*": params.a * params.b}.get(
            params.operator, params.a / params.b if params.b else 0.0
        )
        correct = f"{value:g}" == self.task_spec["target"]
        return text(f"{params.a:g} {params.operator} {params.b:g} = {value:g}", reward=float(correct), finished=True)
