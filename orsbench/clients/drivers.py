"""Client drivers: each plays one scripted episode the way its users write it.

A driver runs inside a forked child (:mod:`orsbench.clients.run`), with the
openreward SDK's environment variables already pointing at the server, and
fills ``out`` as it goes — ``outputs`` (the text each call showed the model),
``reward``, ``finished``, ``failed_at`` — so a crash or a kill still leaves
what happened before it. The four targets:

* ``openreward`` — the openreward SDK client (``OpenReward().environments``), sync;
* ``ors`` — ors-sdk's client (``ors.ORS``, aiohttp), sync;
* ``trl`` — TRL's ``OpenRewardSpec``: ``environment_factory()``, ``reset(task_index=0)``,
  then the generated tool methods, as GRPOTrainer calls them;
* ``inspect`` — a real ``inspect_ai.eval`` of ``openreward_dataset`` +
  ``openreward_solver`` + ``openreward_scorer`` with Inspect's offline
  ``mockllm/model`` scripted to make the script's tool calls (usage set, so it
  never fetches a tokenizer). Like an eager model, it asks for the last call
  once more after the script: a client must stop the loop on ``finished``.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orsbench import protocol
from orsbench.clients.episodes import INDEX, SPLIT, Script

Out = dict[str, Any]


@dataclass(frozen=True)
class Client:
    name: str
    #: The distribution whose version the reports name.
    package: str
    title: str
    play: Callable[[str, str, Script, Out], None]
    #: Seconds added to every deadline for the client's own start-up (an Inspect eval's set-up).
    startup_s: float = 0.0
    #: Episodes of this client that may play at once on a 2-core machine without starving each other.
    concurrency: int = 16

    @property
    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") or "" for b in blocks)


def _play_session(environment: Any, script: Script, out: Out) -> None:
    """The sync session API both SDK clients share: session → prompt → each call."""
    out["failed_at"] = "session"
    with environment.session(split=SPLIT, index=INDEX) as session:
        out["failed_at"] = "prompt"
        session.get_prompt()
        out["failed_at"] = "call"
        for step in script.steps:
            result = session.call_tool(step.tool, step.args)
            out["outputs"].append(_text(result.blocks))
            if result.reward is not None:
                out["reward"] = result.reward
            out["finished"] = out["finished"] or bool(result.finished)
    out["failed_at"] = None


def _openreward(url: str, env: str, script: Script, out: Out) -> None:
    import openreward

    _play_session(openreward.OpenReward().environments.get(env), script, out)


def _ors(url: str, env: str, script: Script, out: Out) -> None:
    from ors.client import ORS

    client = ORS(base_url=url)
    try:
        _play_session(client.environments.get(env), script, out)
    finally:
        client.close()


def _trl(url: str, env: str, script: Script, out: Out) -> None:
    from trl.experimental.openreward import OpenRewardSpec

    out["failed_at"] = "spec"
    rollout = OpenRewardSpec(url, env_name=env, task_tools_discovery_index=INDEX).environment_factory()
    out["failed_at"] = "reset"
    rollout.reset(task_index=INDEX)
    try:
        out["failed_at"] = "call"
        for step in script.steps:
            method = getattr(rollout, step.tool, None)
            if not callable(method):
                raise LookupError(f"the adapter exposes no method {step.tool!r}")
            out["outputs"].append(method(**step.args))
        out["reward"], out["finished"] = rollout.reward, bool(rollout.finished)
        out["failed_at"] = None
    finally:
        rollout._close()


def _inspect(url: str, env: str, script: Script, out: Out) -> None:
    import openreward
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
    from inspect_openreward import openreward_dataset, openreward_scorer, openreward_solver

    environment = openreward.OpenReward().environments.get(env)
    out["failed_at"] = "dataset"
    dataset = openreward_dataset(environment, SPLIT, limit=INDEX + 1)
    planned = [*script.steps, script.steps[-1]]  # the last call once more: the loop must stop on finished
    turns = iter(planned)
    seen: list[Any] = []

    def policy(messages: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        seen.append([tool.model_dump(exclude_none=True) for tool in tools])
        step = next(turns, None)
        if step is None:
            output = ModelOutput.from_content("mockllm/model", "done")
        else:
            output = ModelOutput.for_tool_call("mockllm/model", step.tool, dict(step.args))
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    out["failed_at"] = "eval"
    with tempfile.TemporaryDirectory(prefix="orsbench-inspect-") as logs:
        task = Task(dataset=dataset, solver=openreward_solver(environment), scorer=openreward_scorer())
        [log] = inspect_eval(
            task,
            model=get_model("mockllm/model", custom_outputs=policy),
            log_dir=logs,
            display="none",
            max_samples=1,
            fail_on_error=False,
            score_display=False,
        )
        sample = (log.samples or [None])[0]
    out["tools_seen"] = seen[0] if seen else []
    if sample is None:
        raise RuntimeError(f"the eval ended {log.status} without a sample: {log.error.message if log.error else ''}")
    out["outputs"] = [m.text for m in sample.messages if isinstance(m, ChatMessageTool)]
    score = next(iter((sample.scores or {}).values()), None)
    if score is not None and score.metadata:
        out["reward"] = score.metadata.get("reward")
        out["finished"] = bool(score.metadata.get("finished"))
    if sample.error is not None:
        out["failed_at"] = "sample"
        raise RuntimeError(f"sample error: {sample.error.message}")
    out["failed_at"] = None


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client("openreward", "openreward", "openreward SDK client", _openreward),
        Client("ors", "ors-sdk", "ors-sdk client (ors.ORS)", _ors),
        Client("trl", "trl", "TRL OpenRewardSpec", _trl),
        Client("inspect", "inspect-openreward", "inspect-openreward (Inspect eval)", _inspect, startup_s=10.0, concurrency=2),
    )
}


def point_at(url: str) -> dict[str, str]:
    """Environment variables every client reads to find the server."""
    return {
        protocol.ENV_API_URL: url,
        protocol.ENV_SESSION_URL: url,
        protocol.ENV_DISABLE_UPDATE_CHECK: "1",
        "INSPECT_LOG_DIR": os.path.join(tempfile.gettempdir(), "orsbench-inspect-logs"),
    }
