"""platoon 0.4.0's ``platoon-react`` agent on its ORS service, on orsbench's scripted model (Python >= 3.12).

    <venv>/bin/python orsbench/clients/commands/platoon_react.py

What a platoon user gets with ``harness: platoon-react`` in an environment entry whose ``uri`` is
``ors+http://HOST/Env``: platoon's rollout opens the ORS session (:mod:`platoon_ors`'s ``get_service``,
``get_task``, ``open``), builds the agent's context and runs the harness function
(``platoon.harness.builtin.react.react``) — its own loop: the env's tools as OpenAI tools (its terminal tool kept
out of them), each model reply's tool calls answered in order through ``ctx.call_tool`` until one reports the
episode finished, a reply without tool calls ending the agent (its text sent to the terminal tool, if any) — then
grades and closes the session. The harness here is platoon's, unchanged; the model is the scripted one
(``ORSBENCH_MODEL_URL``, Chat Completions), which plays the case's script as tool calls.

The context (:class:`ScriptedContext`) is platoon's ``AgentContext`` contract (``platoon.harness.agent``) for one
root agent, written out here because platoon's own (``platoon.harness.inline.InlineAgentContext``) is built on its
model gateway (``platoon.gateway.core``), which imports ``tinker`` and ``tinker_cookbook`` (torch, transformers):
not installable beside orsbench, and not part of the ORS path. It does what that context does on this path:

* ``chat``: one Chat Completions request with the harness's messages and tools (platoon's hosted gateway sends
  ``ctx.chat`` as such a body, ``platoon.gateway.hosted.HostedGateway.chat``), read back as a ``ChatReply``;
* ``list_tools``: the session's tools, filtered by the agent's access (``full``: all, ``platoon.gateway.mcp.filter_tools``);
* ``call_tool``: a tool the agent does not see is refused without reaching the env (``InlineAgentContext.call_tool``);
  one that raises becomes an ``is_error`` result (``platoon.gateway.mcp._call_and_record``); each call is recorded.

What it writes (``docs/clients.md``): one line per call, what the model was shown — ``result.as_text()`` as react
puts it in the tool message (``react.py:88``) — with the result's reward and ``finished``, and ``"is_error": true``
where platoon's own record of the call says so (``ToolCallRecord.is_error``); then the grade's episode line, as
:mod:`platoon_ors` writes it. Exit status 0 when the grade is ``scored``, 1 when it is not, 2 for a usage error.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from command_contract import Out, play_episodes
from platoon_ors import REQUIRED, grade, open_session, unwind_on_sigterm

#: Seconds one model request may take (the scripted model answers at once, or after a case's pause).
MODEL_REQUEST_S = 120.0


class Budget:
    """An unbounded step budget (platoon's for a rollout without ``agents.budget``); ``max_steps`` bounds the agent."""

    def __init__(self) -> None:
        self.steps = 0

    def remaining(self) -> float:
        return math.inf

    def used(self) -> float:
        return float(self.steps)


class NoSubagents:
    """``ctx.agents`` of an agent whose environment allows no subagents: a launch is refused (react never launches)."""

    async def spawn(self, goal: str, **options: Any) -> Any:
        raise RuntimeError("this environment allows no subagents")

    def keep_children(self) -> None:
        return None


class ScriptedContext:
    """``platoon.harness.agent.AgentContext`` of one root agent whose model is the scripted one (see the module docstring)."""

    def __init__(self, session: Any, task: Any, model_url: str, out: Out, max_steps: int) -> None:
        self.agent_id, self.trajectory_id, self.parent_agent_id = f"agent-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex, None
        self.depth, self.role, self.access = 0, "policy", "full"
        self.task, self.session = task, session
        self.instruction = session.instruction or ""
        self.max_steps = max_steps
        self.options: Mapping[str, Any] = {}
        self.endpoint = None  # react calls the model through ctx.chat only
        self.mcp = None
        self.budget = Budget()
        self.agents = NoSubagents()
        self.model_url = model_url.rstrip("/")
        self.out = out
        self.finished = False
        self.misc: dict[str, Any] = {}

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                   kind: str = "policy", **sampling: Any) -> Any:  # fmt: skip
        import aiohttp
        from platoon.harness.agent import ChatReply

        body: dict[str, Any] = {"model": "scripted", "messages": [dict(m) for m in messages], **sampling}
        if tools:
            body["tools"] = [dict(tool) for tool in tools]
        timeout = aiohttp.ClientTimeout(total=MODEL_REQUEST_S)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.post(f"{self.model_url}/chat/completions", json=body, headers={"Authorization": "Bearer orsbench"}) as answer:
                answer.raise_for_status()
                data = await answer.json()
        self.budget.steps += 1
        choice = data["choices"][0]
        return ChatReply(call_id=str(data.get("id", "")), message=choice["message"], finish_reason=str(choice.get("finish_reason")))

    async def list_tools(self) -> list[Any]:
        return list(await self.session.tools())

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        from platoon.envs.service import ToolResult

        if name not in {tool.name for tool in await self.list_tools()}:
            return ToolResult.text(f"Tool {name!r} is not available to this agent (tool access: {self.access}).", is_error=True)
        try:
            result = await self.session.call_tool(name, dict(arguments))
        except Exception as exc:  # noqa: BLE001 - platoon.gateway.mcp turns a raising call into an error result
            result = ToolResult.text(f"Tool {name!r} failed: {type(exc).__name__}: {exc}", is_error=True)
        line = {"tool": name, "text": result.as_text(), "reward": result.reward, "finished": bool(result.finished)}
        if self.finished:  # platoon's finish latch answered it (environment_already_finished) without reaching the env
            self.out.write({**line, "is_error": bool(result.is_error), "after_finished": True})
        else:
            self.out.write({**line, **({"is_error": True} if result.is_error else {})})
        self.finished = self.finished or bool(result.finished)
        return result

    def annotate(self, **misc: Any) -> None:
        self.misc.update(misc)

    def annotate_step(self, **misc: Any) -> None:
        self.misc.update(misc)


