"""The SDK twin: any orsbench :class:`Scenario` served by the real openreward ``Server``.

The mock engine is our own reading of the protocol; the twin is the reference
implementation (openreward 0.1.167) running the *same* scenario object. A
difference between their wire transcripts is therefore a serving difference,
never an environment-logic one.

How a scenario becomes an SDK environment
-----------------------------------------
:func:`environment_class` generates one ``Environment`` subclass per scenario,
named exactly ``scenario.name`` (the SDK routes ``/{cls.__name__.lower()}/...``):

* ``list_splits`` → ``scenario.splits()`` as SDK ``Split`` objects;
  ``list_tasks`` → ``scenario.list_tasks``. ``num_tasks``/``get_task`` keep the
  SDK's cached defaults and fall back to ``scenario.num_tasks``/``get_task``
  when ``list_tasks`` raises ``NotImplementedError`` (index-only scenarios).
* ``__init__(task_spec, secrets)`` builds the :class:`Episode`. The SDK hands
  the constructor only the task, so ``episode.split`` and ``episode.index`` are
  always ``None`` here.
* ``get_prompt`` → ``scenario.prompt``; ``setup`` sleeps ``config.setup_delay``
  then awaits ``scenario.setup``; ``teardown`` awaits ``scenario.teardown``.
* Every tool of ``scenario.all_tools`` becomes an ``@tool`` method whose
  attribute name is the tool name, whose docstring is the description and
  whose single parameter is annotated with ``Tool.params`` (none for
  ``params=None``), so the SDK derives the same ``input_schema``. A
  ``schema_override`` is served by a subclass of the params model whose
  ``model_json_schema`` returns the override (validation stays the model's).
  Each call sleeps ``config.latency`` first; a tool that raises raises inside
  the SDK tool (→ SSE ``error``).
* Task-scoped tools (``shared=False``) are listed by ``list_task_tools()`` for
  the tasks whose ``scenario.task_tool_names`` names them. The stock SDK would
  let *any* session call a non-shared tool; to keep the scenario's semantics
  (``Scenario.session_tools``) the instance shadows the task-scoped tools its
  task does not expose with ``None``, so calling one answers ``not_found``.
* ``score_group`` is defined only when the scenario class overrides it; a
  ``None`` returned at call time raises (→ SSE ``error``), because the SDK
  decides 404-vs-supported from the class, before calling it.

Tool names
----------
The SDK finds tools with ``dir(cls)`` + ``getattr`` and serves the attribute
name, so any string works as a tool name when set with ``setattr``/``type()``:
``class``, ``file-path``, ``a.b/c``, ``reset``, even ``""``. Impossible are
names the SDK already uses on the class or instance (``setup``, ``name``,
``list_tools``, ``task_spec``, dunders, ...; see :data:`RESERVED_TOOL_NAMES`):
one attribute cannot be both, so :func:`environment_class` raises
:class:`ToolNameError` naming the tool.

Configuration patches (process-wide, applied by :func:`build_app`)
-----------------------------------------------------------------
The reference hard-codes its timings. The twin runs in its own server
process, so :func:`build_app` patches the SDK in place:

==========================  =====================================================
``ServerConfig`` field      patched SDK attribute
==========================  =====================================================
``setup_wait_timeout``      ``openreward.environments.server._SETUP_WAIT_TIMEOUT_S``
``chunk_size``              ``openreward.environments.reconnect.CHUNK_SIZE``
``linger``                  ``openreward.environments.reconnect.LINGER_SECONDS``
``ping_interval``           ``server.EventSourceResponse`` → a subclass that swaps
                            the literal ``ping=10`` of ``/call``/``/score_group``
``ttl``, ``reaper_interval``  ``__defaults__`` of the ``reaper_coro`` closure
                            (``reaper_interval=5, stale_threshold=900``), found
                            through the app's lifespan closure
``access_log``              the SDK's module ``logger`` objects (server,
                            environment, session) at INFO if set, else WARNING
==========================  =====================================================

Not patchable: ``Retry-After: 2`` on 503 stays ``_SETUP_WAIT_RETRY_AFTER_S``
(no knob); the 10 s disconnect poll inside ``sse_task_stream`` is a literal;
``max_body`` and ``seed`` are mock-engine knobs the reference has no
equivalent for and are ignored; ``faults`` and ``api_key`` would change what
the reference does, so :func:`build_app` refuses a config that sets them. Calling :func:`build_app`
twice in one process re-patches: the last config wins for every app.

Stats
-----
``GET /_orsbench/stats`` is answered by an outer ASGI middleware (before the
SDK's default-env redirect could send it to ``/{first_env}/_orsbench/stats``).
The same middleware counts requests by route template from ``scope["route"]``,
which Starlette's router sets in place; responses with no route (redirects,
404, 405) count under their status code, e.g. ``"308"``.
"""

