"""The engine's call room: tool calls and ``score_group``, streamed as SSE (``docs/protocol.md`` §3, §5).

A synchronous tool with no configured latency runs before the first byte is
sent (the fast path); anything else runs as a task the stream waits on, with
keep-alives, and can be resumed by ``task_id`` (§3.2).
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import traceback
from functools import partial
from typing import Any

import orjson
from pydantic import ValidationError

from orsbench import protocol
from orsbench.scenarios.base import RecordedAnswer, Scenario, ToolResult
from orsbench.servers import models, sse
from orsbench.servers.engine.base import EngineState, Outcome, finished_error, overrides, tool_error, uuid4_hex
from orsbench.servers.http import EventStream, HTTPError, Request, Send
from orsbench.servers.state import Session, TaskRecord


class CallRoutes(EngineState):
    """``/{env}/call`` and ``/{env}/score_group``: §5's reason precedence, hooks, the finish latch."""

    async def call(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        body: models.CallBody = await request.parse(models.CallBody)
        if body.task_id is not None:
            return self._resume(body.task_id)
        task_id = uuid4_hex()
        tool = session.tools.get(body.name)
        delay = sum(hook(session, body.name) for hook in self.hooks.tool_delay) if self.hooks.tool_delay else 0.0
        if tool is not None and not self._is_async(tool.fn) and self.config.latency <= 0 and delay <= 0:
            # Fast path: a synchronous tool finishes before the first byte is sent.
            outcome = self._run_sync(session, body.name, body.input)
            future: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()
            future.set_result(outcome)
            self.tasks.add_result(task_id, *outcome)
        else:
            future = asyncio.ensure_future(self._run_async(session, body.name, body.input, delay))
            self.tasks.add(task_id, TaskRecord(future))
            future.add_done_callback(partial(self.tasks.completed_callback, task_id))
        return _Streamer(task_id=task_id, future=future, engine=self)

    def _is_async(self, fn: Any) -> bool:
        """``inspect.iscoroutinefunction``, remembered per tool function (it is slow)."""
        known = self._async_fns.get(fn)
        if known is None:
            known = self._async_fns[fn] = inspect.iscoroutinefunction(fn)
        return known

    def _resume(self, task_id: str) -> EventStream:
        record = self.tasks.get(task_id)
        if record is None:
            return EventStream(sse.frame(protocol.EVENT_ERROR, protocol.UNKNOWN_TASK_ID))
        return _Streamer(task_id=task_id, future=record.future, engine=self)

    def _precheck(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[Any, Any] | str:
        """Reason precedence (§5): unknown tool, then the finish latch, then input validation."""
        tool = session.tools.get(name)
        if tool is None:
            return tool_error(f"{name!r} is not a valid tool", protocol.REASON_NOT_FOUND)
        if session.finished:
            return finished_error(name)
        if tool.params is None:
            return tool, None
        try:
            return tool, tool.params.model_validate(tool_input)
        except ValidationError as exc:
            return tool_error(f"Tool input validation error: {exc.errors()}", protocol.REASON_INPUT_VALIDATION)

    def _finish(self, session: Session, name: str, result: Any) -> tuple[str, str]:
        if isinstance(result, RecordedAnswer):  # cassette replay: the recorded bytes, as they were
            if session.finished:
                return ("end", finished_error(name))
            session.finished = session.finished or result.finished
            self.stats.calls[name] += 1
            return (result.kind, result.data)
        if not isinstance(result, ToolResult):
            raise TypeError(f"tool {name!r} returned {type(result).__name__}, not a ToolOutput")
        if session.finished:  # a concurrent call finished the episode first
            outcome = ("end", finished_error(name))
        else:
            if result.finished:
                session.finished = True
            self.stats.calls[name] += 1
            outcome = ("end", orjson.dumps({"ok": True, "output": result.to_wire()}).decode())
        for hook in self.hooks.after_tool:
            hook(session, name, outcome)
        return outcome

    def _hooked(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
        for hook in self.hooks.before_tool:
            outcome = hook(session, name, tool_input)
            if outcome is not None:
                return outcome
        return None

    def _prepare(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[Outcome | None, Any, Any]:
        """``(answer, tool, args)``: an answer given before the tool runs (a hook's, or §5's reasons), else the tool to run."""
        if self.hooks.before_tool and (hooked := self._hooked(session, name, tool_input)) is not None:
            return hooked, None, None
        checked = self._precheck(session, name, tool_input)
        if isinstance(checked, str):
            self.stats.call_errors[name] += 1
            return ("end", checked), None, None
        return None, checked[0], checked[1]

    def _raised(self, name: str, exc: Exception) -> Outcome:
        """The tool raised: an ``error`` event with its message, and — as the reference server logs it — its
        traceback on stderr (what ``orsbench check --serve`` shows beside the finding)."""
        self.stats.call_errors[name] += 1
        print(f"tool {name!r} raised:", file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
        return ("error", str(exc))

    def _run_sync(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
        answer, tool, args = self._prepare(session, name, tool_input)
        if answer is not None:
            return answer
        try:
            return self._finish(session, name, tool.fn(session.scenario, session.episode, args))
        except Exception as exc:  # noqa: BLE001 - becomes the `error` event
            return self._raised(name, exc)

    async def _run_async(self, session: Session, name: str, tool_input: dict[str, Any], delay: float = 0.0) -> tuple[str, str]:
        answer, tool, args = self._prepare(session, name, tool_input)
        if answer is not None:
            return answer
        try:
            await session.enter_tool(name)
            try:
                if self.config.latency + delay > 0:
                    await asyncio.sleep(self.config.latency + delay)
                result = tool.fn(session.scenario, session.episode, args)
                if inspect.isawaitable(result):
                    result = await result
                return self._finish(session, name, result)
            finally:
                session.exit_tool(name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - becomes the `error` event
            return self._raised(name, exc)

    async def score_group(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        if not overrides(session.scenario, "score_group"):
            raise HTTPError(404, f"Environment {raw_env.lower()!r} does not implement score_group")
        body: models.ScoreGroupBody = await request.parse(models.ScoreGroupBody)
        if body.task_id is not None:
            return self._resume(body.task_id)
        candidates = [c.model_dump() for c in body.candidates]
        task_id = uuid4_hex()
        future: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()
        try:
            scores = session.scenario.score_group(session.episode, candidates) or []
            if len(scores) != len(candidates):
                future.set_result(("error", f"score_group returned {len(scores)} scores for {len(candidates)} candidates"))
            else:
                payload = {"scores": [{"reward": float(s), "metadata": None} for s in scores]}
                future.set_result(("end", orjson.dumps(payload).decode()))
        except Exception as exc:  # noqa: BLE001
            future.set_result(("error", str(exc)))
        self.tasks.add(task_id, TaskRecord(future))
        self.tasks.completed(task_id)
        return _Streamer(task_id=task_id, future=future, engine=self)



class _Streamer(EventStream):
    """A tool-call task streamed as SSE: ``task_id``, keep-alives while it runs, then its result."""

    __slots__ = ("task_id", "future", "engine")

    def __init__(self, *, task_id: str, future: "asyncio.Future[tuple[str, str]]", engine: EngineState) -> None:
        super().__init__()
        self.task_id, self.future, self.engine = task_id, future, engine

    async def run(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        head = sse.frame(protocol.EVENT_TASK_ID, self.task_id)
        config = self.engine.config
        if not self.future.done():
            await send({"type": "http.response.body", "body": head, "more_body": True})
            head = b""
            while not self.future.done():
                if not await self.engine.keepalive_clock().wait(self.future):
                    await send({"type": "http.response.body", "body": sse.ping_comment(), "more_body": True})
        kind, payload = self.future.result()
        if kind == "error":
            tail = sse.frame(protocol.EVENT_ERROR, payload)
        else:
            tail = sse.result_frames(payload, config.chunk_size)
        await send({"type": "http.response.body", "body": head + tail, "more_body": False})
