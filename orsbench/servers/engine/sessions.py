"""The engine's session room: create, ready, ping, delete and the reaper (``docs/protocol.md`` §8).

A session's setup runs in the background; every route that needs a ready
session waits for it (503 with ``Retry-After`` past the wait), and a failed
setup is sticky (500 on every later call), as the reference does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from typing import Any

from pydantic import ValidationError

from orsbench import protocol
from orsbench.scenarios.base import Episode, Scenario, SessionRefused
from orsbench.servers import models, sse
from orsbench.servers.engine.base import EngineState, overrides, uuid4_str
from orsbench.servers.http import EventStream, HTTPError, Request, validation_detail
from orsbench.servers.state import Session

log = logging.getLogger("orsbench.engine")


def parse_secrets(header: str | None) -> dict[str, str]:
    """Decode ``X-Secrets`` (base64 JSON ``{name: {"value": str}}``); 400 when malformed.

    The detail never quotes the header, so a secret cannot leak into a response or log.
    """
    if header is None or header == "":
        return {}
    problem = "X-Secrets must be base64-encoded JSON of the form {name: {\"value\": string}}"
    try:
        decoded = json.loads(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError, RecursionError):  # RecursionError: JSON nested too deep
        raise HTTPError(400, f"{problem}; it is not valid base64 JSON.") from None
    if not isinstance(decoded, dict):
        raise HTTPError(400, f"{problem}; it decodes to a JSON {type(decoded).__name__}.")
    secrets: dict[str, str] = {}
    for name, entry in decoded.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), str):
            raise HTTPError(400, f"{problem}; entry {name!r} has no string 'value'.")
        secrets[name] = entry["value"]
    return secrets


class SessionRoutes(EngineState):
    """``/create``, ``/delete``, ``/ping``, ``/create_session``, ``/{env}/prompt`` and ``/messages``; the reaper."""

    async def remove_session(self, sid: str) -> None:
        """Delete a session as ``POST /delete`` does (teardown included); unknown ids are ignored."""
        await self._delete(sid)

    async def ping(self, request: Request) -> Any:
        session = self.sessions.get(request.sid)
        if session is None:
            raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)
        session.touch()
        self.stats.pings += 1
        return {"status": "ok"}

    async def create_session(self, request: Request) -> Any:
        sid = uuid4_str()
        return EventStream(sse.frame(protocol.EVENT_TASK_ID, sid) + sse.frame(protocol.EVENT_END, ""))

    async def create(self, request: Request) -> Any:
        sid = request.sid
        body: models.CreateBody = await request.parse(models.CreateBody)
        if sid in self.sessions:
            raise HTTPError(400, protocol.DETAIL_SESSION_EXISTS)
        env_name = body.env_name if body.env_name is not None else self.default_env
        scenario = self.scenarios.get(env_name.lower())
        if scenario is None:
            raise HTTPError(404, f"unknown environment {env_name!r}")
        secrets = parse_secrets(request.header(protocol.SECRETS_HEADER))
        if body.task_spec is not None:
            task = body.task_spec
            try:
                scenario.validate_task(task)
            except ValidationError as exc:
                raise HTTPError(422, validation_detail(exc, b"", prefix=("body", "task_spec"))) from None
        else:
            assert body.split is not None and body.index is not None
            task = self._get_task(scenario, body.split, body.index)
        if body.toolset_name is not None:
            if body.toolset_name not in protocol.BUILTIN_TOOLSETS:
                raise HTTPError(
                    400, f"unknown toolset {body.toolset_name!r}; valid options are {sorted(protocol.BUILTIN_TOOLSETS)}"
                )
            raise HTTPError(400, f"toolset {body.toolset_name!r} needs an environment with a sandbox; {scenario.name!r} has none")
        episode = Episode(scenario, task, body.split, body.index, secrets)
        try:
            scenario.admit(episode)
        except SessionRefused as exc:  # a fixable client mistake (a missing secret): 4xx, not the reference's 500
            raise HTTPError(exc.status, exc.detail) from None
        session = Session(sid, scenario, episode, scenario.session_tools(task))
        self.sessions[sid] = session
        self.stats.sessions_created += 1
        self.stats.sessions_by_env[scenario.name] += 1
        if overrides(scenario, "setup") or self.config.setup_delay > 0:
            session.setup_task = asyncio.get_running_loop().create_task(self._setup(session))
            # A finished setup task is not kept: held by every idle session it would cost a task and its frame each.
            session.setup_task.add_done_callback(session.forget_setup_task)
        else:
            session.ready.set()
        return {"sid": sid}

    async def _setup(self, session: Session) -> None:
        try:
            if self.hooks.setup is not None:
                await self.hooks.setup(session)
            else:
                if self.config.setup_delay > 0:
                    await asyncio.sleep(self.config.setup_delay)
                await session.scenario.setup(session.episode)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - sticky setup failure, reported on every call
            session.setup_error = exc
        finally:
            session.ready.set()

    async def delete(self, request: Request) -> Any:
        sid = request.sid
        await self._delete(sid)
        return {"sid": sid}

    async def delete_session(self, request: Request) -> Any:
        return {"sid": request.sid}

    async def _delete(self, sid: str, *, reaped: bool = False) -> None:
        session = self.sessions.pop(sid, None)
        if session is None:
            return
        session.deleted = True
        if session.setup_task is not None and not session.setup_task.done():
            session.setup_task.cancel()
        session.ready.set()  # waiters wake and answer 410
        if reaped:
            self.stats.sessions_reaped += 1
        else:
            self.stats.sessions_deleted += 1
        if overrides(session.scenario, "teardown"):
            try:
                await session.scenario.teardown(session.episode)
            except Exception:  # noqa: BLE001 - the reference logs and swallows teardown errors
                log.warning("teardown of session %s failed", sid, exc_info=True)

    async def _reap_forever(self) -> None:
        interval = self.config.effective_reaper_interval
        while True:
            await asyncio.sleep(interval)
            horizon = time.monotonic() - self.config.ttl
            may_reap = self.hooks.may_reap
            for sid in [
                s.sid for s in self.sessions.values() if s.last_seen < horizon and all(ok(s) for ok in may_reap)
            ]:
                await self._delete(sid, reaped=True)
            self.tasks.evict()
    def _existing(self, request: Request) -> Session:
        session = self.sessions.get(request.sid)
        if session is None:
            raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)
        session.touch()
        return session

    async def _ready(self, request: Request) -> Session:
        """The reference's ``await_environment_ready``: 404 / 503 starting / 410 / 500."""
        session = self._existing(request)
        if not session.ready.is_set():
            try:
                await asyncio.wait_for(session.ready.wait(), self.config.setup_wait_timeout)
            except asyncio.TimeoutError:
                raise HTTPError(
                    503,
                    protocol.DETAIL_STARTING,
                    [
                        (protocol.BACKEND_STATE_HEADER.lower().encode(), protocol.BACKEND_STARTING.encode()),
                        (b"retry-after", str(protocol.STARTING_RETRY_AFTER_S).encode()),
                    ],
                ) from None
        if session.deleted:
            raise HTTPError(410, protocol.DETAIL_SESSION_DELETED)
        self._raise_setup_error(session)
        return session

    @staticmethod
    def _raise_setup_error(session: Session) -> None:
        if session.setup_error is not None:
            exc = session.setup_error
            raise HTTPError(500, f"{type(exc).__name__}: {exc}")

    async def prompt(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        return session.scenario.prompt(session.episode)

    async def messages(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        return [{"role": "user", "blocks": session.scenario.prompt(session.episode), "detail": None}]