from __future__ import annotations

import asyncio
import json
import contextvars
import inspect
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from pydantic import BaseModel, ConfigDict
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import JSON, Episode, Scenario, Tool, ToolResult

# The twin never calls Server.run(), which is where the SDK's PyPI update check
# lives, but nothing here should ever reach the network.
os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")

import structlog  # noqa: E402  (after the environment variable above)
from openreward.environments import Environment, Server  # noqa: E402
from openreward.environments import environment as sdk_environment  # noqa: E402
from openreward.environments import reconnect as sdk_reconnect  # noqa: E402
from openreward.environments import server as sdk_server  # noqa: E402
from openreward.environments import session as sdk_session  # noqa: E402
from openreward.environments import tool as sdk_tool  # noqa: E402
from openreward.environments.types import (  # noqa: E402
    GroupCandidate,
    ListToolsOutput,
    Split,
    ToolOutput,
    ToolSpec,
)

__all__ = ["RESERVED_TOOL_NAMES", "ToolNameError", "TwinStats", "build_app", "environment_class"]

#: Instance attributes of a generated environment (beyond the SDK's own).
_EPISODE_ATTR = "_orsbench_episode"

#: Attribute names the SDK (or the twin) already uses on an environment class or
#: instance; a tool cannot have one of these names.
RESERVED_TOOL_NAMES: frozenset[str] = frozenset(dir(Environment)) | {
    "task_spec",  # Environment.__init__
    "_toolset_instances",  # Environment.__init__
    "_splits_cache",  # Environment._list_splits_cached
    "_tasks_cache",  # Environment._list_tasks_cached
    "_tasks_cache_locks",
    "__module__",
    "__qualname__",
    "__doc__",
    _EPISODE_ATTR,
}


class ToolNameError(ValueError):
    """A scenario tool name the openreward SDK cannot serve."""


# -- stats ---------------------------------------------------------------------
#: True while a request is being handled: tells a ``/delete`` teardown apart
#: from a reaper (or shutdown) teardown without touching SDK internals.
_IN_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar("orsbench_in_request", default=False)


@dataclass
class TwinStats:
    """Counters behind ``GET /_orsbench/stats``; plain ints, all on the event loop."""

    sessions_created: int = 0
    sessions_deleted: int = 0
    sessions_reaped: int = 0
    #: Successful ``POST /ping`` (session keep-alives).
    pings: int = 0
    #: ``: ping`` comments written on SSE streams.
    sse_pings: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    shutting_down: bool = False
    #: The served ServerConfig (API key masked), as the mock reports it: checkers read ttl and ping_interval.
    config: JSON = field(default_factory=dict)

    def snapshot(self, active_sessions: int) -> JSON:
        return {
            "impl": "sdk",
            "active_sessions": active_sessions,
            "sessions_created": self.sessions_created,
            "sessions_deleted": self.sessions_deleted,
            "sessions_reaped": self.sessions_reaped,
            "pings": self.pings,
            "sse_pings": self.sse_pings,
            "calls": dict(self.calls),
            "calls_total": sum(self.calls.values()),
            "requests": dict(self.requests),
            "config": self.config,
        }

    def count_teardown(self) -> None:
        if _IN_REQUEST.get():
            self.sessions_deleted += 1
        elif not self.shutting_down:
            self.sessions_reaped += 1


