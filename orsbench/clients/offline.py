"""Keep a built-in client on this machine: in its process, names resolve to loopback addresses only.

A built-in client target runs other projects' code (an SDK, an agent harness),
and some of it reaches for the network on its own: the openreward SDK turns a
base URL ``http://127.0.0.1:PORT`` into ``http://sessions.127.0.0.1:PORT`` (a
name, looked up in DNS), a harness may log rollouts to its platform or fetch a
tokenizer. orsbench never lets a client under test reach past 127.0.0.1:
:func:`loopback_only` makes every lookup of a name or address that is not
loopback fail at once, as an unknown host — so the client sees the error it
would see offline, and no packet (not even a DNS query) leaves the machine.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_REAL_GETADDRINFO = socket.getaddrinfo


def is_local(host: Any) -> bool:
    """Whether ``host`` (a name or an address, str or bytes; ``None`` for a wildcard) stays on this machine."""
    if host is None:
        return True
    name = host.decode("ascii", "replace") if isinstance(host, (bytes, bytearray)) else str(host)
    name = name.strip("[]").lower()
    if name in ("localhost", "localhost.", "") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _loopback_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not is_local(host):
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} is not on this machine: orsbench lets a client under test reach 127.0.0.1 only")
    return _REAL_GETADDRINFO(host, *args, **kwargs)


def loopback_only() -> None:
    """From now on, in this process, resolving anything but a loopback name or address fails (idempotent)."""
    socket.getaddrinfo = _loopback_getaddrinfo
