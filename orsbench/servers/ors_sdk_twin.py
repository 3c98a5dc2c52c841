"""The ors-sdk twin: any orsbench :class:`Scenario` served by ors-sdk 0.1.0's own ``ors.Server``.

ors-sdk (``pip install ors-sdk``, imported as ``ors``) is the second Python
implementation of ORS: a FastAPI + sse-starlette server that an environment
author subclasses exactly as in openreward, but forked earlier. ``--impl
ors-sdk`` serves the *same* scenario object through it, so a difference
between its wire transcript and the SDK twin's (:mod:`orsbench.servers.sdk_twin`,
openreward 0.1.167) is a difference between the two servers, never of
environment logic. The differences found so far are data, in
:mod:`orsbench.servers.differences` (``DIFFERENCES["ors-sdk"]``), and the
three-way differential test keeps that list exact.

How a scenario becomes an ors-sdk environment
---------------------------------------------
Exactly as in the SDK twin (the shared part is
:func:`orsbench.servers.twin_support.generated_environment`): one generated
``ors.Environment`` subclass named ``scenario.name``; splits, tasks, prompt,
setup, teardown and every tool from the scenario; task-scoped tools shadowed
with ``None`` for tasks that do not expose them. Two things differ:

* ors-sdk has no ``score_group``: the route does not exist (404), so a
  scenario's ``score_group`` is not served.
* secrets arrive in the ``/create`` body (``{"secrets": {name: value}}``), not
  in openreward's base64 ``X-Secrets`` header; the twin passes whatever the
  SDK hands the constructor into ``Episode.secrets``.

Tool names are attribute names, as in openreward; the reserved ones are
:data:`RESERVED_TOOL_NAMES` (``name``, ``setup``, ``list_tools``, ...).

Configuration patches (process-wide, applied by :func:`build_app`)
-----------------------------------------------------------------
==========================  =====================================================
``ServerConfig`` field      patched SDK attribute
==========================  =====================================================
``chunk_size``              ``ors._reconnect.CHUNK_SIZE``
``linger``                  ``ors._reconnect.LINGER_SECONDS``
``ping_interval``           ``ors.server.EventSourceResponse`` → a subclass that
                            swaps the literal ``ping=10`` of ``/call``
``ttl``, ``reaper_interval``  ``__defaults__`` of the ``reaper_coro`` closure
                            (``reaper_interval=5, stale_threshold=900``), found
                            through the app's lifespan closure
``access_log``              the SDK's module ``logger`` objects (server,
                            environment) at INFO if set, else WARNING
==========================  =====================================================

What it cannot do
-----------------
Listed as data in ``DIFFERENCES["ors-sdk"]`` (and in the README); the ones that
concern configuration:

* ``setup_wait_timeout`` has no equivalent: ``/prompt``, ``/task_tools`` and
  ``/call`` wait on ``setup()`` without a cap, so there is never a
  ``503 starting`` (no ``X-Backend-State``, no ``Retry-After``). The knob is
  accepted and ignored, so one config serves every implementation.
* no finish latch: a call after the one that returned ``finished: true`` still
  runs and may return another reward;
* ``RunToolError`` is ``{ok, error}`` with no ``reason``; ``/tools`` is
  ``{tools}`` only; ``/task`` and ``/task_range`` omit ``env_name``; no
  ``/version``, ``/messages`` or ``/score_group`` route.
* the 10 s disconnect poll inside ``sse_task_stream`` is a literal; ``max_body``
  and ``seed`` are mock-engine knobs; ``faults`` and ``api_key`` would change
  what the SDK does, so :func:`build_app` refuses a config that sets them.

Stats
-----
``GET /_orsbench/stats`` as on the other implementations
(:class:`~orsbench.servers.twin_support.StatsMiddleware`), reporting
``"impl": "ors-sdk"``. Calling :func:`build_app` twice in one process
re-patches: the last config wins for every app.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from orsbench.config import ServerConfig
from orsbench.scenarios.base import Scenario
from orsbench.servers.twin_support import (
    EPISODE_ATTR,
    SdkTypes,
    ToolNameError,
    TwinStats,
    build_twin_app,
    generated_environment,
    patch_timings,
)

import ors  # noqa: E402  (ors-sdk; no network at import, and Server.run() is never called)
from ors import _reconnect as sdk_reconnect  # noqa: E402
from ors import environment as sdk_environment  # noqa: E402
from ors import server as sdk_server  # noqa: E402

__all__ = ["IMPL", "RESERVED_TOOL_NAMES", "SDK", "ToolNameError", "build_app", "environment_class"]

#: The ``--impl`` name.
IMPL = "ors-sdk"

#: Attribute names ors-sdk (or the twin) already uses on an environment class or
#: instance; a tool cannot have one of these names.
RESERVED_TOOL_NAMES: frozenset[str] = frozenset(dir(ors.Environment)) | {
    "task_spec",  # Environment.__init__
    "_toolset_instances",  # Environment.__init__
    "_num_tasks_cache",  # Environment.num_tasks
    "__module__",
    "__qualname__",
    "__doc__",
    EPISODE_ATTR,
}

#: What a generated environment is made of, in ors-sdk's names.
SDK = SdkTypes(
    label="ors-sdk",
    environment=ors.Environment,
    tool=ors.tool,
    tool_output=ors.ToolOutput,
    tool_spec=ors.ToolSpec,
    list_tools_output=ors.ListToolsOutput,
    split=ors.Split,
    reserved_names=RESERVED_TOOL_NAMES,
)


def environment_class(scenario: Scenario, config: ServerConfig | None = None, stats: TwinStats | None = None) -> type:
    """A generated ``ors.Environment`` subclass named ``scenario.name`` serving ``scenario``."""
    config = config or ServerConfig()
    stats = stats if stats is not None else TwinStats(impl=IMPL)
    return generated_environment(scenario, config, stats, SDK, __name__)


def apply_config(server: ors.Server, config: ServerConfig) -> None:
    """Patch ors-sdk's hard-coded timings with ``config`` (see the module docstring)."""
    logs = (sdk_server, sdk_environment)
    patch_timings(server.app, config, reconnect=sdk_reconnect, server_module=sdk_server, log_modules=logs)


def build_app(scenarios: list[Scenario], config: ServerConfig) -> ASGIApp:
    """ors-sdk's FastAPI app serving these scenarios, plus orsbench's read-only ``GET /_orsbench/stats``."""
    return build_twin_app(
        scenarios,
        config,
        impl=IMPL,
        twin="ors-sdk twin",
        server_class=ors.Server,
        environment_class=environment_class,
        apply_config=apply_config,
        sdk=SDK,
    )
