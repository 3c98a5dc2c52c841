"""Protocol violations: faults that each break exactly one ORS rule on the mock engine.

They exist to measure the checker: ``orsbench check`` against a server with
one violation must fail exactly the check(s) naming that rule, and nothing it
is not about. Every violation is registered twice — as a fault of kind
``"violation"`` (so ``orsbench serve echo --fault reward-bool`` serves it) and
in :data:`VIOLATIONS`, which names the checks it breaks and the scenario that
exposes it. ``tests/test_check_violations.py`` holds each one to that.

A violation changes the engine *instance* (a route handler, a hook) or wraps
the ASGI app in a small middleware that rewrites one kind of answer; the
engine's own code stays the reference-faithful path. ``/health`` keeps
answering 200 (the launcher waits on it) and ``/_orsbench/stats`` is never
touched.
"""

from __future__ import annotations

import inspect
import json
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from orsbench import protocol
from orsbench.servers import sse
from orsbench.servers.engine import HTTPError, Request, _finished_error, _Raw
from orsbench.servers.faults import fault
from orsbench.wire.sse import SSEComment, SSEParser

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine, Receive, Scope, Send

Apply = Callable[["Engine", Any, random.Random], Any]
Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Violation:
    """What one violation breaks: the checks that must fail, and how to expose it."""

    name: str
    summary: str
    #: The checks naming the broken rule; a check run must fail exactly these (any severity) ...
    breaks: tuple[str, ...]
    #: ... plus these cross-cutting non-required checks, which see the same defect from afar.
    also: tuple[str, ...] = ()
    scenario: str = "echo"
    #: ServerConfig fields the fault needs to show (e.g. a short TTL).
    knobs: dict[str, Any] = field(default_factory=dict)


VIOLATIONS: dict[str, Violation] = {}


def violation(
    name: str,
    summary: str,
    breaks: tuple[str, ...],
    *,
    also: tuple[str, ...] = (),
    scenario: str = "echo",
    **knobs: Any,
) -> Callable[[Apply], Apply]:
    def decorate(fn: Apply) -> Apply:
        VIOLATIONS[name] = Violation(name, summary, breaks, also, scenario, knobs)
        return fault(name, summary, kind="violation")(fn)

    return decorate


# -- building blocks ------------------------------------------------------------------------
def _wrap_env(engine: Engine, route: str, method: str, wrap: Callable[[Handler], Handler]) -> None:
    routes = engine._env_routes[route]
    routes[method] = wrap(routes[method])


def _wrap_root(engine: Engine, path: str, method: str, wrap: Callable[[Handler], Handler]) -> None:
    routes = engine._root[path]
    routes[method] = wrap(routes[method])


def _plain(result: Any) -> Any:
    """A handler's JSON result as Python data (pre-encoded ``_Raw`` payloads decoded)."""
    return orjson.loads(result.payload) if isinstance(result, _Raw) else result


def _rewrite_result(
    engine: Engine, route: str, method: str, change: Callable[[Any, Request], Any], *, root: bool = False
) -> None:
    """Replace a route's JSON answer with ``change(answer, request)``."""

    def wrap(handler: Handler) -> Handler:
        async def rewritten(request: Request, *args: Any) -> Any:
            return change(_plain(await handler(request, *args)), request)

        return rewritten

    (_wrap_root if root else _wrap_env)(engine, route, method, wrap)


Hook = Callable[[Request, dict[str, Any]], "dict[str, Any] | None | Awaitable[dict[str, Any] | None]"]


def _before(engine: Engine, route: str, method: str, hook: Hook, *, root: bool = False) -> None:
    """Run ``hook(request, body)`` before a route's handler.

    The hook may raise (an ``HTTPError`` is answered, anything else is a 500),
    or return a replacement JSON body for the handler to read; ``None`` leaves
    the request as it is.
    """

    def wrap(handler: Handler) -> Handler:
        async def hooked(request: Request, *args: Any) -> Any:
            replacement = hook(request, await _body(request))
            if inspect.isawaitable(replacement):
                replacement = await replacement
            if replacement is not None:
                request._body = json.dumps(replacement).encode()
            return await handler(request, *args)

        return hooked

    (_wrap_root if root else _wrap_env)(engine, route, method, wrap)


def _rescue(engine: Engine, route: str, method: str, detail: str | None, instead: Callable[[Request, str], Any]) -> None:
    """Where a route answers an ``HTTPError`` (with ``detail``, if given), return or raise ``instead(request, raw_env)``."""

    def wrap(handler: Handler) -> Handler:
        async def rescued(request: Request, *args: Any) -> Any:
            try:
                return await handler(request, *args)
            except HTTPError as exc:
                if detail is not None and exc.detail != detail:
                    raise
                return instead(request, args[-1] if args else "")

        return rescued

    _wrap_env(engine, route, method, wrap)


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def _raise(exc: BaseException) -> Any:
    raise exc


