"""Load measurement: whole ORS episodes per second, and the server CPU each one costs.

* :mod:`.plan` — what an episode does, resolved once from the server's discovery answers;
* :mod:`.episode` — how each answer of an episode is judged (shared with the Locust user);
* :mod:`.driver` — the asyncio/aiohttp driver running many episodes at once, bounded;
* :mod:`orsbench.servers.floor` — the constant-answer ASGI app that is the baseline (``--impl floor``);
* :mod:`.procstat` — CPU time and RSS of a server's process tree from ``/proc``;
* :mod:`.runner` — ``orsbench bench``: mock, SDK twin and floor alternating in one run;
* :mod:`.locust_run` — one headless Locust process against a URL, its episode rate.

Names are imported on first use, so serving the floor never needs aiohttp.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DriverResult": "driver",
    "drive": "driver",
    "run_episodes": "driver",
    "EpisodeFailure": "episode",
    "EpisodePlan": "plan",
    "PlanError": "plan",
    "discover": "plan",
    "example_input": "plan",
}

__all__ = ["DriverResult", "EpisodeFailure", "EpisodePlan", "PlanError", "discover", "drive", "example_input", "run_episodes"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orsbench.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"orsbench.bench.{module}"), name)
