"""What every command adapter in another interpreter writes and reads of the adapter contract, written once.

Why a module of its own, and not :mod:`orsbench.clientcheck.contract`: the command adapters
(``platoon_ors.py``, ``benchflow_ors.py``) run in a Python 3.12 environment where orsbench is not installed,
so they import nothing of it. They import this sibling by its bare name: it sits beside them, and the directory
of the script Python runs — the adapter itself, or ``forkserver.py`` that loads them — is first on ``sys.path``.
"""

from __future__ import annotations

import json
from typing import Any


class Out:
    """``ORSBENCH_OUT``, one JSON line per write, flushed (a client stopped at its deadline leaves what it did)."""

    def __init__(self, path: str) -> None:
        self.handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the episode, closed in main

    def write(self, line: dict[str, Any]) -> None:
        self.handle.write(json.dumps(line) + "\n")
        self.handle.flush()


def runs(environ: dict[str, str]) -> int:
    """``ORSBENCH_RUNS``: times to play the script in this process (absent or malformed: once, §13.16)."""
    return _count(environ, "ORSBENCH_RUNS")


def episodes(environ: dict[str, str]) -> int:
    """``ORSBENCH_EPISODES``: episodes each run plays, tasks INDEX .. INDEX+N-1 (absent or malformed: one, §13.15)."""
    return _count(environ, "ORSBENCH_EPISODES")


def _count(environ: dict[str, str], name: str) -> int:
    try:
        return max(1, int(environ.get(name) or 1))
    except ValueError:
        return 1
