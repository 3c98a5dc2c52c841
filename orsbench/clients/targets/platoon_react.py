"""platoon 0.4.0's ``platoon-react`` agent on its ORS service, on the scripted model: a variant of the ``platoon`` target.

The ``platoon`` target drives platoon's ORS session the way its rollout does with the script in the model's place;
this variant runs platoon's own agent loop (``platoon.harness.builtin.react``) between them, its model the scripted
one (``ORSBENCH_MODEL_URL``): the tool list it offers, how it turns each result into the model's tool message
(``ToolResult.as_text()``), where it stops (a finished result, a reply without tool calls), and its terminal-tool
handling are platoon's. ``orsbench/clients/commands/platoon_react.py`` plays it in the ``trainers-3.12`` environment;
it says there what of platoon's agent context it writes out and why (the model gateway needs tinker and torch).

platoon's other agents are not variants here, each for a reason read in its code: ``platoon-codeact`` runs the
model's ``<python>`` cells in IPython (``codeact/executor.py:42`` imports it; platoon's ORS path does not need it),
and its model writes code, not tool calls — the scripted model plays a script as tool calls; platoon's MCP bridge
(``platoon.gateway.mcp``: the agents' tool plane over streamable HTTP) imports ``platoon.gateway.core``, which
imports ``tinker`` and ``tinker_cookbook`` (torch ≥ 2.10, transformers) at module level.
"""

from __future__ import annotations

from orsbench.clients.consumers import Consumer
from orsbench.clients.interpreters import TRAINERS_312, Command
from orsbench.clients.targets import ClientTarget, register_variant

COMMAND = Command(
    TRAINERS_312,
    "platoon_react.py",
    preload=("openreward", "platoon.envs.ors", "platoon.envs.service", "platoon.harness.builtin.react", "aiohttp"),
)

register_variant(
    ClientTarget(
        "platoon-react",
        "platoon",
        "platoon-react agent on platoon's ORS service (scripted model)",
        command=COMMAND,
        variant_of="platoon",
        trains=True,
        takes_model=True,
        startup_s=20.0,  # a cold start imports openreward and platoon in a fresh 3.12 process
        concurrency=4,
        listings=("list_environments", "task"),
        consumer=Consumer(
            "finishing",
            no_reward="refuses",
            unfinished="zero",
            images=False,
            failed_call="error result",
            source="platoon 0.4.0 platoon/harness/builtin/react.py:88: each tool result reaches the model as "
            "ToolResult.as_text() (text blocks joined by newlines, an image as a '[mime]' placeholder, "
            "platoon/envs/service.py:135-144), a failed call as an error result the loop goes on after; the episode "
            "is graded as the ORS service grades it (platoon/envs/ors/session.py: OrsSession.grade)",
        ),
    ),
    origin=__name__,
)
