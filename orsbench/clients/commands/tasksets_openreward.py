"""verifiers' ``OpenRewardTaskset`` (the ``tasksets`` package, 0.1.4) under orsbench's adapter contract (Python 3.12).

    <venv>/bin/python orsbench/clients/commands/tasksets_openreward.py

What a verifiers user writes to train or evaluate on an ORS environment::

    taskset = OpenRewardTaskset(config=OpenRewardTasksetConfig(environment=ENV, base_url=URL, split=SPLIT))
    env = vf.Env(taskset=taskset, harness=vf.Harness(model=..., client=ClientConfig(...)))
    state = await env.rollout(env.get_dataset()[i], client=..., model=...)

The taskset lists the split's tasks (``client.environments.get(name, variant=, base_url=)``, ``list_tasks``), and each
rollout opens a session of its own (``OpenRewardSession.start``), puts the prompt and the tools in the state, and
answers the model's tool calls (``OpenRewardTaskset.call_tool``: the step's reward added, ``finished`` stopping the
rollout); verifiers' base harness runs the loop (its default ``max_turns`` of 10) and the taskset's rubric scores the
rollout (the sum of the steps' rewards). Nothing of that is re-implemented here: the model is orsbench's scripted
one (``ORSBENCH_MODEL_URL``, Chat Completions), and this file reads the rollout's state afterwards.

What it writes (``docs/clients.md``): one line per call, from the state's ``completion`` (the tool message the model
was shown, its text) and ``trajectory`` (the reward of the step whose reply made the call); the state keeps only the
last call's ``finished`` (``state["openreward_finished"]``), which goes on the last call (the target's consumer
profile says so once, ``Consumer.unsurfaced``); then the rollout's reward as ``episode_reward``, and its error, if any, as an error line.
Exit status 0 when the rollout ended without an error, 1 when it did not, 2 for a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from command_contract import Out, play_episodes

REQUIRED = ("ORSBENCH_URL", "ORSBENCH_ENV", "ORSBENCH_SCRIPT", "ORSBENCH_OUT", "ORSBENCH_MODEL_URL")


def text_of(content: Any) -> str:
    """A tool message's content as the model read it: a string, or its text parts joined (images are parts)."""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict) and part.get("type") == "text")


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def record(state: Any, out: Out) -> None:
    """One contract line per tool message of the rollout, in order (see the module docstring)."""
    steps = list(state.get("trajectory") or [])
    names: dict[str, str] = {}
    step_of: dict[str, int] = {}
    replies = 0
    results: list[tuple[str, str, Any]] = []
    for message in state.get("completion") or []:
        role = _get(message, "role")
        if role == "assistant":
            for call in _get(message, "tool_calls") or []:
                call_id = str(_get(call, "id"))
                function = _get(call, "function")
                names[call_id] = str(_get(call, "name") or _get(function, "name") or "")
                step_of[call_id] = replies
            replies += 1
        elif role == "tool":
            call_id = str(_get(message, "tool_call_id"))
            step = steps[step_of[call_id]] if step_of.get(call_id, len(steps)) < len(steps) else {}
            results.append((names.get(call_id, ""), text_of(_get(message, "content")), _get(step, "reward")))
    finished = bool(state.get("openreward_finished"))
    for number, (tool, text, reward) in enumerate(results):
        out.write({"tool": tool, "text": text, "reward": reward, "finished": finished and number == len(results) - 1})


async def play(environ: dict[str, str], out: Out) -> int:
    import verifiers as vf
    from tasksets.openreward import OpenRewardTaskset, OpenRewardTasksetConfig
    from verifiers.types import ClientConfig

    split, index = environ.get("ORSBENCH_SPLIT") or "train", int(environ.get("ORSBENCH_INDEX") or 0)
    os.environ.setdefault("OPENAI_API_KEY", "orsbench-scripted-model")
    client = ClientConfig(client_type="openai_chat_completions", api_base_url=environ["ORSBENCH_MODEL_URL"], api_key_var="OPENAI_API_KEY")
    try:
        taskset = OpenRewardTaskset(config=OpenRewardTasksetConfig(environment=environ["ORSBENCH_ENV"], base_url=environ["ORSBENCH_URL"], split=split))
        env = vf.Env(taskset=taskset, harness=vf.Harness(model="scripted", client=client))
        record_in = env.get_dataset()[index]
    except Exception as exc:  # noqa: BLE001 - the taskset could not list its tasks: the run fails here
        out.write({"error": f"{type(exc).__name__}: {exc}", "raised": True, "stage": "tasks"})
        return 1
    try:
        state = await env.rollout(record_in, client=client, model="scripted")
    except Exception as exc:  # noqa: BLE001 - the rollout raised: the user's eval or training step fails
        out.write({"error": f"{type(exc).__name__}: {exc}", "raised": True, "stage": "rollout"})
        return 1
    record(state, out)
    error = state.get("error")
    if error:
        out.write({"error": f"the rollout ended with an error: {json.dumps(error, default=str)[:1500]}", "raised": False, "stage": "rollout"})
    out.write({"episode_reward": state.get("reward"), "stop_condition": state.get("stop_condition")})
    return 1 if error else 0


def main() -> int:
    # the unsurfaced line is the target's (its consumer profile), written by orsbench
    return play_episodes("tasksets", play, required=REQUIRED, client="tasksets.openreward",
                         not_importable="tasksets[openreward] does not import")  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