def _route_key(scope: Scope, status: int) -> str:
    """``"POST /{env}/call"`` for a routed request, else the status code (``"308"``)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if path is None or status == 405:
        return str(status)
    return f"{scope['method']} {path.replace('{env_name}', '{env}')}"


class StatsMiddleware:
    """Outermost ASGI layer: serves the stats route and counts every other request."""

    def __init__(self, app: ASGIApp, stats: TwinStats, active_sessions: Callable[[], int]) -> None:
        self.app = app
        self.stats = stats
        self.active_sessions = active_sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_lifespan(receive), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == protocol.STATS:
            await self._serve_stats(scope, receive, send)
            return

        stats = self.stats

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                key = _route_key(scope, message["status"])
                stats.requests[key] += 1
                if message["status"] == 200:
                    if key == f"POST {protocol.CREATE}":
                        stats.sessions_created += 1
                    elif key == f"POST {protocol.PING}":
                        stats.pings += 1
            elif message["type"] == "http.response.body" and message.get("body", b"")[:1] == b":":
                stats.sse_pings += 1  # only keep-alive comments start with ':'
            await send(message)

        token = _IN_REQUEST.set(True)
        try:
            await self.app(scope, receive, counting_send)
        finally:
            _IN_REQUEST.reset(token)

    def _watch_lifespan(self, receive: Receive) -> Receive:
        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.stats.shutting_down = True  # teardowns from now on are not reaps
            return message

        return wrapped

    async def _serve_stats(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "GET":
            response = JSONResponse({"detail": protocol.DETAIL_METHOD_NOT_ALLOWED}, status_code=405)
        else:
            response = JSONResponse(self.stats.snapshot(self.active_sessions()))
        await response(scope, receive, send)


# -- scenario → Environment ------------------------------------------------------
async def _resolve(value: Any) -> Any:
    """Scenario hooks may be sync or async; await only what is awaitable."""
    return await value if inspect.isawaitable(value) else value


def _to_tool_output(result: Any) -> Any:
    """``ToolResult`` → SDK ``ToolOutput``; anything else passes through so the SDK's own type check fires."""
    if isinstance(result, ToolResult):
        return ToolOutput(blocks=result.blocks, metadata=result.metadata, reward=result.reward, finished=result.finished)
    return result


class _AnyInput(BaseModel):
    """Stands in for ``params=None`` when a tool has an explicit ``schema_override``."""

    model_config = ConfigDict(extra="allow")


def _input_model(spec: Tool) -> type[BaseModel] | None:
    """The pydantic model the SDK validates with and derives ``input_schema`` from."""
    if spec.schema_override is None:
        return spec.params
    base = spec.params or _AnyInput
    override = spec.schema_override

    def model_json_schema(cls: type[BaseModel], *args: Any, **kwargs: Any) -> JSON:
        return dict(override)

    # The SDK calls ``mdl.model_json_schema()``: a subclass lets the override win
    # while validation stays the model's own.
    return type(base)(base.__name__, (base,), {"__module__": __name__, "model_json_schema": classmethod(model_json_schema)})


def _schema(model: type[BaseModel] | None) -> JSON | None:
    """What the SDK puts in ``ToolSpec.input_schema`` for a tool taking ``model``."""
    return None if model is None else model.model_json_schema()


def _sdk_tool_method(
    spec: Tool, model: type[BaseModel] | None, scenario: Scenario, config: ServerConfig, stats: TwinStats
) -> Callable[..., Any]:
    """An ``@tool`` method the SDK introspects exactly like a hand-written one."""
    takes_args = spec.params is not None

    async def run(env: Environment, args: Any) -> Any:
        if config.latency > 0:
            await asyncio.sleep(config.latency)
        stats.calls[spec.name] += 1
        episode: Episode = getattr(env, _EPISODE_ATTR)
        return _to_tool_output(await _resolve(spec.fn(scenario, episode, args if takes_args else None)))

    if model is None:

        async def method(self: Environment) -> Any:
            return await run(self, None)

        method.__annotations__ = {"return": ToolOutput}
    else:

        async def method(self: Environment, args: Any) -> Any:  # type: ignore[misc]
            return await run(self, args)

        method.__annotations__ = {"args": model, "return": ToolOutput}
    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = spec.description
    return sdk_tool(shared=spec.shared)(method)


