"""How scenarios are served: the mock engine or the SDK twin, started one way."""

from orsbench.servers.launch import RunningServer, ServerStartError, serve, start

__all__ = ["RunningServer", "ServerStartError", "serve", "start"]
