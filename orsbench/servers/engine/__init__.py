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

One object in four rooms, each readable alone:

* :mod:`.routing` — :class:`Engine`: the ASGI entry, lifespan, the route table (the public seam);
* :mod:`.dataset` — tools, splits and tasks;
* :mod:`.sessions` — create, ready, ping, delete, the reaper, prompts;
* :mod:`.calls` — tool calls and ``score_group``, streamed;

and :mod:`.base`, the state and helpers they share.
"""

from orsbench.servers.engine.base import (
    EngineState,
    EnvHandler,
    Hooks,
    Outcome,
    RootHandler,
    finished_error,
    uuid4_hex,
    uuid4_str,
)
from orsbench.servers.engine.routing import DELIBERATE_DIFFERENCES, Engine
from orsbench.servers.engine.sessions import parse_secrets
from orsbench.servers.http import (  # re-exported: a fault or test builds requests and errors from here
    EventStream,
    HTTPError,
    RawJSON,
    Receive,
    Request,
    Scope,
    Send,
)

__all__ = [
    "DELIBERATE_DIFFERENCES",
    "Engine",
    "EngineState",
    "EnvHandler",
    "EventStream",
    "HTTPError",
    "Hooks",
    "Outcome",
    "RawJSON",
    "Receive",
    "Request",
    "RootHandler",
    "Scope",
    "Send",
    "finished_error",
    "parse_secrets",
    "uuid4_hex",
    "uuid4_str",
]
