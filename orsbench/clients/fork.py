"""One client episode in a forked child, collected at a deadline, with the server's counters around it.

The client matrix (:mod:`orsbench.clients.run`) and the conformance robustness suite
(``conformance/test_client_robustness.py``) both play a client in a child process so that a client
which retries forever cannot hang them: the child sends one dict through a pipe, the parent waits for
it until the deadline, kills the child otherwise, and reads ``/_orsbench/stats`` before and after.
What the child plays and how the outcome is judged stay with each caller.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from orsbench.servers.launch import RunningServer

__all__ = ["Collected", "ForkedEpisode", "forget_parent_ping_thread", "stat_delta"]

_FORK = multiprocessing.get_context("fork")


def forget_parent_ping_thread() -> None:
    """openreward keeps one process-wide ping thread; a fork copies its state but not the thread.

    If the parent already pinged, the child's copy looks running while nothing drives it, and no
    ping would ever leave the child. Re-initialise it (in the child) so the child starts its own.
    """
    session = sys.modules.get("openreward.api._session")
    if session is None:  # never imported here: no state to forget (and importing it would cost the child seconds)
        return
    session.ping.ping_thread.__init__()


def stat_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that changed between two ``/_orsbench/stats`` snapshots, by how much."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


@dataclass
class Collected:
    """What the parent learnt of one forked episode."""

    #: The child's dict; None when it was still going at its deadline (then it was killed).
    result: dict[str, Any] | None
    #: Seconds from the start to the answer (or to the deadline).
    elapsed: float
    calls: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    #: Sessions the server holds now that it did not hold before.
    sessions_left_open: int = 0


class ForkedEpisode:
    """``target(*args, conn)`` under way in a forked child; :meth:`collect` gathers it at its deadline at the latest."""

    def __init__(self, server: RunningServer, target: Callable[..., None], args: tuple[Any, ...], deadline: float) -> None:
        self.server, self.deadline = server, deadline
        self.before = server.stats()
        self.reader, writer = _FORK.Pipe(duplex=False)
        self._child = _FORK.Process(target=target, args=(*args, writer), daemon=True)
        self.started = time.monotonic()
        self._child.start()
        writer.close()

    def collect(self, join_s: float = 5.0, settle: float = 0.0) -> Collected:
        """Wait for the child's dict until the deadline, kill a child still running, read the server's counters.

        ``join_s``: how long a child that answered gets to exit; ``settle``: seconds to wait before the
        counters are read (a client that closes its session on a background thread gets that long).
        """
        result: dict[str, Any] | None = None
        reader: Connection = self.reader
        if reader.poll(max(0.0, self.started + self.deadline - time.monotonic())):
            try:
                result = reader.recv()
            except EOFError:
                result = {"error": f"the client process died (exit code {self._child.exitcode})"}
        elapsed = time.monotonic() - self.started
        if result is None:  # still going at its deadline: stop it now
            self._child.kill()
        self._child.join(join_s)
        if self._child.is_alive():
            self._child.kill()
            self._child.join(5)
        if settle:
            time.sleep(settle)
        before, after = self.before, self.server.stats()
        return Collected(
            result,
            elapsed,
            calls=stat_delta(before["calls"], after["calls"]),
            requests=stat_delta(before.get("requests", {}), after.get("requests", {})),
            statuses=stat_delta(before.get("statuses", {}), after.get("statuses", {})),
            sessions_left_open=after["active_sessions"] - before["active_sessions"],
        )
