"""platoon 0.4.0's ORS client (``platoon.envs.ors``: the ``ors+http://HOST/Env`` service its rollout, eval and trainer use).

platoon needs Python 3.12, so it is a command target: ``orsbench/clients/commands/platoon_ors.py`` drives it the
way ``platoon.harness.rollout`` does (``get_service(uri)``, ``get_task``, ``open``, the agent's tool plane,
``grade``, ``close``), run by the Python of the ``trainers-3.12`` environment (:mod:`orsbench.clients.interpreters`).
Only what that path imports is installed: platoon itself without its dependencies (wandb, datasets, textual,
ipython: its trainer and UI) and the openreward SDK, which its ORS service drives; not ``tinker`` and torch
(``platoon.harness``'s model gateway), which the adapter does without (see its ``grade``).
"""

from __future__ import annotations

from orsbench.clients.consumers import Consumer
from orsbench.clients.interpreters import TRAINERS_312, Command
from orsbench.clients.targets import ClientTarget, register

COMMAND = Command(TRAINERS_312, "platoon_ors.py", preload=("openreward", "platoon.envs.ors", "platoon.envs.service"))

register(
    ClientTarget(
        "platoon",
        "platoon",
        "platoon ORS service (ors+http)",
        command=COMMAND,
        trains=True,
        # A cold start (matrix --url, the adapter by hand) imports openreward in a fresh 3.12 process: seconds.
        startup_s=20.0,
        listings=("list_environments", "task"),  # the env-name check, the task's display name (both best effort)
        consumer=Consumer(
            "finishing",
            no_reward="refuses",
            unfinished="zero",
            failed_call="error result",
            source="platoon 0.4.0 platoon/envs/ors/session.py: OrsSession.grade, _terminal_outcome, _execute",
        ),
    ),
    origin=__name__,
)
