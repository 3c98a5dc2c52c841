"""task-tool: shared tools plus task-scoped tools that differ between tasks.

Task ``i`` is of kind ``("add", "lookup", "hint")[i % 3]`` and exposes only the
task-scoped tool of its kind, served by ``GET /{env}/task_tools`` and never by
``GET /{env}/tools``. A client that probes only task 0 binds ``add`` and
misses ``lookup`` and ``hint``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool

KINDS = ("add", "lookup", "hint")
TABLE = {"alpha": "red", "beta": "green", "gamma": "blue", "delta": "black", "epsilon": "white"}


class TaskToolTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["add", "lookup", "hint"]
    question: str
    answer: str


class AnswerParams(BaseModel):
    value: str = Field(description="Your final answer.")


class AddParams(BaseModel):
    a: int = Field(description="First addend.")
    b: int = Field(description="Second addend.")


class LookupParams(BaseModel):
    key: str = Field(description="Key to look up in the task's table.")


@register
class TaskTool(Scenario):
    name = "task-tool"
    task_model = TaskToolTask
    summary = "shared answer() plus one task-scoped tool per task (add / lookup / hint), visible only via task_tools"
    params_help = {"train_size": (30, "tasks in the train split"), "test_size": (9, "tasks in the test split")}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = self.params["train_size"] if split == "train" else self.params["test_size"]
        return [self._task(split, i) for i in range(size)]

    @staticmethod
    def _task(split: str, i: int) -> JSON:
        kind = KINDS[i % 3]
        if kind == "add":
            a, b = 3 + i, 11 * (i + 1)
            question, answer = f"What is {a} + {b}?", str(a + b)
        elif kind == "lookup":
            key = sorted(TABLE)[i % len(TABLE)]
            question, answer = f"What colour is '{key}'?", TABLE[key]
        else:
            word = ("quartz", "meadow", "lantern", "harbor")[i % 4]
            question, answer = "Guess the secret word.", word
        return {"id": f"tt-{split}-{i}", "kind": kind, "question": question, "answer": answer}

    def task_tool_names(self, task: JSON) -> list[str]:
        return [task["kind"]]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"{episode.task['question']} Use the tools, then call answer(value=...).")]

    @tool(AnswerParams)
    def answer(self, episode: Episode, args: AnswerParams) -> ToolResult:
        """Submit the final answer. Reward 1.0 if right, 0.0 otherwise; ends the episode."""
        correct = args.value.strip().lower() == episode.task["answer"]
        return ToolResult([text("correct" if correct else "wrong")], reward=1.0 if correct else 0.0, finished=True)

    @tool(AddParams, shared=False)
    def add(self, episode: Episode, args: AddParams) -> ToolResult:
        """Add two integers."""
        return ToolResult([text(str(args.a + args.b))])

    @tool(LookupParams, shared=False)
    def lookup(self, episode: Episode, args: LookupParams) -> ToolResult:
        """Look a key up in the colour table."""
        return ToolResult([text(TABLE.get(args.key, "unknown key"))], metadata={"found": args.key in TABLE})

    @tool(None, shared=False)
    def hint(self, episode: Episode, args: None) -> ToolResult:
        """Reveal the secret word of a guessing task."""
        return ToolResult([text(f"The word is {episode.task['answer']}.")])
