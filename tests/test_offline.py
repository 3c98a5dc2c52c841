"""The built-in clients' process resolves loopback names only (orsbench/clients/offline.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orsbench.clients.offline import is_local

#: Run in a child: the guard changes the process it is called in for good.
_PROBE = """
import socket, sys
from orsbench.clients.offline import loopback_only
loopback_only()
for host in ("127.0.0.1", "localhost", "::1"):
    socket.getaddrinfo(host, 80)
for host in ("sessions.127.0.0.1", "api.openreward.ai", "8.8.8.8", "10.0.0.1"):
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        assert "not on this machine" in str(exc), exc
    else:
        sys.exit(f"{host} resolved")
print("ok")
"""


@pytest.mark.parametrize(
    ("host", "local"),
    [("127.0.0.1", True), ("127.4.5.6", True), ("::1", True), ("[::1]", True), ("localhost", True), (b"localhost", True),
     (None, True), ("sessions.127.0.0.1", False), ("api.openreward.ai", False), ("8.8.8.8", False), ("192.168.1.1", False)],
)  # fmt: skip
def test_what_counts_as_this_machine(host: object, local: bool) -> None:
    assert is_local(host) is local


def test_after_the_guard_only_loopback_names_resolve() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
