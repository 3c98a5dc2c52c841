"""The ORS wire protocol's constants, defined once for the whole project.

Everything here mirrors what the openreward 0.1.167 reference server actually
speaks (see ``docs/protocol.md``); servers, the wire
client, the checks and the load driver all import from this module so that a
path, a header or a reason string can never drift between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple, TypeAlias

#: A JSON object as Python sees it: the one spelling of this alias in the project.
JSON: TypeAlias = dict[str, Any]

REFERENCE_VERSION: Final = "0.1.167"

# -- headers ---------------------------------------------------------------
SESSION_HEADER: Final = "X-Session-ID"
SECRETS_HEADER: Final = "X-Secrets"
API_KEY_HEADER: Final = "X-API-Key"
DEPLOYMENT_HEADER: Final = "X-Deployment"
BACKEND_STATE_HEADER: Final = "X-Backend-State"
RETRY_AFTER_HEADER: Final = "Retry-After"
BACKEND_STARTING: Final = "starting"
#: The session header as ASGI servers and the proxy's parser hand header names on: lower-cased bytes.
SESSION_HEADER_RAW: Final = SESSION_HEADER.lower().encode("latin-1")

SSE_CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE: Final = "application/json"

# -- root routes (no environment prefix) ------------------------------------
HEALTH: Final = "/health"
VERSION: Final = "/version"
LIST_ENVIRONMENTS: Final = "/list_environments"
PING: Final = "/ping"
CREATE_SESSION: Final = "/create_session"
CREATE: Final = "/create"
DELETE: Final = "/delete"
DELETE_SESSION: Final = "/delete_session"

#: First path segments that are never redirected to the default environment.
ROOT_SEGMENTS: Final = frozenset(
    {
        "health",
        "version",
        "ping",
        "list_environments",
        "create",
        "delete",
        "create_session",
        "delete_session",
        "docs",
        "redoc",
        "openapi.json",
    }
)

# -- environment routes: ``/{env}/<name>`` ---------------------------------
TOOLS: Final = "tools"
SPLITS: Final = "splits"
TASKS: Final = "tasks"
NUM_TASKS: Final = "num_tasks"
TASK: Final = "task"
TASK_RANGE: Final = "task_range"
TASK_TOOLS: Final = "task_tools"
PROMPT: Final = "prompt"
MESSAGES: Final = "messages"
CALL: Final = "call"
SCORE_GROUP: Final = "score_group"


def env_path(env: str, route: str) -> str:
    """``/{env}/{route}``: the one place environment URLs are spelled."""
    return f"/{env}/{route}"


#: The discovery and dataset routes under an environment (§2.1): read with no session of the client's own.
DISCOVERY_ROUTES: Final = frozenset({TOOLS, SPLITS, TASKS, NUM_TASKS, TASK, TASK_RANGE})


class Route(NamedTuple):
    """What an ORS path names: its environment (``None`` for a root route, or a bare one the default environment
    serves, §1.2) and the route (``call``, ``tools``, ``create``, ...; ``""`` for a path ORS does not have)."""

    env: str | None
    name: str

    @property
    def root(self) -> bool:
        """A root route (``/create``, ``/ping``, ``/list_environments``), never under an environment."""
        return self.env is None and self.name in ROOT_SEGMENTS


def route_of(path: str) -> Route:
    """The route ``path`` names: ``/echo/call`` is ``Route("echo", "call")``, ``/create`` is ``Route(None, "create")``,
    a bare ``/tools`` is ``Route(None, "tools")``. The one reading of an ORS path (a query string and a trailing slash
    ignored) for the engine's neighbours, the graders, cassettes and replay, and the faults."""
    segments = [s for s in path.split("?", 1)[0].split("/") if s]
    if len(segments) == 1:
        return Route(None, segments[0])
    if len(segments) == 2 and segments[0] not in ROOT_SEGMENTS:
        return Route(segments[0], segments[1])
    return Route(None, "")


def session_in(headers: Mapping[str, str]) -> str | None:
    """The session a request names (its ``X-Session-ID``, whatever the name's case), stripped; ``None`` where it names
    none. The one reading of the header from a request's headers, for the graders, attribution and reproducers
    (an ASGI scope's raw headers: ``servers.http.session_id``)."""
    value = headers.get(_SESSION_LOWER)
    if value is None:
        value = headers.get(SESSION_HEADER)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == _SESSION_LOWER), None)
    return (value.strip() or None) if isinstance(value, str) else None


