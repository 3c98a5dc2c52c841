"""Clean: environments whose prompt and answers show the session's own state, as most games do.

Each is a correct environment: every session keeps its state on its own object. What a session sees
changes with its own calls — a counter's value, a board and its moves so far, a chat transcript, a
step count — and one sets its game up in ``get_prompt`` (its tools refuse to run before the prompt was
fetched, as several real environments do; every real client fetches the prompt first). The isolation
checks must pass on all of them, ``--explore`` included (docs/protocol.md §15.1: a session's own state
in its prompt or answers is never a finding).

``Dense`` pays 1.0 for every good step and finishes far away: ``reward.win_finishes`` (which reads 1.0
as a win) must hold back on it. ``GlobalRandom`` is the one defect here: it seeds and draws from
Python's global ``random`` (as some game libraries do), so one session's draws change another's tiles.
``SlowCounter`` is the counter with a slow tool and setup (``ORSBENCH_TEST_TOOL_SECONDS``,
``ORSBENCH_TEST_SETUP_SECONDS``): a slow environment must be fully checked within a stated budget.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text


class Amount(BaseModel):
    amount: int = Field(description="how much to add, 1-9")


class Counter(ThreeTasks):
    """A counter that starts at 0; the prompt and every answer show its value."""

    TASKS: list[dict[str, Any]] = [{"id": "c0", "goal": 7}, {"id": "c1", "goal": 12}, {"id": "c2", "goal": 20}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.value = 0

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"The counter is at {self.value}. Add to it until it reaches the goal of task {self.task_spec['id']}.")]

    @tool
    def add(self, params: Amount) -> ToolOutput:
        """Add an amount to the counter; reaching the goal (or passing it) ends the episode."""
        return self.add_now(params)

    def add_now(self, params: Amount) -> ToolOutput:
        self.value += min(max(params.amount, 1), 9)
        if self.value >= self.task_spec["goal"]:
            won = self.value == self.task_spec["goal"]
            return text(f"The counter is at {self.value}.", reward=1.0 if won else 0.0, finished=True)
        return text(f"The counter is at {self.value}.")


class Cell(BaseModel):
    cell: int = Field(description="the cell to mark, 0-8 (row by row)")


class Board(ThreeTasks):
    """A 3x3 board: the prompt and every answer show the board and the moves so far; two marks end it."""

    TASKS: list[dict[str, Any]] = [{"id": "b0", "start": 4}, {"id": "b1", "start": 0}, {"id": "b2", "start": 8}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.cells = ["."] * 9
        self.cells[task_spec.get("start", 4)] = "O"
        self.moves: list[int] = []

    def shown(self) -> str:
        rows = ["".join(self.cells[r * 3 : r * 3 + 3]) for r in range(3)]
        return "Board:\n" + "\n".join(rows) + f"\nMoves so far: {', '.join(map(str, self.moves)) or 'none'}"

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Mark two cells with mark. {self.shown()}")]

    @tool
    def mark(self, params: Cell) -> ToolOutput:
        """Mark a free cell with X."""
        if not 0 <= params.cell <= 8 or self.cells[params.cell] != ".":
            return text(f"Cell {params.cell} is taken. {self.shown()}")
        self.cells[params.cell] = "X"
        self.moves.append(params.cell)
        done = len(self.moves) >= 2
        return text(self.shown(), reward=1.0 if done else None, finished=done)


class Message(BaseModel):
    message: str = Field(description="what to say")


class Chat(ThreeTasks):
    """A chat: the prompt and every answer show the transcript so far; the third message ends it."""

    TASKS: list[dict[str, Any]] = [{"id": "h0", "bot": "Ada"}, {"id": "h1", "bot": "Bo"}, {"id": "h2", "bot": "Cy"}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.transcript = [f"{task_spec.get('bot')}: Hello, I am {task_spec.get('bot')}."]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="Talk with say. Transcript:\n" + "\n".join(self.transcript))]

    @tool
    def say(self, params: Message) -> ToolOutput:
        """Say something; the bot answers."""
        self.transcript.append(f"you: {params.message}")
        self.transcript.append(f"{self.task_spec['bot']}: You said {len(params.message)} characters.")
        done = sum(1 for line in self.transcript if line.startswith("you: ")) >= 3
        return text("\n".join(self.transcript), reward=1.0 if done else None, finished=done)


class NoParams(BaseModel):
    pass


class StepCount(ThreeTasks):
    """A walk: the prompt and every answer show how many steps were taken."""

    TASKS: list[dict[str, Any]] = [{"id": "s0", "steps": 3}, {"id": "s1", "steps": 4}, {"id": "s2", "steps": 5}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.taken = 0

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Steps taken: {self.taken} of {self.task_spec['steps']}. Walk with step.")]

    @tool
    def step(self, params: NoParams) -> ToolOutput:
        """Take one step."""
        self.taken += 1
        done = self.taken >= self.task_spec["steps"]
        return text(f"Steps taken: {self.taken} of {self.task_spec['steps']}.", reward=1.0 if done else None, finished=done)


class PromptSetup(ThreeTasks):
    """A walk set up in ``get_prompt`` (each fetch starts a fresh one); a step before it is answered with a refusal."""

    TASKS: list[dict[str, Any]] = [{"id": "g0", "steps": 3}, {"id": "g1", "steps": 4}, {"id": "g2", "steps": 5}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.game: dict[str, Any] | None = None

    def get_prompt(self) -> list[TextBlock]:
        self.game = {"taken": 0, "trail": [self.task_spec["id"]]}
        return [TextBlock(text=f"A new walk of {self.task_spec['steps']} steps begins. Walk with step.")]

    @tool
    def step(self, params: NoParams) -> ToolOutput:
        """Take one step; the answer shows the trail so far."""
        if self.game is None:
            return text("No walk yet: read the prompt first.", reward=0.0)
        self.game["taken"] += 1
        self.game["trail"].append(str(self.game["taken"]))
        done = self.game["taken"] >= self.task_spec["steps"]
        return text(f"Trail: {' > '.join(self.game['trail'])}.", reward=1.0 if done else None, finished=done)


class PromptDealt(PromptSetup):
    """PromptSetup whose tool raises before the prompt was fetched, as a textarena game served by the SDK does (its board
    exists only once ``get_prompt`` reset it: ``'MinesweeperEnv' object has no attribute 'state'``). Correct: every real
    client fetches the prompt first, so no probe may call a tool of a session that has not (the fuzz included)."""

    @tool
    def step(self, params: NoParams) -> ToolOutput:
        """Take one step; the answer shows the trail so far."""
        if self.game is None:
            raise AttributeError("'Walk' object has no attribute 'state'")
        return super().step(params)


class Direction(BaseModel):
    direction: str = Field(description="which way to walk: left or right")


class Dense(ThreeTasks):
    """A long walk with a dense reward: 1.0 for every step towards the goal, 0.0 away; the goal is far."""

    TASKS: list[dict[str, Any]] = [{"id": "d0", "goal": 400}, {"id": "d1", "goal": 500}, {"id": "d2", "goal": 600}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.at = 0

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"You are at 0. Walk right to {self.task_spec['goal']}; every step right pays 1.0.")]

    @tool
    def walk(self, params: Direction) -> ToolOutput:
        """Take one step (anything but left walks right); a step right pays 1.0, a step left 0.0."""
        right = params.direction.strip().lower() != "left"
        self.at += 1 if right else -1
        done = self.at >= self.task_spec["goal"]
        return text(f"You are at {self.at}.", reward=1.0 if right else 0.0, finished=done)


class GlobalRandom(ThreeTasks):
    """DEFECT: a tile game whose library seeds and draws from Python's global ``random``.

    Alone, each task deals the same tiles every time; with two sessions, one session's draws (or its
    ``/create``, which seeds again) change the other's tiles.
    """

    TASKS: list[dict[str, Any]] = [{"id": "r0", "seed": 1}, {"id": "r1", "seed": 2}, {"id": "r2", "seed": 3}]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        random.seed(task_spec.get("seed"))  # BUG: the library seeds the process-wide generator
        self.hand: list[int] = []

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Draw tiles with draw until your hand sums past 30 (task {self.task_spec['id']}).")]

    @tool
    def draw(self, params: NoParams) -> ToolOutput:
        """Draw one tile."""
        self.hand.append(random.randint(1, 9))  # BUG: draws from the shared generator
        done = sum(self.hand) > 30
        return text(f"You drew {self.hand[-1]}; your hand: {self.hand}.", reward=1.0 if done else None, finished=done)


#: How long SlowCounter's tool and setup take (seconds; the tests set them through the server's environment).
TOOL_SECONDS = float(os.environ.get("ORSBENCH_TEST_TOOL_SECONDS", "8"))
SETUP_SECONDS = float(os.environ.get("ORSBENCH_TEST_SETUP_SECONDS", "0"))


class SlowCounter(Counter):
    """The counter, with a slow tool (8 s by default) and optionally a slow setup: every isolation scene must run."""

    async def setup(self) -> None:
        await asyncio.sleep(SETUP_SECONDS)

    @tool
    async def add(self, params: Amount) -> ToolOutput:
        """Add an amount to the counter (slowly); reaching the goal (or passing it) ends the episode."""
        await asyncio.sleep(TOOL_SECONDS)
        return Counter.add_now(self, params)
