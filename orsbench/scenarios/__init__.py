"""Scenarios: what an environment does, selectable and parameterised by name."""

from __future__ import annotations

from typing import Any

from orsbench.scenarios.base import Episode, Scenario, Split, Tool, ToolResult, image, text, tool
from orsbench.scenarios.echo import Echo
from orsbench.scenarios.slow import Slow
from orsbench.scenarios.sparse_reward import SparseReward
from orsbench.scenarios.task_tool import TaskTool

#: name → scenario class. Other modules register more with :func:`register`.
REGISTRY: dict[str, type[Scenario]] = {}


def register(cls: type[Scenario]) -> type[Scenario]:
    """Add a scenario class to the registry (usable as a decorator)."""
    REGISTRY[cls.name] = cls
    return cls


for _cls in (Echo, TaskTool, SparseReward, Slow):
    register(_cls)


def get_scenario(name: str, **params: Any) -> Scenario:
    """Build the scenario called ``name`` with ``params``; a clear error for unknown names."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(REGISTRY)}") from None
    return cls(**params)


def list_scenarios() -> list[type[Scenario]]:
    return list(REGISTRY.values())


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
    "register",
    "text",
    "tool",
]

from orsbench.scenarios import schema_zoo  # noqa: E402,F401  (registers schema-zoo and its variants)
from orsbench.scenarios.cassette import Cassette  # noqa: E402  (replays a recorded file: serve --cassette FILE)

register(Cassette)