_SESSION_LOWER: Final = SESSION_HEADER.lower()


def is_call(path: str) -> bool:
    """Whether ``path`` is a tool call: ``/{env}/call``, or the bare ``/call`` the default environment serves."""
    return route_of(path).name == CALL


def is_discovery(path: str) -> bool:
    """Whether ``path`` is a discovery route: ``/list_environments``, or one of :data:`DISCOVERY_ROUTES` under an
    environment (``/{env}/tools``) or bare (``/tools``, which the default-environment redirect serves, §1.2)."""
    route = route_of(path)
    return route.name in DISCOVERY_ROUTES or (route.env is None and "/" + route.name == LIST_ENVIRONMENTS)


# -- SSE --------------------------------------------------------------------
EVENT_TASK_ID: Final = "task_id"
EVENT_CHUNK: Final = "chunk"
EVENT_END: Final = "end"
EVENT_ERROR: Final = "error"
CHUNK_SIZE: Final = 4096  # characters, not bytes (reference ``reconnect.py``)
PING_INTERVAL_S: Final = 10.0
RESUME_LINGER_S: Final = 60.0
UNKNOWN_TASK_ID: Final = "unknown task_id"
CLIENT_READ_TIMEOUT_S: Final = 30.0  # the SDK client's sock_read timeout

# -- sessions ---------------------------------------------------------------
SESSION_TTL_S: Final = 900.0
REAPER_INTERVAL_S: Final = 5.0
SETUP_WAIT_TIMEOUT_S: Final = 25.0
STARTING_RETRY_AFTER_S: Final = 2

# -- tool-call failure reasons (``RunToolError.reason``) --------------------
REASON_NOT_FOUND: Final = "not_found"
REASON_NAME_COLLISION: Final = "name_collision"
REASON_INPUT_VALIDATION: Final = "input_validation"
REASON_EPISODE_FINISHED: Final = "episode_finished"
REASONS: Final = frozenset(
    {REASON_NOT_FOUND, REASON_NAME_COLLISION, REASON_INPUT_VALIDATION, REASON_EPISODE_FINISHED}
)

# -- details the reference server answers with ------------------------------
DETAIL_SID_REQUIRED: Final = "X-Session-ID header is required"
DETAIL_SESSION_EXISTS: Final = "Session already exists"
DETAIL_NOT_FOUND_SESSION: Final = "Active environment not found"
DETAIL_STARTING: Final = "Environment still starting."
DETAIL_SESSION_DELETED: Final = "Session deleted"
DETAIL_INVALID_SPLIT: Final = "Invalid split"
DETAIL_INVALID_INDEX: Final = "Invalid index"
DETAIL_INVALID_RANGE: Final = "Invalid index range"
DETAIL_NOT_FOUND: Final = "Not Found"
DETAIL_METHOD_NOT_ALLOWED: Final = "Method Not Allowed"

SPLIT_TYPES: Final = ("train", "validation", "test")
BLOCK_TYPES: Final = ("text", "image", "reasoning", "tool_call", "tool_result")
BUILTIN_TOOLSETS: Final = (
    "backsearch",
    "claude-code",
    "cli",
    "codex",
    "gemini-cli",
    "hermes",
    "openclaw",
    "web",
)

#: orsbench's own read-only introspection routes live under this prefix, which
#: cannot be an environment name (environment names never start with ``_``).
STATS: Final = "/_orsbench/stats"
#: The request log of a server served with ``ServerConfig(request_log=True)``: what a client under test sent.
REQUEST_LOG: Final = "/_orsbench/requests"

#: Environment variables the openreward SDK reads.
ENV_SESSION_URL: Final = "OPENREWARD_SESSION_URL"
ENV_API_URL: Final = "OPENREWARD_API_URL"
#: The openreward web host, from which the SDK derives ``api.<host>`` and ``sessions.<host>`` when the two above are unset.
ENV_WEB_URL: Final = "OPENREWARD_URL"
ENV_DISABLE_UPDATE_CHECK: Final = "OPENREWARD_DISABLE_UPDATE_CHECK"


#: Which replica of ``orsbench serve --replicas N`` answered (``r0``, ``r1``, ...): every answer of a replica
#: carries it, through nginx or the built-in router (orsbench's own header, not the protocol's).
REPLICA_HEADER = "X-ORSBench-Replica"
