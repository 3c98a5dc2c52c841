"""The Inspect task an inspect-openreward user writes for an ORS environment at a URL: ``inspect eval`` runs it.

The quick start of inspect-openreward's README, with the environment reached by
the URL it is served at (``environments.get(name, base_url=URL)``: the
openreward SDK's own way to a server that is not openreward.ai)::

    inspect eval orsbench/clients/targets/inspect_task.py@ors_episode \\
        -T url=http://127.0.0.1:PORT -T env=echo -T split=train -T index=0 --model openai/scripted

``openreward_dataset`` lists the split, ``openreward_solver`` opens a session per
sample, installs the tools and runs Inspect's ``generate(tool_calls="loop")``,
``openreward_scorer`` scores the reward it captured. Only the samples
``index`` .. ``index + count - 1`` are kept (the dataset is read up to them).
"""

from __future__ import annotations

import openreward
from inspect_ai import Task, task
from inspect_openreward import openreward_dataset, openreward_scorer, openreward_solver


@task
def ors_episode(url: str, env: str, split: str = "train", index: int = 0, count: int = 1) -> Task:
    environment = openreward.OpenReward().environments.get(env, base_url=url)
    dataset = openreward_dataset(environment, split, limit=int(index) + int(count))
    return Task(dataset=dataset[int(index) :], solver=openreward_solver(environment), scorer=openreward_scorer())
