"""How every orsbench registry is filled: an explicit tuple of modules, imported by one helper.

Scenarios (:data:`orsbench.scenarios.MODULES`), faults
(:data:`orsbench.servers.faults.MODULES`) and checks
(:data:`orsbench.checks.registry.MODULES`) each keep a registry (a dict) and a
``MODULES`` tuple naming the modules that register into it with a decorator at
import time; CLI subcommands are the tuple
:data:`orsbench.cli.SUBCOMMANDS`, each module's ``register(subparsers)`` called
in order. :func:`load_modules` imports such a tuple — the one way a registry is
loaded. Why explicit: the tuple is the list a reader
looks for (no directory scan, no lazy ``__getattr__``), and an import error in a
registered module is a bug that surfaces, never a silently missing entry. A
registry whose modules need an optional extra names that extra where it is
used, not here.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType


def load_modules(modules: Iterable[str]) -> list[ModuleType]:
    """Import each of ``modules`` (registering what it defines), in order; the module objects.

    Python imports a module once, so calling this again costs a dict lookup per module.
    """
    return [importlib.import_module(name) for name in modules]
