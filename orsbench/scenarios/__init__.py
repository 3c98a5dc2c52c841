"""Scenarios: what an environment does, selectable and parameterised by name."""

from __future__ import annotations

from typing import Any

from orsbench.registry import Registry
from orsbench.scenarios.base import Episode, Scenario, Split, Tool, ToolResult, image, text, tool

#: The modules that register scenarios, in listing order (see :mod:`orsbench.registry`).
MODULES = (
    "orsbench.scenarios.echo",
    "orsbench.scenarios.task_tool",
    "orsbench.scenarios.sparse_reward",
    "orsbench.scenarios.slow",
    "orsbench.scenarios.pick",
    "orsbench.scenarios.schema_zoo",
    "orsbench.scenarios.schema_edges",  # schema shapes binders crash on or lie about (docs/protocol.md §13.9)
    "orsbench.scenarios.hazards",  # the cases real clients get wrong (docs/protocol.md §13)
    "orsbench.scenarios.cassette",  # replays a recorded file: serve --cassette FILE
)

#: name → scenario class, filled by the :data:`MODULES` (each class decorated with :func:`register`).
SCENARIOS: Registry[type[Scenario]] = Registry("scenario", modules=MODULES)
#: Add a scenario class to :data:`SCENARIOS` (decorator).
register = SCENARIOS.register


def load_scenarios() -> Registry[type[Scenario]]:
    """Import every scenario module (idempotent); the registry, in listing order."""
    return SCENARIOS.load()


def get_scenario(name: str, **params: Any) -> Scenario:
    """Build the scenario called ``name`` with ``params``; ``ValueError`` naming the known ones otherwise."""
    return SCENARIOS.get(name)(**params)


def list_scenarios() -> list[type[Scenario]]:
    return SCENARIOS.values()


def playable_scenarios() -> list[str]:
    """The scenarios that serve an environment with their defaults (every one but a replay of a user's file)."""
    return [cls.name for cls in SCENARIOS.select(lambda cls: cls.standalone)]


def generic_scenarios() -> list[str]:
    """The playable scenarios a suite plays generically: every one without a ``dedicated`` reason to be left out."""
    return [cls.name for cls in SCENARIOS.select(lambda cls: cls.standalone and not cls.dedicated)]


def suite_params(name: str) -> dict[str, Any]:
    """The parameters a suite that plays every scenario serves ``name`` with (its ``suite_params``)."""
    return dict(SCENARIOS.get(name).suite_params)


__all__ = [
    "Episode",
    "SCENARIOS",
    "Scenario",
    "Split",
    "Tool",
    "ToolResult",
    "generic_scenarios",
    "get_scenario",
    "image",
    "list_scenarios",
    "load_scenarios",
    "playable_scenarios",
    "register",
    "suite_params",
    "text",
    "tool",
]