async def play(environ: dict[str, str], out: Out) -> int:
    from platoon.harness.builtin.react import react

    calls = json.loads(open(environ["ORSBENCH_SCRIPT"], encoding="utf-8").read())["calls"]
    opened = await open_session(environ, out)
    if opened is None:
        return 1
    task, session = opened
    try:
        # max_steps bounds the agent as an environment's config does: the script's replies and the final one.
        ctx = ScriptedContext(session, task, environ["ORSBENCH_MODEL_URL"], out, max_steps=len(calls) + 2)
        try:
            result = await react(ctx)
        except Exception as exc:  # noqa: BLE001 - platoon.harness.inline.run_agent: a harness failure is a result
            from platoon.harness.agent import AgentResult

            result = AgentResult("error", error=f"{type(exc).__name__}: {exc}")
        outcome = await grade(session)
    finally:
        await session.close()
    if result.status != "completed":  # the rollout reports how the agent ended
        out.write({"error": f"platoon-react ended {result.status}: {result.error}", "raised": False, "stage": "agent"})
    if not outcome.trainable:
        why = f"the rollout is not trained: {outcome.status} ({outcome.failure_kind}): {outcome.reason}"
        out.write({"error": why, "raised": False, "stage": "grade"})
    out.write({"episode_reward": outcome.reward, "outcome": outcome.status, "reason": outcome.reason, "failure_kind": outcome.failure_kind})
    return 0 if outcome.trainable and result.status == "completed" else 1


def main() -> int:
    return play_episodes("platoon-react", play, required=(*REQUIRED, "ORSBENCH_MODEL_URL"), client="platoon.harness.builtin.react",
                         not_importable="platoon is not installed", on_start=unwind_on_sigterm)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
