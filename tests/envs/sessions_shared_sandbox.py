"""Defect (sessions at once): one sandbox per task, shared by its sessions, removed by any session's teardown.

Materialising a task's files is slow, so ``setup()`` makes them once per task and every session on the
task works in that directory; ``teardown()`` cleans up by removing it — while the task's other sessions
still use it. Their next ``read_file`` raises ``FileNotFoundError``. ``isolation.delete_leaves_other``
names it (the call probe meets it too, as a tool that raises: the failure, not its cause).
"""

import os
import shutil
import tempfile
from pathlib import Path

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

ROOT = Path(tempfile.gettempdir()) / f"orsbench-sandboxes-{os.getpid()}"


class Answer(BaseModel):
    answer: str = Field(description="your answer, a number")


class SharedSandbox(ThreeTasks):
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.sandbox = ROOT / str(task_spec.get("id"))  # BUG: one directory per task, not per session

    async def setup(self) -> None:
        self.sandbox.mkdir(parents=True, exist_ok=True)
        question = self.sandbox / "question.txt"
        if not question.exists():
            question.write_text(str(self.task_spec["question"]))

    async def teardown(self) -> None:
        shutil.rmtree(self.sandbox, ignore_errors=True)  # BUG: the task's other sessions still work in it

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="Read question.txt with read_file, then answer with the submit tool.")]

    @tool
    def read_file(self) -> ToolOutput:
        """Read question.txt from the sandbox."""
        return text((self.sandbox / "question.txt").read_text())

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; reward 1.0 when it is right."""
        correct = params.answer.strip() == self.task_spec["target"]
        return text("correct" if correct else "wrong", reward=1.0 if correct else 0.0, finished=True)
