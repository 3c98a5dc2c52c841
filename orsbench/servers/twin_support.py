"""What the two SDK twins share: stats, the stats middleware, and scenario-tool plumbing.

orsbench serves every scenario on two third-party ORS servers as well as on its
own engine: openreward's ``Server`` (:mod:`orsbench.servers.sdk_twin`) and
ors-sdk's ``ors.Server`` (:mod:`orsbench.servers.ors_sdk_twin`). Both are
FastAPI apps that find tools by introspecting an ``Environment`` subclass, so
the parts that do not depend on which SDK is installed live here, once:

* :class:`TwinStats` and :class:`StatsMiddleware` answer ``GET /_orsbench/stats``
  (sessions, calls per tool, requests per route) in front of the SDK's app;
* :func:`environment_namespace` is the class body of the generated
  ``Environment`` subclass (splits, tasks, prompt, setup, teardown, and each
  scenario :class:`Tool` as a :func:`tool_method` the SDK introspects exactly
  like a hand-written ``@tool``);
* :func:`patch_timings` applies the knobs both SDKs hard-code alike (chunk
  size, resume linger, the literal ``ping=10`` keep-alive, the reaper's TTL and
  interval, log level); :func:`refuse_unsupported` refuses ``faults`` and
  ``api_key``;
* :class:`Lack` and :func:`left_out`: what an older SDK release does not have
  (task-scoped tools, the index API, ``score_group``) and the scenarios that need
  it — the twin serves the rest and says which it left out and why
  (``orsbench versions --server``, docs/versions.md).

Nothing here imports either SDK: each twin passes in its own names
(:class:`SdkTypes`) and modules.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import structlog
from pydantic import BaseModel, ConfigDict
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import JSON, Episode, Scenario, Tool, ToolResult
from orsbench.servers.stats import StatsSnapshot, snapshot

__all__ = [
    "EPISODE_ATTR",
    "Lack",
    "NothingToServe",
    "SdkTypes",
    "StatsMiddleware",
    "ToolNameError",
    "TwinStats",
    "check_tool_names",
    "environment_namespace",
    "input_model",
    "input_schema",
    "keepalive_response",
    "left_out",
    "lifespan_closure_function",
    "patch_timings",
    "refuse_unsupported",
    "resolve",
    "sdk_logger",
    "stats_for",
    "tool_method",
    "twin_app",
]

#: Instance attribute of a generated environment holding the scenario :class:`Episode`.
EPISODE_ATTR = "_orsbench_episode"

#: True while a request is being handled: tells a ``/delete`` teardown apart
#: from a reaper (or shutdown) teardown without touching SDK internals.
_IN_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar("orsbench_in_request", default=False)


@dataclass
class TwinStats:
    """Counters behind ``GET /_orsbench/stats``; plain ints, all on the event loop."""

    #: The ``--impl`` name the snapshot reports (``sdk`` or ``ors-sdk``).
    impl: str = "sdk"
    sessions_created: int = 0
    sessions_deleted: int = 0
    sessions_reaped: int = 0
    #: Environments constructed per environment name (as the mock's ``sessions_by_env``).
    sessions_by_env: Counter[str] = field(default_factory=Counter)
    #: Successful ``POST /ping`` (session keep-alives).
    pings: int = 0
    #: ``: ping`` comments written on SSE streams.
    sse_pings: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    shutting_down: bool = False
    #: Scenarios asked for that this SDK release cannot serve, and why (:func:`left_out`); shown in the stats.
    left_out: dict[str, str] = field(default_factory=dict)
    #: The served ServerConfig (API key masked), as the mock reports it: checkers read ttl and ping_interval.
    config: JSON = field(default_factory=dict)

    def snapshot(self, active_sessions: int) -> StatsSnapshot:
        """A twin's answer to ``GET /_orsbench/stats``: the common counters plus ``sse_pings``."""
        out = snapshot(self, impl=self.impl, active_sessions=active_sessions, config=self.config)
        out["sse_pings"] = self.sse_pings
        if self.left_out:
            out["left_out"] = dict(self.left_out)
        return out

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
    """Outermost ASGI layer: serves the stats route and counts every other request.

    It sits before the SDK's default-env redirect, which would otherwise send
    the stats route to ``/{first_env}/_orsbench/stats``. Requests are counted by
    route template from ``scope["route"]``, which Starlette's router sets in
    place; responses with no route (redirects, 404, 405) count under their
    status code, e.g. ``"308"``.
    """

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


