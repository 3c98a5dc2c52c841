"""The mock ORS engine: a lean ASGI app that speaks ORS as openreward 0.1.167 does.

Why raw ASGI and not FastAPI: the engine *is* the protocol, and a load harness
must not be slower than the servers it measures. Routing is two dict lookups,
bodies are validated by pydantic models shaped like the reference's
(:mod:`orsbench.servers.models`), JSON is written by orjson, and nothing is
logged per request unless asked.

Behaviour follows ``docs/protocol.md`` — status codes and
details (§2), the 308 redirect to the default environment (§1.2), SSE framing
(§3), resume by ``task_id`` (§3.2), tool-call reasons and their precedence
(§5), and the session lifecycle (§8). Where the reference answers 500 for bad
client input, the engine answers 4xx instead; every such deliberate difference
is listed in :data:`DELIBERATE_DIFFERENCES` (and in the README).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import inspect
import json
import logging
import sys
import time
from functools import partial
from random import getrandbits
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import quote

import orjson
from pydantic import ValidationError

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import Episode, RecordedAnswer, Scenario, SessionRefused, ToolResult
from orsbench.servers import models, sse
from orsbench.servers.http import (  # noqa: F401 - Request, HTTPError and the ASGI types are re-exported
    EventStream,
    HTTPError,
    RawJSON,
    Receive,
    Request,
    Scope,
    Send,
    send_json,
    validation_detail,
)
from orsbench.servers.keepalive import KeepaliveClock
from orsbench.servers.state import Session, Stats, TaskRecord, TaskRegistry

log = logging.getLogger("orsbench.engine")

#: Where the mock deliberately answers differently from the reference server.
DELIBERATE_DIFFERENCES: tuple[str, ...] = (
    "Malformed X-Secrets (not base64, not JSON, not {name: {'value': str}}) → 400 with a detail; the reference answers 500.",
    "Request bodies over the size limit (default 1 MiB) → 413; the reference has no limit.",
    "/num_tasks and /task on an environment whose task list is not available → 400; the reference answers 500.",
    "/docs, /redoc and /openapi.json are not served (404); the reference serves FastAPI's generated pages.",
    "/version reports the protocol version the engine emulates (0.1.167) with build_sha null.",
    "A task_spec the scenario cannot play (its task model rejects it) → 422 at /create; "
    "a reference environment whose constructor rejects it answers 500.",
    "A `secrets` field in a /create body is rejected with 422 as the reference does, but its value is redacted from the detail.",
    "Optional API-key enforcement (--api-key): 401 without the key; the reference never checks X-API-Key.",
    "A session the scenario refuses (SessionRefused: the secrets scenario without its secret) → a 4xx naming what is "
    "missing at /create; a reference environment whose constructor raises answers 500.",
)

_MESSAGE_BLOCK_TYPES = list(protocol.BLOCK_TYPES)


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


Outcome = tuple[str, str]
"""A tool call's result as the engine streams it: ``("end", result JSON)`` or ``("error", message)``."""
RootHandler = Callable[[Request], Awaitable[Any]]
EnvHandler = Callable[[Request, Scenario, str], Awaitable[Any]]


@dataclass
class Hooks:
    """Named points where a fault may change what the engine does, without touching its internals.

    Every list is empty on a faithful engine (each costs one truth test per use).
    Route handlers are changed through :meth:`Engine.wrap_route` and friends;
    these hooks reach what no route can: tool runs, session setup and the reaper.
    """

    #: ``before_tool(session, tool_name, tool_input)`` runs before a tool call is checked;
    #: an :data:`Outcome` it returns is the call's answer (the tool does not run).
    before_tool: list[Callable[[Session, str, dict[str, Any]], Outcome | None]] = field(default_factory=list)
    #: ``after_tool(session, tool_name, outcome)`` runs after a tool ran and its result was taken.
    after_tool: list[Callable[[Session, str, Outcome], None]] = field(default_factory=list)
    #: Replaces a session's setup work (``setup_delay`` then ``scenario.setup``); an exception it
    #: raises becomes the session's sticky setup error, as a scenario's own would.
    setup: Callable[[Session], Awaitable[None]] | None = None
    #: ``may_reap(session)``: the reaper deletes an idle session only if every one answers True.
    may_reap: list[Callable[[Session], bool]] = field(default_factory=list)