async def _body(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _frames(body: bytes) -> list[tuple[str, str] | bytes]:
    """An SSE body written by the engine as ``(event, data)`` pairs and raw comment blocks, in order."""
    out: list[tuple[str, str] | bytes] = []
    for item in SSEParser().feed(body):
        if isinstance(item, SSEComment):
            out.append(b":" + item.text.encode() + b"\r\n\r\n")
        else:
            out.append((item.event, item.data))
    return out


EventFn = Callable[[str, str, dict[str, Any]], "list[tuple[str, str] | bytes]"]


class RewriteStream:
    """Middleware rewriting the SSE answers of one route, event by event.

    ``on_event(name, data, state)`` returns what to send instead: ``(name, data)``
    pairs (re-framed by the engine's own writer) or raw bytes; comments go
    through ``on_comment``. ``state`` lives for one response.
    """

    def __init__(
        self, app: Any, route: str, on_event: EventFn | None = None, on_comment: Callable[[bytes], bytes] | None = None
    ) -> None:
        self.app, self.suffix, self.on_event, self.on_comment = app, "/" + route, on_event, on_comment

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(self.suffix):
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {}
        streaming = False

        async def rewrite(message: dict[str, Any]) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                streaming = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"])
            elif message["type"] == "http.response.body" and streaming and message.get("body"):
                message = {**message, "body": self._rewrite(message["body"], state)}
            await send(message)

        await self.app(scope, receive, rewrite)

    def _rewrite(self, body: bytes, state: dict[str, Any]) -> bytes:
        out: list[bytes] = []
        for item in _frames(body):
            if isinstance(item, bytes):
                out.append(self.on_comment(item) if self.on_comment else item)
                continue
            replaced = self.on_event(item[0], item[1], state) if self.on_event else [item]
            for piece in replaced:
                out.append(piece if isinstance(piece, bytes) else sse.frame(*piece))
        return b"".join(out)


def _on_result(change: Callable[[dict[str, Any]], dict[str, Any] | tuple[str, str]]) -> EventFn:
    """An ``on_event`` that edits single-event ``end`` results (chunked ones pass untouched)."""

    def on_event(name: str, data: str, state: dict[str, Any]) -> list[tuple[str, str] | bytes]:
        if name == protocol.EVENT_CHUNK:
            state["chunked"] = True
        if name != protocol.EVENT_END or state.get("chunked"):
            return [(name, data)]
        try:
            result = json.loads(data)
        except ValueError:
            return [(name, data)]
        changed = change(result)
        if isinstance(changed, tuple):
            return [changed]
        return [(name, json.dumps(changed, separators=(",", ":")))]

    return on_event


def _on_output(change: Callable[[dict[str, Any]], None]) -> EventFn:
    """Edit the ``output`` of ok:true results in place."""

    def edit(result: dict[str, Any]) -> dict[str, Any]:
        if result.get("ok") is True and isinstance(result.get("output"), dict):
            change(result["output"])
        return result

    return _on_result(edit)


class RewriteHeaders:
    """Middleware that edits the status and headers of some answers."""

    def __init__(
        self,
        app: Any,
        match: Callable[[Scope, int, list[tuple[bytes, bytes]]], bool],
        edit: Callable[[int, list[tuple[bytes, bytes]]], tuple[int, list[tuple[bytes, bytes]], bytes | None]],
    ) -> None:
        self.app, self.match, self.edit = app, match, edit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in (protocol.HEALTH, protocol.STATS):
            await self.app(scope, receive, send)
            return
        replaced_body: bytes | None = None

        async def rewrite(message: dict[str, Any]) -> None:
            nonlocal replaced_body
            if message["type"] == "http.response.start" and self.match(scope, message["status"], message["headers"]):
                status, headers, replaced_body = self.edit(message["status"], list(message["headers"]))
                message = {**message, "status": status, "headers": headers}
            elif message["type"] == "http.response.body" and replaced_body is not None:
                message = {**message, "body": replaced_body if not message.get("more_body") else b""}
                if not message.get("more_body"):
                    replaced_body = b""
            await send(message)

        await self.app(scope, receive, rewrite)


def _set_header(headers: list[tuple[bytes, bytes]], name: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower() != name] + [(name, value)]


def _shared_tools(engine: Engine) -> set[str]:
    return {t.name for sc in engine.scenarios.values() for t in sc.shared_tools()}


# -- discovery ----------------------------------------------------------------------------------
@violation("health-not-json", 'GET /health answers 200 with the text \'OK\' instead of {"status": "ok"}', ("discovery.health",))
def health_not_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def plain_health(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == protocol.HEALTH:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")],
                }
            )
            await send({"type": "http.response.body", "body": b"OK"})
            return
        await app(scope, receive, send)

    return plain_health


@violation("version-missing", "GET /version is not served (404)", ("discovery.version",))
def version_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    del engine._root[protocol.VERSION]
    return app