# -- scenario tools → SDK tool methods ------------------------------------------------
async def resolve(value: Any) -> Any:
    """Scenario hooks may be sync or async; await only what is awaitable."""
    return await value if inspect.isawaitable(value) else value


class _AnyInput(BaseModel):
    """Stands in for ``params=None`` when a tool has an explicit ``schema_override``."""

    model_config = ConfigDict(extra="allow")


def input_model(spec: Tool) -> type[BaseModel] | None:
    """The pydantic model the SDK validates with and derives ``input_schema`` from."""
    if spec.schema_override is None:
        return spec.params
    base = spec.params or _AnyInput
    override = spec.schema_override

    def model_json_schema(cls: type[BaseModel], *args: Any, **kwargs: Any) -> JSON:
        return dict(override)

    # Both SDKs call ``mdl.model_json_schema()``: a subclass lets the override win
    # while validation stays the model's own.
    return type(base)(base.__name__, (base,), {"__module__": __name__, "model_json_schema": classmethod(model_json_schema)})


def input_schema(model: type[BaseModel] | None) -> JSON | None:
    """What an SDK puts in ``ToolSpec.input_schema`` for a tool taking ``model``."""
    return None if model is None else model.model_json_schema()


def tool_method(
    spec: Tool,
    model: type[BaseModel] | None,
    scenario: Scenario,
    config: ServerConfig,
    stats: TwinStats,
    *,
    decorator: Callable[..., Any],
    output_type: type,
    to_output: Callable[[ToolResult], Any],
    task_tools: bool = True,
) -> Callable[..., Any]:
    """An ``@tool`` method the SDK introspects exactly like a hand-written one.

    Its name is the tool name, its docstring the description, its single
    parameter is annotated with the input model (none for ``params=None``) and
    its return annotation is the SDK's ``output_type`` — both SDKs check that
    annotation before they accept a method as a tool. Each call sleeps
    ``config.latency`` first and is counted in ``stats.calls``. ``task_tools``:
    the SDK's decorator takes ``shared=`` (a release before task-scoped tools
    takes the bare function, and is handed only shared tools: :func:`left_out`).
    """
    takes_args = spec.params is not None

    async def run(env: Any, args: Any) -> Any:
        if config.latency > 0:
            await asyncio.sleep(config.latency)
        stats.calls[spec.name] += 1
        episode: Episode = getattr(env, EPISODE_ATTR)
        result = await resolve(spec.fn(scenario, episode, args if takes_args else None))
        # Anything but a ToolResult passes through so the SDK's own type check fires.
        return to_output(result) if isinstance(result, ToolResult) else result

    if model is None:

        async def method(self: Any) -> Any:
            return await run(self, None)

        method.__annotations__ = {"return": output_type}
    else:

        async def method(self: Any, args: Any) -> Any:  # type: ignore[misc]
            return await run(self, args)

        method.__annotations__ = {"args": model, "return": output_type}
    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = spec.description
    return decorator(shared=spec.shared)(method) if task_tools else decorator(method)


# -- scenario → Environment namespace ------------------------------------------------
@dataclass(frozen=True)
class Lack:
    """Something the installed SDK release does not have, and which scenarios need it.

    Why: ``orsbench versions --server`` serves the same scenarios on SDK releases from long before the twin was
    written (openreward 0.1.33 has no task-scoped tools, no index API and no ``score_group``). A release that
    lacks what a scenario needs cannot serve that scenario at all — its checks would judge the twin's plumbing,
    not the server — so the twin leaves it out, says why, and serves the rest.
    """

    #: What is missing, in the SDK's words (``@tool(shared=False)``, the index API ``num_tasks``/``get_task``).
    feature: str
    #: Whether a scenario needs it.
    needed_by: Callable[[Scenario], bool]


def needs_task_tools(scenario: Scenario) -> bool:
    """The scenario has a task-scoped tool (``shared=False``)."""
    return any(not t.shared for t in scenario.all_tools.values())


def needs_index_api(scenario: Scenario) -> bool:
    """The scenario serves its tasks only by index (``list_tasks`` raises ``NotImplementedError``)."""
    for split in scenario.splits():
        try:
            scenario.list_tasks(split.name)
        except NotImplementedError:
            return True
        except Exception:
            return False  # a scenario whose listing fails on purpose still lists through the SDK's list_tasks
    return False


