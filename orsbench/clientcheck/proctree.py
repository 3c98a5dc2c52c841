"""The client's process tree, read from ``/proc``: every command line it runs, watched for a secret; whether it still runs.

A secret on a command line is readable by every user of the machine
(``/proc/PID/cmdline`` is world-readable; ``ps`` shows it): docs/protocol.md §14.4.
While a case that hands the client secrets runs (``ORSBENCH_SECRETS``), the
runner (:mod:`.runner`) samples the command line of every process of the
client — its process group and session (the client is started as the leader of
both) and their descendants, also one that started a session of its own —
every :data:`EVERY_S` seconds, at most :data:`MOST_SAMPLES` times, and the
client check ``client.secret_not_on_cmdline`` fails where a secret's value (as
written, JSON-escaped or base64, :func:`orsbench.wire.redact.forms`) turned up.

What is kept is only what a report may show: the process id, its command line
with every secret's value masked (:func:`orsbench.wire.redact.scrub`), and the
secret's name. Linux only: elsewhere :data:`UNAVAILABLE` says why nothing is read.
A process that lives shorter than one sampling interval can be missed: the
watch is a sample, bounded, not a trace.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orsbench.wire.redact import forms, scrub

#: Seconds between two readings of the client's process tree.
EVERY_S = 0.1
#: Readings of one case at most (past them the watch stops: bounded in time and CPU).
MOST_SAMPLES = 600
#: Characters of one masked command line kept for a report.
ARGV_CHARS = 400
_PROC = "/proc"


def _unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"command lines are read from Linux's /proc; this is {sys.platform}"
    if not os.path.exists(f"{_PROC}/self/cmdline"):
        return "/proc is not mounted here: no process's command line can be read"
    return None


#: Why no command line can be read on this machine (``None``: they can).
UNAVAILABLE = _unavailable()


def _stat(pid: str) -> tuple[int, int, int] | None:
    """``(ppid, pgrp, session)`` of a live process, or ``None`` when it is gone (a zombie is gone)."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The name in parentheses may hold spaces or ')': the fields after the last ')' are fixed.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if fields[:1] == [b"Z"]:
        return None  # exited, not yet reaped: nothing of it runs
    try:
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def members(leader: int) -> list[int]:
    """The processes of the client led by ``leader``: its process group and session, and their descendants."""
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir(_PROC):
        if not entry.isdigit():
            continue
        stat = _stat(entry)
        if stat is None:
            continue
        pid, (ppid, pgrp, session) = int(entry), stat
        parents[pid] = ppid
        if pid == leader or pgrp == leader or session == leader:
            found.add(pid)
    grew = True
    while grew:  # a descendant that left the group (setsid) is still the client's
        grew = False
        for pid, ppid in parents.items():
            if pid not in found and ppid in found:
                found.add(pid)
                grew = True
    return sorted(found)


def alive(leader: int) -> bool:
    """Whether any process of the client led by ``leader`` still runs (off Linux: whether its group answers a signal)."""
    if UNAVAILABLE:
        try:
            os.killpg(leader, 0)
        except OSError:
            return False
        return True
    return bool(members(leader))


def cmdline(pid: int) -> list[str] | None:
    """A process's arguments, or ``None`` when it is gone (a kernel thread's are empty)."""
    try:
        with open(f"{_PROC}/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]] if raw else []


@dataclass
class ArgvSeen:
    """What the watch saw: how often it read, how many processes, and each one whose arguments carried a secret."""

    samples: int = 0
    processes: int = 0
    #: ``{"pid", "secret" (its name), "argv" (masked)}`` for each process found carrying a secret, first sighting.
    leaks: list[dict[str, Any]] = field(default_factory=list)
    #: Why nothing was read (not Linux), else ``None``.
    unavailable: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "processes": self.processes, "leaks": self.leaks, "unavailable": self.unavailable}


class ArgvWatch:
    """Samples the command lines of the client led by ``leader`` for ``secrets`` (name → value); :meth:`seen` says what it found."""

    def __init__(self, leader: int, secrets: Mapping[str, str]) -> None:
        self.leader = leader
        self.secrets = {name: value for name, value in secrets.items() if value}
        self._values = list(self.secrets.values())
        self._seen = ArgvSeen(unavailable=UNAVAILABLE)
        self._pids: set[int] = set()
        self._leaked: set[int] = set()
        self._next = 0.0

    def sample(self, force: bool = False) -> None:
        """Read the tree once, when a reading is due (``force``: now), within :data:`MOST_SAMPLES`."""
        now = time.monotonic()
        if self._seen.unavailable or self._seen.samples >= MOST_SAMPLES or (now < self._next and not force):
            return
        self._next = now + EVERY_S
        self._seen.samples += 1
        for pid in members(self.leader):
            self._pids.add(pid)
            if pid in self._leaked:
                continue
            argv = cmdline(pid)
            if not argv:
                continue
            joined = "\0".join(argv)
            for name, value in self.secrets.items():
                if any(form in joined for form in forms(value)):
                    self._leaked.add(pid)
                    masked = [scrub(part, self._values)[:ARGV_CHARS] for part in argv]
                    self._seen.leaks.append({"pid": pid, "secret": name, "argv": masked})
                    break
        self._seen.processes = len(self._pids)

    def seen(self) -> ArgvSeen:
        return self._seen
