"""orsbench: conformance, load and training-smoke harness for the Open Reward Standard.

Data flows scenarios → servers → wire client → checks → reports; the CLI, the
pytest plugin, the Locust file and the training smoke are thin front ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orsbench.config import ServerConfig
from orsbench.scenarios import Scenario, get_scenario, list_scenarios
from orsbench.servers.launch import RunningServer, serve, start
from orsbench.wire import Exchange, SSEParser, WireClient

from orsbench.version import __version__

if TYPE_CHECKING:
    from orsbench.checks import Report


def check(target: Any, **options: Any) -> Report:
    """Check an ORS server — a URL, a scenario, your Environment class, ``FILE.py:Class`` or a command.

    See :func:`orsbench.api.check` (imported on first use: ``import orsbench`` stays light for servers).
    """
    from orsbench.api import check as run_check

    return run_check(target, **options)


__all__ = [
    "Exchange",
    "RunningServer",
    "SSEParser",
    "Scenario",
    "ServerConfig",
    "WireClient",
    "__version__",
    "check",
    "get_scenario",
    "list_scenarios",
    "serve",
    "start",
]