def needs_score_group(scenario: Scenario) -> bool:
    """The scenario scores groups of candidates (overrides ``Scenario.score_group``)."""
    return type(scenario).score_group is not Scenario.score_group


@dataclass(frozen=True)
class SdkTypes:
    """The names one SDK gives to what a generated environment is made of."""

    label: str  # how error messages name the SDK
    environment: type  # the ``Environment`` base class
    tool: Callable[..., Any]  # the ``@tool`` decorator (called as ``tool(shared=...)``)
    tool_output: type
    tool_spec: type
    list_tools_output: type
    split: type
    #: Attribute names the SDK already uses on an environment class or instance.
    reserved_names: frozenset[str]
    #: What this installed release does not have (empty for a release the twin was written for).
    lacks: tuple[Lack, ...] = ()
    #: The ``@tool`` decorator takes ``shared=`` (task-scoped tools exist).
    task_tools: bool = True
    #: Its base class has the index API (``num_tasks``, ``get_task``).
    index_api: bool = True


class NothingToServe(ValueError):
    """Every scenario asked for needs something the installed SDK release does not have; the message says what."""


def left_out(scenarios: Sequence[Scenario], sdk: SdkTypes) -> dict[str, str]:
    """``{scenario name: why}`` for each scenario the installed release cannot serve (see :class:`Lack`)."""
    out: dict[str, str] = {}
    for scenario in scenarios:
        missing = [lack.feature for lack in sdk.lacks if lack.needed_by(scenario)]
        if missing:
            out[scenario.name] = f"{sdk.label} has no {' and no '.join(missing)}, which scenario {scenario.name!r} needs"
    return out


class ToolNameError(ValueError):
    """A scenario tool name an SDK twin cannot serve."""


def check_tool_names(scenario: Scenario, sdk: SdkTypes) -> None:
    """Raise :class:`ToolNameError` for a tool name the SDK already uses as an attribute."""
    for name in scenario.all_tools:
        if name in sdk.reserved_names or (name.startswith("__") and name.endswith("__")):
            raise ToolNameError(
                f"scenario {scenario.name!r}: tool {name!r} cannot be served by {sdk.label}: "
                f"the SDK maps tool names to Environment attributes and {name!r} is already one "
                f"(e.g. a lifecycle method). Rename the tool."
            )


