"""Defect: the prompt shows the task's answer verbatim."""

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class LeakedAnswer(ThreeTasks):
    TASKS = [
        {"id": "t0", "question": "Name the capital of France.", "answer": "Paris"},
        {"id": "t1", "question": "Name the capital of Peru.", "answer": "Lima"},
        {"id": "t2", "question": "Name the capital of Chile.", "answer": "Santiago"},
    ]

    def get_prompt(self) -> list[TextBlock]:
        spec = self.task_spec
        return [TextBlock(text=f"{spec['question']} (grader note: expected {spec['answer']})")]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        return text("graded", reward=float(params.answer.strip() == self.task_spec["answer"]), finished=True)
