"""Defect: the environment is cached per task, so a task's second session starts with its first one's episode.

Building a task's world is "expensive", so the author keeps one instance per task and hands it to
every session on that task. The first session plays normally; once it finishes, every later
session on the same task starts finished, and the server answers its very first call with
``episode_finished`` (the reference SDK keeps the finish latch on the instance). The trial of issue
24 saw exactly this: 56 fuzz and quality calls refused, and the checker called those checks passes.
The game is :class:`~tests.envs.command_game.CommandGame`'s (a free-text command tool), whose
cheapest input never ends the episode, so the checker's own play is what finishes each task first.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tests.envs.command_game import CommandGame


class CachedPerTask(CommandGame):
    #: task id → the one instance every session on that task gets.
    _built: ClassVar[dict[str, "CachedPerTask"]] = {}

    def __new__(cls, task_spec: dict = {}, secrets: dict = {}) -> "CachedPerTask":
        key = str(task_spec.get("id"))
        if key not in cls._built:
            cls._built[key] = super().__new__(cls)
        return cls._built[key]

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        if getattr(self, "_built_once", False):
            return  # already built for this task: reuse it as is
        super().__init__(task_spec, secrets)
        self._built_once = True

    def teardown(self) -> Any:
        return None  # the cached instance outlives its sessions
