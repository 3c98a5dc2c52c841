"""pick: a contextual bandit that a tiny policy can learn from reward alone.

Each task is a room with a few doors; one door wins, fixed per task and never
in the prompt (it is in the task spec, which the model does not see).
``pick(door)`` ends the episode with reward 1.0 for the winning door and 0.0
otherwise. A policy that picks uniformly at random wins ``1 / doors`` of the
time; only the server's rewards can teach it which door wins, so a rising
reward on this scenario is evidence that the reward reached the learner (the
training smoke's ``learn`` profile).

By default the same door wins in every room: a policy of 0.1 M parameters
learns that from a few hundred rewarded rollouts. ``--param varied=true`` gives
rooms different winning doors, which needs the room's name to be read and
takes a larger policy or many more steps.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool

DOORS = ("red", "green", "blue", "gold", "gray", "pink")
ROOMS = (
    "north attic cellar garden harbor kitchen library market orchard pantry quarry studio "
    "tower vault yard bridge chapel forge grotto hall"
).split()


class PickParams(BaseModel):
    door: str = Field(description="The colour of the door to open.")


class PickTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    room: str
    door: str
    doors: list[str] = Field(default_factory=lambda: list(DOORS[:4]))


@register
class Pick(Scenario):
    """Tasks carry a ``room`` and its winning ``door``; ``pick(door)`` finishes with reward 1.0 or 0.0."""

    name = "pick"
    task_model = PickTask
    summary = "a room hides one winning door (fixed per task, never shown); pick(door) finishes with reward 1.0 or 0.0"
    params_help = {
        "train_size": (8, "tasks (rooms) in the train split"),
        "test_size": (4, "tasks (rooms) in the test split"),
        "doors": (4, f"doors per room, 2..{len(DOORS)} (chance level is 1/doors)"),
        "varied": (False, "rooms have different winning doors (default: the same door wins everywhere)"),
    }

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        if not 2 <= int(self.params["doors"]) <= len(DOORS):
            raise ValueError(f"doors must be between 2 and {len(DOORS)}, got {self.params['doors']}")

    @property
    def doors(self) -> tuple[str, ...]:
        return DOORS[: int(self.params["doors"])]

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = int(self.params["train_size"] if split == "train" else self.params["test_size"])
        offset = 0 if split == "train" else 11
        doors = self.doors
        return [
            {
                "id": f"pick-{split}-{i}",
                "room": ROOMS[(i + offset) % len(ROOMS)],
                "doors": list(doors),
                # varied: a fixed, deterministic spread over the doors (neighbouring rooms differ).
                "door": doors[(i * 3 + 1 + offset) % len(doors)] if self.params["varied"] else doors[1],
            }
            for i in range(size)
        ]

    def prompt(self, episode: Episode) -> list[JSON]:
        doors = episode.task.get("doors") or self.doors
        return [text(f"Room {episode.task['room']}: one door wins. Call pick(door=...) with one of {', '.join(doors)}.")]

    @tool(PickParams)
    def pick(self, episode: Episode, args: PickParams) -> ToolResult:
        """Open a door. Reward 1.0 if it is this room's winning door, else 0.0; the episode ends either way."""
        won = args.door == episode.task["door"]
        return ToolResult(
            blocks=[text("win" if won else "lose")],
            reward=1.0 if won else 0.0,
            finished=True,
            metadata={"known_door": args.door in (episode.task.get("doors") or self.doors)},
        )