def _check_tool_names(scenario: Scenario) -> None:
    for name in scenario.all_tools:
        if name in RESERVED_TOOL_NAMES or (name.startswith("__") and name.endswith("__")):
            raise ToolNameError(
                f"scenario {scenario.name!r}: tool {name!r} cannot be served by the openreward SDK: "
                f"the SDK maps tool names to Environment attributes and {name!r} is already one "
                f"(e.g. a lifecycle method). Rename the tool."
            )


def environment_class(
    scenario: Scenario,
    config: ServerConfig | None = None,
    stats: TwinStats | None = None,
) -> type[Environment]:
    """A generated ``Environment`` subclass named ``scenario.name`` serving ``scenario``."""
    config = config or ServerConfig()
    stats = stats if stats is not None else TwinStats()
    _check_tool_names(scenario)
    models = {t.name: _input_model(t) for t in scenario.all_tools.values()}
    task_scoped = {
        t.name: ToolSpec(name=t.name, description=t.description.strip(), input_schema=_schema(models[t.name]))
        for t in scenario.all_tools.values()
        if not t.shared
    }

    def __init__(self: Environment, task_spec: JSON = {}, secrets: dict[str, str] = {}) -> None:
        Environment.__init__(self, task_spec, secrets)
        setattr(self, _EPISODE_ATTR, Episode(scenario, task_spec, secrets=dict(secrets)))
        try:
            visible = set(scenario.task_tool_names(task_spec))
        except Exception:
            visible = set()  # list_task_tools() re-raises it where the SDK would
        for name in task_scoped.keys() - visible:
            setattr(self, name, None)  # shadows the class tool: calling it is not_found

    def list_splits(cls: type[Environment]) -> list[Split]:
        return [Split(name=s.name, type=s.type) for s in scenario.splits()]  # type: ignore[arg-type]

    def list_tasks(cls: type[Environment], split: str) -> Sequence[JSON]:
        return scenario.list_tasks(split)

    async def num_tasks(cls: type[Environment], split: str) -> int:
        try:
            return await Environment.num_tasks.__func__(cls, split)  # type: ignore[attr-defined]
        except NotImplementedError:
            return await _resolve(scenario.num_tasks(split))

    async def get_task(cls: type[Environment], split: str, index: int) -> JSON:
        try:
            return await Environment.get_task.__func__(cls, split, index)  # type: ignore[attr-defined]
        except NotImplementedError:
            return await _resolve(scenario.get_task(split, index))

    def get_prompt(self: Environment) -> Any:
        return scenario.prompt(getattr(self, _EPISODE_ATTR))

    def list_task_tools(self: Environment) -> ListToolsOutput:
        names = scenario.task_tool_names(self.task_spec)
        return ListToolsOutput(tools=[task_scoped[n] for n in names if n in task_scoped])

    async def setup(self: Environment) -> None:
        if config.setup_delay > 0:
            await asyncio.sleep(config.setup_delay)
        await _resolve(scenario.setup(getattr(self, _EPISODE_ATTR)))

    async def teardown(self: Environment) -> None:
        stats.count_teardown()
        await _resolve(scenario.teardown(getattr(self, _EPISODE_ATTR)))

    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": scenario.name,
        "__doc__": f"SDK twin of the orsbench scenario {scenario.name!r}: {scenario.summary}",
        "__init__": __init__,
        "list_splits": classmethod(list_splits),
        "list_tasks": classmethod(list_tasks),
        "num_tasks": classmethod(num_tasks),
        "get_task": classmethod(get_task),
        "get_prompt": get_prompt,
        "list_task_tools": list_task_tools,
        "setup": setup,
        "teardown": teardown,
    }
    if type(scenario).score_group is not Scenario.score_group:

        async def score_group(self: Environment, candidates: Sequence[GroupCandidate]) -> list[float]:
            wire = [c.model_dump(mode="json") for c in candidates]
            scores = await _resolve(scenario.score_group(getattr(self, _EPISODE_ATTR), wire))
            if scores is None:
                raise NotImplementedError(f"scenario {scenario.name!r} returned None from score_group")
            return list(scores)

        namespace["score_group"] = score_group
    for spec in scenario.all_tools.values():
        namespace[spec.name] = _sdk_tool_method(spec, models[spec.name], scenario, config, stats)
    return type(Environment)(scenario.name, (Environment,), namespace)


