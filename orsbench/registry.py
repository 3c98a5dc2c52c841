"""How every orsbench registry is filled: an explicit tuple of modules, imported by one helper.

Scenarios, faults, checks and CLI subcommands each keep a registry (a dict) and a
``MODULES`` tuple naming the modules that register into it (with a decorator or
a ``register`` call at import time). :func:`load_modules` imports that tuple —
the one way a registry is loaded. Why explicit: the tuple is the list a reader
looks for (no directory scan, no lazy ``__getattr__``), and an import error in a
registered module is a bug that surfaces, never a silently missing entry. A
registry whose modules need an optional extra names that extra where it is
used, not here.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

_loaded: set[str] = set()


def load_modules(modules: Iterable[str]) -> None:
    """Import each module of ``modules`` once (registering what it defines), in order."""
    for name in modules:
        if name not in _loaded:
            importlib.import_module(name)
            _loaded.add(name)
