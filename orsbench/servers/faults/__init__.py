"""Named faults for the mock engine, selectable with ``--fault NAME[,NAME]``.

Two families share one registry:

* **violations** (:mod:`.violations`) each break exactly one ORS rule, so the
  checker's own tests can show that ``orsbench check`` fails exactly the check
  naming that rule;
* **profiles** (:mod:`.profiles`) reproduce real-world trouble — latency,
  5xx/429 bursts, dropped or stalled streams, restarts — that a robust client
  must survive.

A fault is applied to a built :class:`~orsbench.servers.engine.Engine` and
returns the ASGI app to serve: it may patch the engine instance's route tables
or hooks, or wrap the app in a middleware. Faults compose in the order given and
are deterministic given ``ServerConfig.seed``.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine

ApplyFn = Callable[["Engine", Any, random.Random], Any]


@dataclass(frozen=True)
class Fault:
    name: str
    summary: str
    kind: Literal["violation", "profile"]
    #: ``apply(engine, app, rng) -> app``: patch ``engine`` and/or wrap ``app``.
    apply: ApplyFn


FAULTS: dict[str, Fault] = {}
_MODULES = ("orsbench.servers.faults.violations", "orsbench.servers.faults.profiles", "orsbench.servers.faults.tool_defects")


def fault(name: str, summary: str, kind: Literal["violation", "profile"]) -> Callable[[ApplyFn], ApplyFn]:
    """Register ``apply`` under ``name`` (decorator)."""

    def decorate(fn: ApplyFn) -> ApplyFn:
        if name in FAULTS:
            raise ValueError(f"fault {name!r} registered twice")
        FAULTS[name] = Fault(name, summary, kind, fn)
        return fn

    return decorate


def load_all() -> dict[str, Fault]:
    for module in _MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return FAULTS


def apply_faults(engine: "Engine", names: tuple[str, ...], seed: int) -> Any:
    """Apply the named faults to ``engine``; returns the ASGI app to serve."""
    registry = load_all()
    app: Any = engine
    for index, name in enumerate(names):
        if name not in registry:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(sorted(registry)) or 'none'}")
        app = registry[name].apply(engine, app, random.Random(seed * 1000 + index))
    return app
