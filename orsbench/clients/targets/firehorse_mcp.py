"""firehorse-cli's MCP bridge (``python -m firehorse.mcp``), driven by a scripted policy instead of an agent CLI.

What firehorse does for one trial, with the LLM agent replaced by the script:
``run_trial`` opens a session for the task (``get_task(split, index)``, then
``env.session(task, secrets)``), reads the prompt and tools; the agent (Claude
Code, Codex, ...) then starts the bridge as its MCP server with the variables
``ClaudeCodeAgent`` sets (``OPENREWARD_ENV_NAME``, ``OPENREWARD_TASK_SPEC``, ...);
the bridge opens its *own* session for the same task and serves its tools over
MCP stdio. The scripted policy is the MCP host here: it lists the tools, makes
the script's calls, and stops when the bridge's ``[OR_REWARD:{"r", "f"}]``
marker says finished — no LLM, no network beyond 127.0.0.1.

Each result's text is its text blocks joined, with the bridge's own control
markers removed by firehorse's ``strip_bridge_markers`` (what its rollout logger
keeps); reward and finished come from the marker (firehorse's
``parse_or_reward_marker``). A result the bridge flags ``isError`` is the
bridge's way of saying the call failed: reported as an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

#: Seconds the bridge gets to answer one MCP request (its session set-up included).
CALL_TIMEOUT_S = 60.0


def bridge_environment(episode: AdapterEpisode, task: Any, result_file: str) -> dict[str, str]:
    """The variables ``ClaudeCodeAgent.run`` hands the bridge, over this process's own (which point at the server)."""
    env = {
        **os.environ,
        "OPENREWARD_ENV_NAME": episode.env,
        "OPENREWARD_TASK_SPEC": json.dumps(dict(task.task_spec)),
        "OPENREWARD_TASK_SERVER_NAME": task.server_name,
        "OPENREWARD_TASK_ENV_NAME": task.environment_name,
        "OPENREWARD_TASK_NAMESPACE": task.namespace or "",
        "OPENREWARD_RESULT_FILE": result_file,
        "OPENREWARD_TOOL_DESCRIPTIONS": "env",
    }
    if episode.secrets:
        env["OPENREWARD_SESSION_SECRETS"] = json.dumps(episode.secrets)
    return env


async def _play(episode: AdapterEpisode) -> None:
    """``run_trial`` with the agent replaced by the script: its own session, then the bridge's, over MCP stdio."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from openreward import AsyncOpenReward

    from orsbench.clients.transcript import ClientReported

    environment = AsyncOpenReward().environments.get(episode.env)
    episode.stage = "task"
    task = await environment.get_task(episode.split, episode.index)
    episode.stage = "session"
    async with environment.session(task, secrets=episode.secrets or None) as trial:  # run_trial's own session
        episode.stage = "prompt"
        await trial.get_prompt()
        await trial.list_tools()
        with tempfile.TemporaryDirectory(prefix="orsbench-firehorse-") as tmp:
            bridge_env = bridge_environment(episode, task, os.path.join(tmp, "result.json"))
            params = StdioServerParameters(command=sys.executable, args=["-m", "firehorse.mcp"], env=bridge_env)
            episode.stage = "bridge"
            # The bridge's progress prints go to a file beside its result file, not into our output.
            with open(os.path.join(tmp, "bridge.log"), "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as mcp:
                    failure = await _converse(mcp, episode)
            if failure is not None:  # raised out here: inside the MCP task group it would come wrapped in a group
                raise ClientReported(failure)
    episode.stage = None


async def _converse(mcp: Any, episode: AdapterEpisode) -> str | None:
    """The scripted policy over MCP: list the tools, make each call; the bridge's error text, if a call failed."""
    from firehorse.mcp.convert import parse_or_reward_marker, strip_bridge_markers

    await asyncio.wait_for(mcp.initialize(), CALL_TIMEOUT_S)
    await asyncio.wait_for(mcp.list_tools(), CALL_TIMEOUT_S)
    episode.stage = "call"
    shown: list[str] = episode.extras.setdefault("shown", [])
    for call in episode.steps():
        result = await asyncio.wait_for(mcp.call_tool(call.tool, call.input), CALL_TIMEOUT_S)
        raw = "".join(getattr(block, "text", "") for block in result.content if block.type == "text")
        shown.append(raw)  # what a model reading the MCP result sees, markers and all
        if result.isError:
            return f"the bridge answered isError: {raw}"
        reward, finished = parse_or_reward_marker(raw)
        episode.record(call.tool, strip_bridge_markers(raw), reward, finished)
        if finished:
            break
    episode.stage = "delete"
    return None


def play(episode: AdapterEpisode) -> None:
    asyncio.run(_play(episode))


register(
    ClientTarget(
        "firehorse",
        "firehorse-cli",
        "firehorse-cli MCP bridge (scripted policy)",
        play,
        modules=("openreward", "mcp", "firehorse.mcp.convert"),
        extra="firehorse",
        startup_s=10.0,
        concurrency=2,
        consumer=Consumer(
            "last",
            failed_call="error result",
            source="firehorse-cli 0.1.4: the agents' trial results report final_reward = the bridge's last_reward; "
            "the MCP bridge flags a failed call isError",
        ),
    ),
    origin=__name__,
)
