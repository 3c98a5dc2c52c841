"""orsbench: conformance, load and training-smoke harness for the Open Reward Standard.

Data flows scenarios → servers → wire client → checks → reports; the CLI, the
pytest plugin, the Locust file and the training smoke are thin front ends.
"""

from orsbench.config import ServerConfig
from orsbench.scenarios import Scenario, get_scenario, list_scenarios
from orsbench.servers.launch import RunningServer, serve, start
from orsbench.wire import Exchange, SSEParser, WireClient

__version__ = "0.1.0"

__all__ = [
    "Exchange",
    "RunningServer",
    "SSEParser",
    "Scenario",
    "ServerConfig",
    "WireClient",
    "__version__",
    "get_scenario",
    "list_scenarios",
    "serve",
    "start",
]
