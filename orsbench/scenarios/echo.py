"""echo: the TRL guide's environment. Say the target word to win."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool

WORDS = (
    "hello world apple river stone cloud maple orbit piano lemon tiger amber "
    "canyon delta ember falcon glacier harbor island jungle kettle lantern meadow "
    "nectar oasis pepper quartz raven saddle timber umbra velvet willow yonder zephyr "
    "arrow bramble cinder dune echo fjord grove haze ivory jade kayak lotus mirth "
    "nova opal prism quill ridge sable thorn unity vista wren xenon yarrow zinc"
).split()
DIFFICULTY = ("easy", "medium", "hard")
TAGS = (("greeting",), ("nature",), ("object", "short"), ("nature", "long"))


class EchoParams(BaseModel):
    text: str = Field(description="The string to echo back.")


class EchoTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    target: str


@register
class Echo(Scenario):
    """Tasks carry a ``target``; ``echo(text)`` wins (reward 1.0, finished) on a match."""

    name = "echo"
    task_model = EchoTask
    summary = "say the task's target word with echo(text); reward 1.0 and finished on match, else 0.0"
    params_help = {
        "train_size": (48, "tasks in the train split"),
        "test_size": (16, "tasks in the test split"),
    }

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = self.params["train_size"] if split == "train" else self.params["test_size"]
        offset = 0 if split == "train" else 7
        return [self._task(split, i, offset) for i in range(size)]

    @staticmethod
    def _task(split: str, i: int, offset: int) -> JSON:
        word = WORDS[(i * 5 + offset) % len(WORDS)]
        return {
            "id": f"echo-{split}-{i}",
            "target": word,
            "difficulty": DIFFICULTY[len(word) % 3],
            "tags": list(TAGS[i % len(TAGS)]),
        }

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Echo '{episode.task['target']}' to win. Call echo(text=...).")]

    @tool(EchoParams)
    def echo(self, episode: Episode, args: EchoParams) -> ToolResult:
        """Submit a string. Reward 1.0 and finished if it matches the target, else 0.0."""
        correct = args.text == episode.task["target"]
        return ToolResult(
            blocks=[text("match" if correct else "no match")],
            reward=1.0 if correct else 0.0,
            finished=correct,
            metadata={"len": len(args.text)},
        )
