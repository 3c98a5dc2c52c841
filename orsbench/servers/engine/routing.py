"""The engine's front room: the ASGI entry, lifespan, the route table and the root routes.

Routing is two dict lookups (root paths, then ``/{env}/<route>``); a trailing
slash is redirected (307), an unknown environment segment is redirected to the
default environment (308, ``docs/protocol.md`` §1.2). Errors become JSON
``detail`` answers (§2); a scenario bug still answers 500 with its message.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sys
import time
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import Scenario
from orsbench.servers.engine.base import EnvHandler, Hooks, RootHandler
from orsbench.servers.engine.calls import CallRoutes
from orsbench.servers.engine.dataset import DatasetRoutes
from orsbench.servers.engine.sessions import SessionRoutes
from orsbench.servers.http import EventStream, HTTPError, Receive, Request, Scope, Send, run_lifespan, send_json
from orsbench.servers.keepalive import KeepaliveClock
from orsbench.servers.state import Session, Stats, TaskRegistry

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



class Engine(DatasetRoutes, SessionRoutes, CallRoutes):
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
        async def startup() -> None:
            self.start_background()

        await run_lifespan(receive, send, startup, self.shutdown)

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
