"""Clean: a command-line game with one free-text ``command`` tool (as a text adventure or a shell exposes).

Nothing in the schema says what to type: the tool's description offers ``help``, ``help`` lists
the verbs (``look``, ``take <item>``, ``open <thing>``), and ``look`` names the things to use them
on. Won by taking the task's item and opening its exit; every other command answers in words.
"""

from typing import Any

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from tests.envs._base import ThreeTasks, text

HELP = "Commands: look, inventory, take <item>, open <thing>."


class Command(BaseModel):
    command: str = Field(description="the command line to run, as typed at the game's prompt")


class CommandGame(ThreeTasks):
    TASKS: list[dict[str, Any]] = [
        {"id": "t0", "item": "key", "exit": "door"},
        {"id": "t1", "item": "card", "exit": "gate"},
        {"id": "t2", "item": "crowbar", "exit": "hatch"},
    ]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.holding: set[str] = set()

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="You wake up in a locked cell. Get out. Play by sending commands to the command tool.")]

    @tool
    def command(self, params: Command) -> ToolOutput:
        """Run one command of the game, as you would type it at its prompt. Type `help` to list the commands."""
        return self.respond(params.command)

    def respond(self, line: str) -> ToolOutput:
        """The game's answer to one command line."""
        item, exit_ = self.task_spec["item"], self.task_spec["exit"]
        verb, _, rest = line.strip().lower().partition(" ")
        thing = rest.strip()
        if verb == "help":
            return text(HELP)
        if verb == "look":
            return text(f"You see a bed, a {item} and a {exit_}. The {exit_} is locked.")
        if verb == "inventory":
            return text(f"You carry: {', '.join(sorted(self.holding)) or 'nothing'}.")
        if verb == "take":
            if thing == item:
                self.holding.add(item)
                return text(f"Taken: {item}.")
            return text("You can't take that.")
        if verb == "open":
            if thing != exit_:
                return text("That does not open.")
            if item not in self.holding:
                return text(f"The {exit_} is locked.")
            return text(f"The {exit_} opens. You are free!", reward=1.0, finished=True)
        return text(f"Unknown command {line!r}. Type help for the commands.")
