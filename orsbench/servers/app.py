"""Build the ASGI app for a scenario on either implementation, and serve it.

This is the one way orsbench starts a server: :func:`build_app` picks the
implementation, :func:`serve_forever` binds a socket itself (so port 0 gives a
free port with no race) and runs uvicorn with httptools and uvloop.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios import Scenario

#: ``floor`` is not an ORS server: it answers a load episode's requests with constants
#: (:mod:`orsbench.bench.floor`), the baseline ``orsbench bench`` measures against.
IMPLEMENTATIONS = ("mock", "sdk", "ors-sdk", "floor")
#: The implementations that are ORS servers (``floor`` is not): what ``check --serve`` and tests may serve.
SERVERS = ("mock", "sdk", "ors-sdk")


def effective_config(scenario: Scenario, config: ServerConfig, explicit: set[str] = frozenset()) -> ServerConfig:
    """Apply the scenario's own config defaults to fields the user did not set explicitly."""
    changes = {k: v for k, v in scenario.config_defaults.items() if k not in explicit}
    return config.replace(**changes) if changes else config


def build_app(scenarios: list[Scenario], config: ServerConfig, impl: str = "mock") -> Any:
    """The ASGI app serving ``scenarios``.

    ``mock`` is our engine, ``sdk`` the openreward SDK twin, ``ors-sdk`` the ors-sdk twin, ``floor`` the bench floor.
    """
    if impl == "mock":
        from orsbench.servers.engine import Engine
        from orsbench.servers.faults import apply_faults

        engine = Engine(scenarios, config)
        return apply_faults(engine, config.faults, config.seed) if config.faults else engine
    if config.faults:
        raise ValueError("fault profiles apply to the mock engine only (--impl mock)")
    if impl == "sdk":
        os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")
        from orsbench.servers.sdk_twin import build_app as build_sdk_app

        return build_sdk_app(scenarios, config)
    if impl == "ors-sdk":
        try:
            from orsbench.servers.ors_sdk_twin import build_app as build_ors_app
        except ImportError as exc:
            raise ValueError(f"--impl ors-sdk needs ors-sdk installed: pip install 'orsbench[ors-sdk]' ({exc})") from None
        return build_ors_app(scenarios, config)
    if impl == "floor":
        from orsbench.bench.floor import FloorApp

        return FloorApp(scenarios)
    raise ValueError(f"unknown implementation {impl!r}; choose one of {', '.join(IMPLEMENTATIONS)}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_forever(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Bind ``host:port`` (0 = a free port), call ``on_ready(url)``, serve until SIGINT/SIGTERM."""
    import uvicorn

    if not is_loopback(host):
        print(f"orsbench: WARNING: binding {host}, reachable beyond this machine", file=sys.stderr)
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound_port}"
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=60,
    )
    server = uvicorn.Server(config)
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            on_ready(url)

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


def write_ready_file(path: str | os.PathLike[str]) -> Callable[[str], None]:
    """An ``on_ready`` that atomically writes the URL to ``path`` (how the launcher learns it)."""

    def on_ready(url: str) -> None:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(url)
        tmp.replace(path)

    return on_ready
