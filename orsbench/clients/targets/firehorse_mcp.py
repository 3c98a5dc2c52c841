"""firehorse-cli's MCP bridge (``python -m firehorse.mcp``): the ORS session its CLI agents (claude-code, codex,
gemini, hermes) act on, driven the way its ``claude-code`` agent drives it, on the scripted model — a variant of the
``firehorse`` target (:data:`~orsbench.clients.targets.CLIENT_VARIANTS`), whose react agent calls the SDK in process.

A firehorse user who runs ``firehorse --agent claude-code`` gets this path: firehorse's orchestrator and
``run_trial`` open the trial's session (the prompt, the tools), then the agent writes an MCP config whose server
is ``python -m firehorse.mcp`` with the trial's environment in variables (``OPENREWARD_ENV_NAME``,
``OPENREWARD_TASK_SPEC``, ``OPENREWARD_RESULT_FILE``, ...; ``firehorse/agents/claude_code.py:335-361``), and the
Claude Code CLI — the MCP host — runs the model, calling the bridge's tools over stdio. The bridge opens a
session of its own and turns each MCP ``tools/call`` into an ORS call.

Here the host is orsbench's: the Claude Code binary is not a Python package and talks to Anthropic only. The
agent below (:class:`McpHostAgent`, registered in firehorse's own agent registry and run through firehorse's CLI,
orchestrator and ``run_trial``) builds the bridge's variables exactly as ``ClaudeCodeAgent.run`` does, starts the
bridge as a subprocess with the MCP SDK's stdio client (bounded by the case's deadline; the SDK stops it when the
host leaves), and asks the scripted model (Anthropic Messages, as Claude Code does) for each next tool call,
offering the bridge's ``tools/list`` and answering with its ``CallToolResult`` (``is_error`` from ``isError``).
It stops when a reply has no tool call, as a host does. At the end it reads the bridge's result file as
``ClaudeCodeAgent.run`` does (``claude_code.py:817-827``: the trial's reward is ``last_reward``).

What each call's line says is what firehorse's own rollout logger makes of the bridge's result
(``claude_code.py:279-300``: the text blocks joined with newlines, the reward and ``finished`` parsed from the
bridge's last ``[OR_REWARD:...]`` marker, that marker stripped) — the bridge's output, untranslated by orsbench.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register_variant
from orsbench.clients.targets.firehorse import command_line, platform_url

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

#: The name the host agent is registered under in firehorse's agent registry.
AGENT = "orsbench-mcp-host"
#: Seconds the host waits for the bridge to answer one MCP request (a tool call included).
MCP_REQUEST_S = 60.0


def bridge_environment(ctx: Any, result_file: str) -> dict[str, str]:
    """The bridge's variables, as ``ClaudeCodeAgent.run`` builds them (``firehorse/agents/claude_code.py:335-361``),
    over this process's environment (Claude Code starts its MCP servers with its own environment and the config's)."""
    session_task = ctx.session.task
    env = {
        "OPENREWARD_API_KEY": os.environ.get("OPENREWARD_API_KEY", ""),
        "OPENREWARD_ENV_NAME": ctx.env_name,
        "OPENREWARD_TASK_SPEC": json.dumps(dict(ctx.task_spec)),
        "OPENREWARD_TASK_SERVER_NAME": session_task.server_name,
        "OPENREWARD_TASK_ENV_NAME": session_task.environment_name,
        "OPENREWARD_TASK_NAMESPACE": session_task.namespace or "",
        "OPENREWARD_RESULT_FILE": result_file,
    }
    if ctx.toolset_name:
        env["OPENREWARD_TOOLSET_NAME"] = ctx.toolset_name
    else:
        env["OPENREWARD_TOOL_DESCRIPTIONS"] = "claude" if ctx.use_builtin_descriptions else "env"
    if ctx.secrets:
        env["OPENREWARD_SESSION_SECRETS"] = json.dumps(ctx.secrets)
    return {**os.environ, **env}


def shown(result: Any) -> tuple[str, Any, bool]:
    """A bridge ``CallToolResult`` as firehorse's rollout logger records it: text, reward, finished
    (``claude_code.py:281-300``, with ``firehorse.mcp.convert``'s own marker parser)."""
    from firehorse.mcp.convert import parse_or_reward_marker, strip_or_reward_marker

    content = "\n".join(getattr(block, "text", "") or "" for block in result.content)
    reward, finished = parse_or_reward_marker(content)
    return strip_or_reward_marker(content), reward, finished


def _make_agent(episode: AdapterEpisode) -> type:
    from anthropic import AsyncAnthropic
    from firehorse.agents.base import AgentResult, BaseAgent
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    class McpHostAgent(BaseAgent):
        """The MCP host in Claude Code's place: the bridge as its one MCP server, the scripted model as its model."""

        @property
        def name(self) -> str:
            return AGENT

        async def setup(self) -> None:
            return None

        async def run(self, ctx: Any) -> Any:
            episode.finished = False  # each trial is an episode of its own (a run of ORSBENCH_EPISODES plays several)
            with tempfile.TemporaryDirectory(prefix="orsbench-firehorse-mcp-") as folder:
                result_file = str(Path(folder) / "result.json")
                server = StdioServerParameters(
                    command=sys.executable, args=["-m", "firehorse.mcp"], env=bridge_environment(ctx, result_file)
                )
                async with stdio_client(server) as (read, write), ClientSession(read, write) as mcp:
                    await asyncio.wait_for(mcp.initialize(), MCP_REQUEST_S)
                    listed = (await asyncio.wait_for(mcp.list_tools(), MCP_REQUEST_S)).tools
                    await self._loop(ctx, mcp, listed)
                try:
                    data = json.loads(Path(result_file).read_text())
                except (OSError, ValueError):
                    return AgentResult(success=False, error="the MCP bridge wrote no result file")
            return AgentResult(success=True, reward=data.get("last_reward"), finished=data.get("finished", False), turns_used=data.get("calls", 0))

        async def _loop(self, ctx: Any, mcp: Any, listed: list[Any]) -> None:
            model = AsyncAnthropic(base_url=episode.model_url.removesuffix("/").removesuffix("/v1"), api_key="orsbench", max_retries=0)
            tools = [{"name": t.name, "description": t.description or "", "input_schema": t.inputSchema} for t in listed]
            messages: list[dict[str, Any]] = [{"role": "user", "content": ctx.prompt_text}]
            for _ in range(len(episode.calls) + 2):  # the script's calls, then the model's final text
                reply = await model.messages.create(model="scripted", max_tokens=1024, messages=messages, tools=tools)
                uses = [block for block in reply.content if block.type == "tool_use"]
                messages.append({"role": "assistant", "content": [block.model_dump() for block in reply.content]})
                if not uses:
                    return
                results = []
                for use in uses:
                    result = await asyncio.wait_for(mcp.call_tool(use.name, dict(use.input)), MCP_REQUEST_S)
                    text, reward, finished = shown(result)
                    if episode.finished:  # the bridge's own refusal ("Episode already complete"), never sent to the env
                        episode.after_finished(use.name, text, reward, finished, is_error=bool(result.isError))
                    elif result.isError:
                        episode.record(use.name, text, None, False, is_error=True)
                    else:
                        episode.record(use.name, text, reward, finished)
                    blocks = [{"type": "text", "text": getattr(b, "text", "")} for b in result.content if getattr(b, "type", "") == "text"]
                    results.append({"type": "tool_result", "tool_use_id": use.id, "content": blocks, "is_error": bool(result.isError)})
                messages.append({"role": "user", "content": results})

    return McpHostAgent


def play(episode: AdapterEpisode) -> None:
    from firehorse.agents import AGENT_REGISTRY
    from firehorse.cli import main as firehorse

    from orsbench.clients.transcript import ClientExited, ClientReported, UsageError

    if not episode.model_url:
        raise UsageError("the firehorse MCP bridge plays through a model: ORSBENCH_MODEL_URL is not set (orsbench check-client and matrix set it)")
    os.environ["OPENREWARD_SESSION_URL"] = episode.url  # the SDK's variable: firehorse and its bridge take no URL
    os.environ["OPENREWARD_API_URL"] = platform_url(episode.model_url)
    AGENT_REGISTRY[AGENT] = _make_agent(episode)
    with tempfile.TemporaryDirectory(prefix="orsbench-firehorse-") as output_dir:
        argv = command_line(episode, output_dir)
        argv[argv.index("--agent") + 1] = AGENT
        episode.stage = "run"
        code = firehorse(argv)
        episode.stage = "trial"
        try:
            summary = json.loads(Path(output_dir, "run_result.json").read_text())
        except (OSError, ValueError):
            raise ClientReported(f"firehorse exited {code} without a run_result.json") from None
    trials = summary.get("trials") or []
    if not trials:
        raise ClientReported(f"firehorse ran no trial (exit {code}, {summary.get('n_tasks')} task(s))")
    if episode.episodes > 1 and len(trials) > 1:  # ORSBENCH_EPISODES (§13.15): each trial's failure, then its aggregate
        failed = [t for t in sorted(trials, key=lambda t: t.get("task_index", 0)) if t.get("error")]
        for trial in failed:
            episode.error(f"firehorse: trial failed (exit {code}): {trial['error']}", raised=False)
        averaged = sum(1 for t in trials if t.get("final_reward") is not None)
        episode.aggregate(summary.get("avg_reward"), averaged, firehorse="run_result.json avg_reward", n_failed=summary.get("n_failed"))
        if failed:
            raise ClientExited(1)
    elif trials[0].get("error"):
        raise ClientReported(f"firehorse: trial failed (exit {code}): {trials[0]['error']}")
    episode.stage = None


register_variant(
    ClientTarget(
        "firehorse-mcp",
        "firehorse-cli",
        "firehorse-cli's MCP bridge (python -m firehorse.mcp, as its claude-code agent runs it)",
        play,
        variant_of="firehorse",
        plays_episodes=True,  # firehorse's orchestrator plays --max-tasks trials itself, as the firehorse target's
        modules=("openreward", "anthropic", "mcp", "firehorse.cli", "firehorse.orchestrator", "firehorse.mcp.bridge"),
        extra="firehorse",
        takes_model=True,
        startup_s=15.0,  # the bridge is a fresh Python importing the openreward SDK and the MCP SDK
        concurrency=2,
        listings=("num_tasks", "task", "tools"),  # the orchestrator's task selection, then the trial's tool list
        consumer=Consumer(
            "last",
            images=True,
            failed_call="error result",
            source="firehorse-cli 0.1.4: firehorse/mcp/bridge.py keeps last_reward (the last non-null reward) and writes "
            "it to OPENREWARD_RESULT_FILE, which agents/claude_code.py reports as the trial's reward; a call that "
            "fails is an isError CallToolResult and the host goes on (ToolFailed and SessionTerminatedError make "
            "every later call 'Session terminated'); image blocks are passed to the host as MCP images",
        ),
    ),
    origin=__name__,
)

__all__ = ["AGENT", "bridge_environment", "play", "shown"]
