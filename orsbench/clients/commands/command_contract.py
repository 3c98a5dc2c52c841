"""What every command adapter in another interpreter writes and reads of the adapter contract, written once.

Why a module of its own, and not :mod:`orsbench.clientcheck.contract`: the command adapters
(``platoon_ors.py``, ``benchflow_ors.py``) run in a Python 3.12 environment where orsbench is not installed,
so they import nothing of it. They import this sibling by its bare name: it sits beside them, and the directory
of the script Python runs — the adapter itself, or ``forkserver.py`` that loads them — is first on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
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


def play_episodes(
    name: str,
    play: Callable[[dict[str, str], Out], Awaitable[int]],
    *,
    required: tuple[str, ...],
    client: str,
    not_importable: str,
    on_start: Callable[[], None] | None = None,
) -> int:
    """The ``main`` of an adapter whose episode is one coroutine: the contract's checks, runs and episodes, written once.

    ``name`` is how the adapter names itself on stderr; ``client`` the module of the code under test (it must import:
    ``not_importable`` says what is missing, exit 2); ``on_start`` arms what must happen before the first episode
    (platoon's SIGTERM unwinding, §13.17). ORSBENCH_RUNS (docs/protocol.md §13.16): the rollout run that many times
    in this one process, each run its own ``asyncio.run``, as a script looping over runs calls the client — whatever
    it caches carries over. ORSBENCH_EPISODES (§13.15): tasks INDEX .. INDEX+N-1 one by one, going on after one that
    fails. Exit status: the worst episode's (0 or 1), 2 for a usage error.
    """
    environ = dict(os.environ)
    missing = [key for key in required if not environ.get(key)]
    if missing:
        print(f"{name} adapter: error: {', '.join(missing)} not set: run it under orsbench check-client or matrix", file=sys.stderr)
        return 2
    try:
        importlib.import_module(client)
    except ImportError as exc:
        print(f"{name} adapter: error: {not_importable} in {sys.executable}: {exc}", file=sys.stderr)
        return 2
    out = Out(environ["ORSBENCH_OUT"])
    started = time.monotonic()
    if on_start is not None:
        on_start()
    try:
        code, first = 0, int(environ.get("ORSBENCH_INDEX") or 0)
        for _ in range(runs(environ)):
            for number in range(episodes(environ)):
                code = max(code, asyncio.run(play({**environ, "ORSBENCH_INDEX": str(first + number)}, out)))
        return code
    except SystemExit:
        out.write({"error": "ended by SIGTERM before the episode's end", "raised": True})
        raise
    except Exception as exc:  # noqa: BLE001 - a crash of the client (or of this adapter) is reported, then exits 1
        out.write({"error": f"{type(exc).__name__}: {exc}", "raised": True})
        traceback.print_exc()
        return 1
    finally:
        out.handle.close()
        print(f"{name} adapter: {time.monotonic() - started:.2f}s", file=sys.stderr)