class Engine:
    """The ASGI application serving one or more scenarios under one :class:`ServerConfig`.

    Its public seam, for faults and tests: the route table (:meth:`route`,
    :meth:`set_route`, :meth:`wrap_route`, :meth:`remove_route`, :meth:`routes`),
    :attr:`hooks`, and the state a fault may read or reset (:attr:`config`,
    :attr:`sessions`, :attr:`tasks`, :attr:`stats`, :meth:`remove_session`,
    :meth:`task_list`, :meth:`split_names`).
    """

    def __init__(self, scenarios: list[Scenario], config: ServerConfig | None = None) -> None:
        if not scenarios:
            raise ValueError("the engine needs at least one scenario")
        self.config = config or ServerConfig()
        self.scenarios: dict[str, Scenario] = {}
        for scenario in scenarios:
            key = scenario.name.lower()
            if key in self.scenarios:
                raise ValueError(f"two scenarios are named {scenario.name!r}")
            self.scenarios[key] = scenario
        self.default_env = scenarios[0].name
        self.sessions: dict[str, Session] = {}
        self.tasks = TaskRegistry(self.config.linger)
        self.stats = Stats()
        self._started = time.monotonic()
        self._reaper: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._splits = {k: {s.name: s for s in sc.splits()} for k, sc in self.scenarios.items()}
        self._task_lists: dict[tuple[str, str], list[dict[str, Any]] | None] = {}
        self._tools_json = {k: self._tools_payload(sc, [t.spec() for t in sc.shared_tools()]) for k, sc in self.scenarios.items()}
        self._task_tools_json: dict[tuple[str, tuple[Any, ...]], bytes] = {}
        self._async_fns: dict[Any, bool] = {}
        self.hooks = Hooks()
        self._keepalive: KeepaliveClock | None = None
        self._root: dict[str, dict[str, Callable[[Request], Awaitable[Any]]]] = {
            protocol.HEALTH: {"GET": self.health},
            protocol.VERSION: {"GET": self.version},
            protocol.LIST_ENVIRONMENTS: {"GET": self.list_environments},
            protocol.PING: {"POST": self.ping},
            protocol.CREATE_SESSION: {"POST": self.create_session},
            protocol.CREATE: {"POST": self.create},
            protocol.DELETE: {"POST": self.delete},
            protocol.DELETE_SESSION: {"POST": self.delete_session},
            protocol.STATS: {"GET": self.get_stats},
        }
        self._env_routes: dict[str, dict[str, Callable[[Request, Scenario, str], Awaitable[Any]]]] = {
            protocol.TOOLS: {"GET": self.tools},
            protocol.SPLITS: {"GET": self.splits},
            protocol.TASKS: {"POST": self.list_tasks},
            protocol.NUM_TASKS: {"POST": self.num_tasks},
            protocol.TASK: {"POST": self.task},
            protocol.TASK_RANGE: {"POST": self.task_range},
            protocol.TASK_TOOLS: {"GET": self.task_tools},
            protocol.PROMPT: {"GET": self.prompt},
            protocol.MESSAGES: {"GET": self.messages},
            protocol.CALL: {"POST": self.call},
            protocol.SCORE_GROUP: {"POST": self.score_group},
        }

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.start_background()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def keepalive_clock(self) -> KeepaliveClock:
        """The one keep-alive timer of all held streams, at the configured interval (a fault may change it)."""
        clock = self._keepalive
        if clock is None or clock.interval != self.config.ping_interval:
            clock = self._keepalive = KeepaliveClock(self.config.ping_interval)
        return clock

    def start_background(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def shutdown(self) -> None:
        """Delete every session with teardown, as the reference does on lifespan exit."""
        if self._reaper is not None:
            self._reaper.cancel()
        for sid in list(self.sessions):
            await self._delete(sid)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        config, stats = self.config, self.stats
        request = Request(scope, receive, config.max_body)
        key = ""
        try:
            if config.api_key is not None and request.path != protocol.HEALTH:
                self._authorise(request)  # before routing: no route, redirect or 404 leaks to a stranger
            handler, key = self._route(request)
            result = await handler()
            handler = None  # type: ignore[assignment]  # not held for the length of a stream
            if isinstance(result, EventStream):
                await result.run(send)
            else:
                await send_json(send, 200, result)
            stats.statuses[200] += 1
        except HTTPError as exc:
            await send_json(send, exc.status, {"detail": exc.detail} if exc.status not in (307, 308) else None, exc.headers)
            stats.statuses[exc.status] += 1
            key = key or str(exc.status)
        except Exception as exc:  # noqa: BLE001 - a scenario bug must still answer
            log.exception("internal error on %s %s", request.method, request.path)
            await send_json(send, 500, {"detail": f"{type(exc).__name__}: {exc}"})
            stats.statuses[500] += 1
            key = key or "500"
        stats.requests[key] += 1
        if config.access_log:
            print(f"{request.method} {request.path} [{key}]", file=sys.stderr)

    def _route(self, request: Request) -> tuple[Callable[[], Awaitable[Any]], str]:
        path, method = request.path, request.method
        if len(path) > 1 and path.endswith("/"):
            raise HTTPError(307, None, [(b"location", _absolute(request.scope, path.rstrip("/")).encode())])
        methods = self._root.get(path)
        if methods is not None:
            handler = methods.get(method)
            if handler is None:
                raise _method_not_allowed(methods)
            return (lambda: handler(request)), f"{method} {path}"
        first, _, rest = path[1:].partition("/")
        scenario = self.scenarios.get(first.lower())
        if scenario is None:
            if first in protocol.ROOT_SEGMENTS or first.startswith("_"):
                raise HTTPError(404, protocol.DETAIL_NOT_FOUND)
            location = f"/{self.default_env}{_quote_path(path)}"
            query = request.scope.get("query_string") or b""
            if query:
                location += "?" + query.decode("latin-1")
            raise HTTPError(308, None, [(b"location", location.encode())])
        env_methods = self._env_routes.get(rest)
        if env_methods is None:
            raise HTTPError(404, protocol.DETAIL_NOT_FOUND)
        env_handler = env_methods.get(method)
        if env_handler is None:
            raise _method_not_allowed(env_methods)
        return (lambda: env_handler(request, scenario, first)), f"{method} /{{env}}/{rest}"

    # ------------------------------------------------------------ public seam
    def _table(self, path: str) -> dict[str, Any]:
        table: dict[str, Any] = self._root if path.startswith("/") else self._env_routes
        if path not in table:
            raise KeyError(f"no route {path!r}")
        return table[path]

    def route(self, path: str, method: str) -> Any:
        """The handler of ``method path``: a root path (``/create``) or an environment route (``call``)."""
        return self._table(path)[method]

    def set_route(self, path: str, method: str, handler: RootHandler | EnvHandler) -> None:
        """Serve ``method path`` with ``handler`` (root: ``handler(request)``; environment:
        ``handler(request, scenario, raw_env)``)."""
        self._table(path)[method] = handler

    def wrap_route(self, path: str, method: str, wrap: Callable[[Any], Any]) -> None:
        """Replace the handler of ``method path`` with ``wrap(current handler)``."""
        methods = self._table(path)
        methods[method] = wrap(methods[method])

    def remove_route(self, path: str) -> None:
        """Stop serving ``path`` at all (every method answers 404)."""
        table = self._root if path.startswith("/") else self._env_routes
        del table[path]

    def routes(self) -> list[tuple[str, str]]:
        """Every ``(method, path)`` served; environment routes as ``/{env}/<name>``."""
        out = [(method, path) for path, methods in self._root.items() for method in methods]
        out += [(method, protocol.env_path("{env}", r)) for r, methods in self._env_routes.items() for method in methods]
        return out

    async def remove_session(self, sid: str) -> None:
        """Delete a session as ``POST /delete`` does (teardown included); unknown ids are ignored."""
        await self._delete(sid)

    def split_names(self, env: str) -> tuple[str, ...] | None:
        """The split names of environment ``env`` (any case), or ``None`` for an unknown environment."""
        splits = self._splits.get(env.lower())
        return None if splits is None else tuple(splits)

    def task_list(self, scenario: Scenario, split: Any) -> list[dict[str, Any]] | None:
        """A split's task list as served, or ``None`` (unknown split, or an index-API-only scenario)."""
        if not isinstance(split, str) or split not in self._splits[scenario.name.lower()]:
            return None
        return self._task_list(scenario, split)

    def _authorise(self, request: Request) -> None:
        expected = self.config.api_key or ""
        given = request.header(protocol.API_KEY_HEADER) or ""
        auth = request.header("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise HTTPError(401, "Missing or invalid API key: send it as X-API-Key or 'Authorization: Bearer <key>'.")

    # ------------------------------------------------------------ root routes
    async def health(self, request: Request) -> Any:
        return {"status": "ok"}

    async def version(self, request: Request) -> Any:
        return {"version": protocol.REFERENCE_VERSION, "build_sha": None}

    async def list_environments(self, request: Request) -> Any:
        return [sc.name for sc in self.scenarios.values()]

    async def get_stats(self, request: Request) -> Any:
        return self.stats.snapshot(
            active_sessions=len(self.sessions),
            tasks_tracked=len(self.tasks),
            tasks_running=self.tasks.running,
            uptime_s=round(time.monotonic() - self._started, 3),
            config=json.loads(self.config.to_json()) | {"api_key": None},
        )

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
        if _overrides(scenario, "setup") or self.config.setup_delay > 0:
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
        if _overrides(session.scenario, "teardown"):
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

    # ------------------------------------------------------------ discovery
    def _tools_payload(self, scenario: Scenario, specs: list[dict[str, Any]]) -> bytes:
        return orjson.dumps(
            {
                "tools": sorted(specs, key=lambda s: s["name"]),
                "terminal_tool": None,
                "supports_score_group": _overrides(scenario, "score_group"),
                "message_block_types": _MESSAGE_BLOCK_TYPES,
            }
        )

    async def tools(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        return RawJSON(self._tools_json[scenario.name.lower()])

    async def splits(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        return [s.to_wire() for s in self._splits[scenario.name.lower()].values()]

    def _check_split(self, scenario: Scenario, split: str) -> None:
        if split not in self._splits[scenario.name.lower()]:
            raise HTTPError(400, protocol.DETAIL_INVALID_SPLIT)

    def _task_list(self, scenario: Scenario, split: str) -> list[dict[str, Any]] | None:
        """The cached task list of a split, or ``None`` for an index-API-only scenario."""
        key = (scenario.name, split)
        if key not in self._task_lists:
            try:
                self._task_lists[key] = scenario.list_tasks(split)
            except NotImplementedError:
                self._task_lists[key] = None
        return self._task_lists[key]

    def _get_task(self, scenario: Scenario, split: str, index: int) -> dict[str, Any]:
        self._check_split(scenario, split)
        tasks = self._task_list(scenario, split)
        try:
            if tasks is not None:
                return tasks[index]
            return scenario.get_task(split, index)
        except IndexError:
            raise HTTPError(400, protocol.DETAIL_INVALID_INDEX) from None
        except NotImplementedError:
            raise HTTPError(400, "This environment cannot serve tasks by index.") from None

    async def list_tasks(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.SplitBody = await request.parse(models.SplitBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        if tasks is None:
            raise HTTPError(
                400,
                "list_tasks is not supported for this environment. Use the index-based API (num_tasks + get_task) instead.",
            )
        return {"tasks": tasks, "env_name": raw_env}

    async def num_tasks(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.SplitBody = await request.parse(models.SplitBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        try:
            count = len(tasks) if tasks is not None else scenario.num_tasks(body.split)
        except NotImplementedError:
            raise HTTPError(400, "This environment cannot count its tasks.") from None
        return {"num_tasks": count}

    async def task(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.TaskBody = await request.parse(models.TaskBody)
        return {"task": self._get_task(scenario, body.split, body.index), "env_name": raw_env}

    async def task_range(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.TaskRangeBody = await request.parse(models.TaskRangeBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        if tasks is None:
            count = scenario.num_tasks(body.split)
            indices = range(count)[body.start : body.stop]
            return {"tasks": [self._get_task(scenario, body.split, i) for i in indices], "env_name": raw_env}
        return {"tasks": tasks[body.start : body.stop], "env_name": raw_env}

    # ------------------------------------------------------------ sessions
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

    async def task_tools(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = self._existing(request)
        self._raise_setup_error(session)
        # Keyed by what the specs are made of, so per-task variants of a tool never share a payload.
        key = (
            session.scenario.name,
            tuple((t.name, t.description, t.params, orjson.dumps(t.schema_override)) for t in session.tools.values()),
        )
        payload = self._task_tools_json.get(key)
        if payload is None:
            specs = [t.spec() for t in session.tools.values()]
            shared = {t.name for t in session.scenario.shared_tools()}
            ordered = sorted((s for s in specs if s["name"] in shared), key=lambda s: s["name"])
            ordered += [s for s in specs if s["name"] not in shared]
            payload = orjson.dumps(
                {
                    "tools": ordered,
                    "terminal_tool": None,
                    "supports_score_group": _overrides(session.scenario, "score_group"),
                    "message_block_types": _MESSAGE_BLOCK_TYPES,
                }
            )
            self._task_tools_json[key] = payload
        return RawJSON(payload)

    async def prompt(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        return session.scenario.prompt(session.episode)

    async def messages(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        return [{"role": "user", "blocks": session.scenario.prompt(session.episode), "detail": None}]

    # ------------------------------------------------------------ tool calls
    async def call(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = await self._ready(request)
        body: models.CallBody = await request.parse(models.CallBody)
        if body.task_id is not None:
            return self._resume(body.task_id)
        task_id = uuid4_hex()
        tool = session.tools.get(body.name)
        if tool is not None and not self._is_async(tool.fn) and self.config.latency <= 0:
            # Fast path: a synchronous tool finishes before the first byte is sent.
            outcome = self._run_sync(session, body.name, body.input)
            future: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()
            future.set_result(outcome)
            self.tasks.add_result(task_id, *outcome)
        else:
            future = asyncio.ensure_future(self._run_async(session, body.name, body.input))
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
            return _tool_error(f"{name!r} is not a valid tool", protocol.REASON_NOT_FOUND)
        if session.finished:
            return finished_error(name)
        if tool.params is None:
            return tool, None
        try:
            return tool, tool.params.model_validate(tool_input)
        except ValidationError as exc:
            return _tool_error(f"Tool input validation error: {exc.errors()}", protocol.REASON_INPUT_VALIDATION)

    def _finish(self, session: Session, name: str, result: Any) -> tuple[str, str]:
        if isinstance(result, RecordedAnswer):  # cassette replay: the recorded bytes, as they were
            if session.finished:
                return ("end", _finished_error(name))
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
        self.stats.call_errors[name] += 1
        return ("error", str(exc))

    def _run_sync(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
        answer, tool, args = self._prepare(session, name, tool_input)
        if answer is not None:
            return answer
        try:
            return self._finish(session, name, tool.fn(session.scenario, session.episode, args))
        except Exception as exc:  # noqa: BLE001 - becomes the `error` event
            return self._raised(name, exc)

    async def _run_async(self, session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
        answer, tool, args = self._prepare(session, name, tool_input)
        if answer is not None:
            return answer
        try:
            await session.enter_tool(name)
            try:
                if self.config.latency > 0:
                    await asyncio.sleep(self.config.latency)
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
        if not _overrides(session.scenario, "score_group"):
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


# ---------------------------------------------------------------- responses
class _Streamer(EventStream):
    """A tool-call task streamed as SSE: ``task_id``, keep-alives while it runs, then its result."""

    __slots__ = ("task_id", "future", "engine")

    def __init__(self, *, task_id: str, future: "asyncio.Future[tuple[str, str]]", engine: Engine) -> None:
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


def uuid4_hex() -> str:
    """``uuid.uuid4().hex`` for ids, without a ``UUID`` object or a syscall per id.

    Same format and bits as ``uuid4`` (128 random bits, version 4, RFC variant),
    drawn from :mod:`random`, which is seeded from ``os.urandom`` and reseeded
    in a forked child. Session and task ids need to be unique, not secret.
    """
    return "%032x" % ((getrandbits(128) & _UUID4_CLEAR) | _UUID4_SET)


def uuid4_str() -> str:
    """``str(uuid.uuid4())``, the same way."""
    h = uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# uuid.UUID(version=4): clear the variant (2 bits) and version (4 bits), then set them.
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID4_SET = (0x8000 << 48) | (0x4000 << 64)


def _method_not_allowed(methods: dict[str, Any]) -> HTTPError:
    return HTTPError(405, protocol.DETAIL_METHOD_NOT_ALLOWED, [(b"allow", ", ".join(methods).encode())])


def _quote_path(path: str) -> str:
    """Re-encode a decoded path for a Location header: a %0d or %00 in the request must not become a raw
    control character there (uvicorn refuses such a header and drops the connection)."""
    return quote(path, safe="/:@!$&'()*+,;=")


def _absolute(scope: Scope, path: str) -> str:
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "127.0.0.1")
    url = f"{scope.get('scheme', 'http')}://{host}{_quote_path(path)}"
    query = scope.get("query_string") or b""
    return url + ("?" + query.decode("latin-1") if query else "")


def _tool_error(message: str, reason: str) -> str:
    return orjson.dumps({"ok": False, "error": message, "reason": reason}).decode()


def finished_error(name: str) -> str:
    """The ok:false answer to a tool call after the episode finished (reason ``episode_finished``)."""
    return _tool_error(
        f"{name!r} was not run: the episode has finished (a tool returned finished=True), "
        "so no further tool calls are accepted.",
        protocol.REASON_EPISODE_FINISHED,
    )


def _overrides(scenario: Scenario, method: str) -> bool:
    return getattr(type(scenario), method) is not getattr(Scenario, method)
