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

Older releases
--------------
``orsbench versions --server openreward`` serves the same scenarios on SDK
releases back to 0.1.33, so nothing the twin imports from the SDK may be
assumed beyond what 0.1.33 ships. What a release lacks is found by looking
(an import, a signature), never by its version number:

==============================  ===============  =====================================
feature                         in 0.1.33?       a scenario that needs it
==============================  ===============  =====================================
``@tool(shared=False)``,        no (0.1.80 has)  has a task-scoped tool (``task-tool``)
``list_task_tools``
``num_tasks``/``get_task``      no (0.1.80 has)  lists its tasks only by index
                                                 (``schema-zoo-index``)
``GroupCandidate``,             no (from 0.1.157) overrides ``score_group``
``score_group``
``environments.session``        no (0.1.100 has) none: only its logger is patched
``_SETUP_WAIT_TIMEOUT_S``       no (from 0.1.156) none: ``setup_wait_timeout`` does
                                                 nothing where it is absent
==============================  ===============  =====================================

A scenario that needs what the installed release lacks is left out: the twin
serves the rest, prints one line per scenario left out, and lists them in the
stats' ``left_out`` (:func:`~orsbench.servers.twin_support.left_out`); with
none left, :class:`~orsbench.servers.twin_support.NothingToServe` (a
``ValueError``: ``orsbench serve`` exits 2 naming what is missing).

Stats
-----
``GET /_orsbench/stats`` is answered by
:class:`~orsbench.servers.twin_support.StatsMiddleware`, shared with the
ors-sdk twin (:mod:`orsbench.servers.ors_sdk_twin`), which also holds the
scenario → ``Environment`` plumbing both twins use
(:func:`~orsbench.servers.twin_support.generated_environment`).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
from typing import Any, Sequence

from starlette.types import ASGIApp

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import Scenario
from orsbench.servers.twin_support import (
    EPISODE_ATTR,
    Lack,
    NothingToServe,
    SdkTypes,
    ToolNameError,
    TwinStats,
    build_twin_app,
    generated_environment,
    needs_index_api,
    needs_score_group,
    needs_task_tools,
    patch_timings,
    resolve,
)

# The twin never calls Server.run(), which is where the SDK's PyPI update check
# lives, but nothing here should ever reach the network.
os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")

from openreward.environments import Environment, Server  # noqa: E402  (after the environment variable above)
from openreward.environments import environment as sdk_environment  # noqa: E402
from openreward.environments import reconnect as sdk_reconnect  # noqa: E402
from openreward.environments import server as sdk_server  # noqa: E402
from openreward.environments import tool as sdk_tool  # noqa: E402
from openreward.environments.types import ListToolsOutput, Split, ToolOutput, ToolSpec  # noqa: E402

# What older releases lack (see "Older releases" in the module docstring): looked for, never assumed.
try:
    from openreward.environments.types import GroupCandidate  # noqa: E402
except ImportError:  # before score_group existed
    GroupCandidate = None  # type: ignore[assignment,misc]
try:
    from openreward.environments import session as sdk_session  # noqa: E402
except ImportError:  # before 0.1.100 the session logic lived in the server module
    sdk_session = None  # type: ignore[assignment]

__all__ = ["LACKS", "NothingToServe", "RESERVED_TOOL_NAMES", "SDK", "ToolNameError", "TwinStats", "build_app", "environment_class"]


def _takes_shared(decorator: Any) -> bool:
    try:
        return "shared" in inspect.signature(decorator).parameters
    except (TypeError, ValueError):
        return False


#: ``@tool(shared=False)`` and ``list_task_tools`` (task-scoped tools).
TASK_TOOLS = _takes_shared(sdk_tool) and hasattr(Environment, "list_task_tools")
#: The index API a scenario that lists tasks only by index needs.
INDEX_API = hasattr(Environment, "num_tasks") and hasattr(Environment, "get_task")
#: What the installed release lacks, and the scenarios that need it.
LACKS: tuple[Lack, ...] = tuple(
    lack
    for lack, present in (
        (Lack("task-scoped tools (@tool(shared=False), list_task_tools)", needs_task_tools), TASK_TOOLS),
        (Lack("index API (Environment.num_tasks/get_task)", needs_index_api), INDEX_API),
        (Lack("score_group (GroupCandidate)", needs_score_group), GroupCandidate is not None),
    )
    if not present
)

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
    EPISODE_ATTR,
}

#: What a generated environment is made of, in openreward's names.
SDK = SdkTypes(
    label=f"the openreward SDK {importlib.metadata.version('openreward')}",
    environment=Environment,
    tool=sdk_tool,
    tool_output=ToolOutput,
    tool_spec=ToolSpec,
    list_tools_output=ListToolsOutput,
    split=Split,
    reserved_names=RESERVED_TOOL_NAMES,
    lacks=LACKS,
    task_tools=TASK_TOOLS,
    index_api=INDEX_API,
)


def environment_class(
    scenario: Scenario,
    config: ServerConfig | None = None,
    stats: TwinStats | None = None,
) -> type[Environment]:
    """A generated ``Environment`` subclass named ``scenario.name`` serving ``scenario``."""
    config = config or ServerConfig()
    stats = stats if stats is not None else TwinStats()
    extra: dict[str, object] = {}
    if GroupCandidate is not None and needs_score_group(scenario):

        async def score_group(self: Environment, candidates: Sequence[GroupCandidate]) -> list[float]:
            wire = [c.model_dump(mode="json") for c in candidates]
            scores = await resolve(scenario.score_group(getattr(self, EPISODE_ATTR), wire))
            if scores is None:
                raise NotImplementedError(f"scenario {scenario.name!r} returned None from score_group")
            return list(scores)

        extra["score_group"] = score_group
    return generated_environment(scenario, config, stats, SDK, __name__, extra)


# -- config patches ----------------------------------------------------------------
def apply_config(server: Server, config: ServerConfig) -> None:
    """Patch the SDK's hard-coded timings with ``config`` (see the module docstring)."""
    sdk_server._SETUP_WAIT_TIMEOUT_S = config.setup_wait_timeout  # read by the releases that have it
    logs = tuple(m for m in (sdk_server, sdk_environment, sdk_session) if m is not None)
    patch_timings(server.app, config, reconnect=sdk_reconnect, server_module=sdk_server, log_modules=logs)


def build_app(scenarios: list[Scenario], config: ServerConfig) -> ASGIApp:
    """An ASGI app: the openreward Server's FastAPI app serving these scenarios, plus orsbench's read-only GET /_orsbench/stats route."""
    return build_twin_app(
        scenarios,
        config,
        impl="sdk",
        twin="SDK twin",
        server_class=Server,
        environment_class=environment_class,
        apply_config=apply_config,
        sdk=SDK,
    )