@violation(
    "list-environments-object",
    'GET /list_environments answers {"environments": [...]} instead of an array',
    ("discovery.list_environments",),
)
def list_environments_object(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.LIST_ENVIRONMENTS, "GET", lambda names, _r: {"environments": names}, root=True)
    return app


def _edit_tool_listings(engine: Engine, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    for route in (protocol.TOOLS, protocol.TASK_TOOLS):
        _rewrite_result(engine, route, "GET", lambda listing, _r: {**listing, "tools": change(listing["tools"])})


@violation(
    "tools-listing-bare-array",
    'GET /{env}/tools answers a bare array of tools instead of {"tools": [...]}',
    ("discovery.tools_listing",),
)
def tools_listing_bare_array(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.TOOLS, "GET", lambda listing, _r: listing["tools"])
    return app


@violation(
    "tools-optional-fields-missing",
    'tool listings carry only "tools" (no terminal_tool, supports_score_group, message_block_types)',
    ("discovery.tools_optional_fields",),
)
def tools_optional_fields_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    for route in (protocol.TOOLS, protocol.TASK_TOOLS):
        _rewrite_result(engine, route, "GET", lambda listing, _r: {"tools": listing["tools"]})
    return app


@violation(
    "tool-schema-invalid",
    'the tool listings add a tool whose input_schema is not a JSON Schema ({"type": "strng"})',
    ("discovery.tools_schema",),
)
def tool_schema_invalid(engine: Engine, app: Any, rng: random.Random) -> Any:
    broken = {"name": "broken_schema", "description": "Its schema is invalid.", "input_schema": {"type": "strng"}}
    _edit_tool_listings(engine, lambda tools: [*tools, broken])
    return app


@violation("tool-names-duplicated", "the tool listings list the first tool twice", ("discovery.tool_names_unique",))
def tool_names_duplicated(engine: Engine, app: Any, rng: random.Random) -> Any:
    _edit_tool_listings(engine, lambda tools: [*tools, tools[0]] if tools else tools)
    return app


@violation(
    "split-type-invalid", "GET /{env}/splits reports the type 'training' (not train|validation|test)", ("discovery.splits",)
)
def split_type_invalid(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(
        engine,
        protocol.SPLITS,
        "GET",
        lambda splits, _r: [{**s, "type": "training" if s["type"] == "train" else s["type"]} for s in splits],
    )
    return app


@violation(
    "default-env-404",
    "bare paths (/tools) answer 404 instead of 308 to the default environment",
    ("routing.default_env_redirect",),
)
def default_env_404(engine: Engine, app: Any, rng: random.Random) -> Any:
    body = orjson.dumps({"detail": protocol.DETAIL_NOT_FOUND})

    def match(scope: Scope, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        return status == 308

    def edit(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        return 404, [(b"content-type", protocol.JSON_CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())], body

    return RewriteHeaders(app, match, edit)


@violation("json-as-text-plain", "JSON answers of the discovery routes are labelled text/plain", ("http.json_content_type",))
def json_as_text_plain(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        return scope["path"].endswith(("/" + protocol.TOOLS, "/" + protocol.SPLITS, protocol.LIST_ENVIRONMENTS))

    def edit(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], None]:
        return status, _set_header(headers, b"content-type", b"text/plain"), None

    return RewriteHeaders(app, match, edit)


# -- dataset ------------------------------------------------------------------------------------
@violation(
    "invalid-split-200",
    "an unknown split on tasks/num_tasks/task/task_range answers 200 with empty data",
    ("dataset.invalid_split_400",),
)
def invalid_split_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    empty = {
        protocol.TASKS: {"tasks": []},
        protocol.NUM_TASKS: {"num_tasks": 0},
        protocol.TASK: {"task": {}},
        protocol.TASK_RANGE: {"tasks": []},
    }
    for route, answer in empty.items():
        with_env = route != protocol.NUM_TASKS
        _rescue(
            engine,
            route,
            "POST",
            protocol.DETAIL_INVALID_SPLIT,
            lambda request, env, answer=answer, with_env=with_env: {**answer, "env_name": env} if with_env else answer,
        )
    return app


@violation("num-tasks-off-by-one", "num_tasks answers one more than the task list holds", ("dataset.num_tasks_matches_list",))
def num_tasks_off_by_one(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.NUM_TASKS, "POST", lambda body, _r: {"num_tasks": body["num_tasks"] + 1})
    return app


@violation("num-tasks-string", 'num_tasks answers the count as a string ("48")', ("dataset.num_tasks",))
def num_tasks_string(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.NUM_TASKS, "POST", lambda body, _r: {"num_tasks": str(body["num_tasks"])})
    return app


@violation(
    "tasks-not-objects", "POST /{env}/tasks lists each task as a JSON-encoded string, not an object", ("dataset.tasks_list",)
)
def tasks_not_objects(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.TASKS, "POST", lambda body, _r: {**body, "tasks": [json.dumps(t) for t in body["tasks"]]})
    return app


@violation(
    "task-index-shifted", "POST /{env}/task with index i (0 ≤ i < n-1) returns tasks[i + 1]", ("dataset.task_matches_list",)
)
def task_index_shifted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def wrap(handler: Handler) -> Handler:
        async def shifted(request: Request, scenario: Any, raw_env: str) -> Any:
            body = await _body(request)
            index, split = body.get("index"), body.get("split")
            tasks = engine._task_list(scenario, split) if split in engine._splits[scenario.name.lower()] else None
            if isinstance(index, int) and tasks and 0 <= index < len(tasks) - 1:
                return {"task": tasks[index + 1], "env_name": raw_env}
            return await handler(request, scenario, raw_env)

        return shifted

    _wrap_env(engine, protocol.TASK, "POST", wrap)
    return app


@violation("task-range-ignores-start", "task_range ignores start (slices [:stop])", ("dataset.task_range_slice",))
def task_range_ignores_start(engine: Engine, app: Any, rng: random.Random) -> Any:
    _before(engine, protocol.TASK_RANGE, "POST", lambda request, body: _without(body, "start") if "start" in body else None)
    return app


@violation(
    "invalid-index-500",
    "POST /{env}/task with an index past the end answers 500",
    ("dataset.invalid_index_400",),
    also=("http.no_server_errors",),
)
def invalid_index_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rescue(
        engine,
        protocol.TASK,
        "POST",
        protocol.DETAIL_INVALID_INDEX,
        lambda request, env: _raise(IndexError("list index out of range")),
    )
    return app


@violation("env-name-missing", "tasks, task and task_range answers leave out env_name", ("dataset.env_name_echo",))
def env_name_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    for route in (protocol.TASKS, protocol.TASK, protocol.TASK_RANGE):
        _rewrite_result(engine, route, "POST", lambda body, _r: {k: v for k, v in body.items() if k != "env_name"})
    return app


@violation(
    "malformed-body-500",
    "a /tasks body that is not JSON answers 500",
    ("http.malformed_body_4xx",),
    also=("http.no_server_errors",),
)
def malformed_body_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def naive(request: Request, body: dict[str, Any]) -> None:
        json.loads(await request.body())  # JSONDecodeError → 500

    _before(engine, protocol.TASKS, "POST", naive)
    return app


# -- sessions ------------------------------------------------------------------------------------
@violation(
    "create-session-json", 'POST /create_session answers JSON {"sid"} instead of an event stream', ("session.create_session_sse",)
)
def create_session_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def as_json(request: Request) -> Any:
        return {"sid": str(uuid.uuid4())}

    engine._root[protocol.CREATE_SESSION]["POST"] = as_json
    return app


@violation(
    "create-answers-wrong-sid",
    'POST /create answers {"sid"} with an id other than the X-Session-ID it was given',
    ("session.create",),
)
def create_answers_wrong_sid(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.CREATE, "POST", lambda body, _r: {"sid": f"server-{body['sid']}"}, root=True)
    return app


@violation("ping-never-finds-session", "POST /ping answers 404 for every sid, live sessions included", ("session.ping",))
def ping_never_finds_session(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def lost(request: Request) -> Any:
        request.sid  # noqa: B018 - still 400 without X-Session-ID
        raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)

    engine._root[protocol.PING]["POST"] = lost
    return app


@violation(
    "delete-500", "POST /delete tears the session down, then answers 500", ("session.delete",), also=("http.no_server_errors",)
)
def delete_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    def wrap(handler: Handler) -> Handler:
        async def crashing(request: Request) -> Any:
            known = request.sid in engine.sessions
            await handler(request)
            if known:
                raise RuntimeError("teardown failed")
            return {"sid": request.sid}

        return crashing

    _wrap_root(engine, protocol.DELETE, "POST", wrap)
    return app


@violation("errors-without-detail", '4xx answers are plain text, not JSON {"detail": ...}', ("http.error_detail",))
def errors_without_detail(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        return 400 <= status < 500

    def edit(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        body = f"error {status}".encode()
        headers = _set_header(_set_header(headers, b"content-type", b"text/plain"), b"content-length", str(len(body)).encode())
        return status, headers, body

    return RewriteHeaders(app, match, edit)


@violation(
    "empty-api-key-401",
    "a request carrying an empty X-API-Key header (as the SDK sends without a key) answers 401",
    ("session.sdk_headers_accepted",),
)
def empty_api_key_401(engine: Engine, app: Any, rng: random.Random) -> Any:
    body = orjson.dumps({"detail": "Invalid API key"})

    async def strict(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if headers.get(protocol.API_KEY_HEADER.lower().encode()) == b"":
            start = {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return strict


@violation("create-session-same-id", "every POST /create_session hands out the same sid", ("session.create_session_unique",))
def create_session_same_id(engine: Engine, app: Any, rng: random.Random) -> Any:
    from orsbench.servers.engine import _Streamer

    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))

    async def same(request: Request) -> Any:
        return _Streamer(immediate=sse.frame(protocol.EVENT_TASK_ID, sid) + sse.frame(protocol.EVENT_END, ""))

    engine._root[protocol.CREATE_SESSION]["POST"] = same
    return app


@violation(
    "missing-sid-accepted",
    "POST /create without X-Session-ID creates a session under a made-up sid",
    ("session.missing_sid_400",),
)
def missing_sid_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def invent(request: Request, body: dict[str, Any]) -> None:
        if not (request.header(protocol.SESSION_HEADER) or "").strip():
            request.headers[protocol.SESSION_HEADER.lower()] = str(uuid.uuid4())

    _before(engine, protocol.CREATE, "POST", invent, root=True)
    return app


@violation(
    "duplicate-sid-replaces",
    "POST /create with an active sid replaces the session instead of answering 400",
    ("session.duplicate_sid_400",),
)
def duplicate_sid_replaces(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def replace(request: Request, body: dict[str, Any]) -> None:
        if request.sid in engine.sessions:
            await engine._delete(request.sid)

    _before(engine, protocol.CREATE, "POST", replace, root=True)
    return app


@violation(
    "create-both-sources-accepted",
    "POST /create with both task_spec and split/index is accepted (task_spec wins)",
    ("session.create_exactly_one_task_source",),
)
def create_both_sources_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def drop_index(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        both = body.get("task_spec") is not None and (body.get("split") is not None or body.get("index") is not None)
        return _without(body, "split", "index") if both else None

    _before(engine, protocol.CREATE, "POST", drop_index, root=True)
    return app


@violation("create-task-spec-refused", "POST /create with a task_spec answers 422", ("session.create_task_spec",))
def create_task_spec_refused(engine: Engine, app: Any, rng: random.Random) -> Any:
    def refuse(request: Request, body: dict[str, Any]) -> None:
        if body.get("task_spec") is not None and body.get("split") is None and body.get("index") is None:
            raise HTTPError(
                422, [{"type": "extra_forbidden", "loc": ["body", "task_spec"], "msg": "Extra inputs are not permitted"}]
            )

    _before(engine, protocol.CREATE, "POST", refuse, root=True)
    return app


@violation(
    "create-invalid-split-accepted",
    "POST /create with an unknown split falls back to the first split instead of 400",
    ("session.create_invalid_task_400",),
)
def create_invalid_split_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def first_split(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        splits = engine._splits.get(str(body.get("env_name") or engine.default_env).lower())
        if splits is None or body.get("split") is None or body["split"] in splits:
            return None
        return {**body, "split": next(iter(splits))}

    _before(engine, protocol.CREATE, "POST", first_split, root=True)
    return app


@violation(
    "create-unknown-env-accepted",
    "POST /create with an unknown env_name uses the default environment instead of 404",
    ("session.create_unknown_env_404",),
)
def create_unknown_env_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def default_env(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        unknown = body.get("env_name") is not None and str(body["env_name"]).lower() not in engine.scenarios
        return _without(body, "env_name") if unknown else None

    _before(engine, protocol.CREATE, "POST", default_env, root=True)
    return app


@violation(
    "task-tools-omit-shared",
    "GET /{env}/task_tools lists only task-scoped tools, not the shared ones",
    ("session.task_tools_superset",),
)
def task_tools_omit_shared(engine: Engine, app: Any, rng: random.Random) -> Any:
    shared = _shared_tools(engine)
    _rewrite_result(
        engine,
        protocol.TASK_TOOLS,
        "GET",
        lambda listing, _r: {**listing, "tools": [t for t in listing["tools"] if t["name"] not in shared]},
    )
    return app


@violation("prompt-not-blocks", "GET /{env}/prompt answers a bare string instead of a list of blocks", ("session.prompt",))
def prompt_not_blocks(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rewrite_result(engine, protocol.PROMPT, "GET", lambda blocks, _r: " ".join(b.get("text", "") for b in blocks))
    return app


@violation("ping-unknown-200", "POST /ping answers 200 for any sid, known or not", ("session.ping_unknown_404",))
def ping_unknown_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def always(request: Request) -> Any:
        session = engine.sessions.get(request.sid)
        if session is not None:
            session.touch()
        return {"status": "ok"}

    engine._root[protocol.PING]["POST"] = always
    return app


def _remember_deleted(engine: Engine) -> dict[str, Any]:
    """Wrap /delete so the fault can tell a deleted sid from one never seen; returns sid → old session."""
    deleted: dict[str, Any] = {}

    def wrap(handler: Handler) -> Handler:
        async def remembering(request: Request) -> Any:
            sid = (request.header(protocol.SESSION_HEADER) or "").strip()
            if sid in engine.sessions:
                deleted[sid] = engine.sessions[sid]
            return await handler(request)

        return remembering

    _wrap_root(engine, protocol.DELETE, "POST", wrap)
    return deleted


@violation("ping-after-delete-200", "POST /ping keeps answering 200 for a deleted session", ("session.ping_after_delete_404",))
def ping_after_delete_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = _remember_deleted(engine)

    def wrap(handler: Handler) -> Handler:
        async def ghost(request: Request) -> Any:
            if request.sid in deleted and request.sid not in engine.sessions:
                return {"status": "ok"}
            return await handler(request)

        return ghost

    _wrap_root(engine, protocol.PING, "POST", wrap)
    return app


@violation(
    "prompt-after-delete-200", "GET /{env}/prompt still answers a deleted session's prompt", ("session.use_after_delete_404",)
)
def prompt_after_delete_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = _remember_deleted(engine)

    def wrap(handler: Handler) -> Handler:
        async def ghost(request: Request, scenario: Any, raw_env: str) -> Any:
            old = deleted.get(request.sid)
            if old is not None and request.sid not in engine.sessions:
                return old.scenario.prompt(old.episode)
            return await handler(request, scenario, raw_env)

        return ghost

    _wrap_env(engine, protocol.PROMPT, "GET", wrap)
    return app


@violation(
    "unknown-sid-500",
    "GET /{env}/prompt for an unknown sid answers 500",
    ("session.unknown_sid_404",),
    also=("http.no_server_errors",),
)
def unknown_sid_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    def crash(request: Request, body: dict[str, Any]) -> None:
        if request.sid not in engine.sessions:
            raise KeyError(request.sid)

    _before(engine, protocol.PROMPT, "GET", crash)
    return app


@violation("delete-unknown-404", "POST /delete for an unknown or already deleted sid answers 404", ("session.delete_idempotent",))
def delete_unknown_404(engine: Engine, app: Any, rng: random.Random) -> Any:
    def strict(request: Request, body: dict[str, Any]) -> None:
        if request.sid not in engine.sessions:
            raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)

    _before(engine, protocol.DELETE, "POST", strict, root=True)
    return app


@violation(
    "recreate-deleted-refused", "POST /create refuses (400) a sid that was deleted before", ("session.recreate_deleted_sid",)
)
def recreate_deleted_refused(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = _remember_deleted(engine)

    def grudging(request: Request, body: dict[str, Any]) -> None:
        if (request.header(protocol.SESSION_HEADER) or "").strip() in deleted:
            raise HTTPError(400, protocol.DETAIL_SESSION_EXISTS)

    _before(engine, protocol.CREATE, "POST", grudging, root=True)
    return app


@violation(
    "starting-503-bare",
    "503 'still starting' answers come without X-Backend-State and Retry-After",
    ("session.starting_503",),
    also=("http.no_server_errors",),
    scenario="slow",
    params={"setup": 0.5, "long_call": 0.1},
    setup_wait_timeout=0.2,
)
def starting_503_bare(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        return status == 503

    def edit(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], None]:
        drop = {protocol.BACKEND_STATE_HEADER.lower().encode(), b"retry-after"}
        return status, [(k, v) for k, v in headers if k.lower() not in drop], None

    return RewriteHeaders(app, match, edit)


@violation(
    "ttl-never-reaps",
    "idle sessions are never reaped (the TTL is not enforced)",
    ("session.ttl_reap",),
    ttl=1.0,
    reaper_interval=0.2,
)
def ttl_never_reaps(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def idle() -> None:
        return None

    engine._reap_forever = idle  # type: ignore[method-assign]
    return app


@violation(
    "score-group-500",
    "POST /{env}/score_group on an environment that does not score groups answers 500",
    ("score_group.contract",),
    also=("http.no_server_errors",),
)
def score_group_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    _rescue(engine, protocol.SCORE_GROUP, "POST", None, lambda request, env: _raise(NotImplementedError("score_group")))
    return app


# -- tool calls -----------------------------------------------------------------------------------
@violation("call-content-type-json", "/call streams are labelled application/json", ("call.sse_content_type",))
def call_content_type_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        return scope["path"].endswith("/" + protocol.CALL) and status == 200

    def edit(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], None]:
        return status, _set_header(headers, b"content-type", protocol.JSON_CONTENT_TYPE.encode()), None

    return RewriteHeaders(app, match, edit)


@violation("task-id-event-missing", "/call streams leave out the task_id event", ("call.first_event_task_id",))
def task_id_event_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, lambda name, data, state: [] if name == protocol.EVENT_TASK_ID else [(name, data)])


@violation("call-end-missing", "/call streams close without their end event (chunks and errors still sent)", ("call.end_event",))
def call_end_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, lambda name, data, state: [] if name == protocol.EVENT_END else [(name, data)])


@violation("end-not-json", "/call results are sent as a Python repr ({'ok': True, ...}), not JSON", ("call.end_json",))
def end_not_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, _on_result(lambda result: (protocol.EVENT_END, repr(result))))


@violation(
    "chunk-loses-whitespace",
    "chunk and end data after the first chunk lose their leading whitespace",
    ("call.chunk_reassembly",),
    also=("call.chunk_size",),
)
def chunk_loses_whitespace(engine: Engine, app: Any, rng: random.Random) -> Any:
    def on_event(name: str, data: str, state: dict[str, Any]) -> list[tuple[str, str] | bytes]:
        if name in (protocol.EVENT_CHUNK, protocol.EVENT_END) and state.get("chunked"):
            data = data.lstrip()
        if name == protocol.EVENT_CHUNK:
            state["chunked"] = True
        return [(name, data)]

    return RewriteStream(app, protocol.CALL, on_event)


@violation(
    "sse-mixed-line-endings",
    "/call events end their lines with LF but the blank line after each event with CRLF",
    ("call.sse_framing",),
)
def sse_mixed_line_endings(engine: Engine, app: Any, rng: random.Random) -> Any:
    def on_event(name: str, data: str, state: dict[str, Any]) -> list[tuple[str, str] | bytes]:
        lines = "".join(f"data: {line}\n" for line in (data.split("\n") if data else [""]))
        return [f"event: {name}\n{lines}\r\n".encode()]

    return RewriteStream(app, protocol.CALL, on_event)


@violation(
    "output-blocks-invalid", 'ok:true outputs carry blocks of an unknown shape ({"kind", "content"})', ("call.tool_output_shape",)
)
def output_blocks_invalid(engine: Engine, app: Any, rng: random.Random) -> Any:
    def change(output: dict[str, Any]) -> None:
        output["blocks"] = [{"kind": b.get("type"), "content": b.get("text")} for b in output.get("blocks", [])]

    return RewriteStream(app, protocol.CALL, _on_output(change))


@violation(
    "unknown-tool-500",
    "/call naming an unknown tool answers HTTP 500",
    ("call.unknown_tool_ok_false",),
    also=("http.no_server_errors",),
)
def unknown_tool_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    def crash(request: Request, body: dict[str, Any]) -> None:
        session = engine.sessions.get((request.header(protocol.SESSION_HEADER) or "").strip())
        if session is not None and body.get("task_id") is None and body.get("name") not in session.tools:
            raise KeyError(body.get("name"))

    _before(engine, protocol.CALL, "POST", crash)
    return app


@violation(
    "input-validation-error-event",
    "invalid tool input is answered with an SSE error event instead of ok:false",
    ("call.input_validation_ok_false",),
)
def input_validation_error_event(engine: Engine, app: Any, rng: random.Random) -> Any:
    def change(result: dict[str, Any]) -> dict[str, Any] | tuple[str, str]:
        if result.get("ok") is False and result.get("reason") == protocol.REASON_INPUT_VALIDATION:
            return (protocol.EVENT_ERROR, result.get("error", "invalid input"))
        return result

    return RewriteStream(app, protocol.CALL, _on_result(change))


@violation("reason-missing", "ok:false answers carry no reason", ("call.error_reason",))
def reason_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, _on_result(lambda result: {k: v for k, v in result.items() if k != "reason"}))


@violation("finish-latch-missing", "tool calls keep running after a tool returned finished:true", ("call.finish_latch",))
def finish_latch_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    original = engine._finish

    def finish(session: Any, name: str, result: Any) -> tuple[str, str]:
        outcome = original(session, name, result)
        session.finished = False
        return outcome

    engine._finish = finish  # type: ignore[method-assign]
    return app


@violation(
    "reason-precedence-latch-first",
    "after finished:true an unknown tool is refused as episode_finished, not not_found",
    ("call.reason_precedence",),
)
def reason_precedence_latch_first(engine: Engine, app: Any, rng: random.Random) -> Any:
    original = engine._precheck

    def precheck(session: Any, name: str, tool_input: dict[str, Any]) -> Any:
        if session.finished:
            return _finished_error(name)
        return original(session, name, tool_input)

    engine._precheck = precheck  # type: ignore[method-assign]
    return app


@violation("unknown-task-id-404", "resuming an unknown task_id answers HTTP 404", ("call.unknown_task_id_error",))
def unknown_task_id_404(engine: Engine, app: Any, rng: random.Random) -> Any:
    def strict(request: Request, body: dict[str, Any]) -> None:
        if body.get("task_id") is not None and engine.tasks.get(body["task_id"]) is None:
            raise HTTPError(404, "task not found")

    _before(engine, protocol.CALL, "POST", strict)
    return app


@violation(
    "resume-unsupported", "resuming any task_id answers 'unknown task_id' (results are not kept)", ("call.resume_by_task_id",)
)
def resume_unsupported(engine: Engine, app: Any, rng: random.Random) -> Any:
    def forget(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        return {**body, "task_id": f"forgotten-{body['task_id']}"} if body.get("task_id") is not None else None

    _before(engine, protocol.CALL, "POST", forget)
    return app


@violation(
    "resume-running-refused",
    "resuming a task that is still running answers 'unknown task_id'",
    ("call.resume_running",),
    scenario="slow",
    params={"setup": 0.0, "long_call": 0.6},
)
def resume_running_refused(engine: Engine, app: Any, rng: random.Random) -> Any:
    def impatient(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        record = engine.tasks.get(body["task_id"]) if body.get("task_id") else None
        if record is None or record.future.done():
            return None
        return {**body, "task_id": f"running-{body['task_id']}"}

    _before(engine, protocol.CALL, "POST", impatient)
    return app


@violation(
    "keepalive-missing",
    "long /call streams send no keep-alive comments",
    ("call.keepalive_interval",),
    scenario="slow",
    params={"setup": 0.0, "long_call": 1.5},
)
def keepalive_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, on_comment=lambda raw: b"")


# -- rewards -------------------------------------------------------------------------------------
@violation("reward-bool", "numeric rewards are sent as JSON booleans (1.0 → true, 0.0 → false)", ("reward.well_formed",))
def reward_bool(engine: Engine, app: Any, rng: random.Random) -> Any:
    def change(output: dict[str, Any]) -> None:
        if isinstance(output.get("reward"), (int, float)):
            output["reward"] = bool(output["reward"])

    return RewriteStream(app, protocol.CALL, _on_output(change))


@violation("finished-not-bool", "finished is sent as 0/1 instead of false/true", ("reward.finished_bool",))
def finished_not_bool(engine: Engine, app: Any, rng: random.Random) -> Any:
    def change(output: dict[str, Any]) -> None:
        if isinstance(output.get("finished"), bool):
            output["finished"] = int(output["finished"])

    return RewriteStream(app, protocol.CALL, _on_output(change))


# -- every violation in one process ----------------------------------------------------------------
#: Path prefix under which the ``violation-router`` fault serves each violation.
ROUTER_PREFIX = "/_violations/"


class ViolationRouter:
    """Serves each registered violation on its own engine under ``/_violations/<name>/``.

    Why: the checker's tests need one broken server per violation, and starting
    fifty server processes costs more than the checks. Behind each prefix is a
    separate :class:`~orsbench.servers.engine.Engine` — its own scenario (the
    violation's), config (scenario defaults plus the violation's knobs),
    sessions, tasks, reaper and stats — with exactly that one violation
    applied, as ``orsbench serve <scenario> --fault <name>`` would build it.
    Only the process and the event loop are shared. Redirect ``Location``
    headers are not rewritten (the engine's are relative to its own root).
    """

    def __init__(self, app: Any, seed: int) -> None:
        self.app, self.seed = app, seed
        self.engines: dict[str, Any] = {}

    def _build(self, name: str) -> Any:
        from orsbench.config import ServerConfig
        from orsbench.scenarios import get_scenario
        from orsbench.servers.app import effective_config
        from orsbench.servers.engine import Engine
        from orsbench.servers.faults import apply_faults

        spec = VIOLATIONS[name]
        scenario = get_scenario(spec.scenario, **spec.knobs.get("params", {}))
        config = effective_config(scenario, ServerConfig(**spec.knobs, seed=self.seed), set(spec.knobs)).replace(faults=(name,))
        engine = Engine([scenario], config)
        app = apply_faults(engine, (name,), self.seed)
        engine.start_background()
        return engine, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_shutdown(receive), send)
            return
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(ROUTER_PREFIX):
            await self.app(scope, receive, send)
            return
        name, _, rest = path[len(ROUTER_PREFIX) :].partition("/")
        if name not in VIOLATIONS:
            body = orjson.dumps({"detail": f"unknown violation {name!r}; known: {', '.join(sorted(VIOLATIONS))}"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if name not in self.engines:
            self.engines[name] = self._build(name)
        inner_path = "/" + rest
        inner = {
            **scope,
            "path": inner_path,
            "raw_path": inner_path.encode(),
            "root_path": scope.get("root_path", "") + ROUTER_PREFIX + name,
        }
        await self.engines[name][1](inner, receive, send)

    def _watch_shutdown(self, receive: Receive) -> Receive:
        async def watched() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                for engine, _app in self.engines.values():
                    await engine.shutdown()
            return message

        return watched


@fault(
    "violation-router",
    f"test harness: serves every violation, each on its own engine, under {ROUTER_PREFIX}<name>/ (one process for all)",
    kind="violation",
)
def violation_router(engine: Engine, app: Any, rng: random.Random) -> Any:
    return ViolationRouter(app, engine.config.seed)
