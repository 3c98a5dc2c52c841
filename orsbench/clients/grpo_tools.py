"""How ``GRPOTrainer`` turns an environment instance into tools: the one copy of that rule in orsbench.

Mirrors trl 1.16.0 (``grpo_trainer.py`` ~L691 and ~L2373): every class-level
function of the instance's class except ``reset``, ``get_reward`` and
``_``-prefixed names, sorted by name (``inspect.getmembers``), read back from
the *instance* (so instance attributes that shadow a method win, as in TRL).
``conformance/test_scope.py::test_grpo_mirror_matches_trl`` fails when TRL's
source stops saying so.

Both the training smoke (which hands the same tools to its warm-up) and the
conformance suite (which inspects what the model would see) import it from
here, beside the other facts about how clients bind tools
(:mod:`orsbench.upstream.defects`); neither front end imports the other. It
imports nothing heavy, so importing it does not pull in torch or TRL.
"""

from __future__ import annotations

import inspect
from typing import Any

from orsbench.upstream.defects import GRPO_RESERVED  # names GRPOTrainer treats specially instead of as tools


def grpo_tool_surface(instance: Any) -> dict[str, Any]:
    """``{name: object}`` as GRPOTrainer collects tools from an environment instance, in its order."""
    return {
        name: getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in GRPO_RESERVED and not name.startswith("_")
    }


def grpo_tools(instance: Any) -> list[Any]:
    """The tools GRPOTrainer exposes for ``instance``, in its order (the values of :func:`grpo_tool_surface`)."""
    return list(grpo_tool_surface(instance).values())