# -- config patches ----------------------------------------------------------------
def _reaper_coro(server: Server) -> Callable[..., Awaitable[None]]:
    """The ``reaper_coro`` closure of ``Server.__init__``, reached through the app's lifespan."""
    lifespan = server.app.router.lifespan_context
    fn = getattr(lifespan, "__wrapped__", lifespan)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cell = cells.get("reaper_coro")
    reaper = cell.cell_contents if cell is not None else None
    if reaper is None or reaper.__code__.co_varnames[:2] != ("reaper_interval", "stale_threshold"):
        raise RuntimeError(
            "openreward Server internals changed: cannot find reaper_coro(reaper_interval, stale_threshold); "
            "the ttl and reaper_interval knobs cannot be applied to the SDK twin"
        )
    return reaper


def _keepalive_response(interval: float) -> type:
    """``EventSourceResponse`` whose explicit ``ping=`` (the SDK's literal 10) becomes ``interval``."""
    base = sdk_server.EventSourceResponse
    base = getattr(base, "_orsbench_original", base)

    class KeepAliveEventSourceResponse(base):  # type: ignore[misc, valid-type]
        _orsbench_original = base

        def __init__(self, *args: Any, ping: float | None = None, **kwargs: Any) -> None:
            # /create_session passes no ping (library default, ends at once); keep that.
            super().__init__(*args, ping=None if ping is None else interval, **kwargs)

    return KeepAliveEventSourceResponse


def _sdk_logger(name: str, access_log: bool) -> Any:
    level = logging.INFO if access_log else logging.WARNING
    return structlog.wrap_logger(
        structlog.PrintLogger(),
        processors=[
            structlog.contextvars.merge_contextvars,  # session_id, method, path (the SDK binds them)
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
    ).bind(logger_name=name)


def apply_config(server: Server, config: ServerConfig) -> None:
    """Patch the SDK's hard-coded timings with ``config`` (see the module docstring)."""
    sdk_server._SETUP_WAIT_TIMEOUT_S = config.setup_wait_timeout
    sdk_reconnect.CHUNK_SIZE = config.chunk_size
    sdk_reconnect.LINGER_SECONDS = config.linger
    sdk_server.EventSourceResponse = _keepalive_response(config.ping_interval)
    _reaper_coro(server).__defaults__ = (config.effective_reaper_interval, config.ttl)
    for module in (sdk_server, sdk_environment, sdk_session):
        module.logger = _sdk_logger(module.__name__, config.access_log)


def build_app(scenarios: list[Scenario], config: ServerConfig) -> ASGIApp:
    """An ASGI app: the openreward Server's FastAPI app serving these scenarios, plus orsbench's read-only GET /_orsbench/stats route."""
    unsupported = [knob for knob, value in (("faults", config.faults), ("api_key", config.api_key)) if value]
    if unsupported:
        raise ValueError(
            f"the SDK twin serves the reference server unchanged and has no {' / '.join(unsupported)}: "
            "use the mock engine for those knobs"
        )
    stats = TwinStats(config=json.loads(config.to_json()) | {"api_key": None})
    server = Server([environment_class(s, config, stats) for s in scenarios])
    apply_config(server, config)
    envs = getattr(server, "_active_envs", None)

    def active_sessions() -> int:
        if envs is not None:
            return len(envs)
        return stats.sessions_created - stats.sessions_deleted - stats.sessions_reaped

    return StatsMiddleware(server.app, stats, active_sessions)