def environment_namespace(scenario: Scenario, config: ServerConfig, stats: TwinStats, sdk: SdkTypes) -> dict[str, Any]:
    """The class body of a generated ``Environment`` subclass serving ``scenario`` (see the twins' docstrings).

    * ``list_splits``/``list_tasks`` come from the scenario; ``num_tasks`` and
      ``get_task`` keep the SDK's defaults and fall back to the scenario's own
      when ``list_tasks`` raises ``NotImplementedError`` (index-only scenarios).
    * ``__init__`` builds the :class:`Episode` (the SDKs hand the constructor
      only the task, so ``episode.split``/``index`` are ``None``) and shadows
      with ``None`` the task-scoped tools this task does not expose, so calling
      one answers "not a valid tool" as in the mock (the stock SDKs would let
      any session call any non-shared tool).
    * ``setup`` sleeps ``config.setup_delay`` then awaits ``scenario.setup``;
      ``teardown`` counts itself and awaits ``scenario.teardown``.
    * every tool of ``scenario.all_tools`` becomes a :func:`tool_method`.
    """
    check_tool_names(scenario, sdk)
    base = sdk.environment
    models = {t.name: input_model(t) for t in scenario.all_tools.values()}
    task_scoped = {
        t.name: sdk.tool_spec(name=t.name, description=t.description.strip(), input_schema=input_schema(models[t.name]))
        for t in scenario.all_tools.values()
        if not t.shared
    }

    def __init__(self: Any, task_spec: JSON = {}, secrets: dict[str, str] = {}) -> None:
        base.__init__(self, task_spec, secrets)
        episode = Episode(scenario, task_spec, secrets=dict(secrets))
        scenario.admit(episode)  # SessionRefused raises here: the SDK answers /create 500 (servers/differences.py)
        setattr(self, EPISODE_ATTR, episode)
        stats.sessions_by_env[scenario.name] += 1
        try:
            visible = set(scenario.task_tool_names(task_spec))
        except Exception:
            visible = set()  # list_task_tools() re-raises it where the SDK would
        for name in task_scoped.keys() - visible:
            setattr(self, name, None)  # shadows the class tool: calling it is not_found

    def list_splits(cls: type) -> list[Any]:
        return [sdk.split(name=s.name, type=s.type) for s in scenario.splits()]

    # A release without the index API gets no num_tasks/get_task (no route calls them; see left_out).

    def list_tasks(cls: type, split: str) -> Sequence[JSON]:
        return scenario.list_tasks(split)

    async def num_tasks(cls: type, split: str) -> int:
        try:
            return await base.num_tasks.__func__(cls, split)  # type: ignore[attr-defined]
        except NotImplementedError:
            return await resolve(scenario.num_tasks(split))

    async def get_task(cls: type, split: str, index: int) -> JSON:
        try:
            return await base.get_task.__func__(cls, split, index)  # type: ignore[attr-defined]
        except NotImplementedError:
            return await resolve(scenario.get_task(split, index))

    def get_prompt(self: Any) -> Any:
        return scenario.prompt(getattr(self, EPISODE_ATTR))

    def list_task_tools(self: Any) -> Any:
        names = scenario.task_tool_names(self.task_spec)
        return sdk.list_tools_output(tools=[task_scoped[n] for n in names if n in task_scoped])

    async def setup(self: Any) -> None:
        if config.setup_delay > 0:
            await asyncio.sleep(config.setup_delay)
        await resolve(scenario.setup(getattr(self, EPISODE_ATTR)))

    async def teardown(self: Any) -> None:
        stats.count_teardown()
        await resolve(scenario.teardown(getattr(self, EPISODE_ATTR)))

    def to_output(result: ToolResult) -> Any:
        return sdk.tool_output(blocks=result.blocks, metadata=result.metadata, reward=result.reward, finished=result.finished)

    namespace: dict[str, Any] = {
        "__qualname__": scenario.name,
        "__doc__": f"{sdk.label} twin of the orsbench scenario {scenario.name!r}: {scenario.summary}",
        "__init__": __init__,
        "list_splits": classmethod(list_splits),
        "list_tasks": classmethod(list_tasks),
        **({"num_tasks": classmethod(num_tasks), "get_task": classmethod(get_task)} if sdk.index_api else {}),
        "get_prompt": get_prompt,
        "list_task_tools": list_task_tools,
        "setup": setup,
        "teardown": teardown,
    }
    for spec in scenario.all_tools.values():
        namespace[spec.name] = tool_method(
            spec, models[spec.name], scenario, config, stats,
            decorator=sdk.tool, output_type=sdk.tool_output, to_output=to_output, task_tools=sdk.task_tools,
        )  # fmt: skip
    return namespace


def generated_environment(
    scenario: Scenario,
    config: ServerConfig,
    stats: TwinStats,
    sdk: SdkTypes,
    module: str,
    extra: dict[str, Any] | None = None,
) -> type:
    """A subclass of ``sdk.environment`` named ``scenario.name``, built in ``module``, serving ``scenario``.

    ``extra``: members one SDK has and the other does not (the openreward SDK's ``score_group``).
    """
    namespace = environment_namespace(scenario, config, stats, sdk) | (extra or {})
    namespace["__module__"] = module
    return type(sdk.environment)(scenario.name, (sdk.environment,), namespace)


def twin_app(server: Any, stats: TwinStats) -> StatsMiddleware:
    """The SDK server's FastAPI app behind :class:`StatsMiddleware`; sessions counted from its own table."""
    envs = getattr(server, "_active_envs", None)

    def active_sessions() -> int:
        if envs is not None:
            return len(envs)
        return stats.sessions_created - stats.sessions_deleted - stats.sessions_reaped

    return StatsMiddleware(server.app, stats, active_sessions)


def stats_for(impl: str, config: ServerConfig) -> TwinStats:
    """Fresh counters reporting ``impl`` and the served config with the API key masked."""
    return TwinStats(impl=impl, config=json.loads(config.to_json()) | {"api_key": None})


