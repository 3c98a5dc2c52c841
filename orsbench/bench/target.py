"""Which server a load run may target: a URL on this machine, and its process when named.

Load is aimed only at the loopback interface (``127.0.0.1``, ``localhost``,
``::1``): ``orsbench bench --url`` is for measuring *your* server on *your*
machine, and a tool that opens 10,000 connections must not be pointable at
someone else's. A ``--server-pid`` lets the bench read that server's CPU time
and memory from ``/proc``, as it does for the servers it starts itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from orsbench.bench.procstat import alive
from orsbench.servers.app import is_loopback


class TargetError(ValueError):
    """The URL or PID cannot be measured; the message names the fix."""


@dataclass(frozen=True)
class LoadTarget:
    """A server to measure: its base URL, and its PID when it runs here."""

    url: str
    pid: int | None = None
    name: str = "url"


def local_target(url: str, pid: int | None = None, *, command: str = "orsbench bench") -> LoadTarget:
    """Validate ``url`` (http(s), loopback host) and ``pid`` (a live process here).

    ``command`` names the front end in the message (``matrix --url`` applies the same rule).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"--url must look like http://127.0.0.1:8000, got {url!r}")
    if not is_loopback(parts.hostname):
        raise TargetError(
            f"--url {url!r} is not on this machine: {command} --url only talks to 127.0.0.1, localhost or [::1]. "
            f"Run {command} on the server's own machine instead."
        )
    if pid is not None:
        if not alive(pid):
            raise TargetError(f"--server-pid {pid} is not a running process on this machine")
    return LoadTarget(url.rstrip("/"), pid)
