"""CPU time and resident memory of a process (tree), read from ``/proc``: the bench's one reader of them.

The bench reports *server* CPU per episode, which is independent of how the
driver and the server share the cores: user+sys time of the server process and
all its descendants (live ones from their own ``stat``, reaped ones through
their parent's ``cutime``/``cstime``), sampled before and after a run.
Linux only; elsewhere the readers return ``None`` and the figure is left out.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces; fields follow the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir() if _PROC.exists() else ():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))  # field 4: ppid
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def tree_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of ``pid``'s process tree (including reaped children); ``None`` if unreadable."""
    total = 0
    seen = False
    for member in descendants(pid):
        fields = _stat_fields(member)
        if fields is None:
            continue
        seen = True
        # utime, stime, cutime, cstime are fields 14-17 of stat (11-14 after the name).
        total += sum(int(x) for x in fields[11:15])
    return total / _TICKS if seen else None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process on this machine."""
    return pid > 0 and (_PROC / str(pid)).exists()


def rss_bytes(pid: int) -> int | None:
    """Resident set size of the one process ``pid`` in bytes (``os.getpid()``: this one); ``None`` if unreadable."""
    try:
        return int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def tree_rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid``'s process tree in bytes; ``None`` if unreadable."""
    total = 0
    seen = False
    for member in descendants(pid):
        size = rss_bytes(member)
        if size is None:
            continue
        seen = True
        total += size
    return total if seen else None


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages, rounded (None where the platform has none): every timing says its load."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_facts(loadavg_before: list[float] | None, **extra: object) -> dict[str, object]:
    """What a benchmark report says about the machine: cores, Python, the load before and now, and ``extra``."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_before": loadavg_before,
        "loadavg_after": loadavg(),
        **extra,
    }


@dataclass
class TreeReadings:
    """RSS (KiB) and CPU seconds of one process tree at named instants (``probe("held")``), and the figures between.

    ``pid`` ``None`` (a server not on this machine, or whose PID is unknown): every reading and figure is ``None``.
    """

    pid: int | None
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    cpu_s: dict[str, float | None] = field(default_factory=dict)

    def probe(self, phase: str) -> None:
        if self.pid is None:
            return
        value = tree_rss_bytes(self.pid)
        self.rss_kib[phase] = None if value is None else value // 1024
        self.cpu_s[phase] = tree_cpu_seconds(self.pid)

    def rss_growth_per(self, base: str, at: str, count: int) -> float | None:
        """KiB the tree grew from ``base`` to ``at``, per one of ``count`` (sessions)."""
        a, b = self.rss_kib.get(base), self.rss_kib.get(at)
        return None if a is None or b is None or not count else (b - a) / count

    def cpu_us_per(self, start: str, end: str, count: int) -> float | None:
        """CPU microseconds the tree spent from ``start`` to ``end``, per one of ``count`` (pings, episodes)."""
        a, b = self.cpu_s.get(start), self.cpu_s.get(end)
        return None if a is None or b is None or not count else (b - a) / count * 1e6
