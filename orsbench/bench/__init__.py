"""Load measurement: whole ORS episodes per second, and the server CPU each one costs.

* :mod:`.plan` — what an episode does (``EpisodePlan.actions()``: the one episode model both front ends walk);
* :mod:`.learn` — the episode the checker's player plays on the server, replayed by default (reward path included);
* :mod:`.episode` — how each answer of an episode is judged (shared with the Locust user);
* :mod:`.driver` — the asyncio/aiohttp driver running many episodes at once, bounded;
* :mod:`orsbench.servers.floor` — the constant-answer ASGI app that is the baseline (``--impl floor``);
* :mod:`.procstat` — CPU time and RSS of a server's process tree from ``/proc``;
* :mod:`.runner` — ``orsbench bench``: mock, SDK twin and floor alternating in one run;
* :mod:`.locust_run` — one headless Locust process against a URL, its episode rate;
* :mod:`.shapes` — ramp to the knee and GRPO burst–idle (``--shape``);
* :mod:`.thresholds` — ``--fail-under METRIC=VALUE`` for CI;
* :mod:`.hold` — the held-sessions driver: N sessions each in one long streaming call at once;
* :mod:`.sessions` — ``orsbench bench --sessions N``: memory and CPU per held session, per server;
* :mod:`.pinghold` / :mod:`.pinged` — held sessions on any environment: open, pinged at the reference cadence;
* :mod:`.target` — which URL a load run may target (loopback only) and its server's PID;
* :mod:`.remote` — ``orsbench bench --url``: episodes/s on a server orsbench did not start.

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
