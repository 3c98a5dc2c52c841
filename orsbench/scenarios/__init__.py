"""Scenarios: what an environment does, selectable and parameterised by name."""

from __future__ import annotations

from typing import Any

from orsbench.registry import load_modules
from orsbench.scenarios.base import Episode, Scenario, Split, Tool, ToolResult, image, text, tool

#: name → scenario class, filled by the :data:`MODULES` (each class decorated with :func:`register`).
REGISTRY: dict[str, type[Scenario]] = {}
#: The modules that register scenarios, in listing order (see :mod:`orsbench.registry`).
MODULES = (
    "orsbench.scenarios.echo",
    "orsbench.scenarios.task_tool",
    "orsbench.scenarios.sparse_reward",
    "orsbench.scenarios.slow",
    "orsbench.scenarios.pick",
    "orsbench.scenarios.schema_zoo",
    "orsbench.scenarios.hazards",  # the cases real clients get wrong (docs/protocol.md §13)
    "orsbench.scenarios.cassette",  # replays a recorded file: serve --cassette FILE
)


def register(cls: type[Scenario]) -> type[Scenario]:
    """Add a scenario class to the registry (decorator)."""
    if REGISTRY.get(cls.name, cls) is not cls:
        raise ValueError(f"scenario {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls
    return cls


def load_scenarios() -> dict[str, type[Scenario]]:
    """Import every scenario module (idempotent); the registry, in listing order."""
    load_modules(MODULES)
    return REGISTRY


def get_scenario(name: str, **params: Any) -> Scenario:
    """Build the scenario called ``name`` with ``params``; a clear error for unknown names."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(REGISTRY)}") from None
    return cls(**params)


def list_scenarios() -> list[type[Scenario]]:
    return list(REGISTRY.values())


def playable_scenarios() -> list[str]:
    """The scenarios that serve an environment with their defaults (every one but a replay of a user's file)."""
    return [name for name, cls in REGISTRY.items() if cls.standalone]


__all__ = [
    "Episode",
    "REGISTRY",
    "Scenario",
    "Split",
    "Tool",
    "ToolResult",
    "get_scenario",
    "image",
    "list_scenarios",
    "load_scenarios",
    "playable_scenarios",
    "register",
    "text",
    "tool",
]

# Eager, unlike faults and checks: every front end lists the scenarios (argparse choices) on start.
load_scenarios()
