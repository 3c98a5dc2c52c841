"""Defect: the command tool never answers when the command holds a control character.

A shell-like environment writes each command to a terminal and waits for the prompt to come
back; a control character (Ctrl-C, Ctrl-D, an escape sequence, DEL) leaves the terminal waiting
for more input, and the call never ends. Tabs and line breaks are ordinary whitespace here. A
policy that emits such a byte stalls its rollout, and the GRPO step with it. ``tool.no_hang``
found this before the fuzz drew its strings differently, then missed it (issue 24): control
characters are a boundary class of their own now, tried in every run.
"""

from __future__ import annotations

import asyncio
import unicodedata

from openreward.environments import ToolOutput, tool

from tests.envs.command_game import Command, CommandGame


def holds_control(line: str) -> bool:
    """A C0/C1 control character other than tab, line feed and carriage return."""
    return any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in line)


class HangsOnControl(CommandGame):
    @tool
    async def command(self, params: Command) -> ToolOutput:
        """Run one command of the game, as you would type it at its prompt. Type `help` to list the commands."""
        if holds_control(params.command):
            await asyncio.sleep(3600)  # the terminal waits for the rest of a sequence that never comes
        return self.respond(params.command)
