"""Build the ASGI app for a scenario on a registered implementation, and serve it.

This is the one way orsbench starts a server: :func:`build_app` builds the
registered implementation's app, :func:`serve_forever` binds a socket itself
(so port 0 gives a free port with no race) and runs uvicorn with httptools and
uvloop.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Awaitable, Callable, TextIO

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios import Scenario
from orsbench.servers.implementations import IMPLEMENTATIONS


def build_app(scenarios: list[Scenario], config: ServerConfig, impl: str = "mock") -> Any:
    """The ASGI app serving ``scenarios`` on the implementation called ``impl`` (see
    :mod:`orsbench.servers.implementations`); ``ValueError`` for an unknown one, naming the known ones.

    With ``config.request_log`` the app is wrapped, outermost, in the request log
    (:mod:`orsbench.servers.request_log`): it records what a client sent and what the faults answered.
    """
    app = IMPLEMENTATIONS.get(impl).build_app(scenarios, config)
    if config.replica:
        app = ReplicaHeader(app, config.replica)
    if config.request_log:
        from orsbench.servers.request_log import RequestLog

        return RequestLog(app)
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def raise_open_file_limit(wanted: int | None = None) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` towards its hard limit; return the soft limit after.

    One connection is one file descriptor, so serving (or driving) thousands of
    held streams needs more than the common default soft limit of 1,024.
    Raising the soft limit up to the hard one needs no privilege.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted or 0, 65536)
    if wanted is not None:
        target = min(target, max(soft, wanted))
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class BindError(OSError):
    """The address cannot be listened on (in use, not ours, not an address); the message says which."""


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class ReplicaHeader:
    """ASGI middleware: every answer names the replica that gave it (``X-ORSBench-Replica``; ``serve --replicas``)."""

    def __init__(self, app: Any, name: str) -> None:
        self.app = app
        self.header = (protocol.REPLICA_HEADER.lower().encode(), name.encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), self.header]}
            await send(message)

        await self.app(scope, receive, named)


def serve_forever(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str], None] | None = None,
    until: Callable[[], Awaitable[None]] | None = None,
    more_ports: Sequence[int] = (),
    on_bound: Callable[[list[int]], None] | None = None,
) -> None:
    """Bind ``host:port`` (0 = a free port), call ``on_ready(url)``, serve until SIGINT/SIGTERM
    or until the coroutine ``until()`` returns (a server that knows when its work is done).

    ``more_ports``: further ports (0 = free) the same app serves, in one process and one event loop;
    the app tells them apart by ``scope["server"]``. ``on_bound(ports)`` is told the port each socket
    got (the first port first) before anything is served; ``on_ready`` gets the first one's URL.
    """
    import uvicorn

    if not is_loopback(host):
        print(f"orsbench: WARNING: binding {host}, reachable beyond this machine", file=sys.stderr)
    raise_open_file_limit()  # one descriptor per held stream
    sockets = [bind(host, port)]
    try:
        sockets += [bind(host, more) for more in more_ports]
    except BindError:
        for sock in sockets:
            sock.close()
        raise
    url = url_of(host, sockets[0].getsockname()[1])
    if on_bound is not None:
        on_bound([sock.getsockname()[1] for sock in sockets])
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=60,
        # Loopback servers sit behind no proxy; the middleware would add a frame to every held stream.
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    if on_ready is not None or until is not None:
        original = server.startup
        stopping: list[Any] = []  # the task that ends the server, held until the server ends

        async def stop_when_done() -> None:
            assert until is not None
            await until()
            server.should_exit = True

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            if on_ready is not None:
                on_ready(url)
            if until is not None:
                import asyncio

                stopping.append(asyncio.get_running_loop().create_task(stop_when_done()))

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=sockets)


def url_of(host: str, port: int) -> str:
    """``http://host:port`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def write_ready_file(path: str | os.PathLike[str]) -> Callable[[str], None]:
    """An ``on_ready`` that atomically writes the URL to ``path`` (how the launcher learns it)."""

    def on_ready(url: str) -> None:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(url)
        tmp.replace(path)

    return on_ready


def announce_ready(
    banner: Callable[[str], str], ready_file: str | os.PathLike[str] | None, *, stream: TextIO | None = None
) -> Callable[[str], None]:
    """An ``on_ready`` for a server command: print ``banner(url)`` for the person (on ``stream``, default stdout),
    then write the ready file (when given) for the launcher. Every ``orsbench`` server command (serve, proxy, a
    user's app) says it so."""

    def on_ready(url: str) -> None:
        print(banner(url), file=stream or sys.stdout, flush=True)
        if ready_file:
            write_ready_file(ready_file)(url)

    return on_ready
