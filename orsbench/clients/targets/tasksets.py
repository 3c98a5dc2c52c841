"""verifiers' ``OpenRewardTaskset`` (the ``tasksets`` package 0.1.4): an ORS environment as a verifiers taskset.

A verifiers user names the environment and where it is served (``OpenRewardTasksetConfig(environment=...,
variant=..., base_url=...)``); the taskset lists the split's tasks through the openreward SDK's sync client
(``client.environments.get(name, variant=, base_url=)``), and each rollout of ``vf.Env`` opens a session of its own,
shows the model the prompt and the tools, and answers its tool calls, verifiers' base harness running the loop.
tasksets needs Python ≥ 3.10 and the verifiers of its own release (``TASKSETS_312``: pip's resolution of a newer
verifiers does not import), so it runs as a command adapter, ``orsbench/clients/commands/tasksets_openreward.py``,
on the scripted model (``ORSBENCH_MODEL_URL``).

It is graded case by case (``check-client``) and not yet a row of the matrix: a row is predicted cell by cell from the
pinned defects, and this client's are read here for the first time.
"""

from __future__ import annotations

from orsbench.clients.consumers import Consumer
from orsbench.clients.interpreters import TASKSETS_312, Command
from orsbench.clients.targets import ClientTarget, register_variant

COMMAND = Command(TASKSETS_312, "tasksets_openreward.py", preload=("openreward", "verifiers", "tasksets.openreward"))

register_variant(
    ClientTarget(
        "tasksets",
        "tasksets",
        "verifiers' OpenRewardTaskset (tasksets, scripted model)",
        command=COMMAND,
        variant_of="",
        trains=True,
        takes_model=True,
        startup_s=30.0,  # a cold start imports verifiers (datasets, openai) in a fresh 3.12 process
        concurrency=2,
        listings=("tasks",),  # OpenRewardTaskset.load_tasks: list_tasks of the split
        consumer=Consumer(
            "sum",
            failed_call="error result",
            unsurfaced=(("finished", "the rollout's state keeps the last call's finished only (tasksets/openreward.py: state['openreward_finished'])"),),
            source="tasksets 0.1.4 tasksets/openreward.py: the rubric's openreward_reward is State.total_step_reward(), "
            "the sum of the steps' rewards (verifiers/types.py: add_step_reward skips None, refuses a boolean); "
            "a finished result stops the rollout (state.stop('openreward_done')); text blocks reach the model joined "
            "by newlines (OpenRewardSession.content)",
        ),
    ),
    origin=__name__,
)
