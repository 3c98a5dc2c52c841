"""Defect: scorers that parse the answer before grading it, and crash on strings the fuzz now sends.

Each accepts a plain answer (``"4"``) and one richer form a model might send, and raises on one
input its schema accepts: a string holding a JSON object (``"{}"``), a JSON array (``"[1]"``), or
a number written as a string that is not a valid option (``"12"``). Found by the boundary inputs.
"""

import json

from openreward.environments import ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

#: Option ``n`` is the number ``n`` (0 to 11): every number the tasks ask for is an option, 12 is not.
OPTIONS = tuple(str(n) for n in range(12))


class Answer(BaseModel):
    answer: str = Field(description="your answer")


class _Graded(ThreeTasks):
    def grade(self, answer: str) -> str:
        raise NotImplementedError

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit an answer."""
        given = self.grade(params.answer.strip())
        return text("graded", reward=float(given == self.task_spec["target"]), finished=True)


class JsonObjectScorer(_Graded):
    """Reads ``{"answer": "4"}`` as well as ``4``: ``"{}"`` raises KeyError."""

    def grade(self, answer: str) -> str:
        return str(json.loads(answer)["answer"]) if answer.startswith("{") else answer


class JsonArrayScorer(_Graded):
    """Reads ``[{"answer": "4"}]`` (a list of attempts, the first counts): ``"[1]"`` raises TypeError."""

    def grade(self, answer: str) -> str:
        return str(json.loads(answer)[0]["answer"]) if answer.startswith("[") else answer


class NumberStringScorer(_Graded):
    """Reads an option number (``"0"`` to ``"11"``) as that option: ``"12"`` raises IndexError."""

    def grade(self, answer: str) -> str:
        return OPTIONS[int(answer)] if answer.isdigit() else answer
