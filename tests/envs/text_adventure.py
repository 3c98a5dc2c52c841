"""Defect, on a text adventure with a slow setup: its ``command`` tool never answers a command with a control character.

What issue 35 met on a real environment: each session boots an interpreter and loads its story file (about 9 s of
``setup()``), then plays by one free-text ``command`` tool. The interpreter reads its input as a terminal does, so a
control character (Ctrl-C, an escape sequence, DEL) leaves it waiting for the rest of a sequence that never comes:
the call never ends, and a policy that emits such a byte stalls its rollout. ``tool.no_hang`` must find it there too,
although every fresh session costs the fuzz ~9 s before its first call.

A real game otherwise: rooms joined by exits, things to take, a lock to open; ``help`` lists the verbs; won (reward
1.0, finished) by leaving through the task's exit with its key. ``ORSBENCH_TEST_SETUP_SECONDS`` (the server's
environment) sets the setup time; 9 s by default.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from openreward.environments import TextBlock, ToolOutput, tool

from tests.envs._base import ThreeTasks, text
from tests.envs.command_game import Command
from tests.envs.hangs_on_control import holds_control

#: Seconds each session's setup takes ("loading the story file").
SETUP_SECONDS = float(os.environ.get("ORSBENCH_TEST_SETUP_SECONDS", "9"))
HELP = "Verbs: look, go <direction>, take <thing>, inventory, unlock <thing>, open <thing>, help."
#: room -> (description, exits {direction: room}, things lying there)
WORLD: dict[str, tuple[str, dict[str, str], set[str]]] = {
    "cellar": ("a damp cellar; stairs lead up", {"up": "kitchen"}, {"lamp"}),
    "kitchen": ("a cold kitchen; stairs lead down, a corridor runs east", {"down": "cellar", "east": "hall"}, {"knife"}),
    "hall": ("a dusty hall; the corridor runs west", {"west": "kitchen"}, set()),
}


class TextAdventure(ThreeTasks):
    TASKS: list[dict[str, Any]] = [
        {"id": "t0", "key": "brass key", "key_room": "cellar", "exit": "front door", "exit_room": "hall"},
        {"id": "t1", "key": "iron key", "key_room": "kitchen", "exit": "trapdoor", "exit_room": "cellar"},
        {"id": "t2", "key": "silver key", "key_room": "hall", "exit": "back door", "exit_room": "kitchen"},
    ]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec, secrets)
        self.room = "kitchen"
        self.carrying: set[str] = set()
        self.unlocked = False
        self.things: dict[str, set[str]] = {}

    async def setup(self) -> None:
        await asyncio.sleep(SETUP_SECONDS)  # the interpreter boots and loads the story file
        self.things = {room: set(items) for room, (_, _, items) in WORLD.items()}
        self.things[self.task_spec["key_room"]].add(self.task_spec["key"])

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="You are in a house you must leave. Play by sending commands to the command tool; type help.")]

    @tool
    async def command(self, params: Command) -> ToolOutput:
        """Run one command of the game, as you would type it at its prompt. Type `help` to list the commands."""
        if holds_control(params.command):
            await asyncio.sleep(3600)  # the interpreter waits for the rest of a control sequence that never comes
        return self.respond(params.command)

    def respond(self, line: str) -> ToolOutput:
        verb, _, rest = line.strip().lower().partition(" ")
        thing = rest.strip()
        description, exits, _ = WORLD[self.room]
        here = self.things.get(self.room, set())
        exit_here = self.task_spec["exit"] if self.task_spec["exit_room"] == self.room else None
        if verb == "help":
            return text(HELP)
        if verb == "look":
            seen = sorted(here) + ([exit_here] if exit_here else [])
            return text(f"You are in {description}. You see: {', '.join(seen) or 'nothing'}. Exits: {', '.join(exits)}.")
        if verb == "go":
            if thing not in exits:
                return text("You cannot go that way.")
            self.room = exits[thing]
            return text(f"You go {thing}. You are in {WORLD[self.room][0]}.")
        if verb == "take":
            if thing not in here:
                return text("You see no such thing here.")
            here.discard(thing)
            self.carrying.add(thing)
            return text(f"Taken: {thing}.")
        if verb == "inventory":
            return text(f"You carry: {', '.join(sorted(self.carrying)) or 'nothing'}.")
        if verb == "unlock":
            if thing != exit_here:
                return text("There is nothing like that to unlock here.")
            if self.task_spec["key"] not in self.carrying:
                return text("You have no key that fits.")
            self.unlocked = True
            return text(f"The {thing} is unlocked.")
        if verb == "open":
            if thing != exit_here:
                return text("That does not open.")
            if not self.unlocked:
                return text(f"The {thing} is locked.")
            return text(f"The {thing} opens and you step outside. You are free!", reward=1.0, finished=True)
        return text(f"I do not know the verb {verb!r}. Type help.")


class PatientAdventure(TextAdventure):
    """Clean: the same slow-setup game whose interpreter drops control characters (as a line editor does) — a correct
    environment of this shape, which every check must pass however long its setup takes against ``--timeout``."""

    @tool
    async def command(self, params: Command) -> ToolOutput:
        """Run one command of the game, as you would type it at its prompt. Type `help` to list the commands."""
        return self.respond("".join(ch for ch in params.command if ch.isprintable()))
