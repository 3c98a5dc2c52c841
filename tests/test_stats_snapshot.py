"""``GET /_orsbench/stats`` is one typed snapshot, whichever implementation serves it.

The mock and both SDK twins answer with a :class:`~orsbench.servers.stats.StatsSnapshot`:
every required key present with its declared type, no key the type does not declare,
and the ``NotRequired`` keys only where the type says which implementation counts them.
"""

from __future__ import annotations

import typing
from typing import Any

import httpx
import pytest

from orsbench import protocol
from orsbench.servers.stats import StatsSnapshot

HINTS = typing.get_type_hints(StatsSnapshot)
ONLY = {"mock": {"call_errors", "statuses", "tasks_tracked", "tasks_running", "uptime_s"}, "twin": {"sse_pings"}}


def _plain(hint: Any) -> type:
    """``dict[str, int]`` → ``dict``; ``int`` → ``int``."""
    return typing.get_origin(hint) or hint


@pytest.mark.parametrize("impl", ["mock", "sdk", "ors-sdk"])
def test_every_implementation_answers_the_one_snapshot_type(ors_server_factory: Any, impl: str) -> None:
    server = ors_server_factory("echo", impl=impl)
    httpx.post(server.url + protocol.PING, headers={protocol.SESSION_HEADER: "nobody"}, timeout=10)  # counted as a request
    snapshot = server.stats()
    assert set(StatsSnapshot.__required_keys__) <= set(snapshot), set(StatsSnapshot.__required_keys__) - set(snapshot)
    assert set(snapshot) <= set(HINTS), f"undeclared keys: {set(snapshot) - set(HINTS)}"
    assert set(snapshot) - set(StatsSnapshot.__required_keys__) == ONLY["mock" if impl == "mock" else "twin"]
    for key, value in snapshot.items():
        expected = _plain(HINTS[key])
        assert isinstance(value, float if expected is float else expected) or (expected is float and isinstance(value, int)), (
            key,
            value,
        )
    assert snapshot["impl"] == impl
    assert snapshot["calls_total"] == sum(snapshot["calls"].values())
    assert sum(snapshot["requests"].values()) >= 1