def build_twin_app(
    scenarios: list[Scenario],
    config: ServerConfig,
    *,
    impl: str,
    twin: str,
    server_class: Callable[[list[Any]], Any],
    environment_class: Callable[[Scenario, ServerConfig, TwinStats], type],
    apply_config: Callable[[Any, ServerConfig], None],
    sdk: SdkTypes | None = None,
) -> StatsMiddleware:
    """How either twin builds its app: refuse what it cannot serve, generate one environment class per
    scenario, hand them to the SDK's own ``Server``, patch its timings, and count behind the stats route.

    ``sdk``: the installed release's types; a scenario it lacks a feature for is left out (said once on stderr and
    in the stats' ``left_out``), and :class:`NothingToServe` is raised when that leaves nothing.
    """
    refuse_unsupported(config, twin)
    stats = stats_for(impl, config)
    skipped = left_out(scenarios, sdk) if sdk is not None else {}
    served = [s for s in scenarios if s.name not in skipped]
    if not served:
        raise NothingToServe("; ".join(skipped.values()) + ": serve another scenario, or a newer release")
    for why in skipped.values():
        print(f"orsbench: the {twin} leaves a scenario out: {why}", file=sys.stderr, flush=True)
    stats.left_out = skipped
    server = server_class([environment_class(s, config, stats) for s in served])
    apply_config(server, config)
    return twin_app(server, stats)


# -- config patches both twins apply -------------------------------------------------
def keepalive_response(base: type, interval: float) -> type:
    """``EventSourceResponse`` whose explicit ``ping=`` (the SDKs' literal 10) becomes ``interval``."""
    base = getattr(base, "_orsbench_original", base)

    class KeepAliveEventSourceResponse(base):  # type: ignore[misc, valid-type]
        _orsbench_original = base

        def __init__(self, *args: Any, ping: float | None = None, **kwargs: Any) -> None:
            # /create_session passes no ping (library default, ends at once); keep that.
            super().__init__(*args, ping=None if ping is None else interval, **kwargs)

    return KeepAliveEventSourceResponse


def sdk_logger(name: str, access_log: bool) -> Any:
    """A structlog logger like the SDKs' own, at INFO with ``access_log`` and WARNING without."""
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


def refuse_unsupported(config: ServerConfig, twin: str) -> None:
    """``faults`` and ``api_key`` would change what the SDK server does: a twin refuses them (ValueError)."""
    unsupported = [knob for knob, value in (("faults", config.faults), ("api_key", config.api_key)) if value]
    if unsupported:
        raise ValueError(
            f"the {twin} serves its SDK's Server unchanged and has no {' / '.join(unsupported)}: "
            "use the mock engine for those knobs"
        )


def patch_timings(app: Any, config: ServerConfig, *, reconnect: Any, server_module: Any, log_modules: Sequence[Any]) -> None:
    """Apply the knobs both SDKs hard-code the same way (see the twins' docstrings).

    ``reconnect`` is the SDK's resumable-stream module (``CHUNK_SIZE``,
    ``LINGER_SECONDS``), ``server_module`` the one that names
    ``EventSourceResponse`` with a literal ``ping=10``; the reaper's TTL and
    interval are the defaults of ``reaper_coro`` in ``app``'s lifespan.
    """
    reconnect.CHUNK_SIZE = config.chunk_size
    reconnect.LINGER_SECONDS = config.linger
    server_module.EventSourceResponse = keepalive_response(server_module.EventSourceResponse, config.ping_interval)
    reaper = lifespan_closure_function(app, "reaper_coro", ("reaper_interval", "stale_threshold"))
    reaper.__defaults__ = (config.effective_reaper_interval, config.ttl)
    for module in log_modules:
        module.logger = sdk_logger(module.__name__, config.access_log)


def lifespan_closure_function(app: Any, name: str, params: tuple[str, ...]) -> Callable[..., Any]:
    """The function ``name`` the app's lifespan closes over (the SDKs' ``reaper_coro``).

    Both SDKs define ``reaper_coro(reaper_interval=5, stale_threshold=900)`` inside
    ``Server.__init__`` and start it from the lifespan; patching its
    ``__defaults__`` is the smallest change that makes the TTL configurable.
    """
    lifespan = app.router.lifespan_context
    fn = getattr(lifespan, "__wrapped__", lifespan)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cell = cells.get(name)
    found = cell.cell_contents if cell is not None else None
    if found is None or found.__code__.co_varnames[: len(params)] != params:
        raise RuntimeError(
            f"SDK Server internals changed: cannot find {name}({', '.join(params)}) in the app's lifespan; "
            "the ttl and reaper_interval knobs cannot be applied"
        )
    return found
