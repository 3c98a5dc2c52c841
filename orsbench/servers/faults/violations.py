"""Protocol violations: faults that each break exactly one ORS rule on the mock engine (61 of them).

They exist to measure the checker: ``orsbench check`` against a server with
one violation must fail exactly the check(s) naming that rule, and nothing it
is not about. Every violation is registered twice — as a fault of kind
``"violation"`` (so ``orsbench serve echo --fault reward-bool`` serves it) and
in :data:`VIOLATIONS`, which names the checks it breaks and the scenario that
exposes it. ``tests/test_check_violations.py`` holds each one to that.

A violation changes the engine *instance* through its public seam (a route
handler via :mod:`.hooks`, an engine :class:`~orsbench.servers.engine.Hooks`
entry) or wraps the ASGI app in a small middleware from :mod:`.middleware`
that rewrites one kind of answer; the engine's own code stays the
reference-faithful path. The ``violation-router`` test harness is in
:mod:`.router`. ``/health`` keeps
answering 200 (the launcher waits on it) and ``/_orsbench/stats`` is never
touched.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orsbench import protocol
from orsbench.registry import Registry
from orsbench.servers import sse
from orsbench.servers.engine import finished_error
from orsbench.servers.faults import WrapFn, fault, http_fault
from orsbench.servers.faults.hooks import Handler, before, raise_, remember_deleted, rescue, rewrite_result, without
from orsbench.servers.faults.middleware import RewriteHeaders, RewriteStream, on_output, on_result, status_is
from orsbench.servers.http import EventStream, Headers, HTTPError, Request, Scope, send_bytes, send_detail, set_header

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine
    from orsbench.servers.http import Receive, Send

Apply = Callable[["Engine", Any, random.Random], Any]


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


#: Every violation, registered with its fault by :func:`violation` (a module adding violations joins ``modules``).
VIOLATIONS: Registry[Violation] = Registry(
    "violation",
    modules=("orsbench.servers.faults.violations", "orsbench.servers.faults.tool_defects", "orsbench.servers.faults.isolation"),
)
#: Path prefix under which the ``violation-router`` test harness (:mod:`.router`) serves each violation.
ROUTER_PREFIX = "/_violations/"


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
        VIOLATIONS.register(Violation(name, summary, breaks, also, scenario, knobs), origin=fn.__module__)
        return fault(name, summary, kind="violation")(fn)

    return decorate


def http_violation(
    name: str,
    summary: str,
    breaks: tuple[str, ...],
    *,
    also: tuple[str, ...] = (),
    scenario: str = "echo",
    **knobs: Any,
) -> Callable[[WrapFn], WrapFn]:
    """A violation told at the HTTP level: ``wrap(app, rng, context)`` breaks the rule around *any* ORS app.

    Served on the mock as every violation is, and around the SDK twins (``--impl sdk --fault NAME``), so
    the same planted defect shows the checker catching it on more than one server.
    """

    def decorate(fn: WrapFn) -> WrapFn:
        VIOLATIONS.register(Violation(name, summary, breaks, also, scenario, knobs), origin=fn.__module__)
        http_fault(name, summary, kind="violation")(fn)
        return fn

    return decorate


def _shared_tools(engine: Engine) -> set[str]:
    return {t.name for sc in engine.scenarios.values() for t in sc.shared_tools()}


# -- discovery ----------------------------------------------------------------------------------
@violation("health-not-json", 'GET /health answers 200 with the text \'OK\' instead of {"status": "ok"}', ("discovery.health",))
def health_not_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def plain_health(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == protocol.HEALTH:
            await send_bytes(send, 200, b"OK", b"text/plain")
            return
        await app(scope, receive, send)

    return plain_health


@violation("version-missing", "GET /version is not served (404)", ("discovery.version",))
def version_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    engine.remove_route(protocol.VERSION)
    return app


@violation(
    "list-environments-object",
    'GET /list_environments answers {"environments": [...]} instead of an array',
    ("discovery.list_environments",),
)
def list_environments_object(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.LIST_ENVIRONMENTS, "GET", lambda names, _r: {"environments": names})
    return app


def _edit_tool_listings(engine: Engine, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    for route in (protocol.TOOLS, protocol.TASK_TOOLS):
        rewrite_result(engine, route, "GET", lambda listing, _r: {**listing, "tools": change(listing["tools"])})


@violation(
    "tools-listing-bare-array",
    'GET /{env}/tools answers a bare array of tools instead of {"tools": [...]}',
    ("discovery.tools_listing",),
)
def tools_listing_bare_array(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.TOOLS, "GET", lambda listing, _r: listing["tools"])
    return app


@violation(
    "tools-optional-fields-missing",
    'tool listings carry only "tools" (no terminal_tool, supports_score_group, message_block_types)',
    ("discovery.tools_optional_fields",),
)
def tools_optional_fields_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    for route in (protocol.TOOLS, protocol.TASK_TOOLS):
        rewrite_result(engine, route, "GET", lambda listing, _r: {"tools": listing["tools"]})
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
    rewrite_result(
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
    body = json.dumps({"detail": protocol.DETAIL_NOT_FOUND}, separators=(",", ":")).encode()

    def edit(status: int, headers: Headers) -> tuple[int, Headers, bytes]:
        return 404, [(b"content-type", protocol.JSON_CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())], body

    return RewriteHeaders(app, status_is(308), edit)


@violation("json-as-text-plain", "JSON answers of the discovery routes are labelled text/plain", ("http.json_content_type",))
def json_as_text_plain(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: Headers) -> bool:
        return scope["path"].endswith(("/" + protocol.TOOLS, "/" + protocol.SPLITS, protocol.LIST_ENVIRONMENTS))

    def edit(status: int, headers: Headers) -> tuple[int, Headers, None]:
        return status, set_header(headers, b"content-type", b"text/plain"), None

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
        rescue(
            engine,
            route,
            "POST",
            protocol.DETAIL_INVALID_SPLIT,
            lambda request, env, answer=answer, with_env=with_env: {**answer, "env_name": env} if with_env else answer,
        )
    return app


@violation("num-tasks-off-by-one", "num_tasks answers one more than the task list holds", ("dataset.num_tasks_matches_list",))
def num_tasks_off_by_one(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.NUM_TASKS, "POST", lambda body, _r: {"num_tasks": body["num_tasks"] + 1})
    return app


@violation("num-tasks-string", 'num_tasks answers the count as a string ("48")', ("dataset.num_tasks",))
def num_tasks_string(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.NUM_TASKS, "POST", lambda body, _r: {"num_tasks": str(body["num_tasks"])})
    return app


@violation(
    "tasks-not-objects", "POST /{env}/tasks lists each task as a JSON-encoded string, not an object", ("dataset.tasks_list",)
)
def tasks_not_objects(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.TASKS, "POST", lambda body, _r: {**body, "tasks": [json.dumps(t) for t in body["tasks"]]})
    return app


@violation(
    "task-index-shifted", "POST /{env}/task with index i (0 ≤ i < n-1) returns tasks[i + 1]", ("dataset.task_matches_list",)
)
def task_index_shifted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def wrap(handler: Handler) -> Handler:
        async def shifted(request: Request, scenario: Any, raw_env: str) -> Any:
            body = await request.json_body()
            index, split = body.get("index"), body.get("split")
            tasks = engine.task_list(scenario, split)
            if isinstance(index, int) and tasks and 0 <= index < len(tasks) - 1:
                return {"task": tasks[index + 1], "env_name": raw_env}
            return await handler(request, scenario, raw_env)

        return shifted

    engine.wrap_route(protocol.TASK, "POST", wrap)
    return app


@violation("task-range-ignores-start", "task_range ignores start (slices [:stop])", ("dataset.task_range_slice",))
def task_range_ignores_start(engine: Engine, app: Any, rng: random.Random) -> Any:
    before(engine, protocol.TASK_RANGE, "POST", lambda request, body: without(body, "start") if "start" in body else None)
    return app


@violation(
    "invalid-index-500",
    "POST /{env}/task with an index past the end answers 500",
    ("dataset.invalid_index_400",),
    also=("http.no_server_errors",),
)
def invalid_index_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    rescue(
        engine,
        protocol.TASK,
        "POST",
        protocol.DETAIL_INVALID_INDEX,
        lambda request, env: raise_(IndexError("list index out of range")),
    )
    return app


@violation("env-name-missing", "tasks, task and task_range answers leave out env_name", ("dataset.env_name_echo",))
def env_name_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    for route in (protocol.TASKS, protocol.TASK, protocol.TASK_RANGE):
        rewrite_result(engine, route, "POST", lambda body, _r: {k: v for k, v in body.items() if k != "env_name"})
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

    before(engine, protocol.TASKS, "POST", naive)
    return app


# -- sessions ------------------------------------------------------------------------------------
@violation(
    "create-session-json", 'POST /create_session answers JSON {"sid"} instead of an event stream', ("session.create_session_sse",)
)
def create_session_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def as_json(request: Request) -> Any:
        return {"sid": str(uuid.uuid4())}

    engine.set_route(protocol.CREATE_SESSION, "POST", as_json)
    return app


@violation(
    "create-answers-wrong-sid",
    'POST /create answers {"sid"} with an id other than the X-Session-ID it was given',
    ("session.create",),
)
def create_answers_wrong_sid(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.CREATE, "POST", lambda body, _r: {"sid": f"server-{body['sid']}"})
    return app


@violation("ping-never-finds-session", "POST /ping answers 404 for every sid, live sessions included", ("session.ping",))
def ping_never_finds_session(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def lost(request: Request) -> Any:
        request.sid  # noqa: B018 - still 400 without X-Session-ID
        raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)

    engine.set_route(protocol.PING, "POST", lost)
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

    engine.wrap_route(protocol.DELETE, "POST", wrap)
    return app


@violation("errors-without-detail", '4xx answers are plain text, not JSON {"detail": ...}', ("http.error_detail",))
def errors_without_detail(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: Headers) -> bool:
        return 400 <= status < 500

    def edit(status: int, headers: Headers) -> tuple[int, Headers, bytes]:
        body = f"error {status}".encode()
        headers = set_header(set_header(headers, b"content-type", b"text/plain"), b"content-length", str(len(body)).encode())
        return status, headers, body

    return RewriteHeaders(app, match, edit)


@violation(
    "empty-api-key-401",
    "a request carrying an empty X-API-Key header (as the SDK sends without a key) answers 401",
    ("session.sdk_headers_accepted",),
)
def empty_api_key_401(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def strict(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if headers.get(protocol.API_KEY_HEADER.lower().encode()) == b"":
            await send_detail(send, 401, "Invalid API key")
            return
        await app(scope, receive, send)

    return strict


@violation("create-session-same-id", "every POST /create_session hands out the same sid", ("session.create_session_unique",))
def create_session_same_id(engine: Engine, app: Any, rng: random.Random) -> Any:
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))

    async def same(request: Request) -> Any:
        return EventStream(sse.frame(protocol.EVENT_TASK_ID, sid) + sse.frame(protocol.EVENT_END, ""))

    engine.set_route(protocol.CREATE_SESSION, "POST", same)
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

    before(engine, protocol.CREATE, "POST", invent)
    return app


@violation(
    "duplicate-sid-replaces",
    "POST /create with an active sid replaces the session instead of answering 400",
    ("session.duplicate_sid_400",),
)
def duplicate_sid_replaces(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def replace(request: Request, body: dict[str, Any]) -> None:
        if request.sid in engine.sessions:
            await engine.remove_session(request.sid)

    before(engine, protocol.CREATE, "POST", replace)
    return app


@violation(
    "create-both-sources-accepted",
    "POST /create with both task_spec and split/index is accepted (task_spec wins)",
    ("session.create_exactly_one_task_source",),
)
def create_both_sources_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def drop_index(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        both = body.get("task_spec") is not None and (body.get("split") is not None or body.get("index") is not None)
        return without(body, "split", "index") if both else None

    before(engine, protocol.CREATE, "POST", drop_index)
    return app


@violation("create-task-spec-refused", "POST /create with a task_spec answers 422", ("session.create_task_spec",))
def create_task_spec_refused(engine: Engine, app: Any, rng: random.Random) -> Any:
    def refuse(request: Request, body: dict[str, Any]) -> None:
        if body.get("task_spec") is not None and body.get("split") is None and body.get("index") is None:
            raise HTTPError(
                422, [{"type": "extra_forbidden", "loc": ["body", "task_spec"], "msg": "Extra inputs are not permitted"}]
            )

    before(engine, protocol.CREATE, "POST", refuse)
    return app


@violation(
    "create-invalid-split-accepted",
    "POST /create with an unknown split falls back to the first split instead of 400",
    ("session.create_invalid_task_400",),
)
def create_invalid_split_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def first_split(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        splits = engine.split_names(str(body.get("env_name") or engine.default_env))
        if splits is None or body.get("split") is None or body["split"] in splits:
            return None
        return {**body, "split": next(iter(splits))}

    before(engine, protocol.CREATE, "POST", first_split)
    return app


@violation(
    "create-unknown-env-accepted",
    "POST /create with an unknown env_name uses the default environment instead of 404",
    ("session.create_unknown_env_404",),
)
def create_unknown_env_accepted(engine: Engine, app: Any, rng: random.Random) -> Any:
    def default_env(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        unknown = body.get("env_name") is not None and str(body["env_name"]).lower() not in engine.scenarios
        return without(body, "env_name") if unknown else None

    before(engine, protocol.CREATE, "POST", default_env)
    return app


@violation(
    "task-tools-omit-shared",
    "GET /{env}/task_tools lists only task-scoped tools, not the shared ones",
    ("session.task_tools_superset",),
)
def task_tools_omit_shared(engine: Engine, app: Any, rng: random.Random) -> Any:
    shared = _shared_tools(engine)
    rewrite_result(
        engine,
        protocol.TASK_TOOLS,
        "GET",
        lambda listing, _r: {**listing, "tools": [t for t in listing["tools"] if t["name"] not in shared]},
    )
    return app


@violation("prompt-not-blocks", "GET /{env}/prompt answers a bare string instead of a list of blocks", ("session.prompt",))
def prompt_not_blocks(engine: Engine, app: Any, rng: random.Random) -> Any:
    rewrite_result(engine, protocol.PROMPT, "GET", lambda blocks, _r: " ".join(b.get("text", "") for b in blocks))
    return app


@violation("ping-unknown-200", "POST /ping answers 200 for any sid, known or not", ("session.ping_unknown_404",))
def ping_unknown_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    async def always(request: Request) -> Any:
        session = engine.sessions.get(request.sid)
        if session is not None:
            session.touch()
        return {"status": "ok"}

    engine.set_route(protocol.PING, "POST", always)
    return app


@violation("ping-after-delete-200", "POST /ping keeps answering 200 for a deleted session", ("session.ping_after_delete_404",))
def ping_after_delete_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = remember_deleted(engine)

    def wrap(handler: Handler) -> Handler:
        async def ghost(request: Request) -> Any:
            if request.sid in deleted and request.sid not in engine.sessions:
                return {"status": "ok"}
            return await handler(request)

        return ghost

    engine.wrap_route(protocol.PING, "POST", wrap)
    return app


@violation(
    "prompt-after-delete-200", "GET /{env}/prompt still answers a deleted session's prompt", ("session.use_after_delete_404",)
)
def prompt_after_delete_200(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = remember_deleted(engine)

    def wrap(handler: Handler) -> Handler:
        async def ghost(request: Request, scenario: Any, raw_env: str) -> Any:
            old = deleted.get(request.sid)
            if old is not None and request.sid not in engine.sessions:
                return old.scenario.prompt(old.episode)
            return await handler(request, scenario, raw_env)

        return ghost

    engine.wrap_route(protocol.PROMPT, "GET", wrap)
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

    before(engine, protocol.PROMPT, "GET", crash)
    return app


@violation("delete-unknown-404", "POST /delete for an unknown or already deleted sid answers 404", ("session.delete_idempotent",))
def delete_unknown_404(engine: Engine, app: Any, rng: random.Random) -> Any:
    def strict(request: Request, body: dict[str, Any]) -> None:
        if request.sid not in engine.sessions:
            raise HTTPError(404, protocol.DETAIL_NOT_FOUND_SESSION)

    before(engine, protocol.DELETE, "POST", strict)
    return app


@violation(
    "recreate-deleted-refused", "POST /create refuses (400) a sid that was deleted before", ("session.recreate_deleted_sid",)
)
def recreate_deleted_refused(engine: Engine, app: Any, rng: random.Random) -> Any:
    deleted = remember_deleted(engine)

    def grudging(request: Request, body: dict[str, Any]) -> None:
        if (request.header(protocol.SESSION_HEADER) or "").strip() in deleted:
            raise HTTPError(400, protocol.DETAIL_SESSION_EXISTS)

    before(engine, protocol.CREATE, "POST", grudging)
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
    def edit(status: int, headers: Headers) -> tuple[int, Headers, None]:
        drop = {protocol.BACKEND_STATE_HEADER.lower().encode(), b"retry-after"}
        return status, [(k, v) for k, v in headers if k.lower() not in drop], None

    return RewriteHeaders(app, status_is(503), edit)


@violation(
    "ttl-never-reaps",
    "idle sessions are never reaped (the TTL is not enforced)",
    ("session.ttl_reap",),
    ttl=1.0,
    reaper_interval=0.2,
)
def ttl_never_reaps(engine: Engine, app: Any, rng: random.Random) -> Any:
    engine.hooks.may_reap.append(lambda session: False)
    return app


@violation(
    "score-group-500",
    "POST /{env}/score_group on an environment that does not score groups answers 500",
    ("score_group.contract",),
    also=("http.no_server_errors",),
)
def score_group_500(engine: Engine, app: Any, rng: random.Random) -> Any:
    rescue(engine, protocol.SCORE_GROUP, "POST", None, lambda request, env: raise_(NotImplementedError("score_group")))
    return app


# -- tool calls -----------------------------------------------------------------------------------
@violation("call-content-type-json", "/call streams are labelled application/json", ("call.sse_content_type",))
def call_content_type_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    def match(scope: Scope, status: int, headers: Headers) -> bool:
        return protocol.is_call(scope["path"]) and status == 200

    def edit(status: int, headers: Headers) -> tuple[int, Headers, None]:
        return status, set_header(headers, b"content-type", protocol.JSON_CONTENT_TYPE.encode()), None

    return RewriteHeaders(app, match, edit)


@violation("task-id-event-missing", "/call streams leave out the task_id event", ("call.first_event_task_id",))
def task_id_event_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, lambda name, data, state: [] if name == protocol.EVENT_TASK_ID else [(name, data)])


@violation("call-end-missing", "/call streams close without their end event (chunks and errors still sent)", ("call.end_event",))
def call_end_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, lambda name, data, state: [] if name == protocol.EVENT_END else [(name, data)])


@violation("end-not-json", "/call results are sent as a Python repr ({'ok': True, ...}), not JSON", ("call.end_json",))
def end_not_json(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, on_result(lambda result: (protocol.EVENT_END, repr(result))))


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

    return RewriteStream(app, protocol.CALL, on_output(change))


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

    before(engine, protocol.CALL, "POST", crash)
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

    return RewriteStream(app, protocol.CALL, on_result(change))


@violation("reason-missing", "ok:false answers carry no reason", ("call.error_reason",))
def reason_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    return RewriteStream(app, protocol.CALL, on_result(lambda result: {k: v for k, v in result.items() if k != "reason"}))


@violation("finish-latch-missing", "tool calls keep running after a tool returned finished:true", ("call.finish_latch",))
def finish_latch_missing(engine: Engine, app: Any, rng: random.Random) -> Any:
    def unlatch(session: Any, name: str, outcome: tuple[str, str]) -> None:
        session.finished = False

    engine.hooks.after_tool.append(unlatch)
    return app


@violation(
    "reason-precedence-latch-first",
    "after finished:true an unknown tool is refused as episode_finished, not not_found",
    ("call.reason_precedence",),
)
def reason_precedence_latch_first(engine: Engine, app: Any, rng: random.Random) -> Any:
    def latch_first(session: Any, name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
        if not session.finished:
            return None
        engine.stats.call_errors[name] += 1
        return ("end", finished_error(name))

    engine.hooks.before_tool.append(latch_first)
    return app


@violation("unknown-task-id-404", "resuming an unknown task_id answers HTTP 404", ("call.unknown_task_id_error",))
def unknown_task_id_404(engine: Engine, app: Any, rng: random.Random) -> Any:
    def strict(request: Request, body: dict[str, Any]) -> None:
        if body.get("task_id") is not None and engine.tasks.get(body["task_id"]) is None:
            raise HTTPError(404, "task not found")

    before(engine, protocol.CALL, "POST", strict)
    return app


@violation(
    "resume-unsupported", "resuming any task_id answers 'unknown task_id' (results are not kept)", ("call.resume_by_task_id",)
)
def resume_unsupported(engine: Engine, app: Any, rng: random.Random) -> Any:
    def forget(request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        return {**body, "task_id": f"forgotten-{body['task_id']}"} if body.get("task_id") is not None else None

    before(engine, protocol.CALL, "POST", forget)
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

    before(engine, protocol.CALL, "POST", impatient)
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

    return RewriteStream(app, protocol.CALL, on_output(change))


@violation("finished-not-bool", "finished is sent as 0/1 instead of false/true", ("reward.finished_bool",))
def finished_not_bool(engine: Engine, app: Any, rng: random.Random) -> Any:
    def change(output: dict[str, Any]) -> None:
        if isinstance(output.get("finished"), bool):
            output["finished"] = int(output["finished"])

    return RewriteStream(app, protocol.CALL, on_output(change))

