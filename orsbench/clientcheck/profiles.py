"""The fault profiles every client plays on the mock engine, with the knobs that keep each short.

Each profile of :mod:`orsbench.servers.faults.profiles` is served on the
``sparse-reward`` scenario (a multi-call episode with one reward at the end).
Timings are scaled down through :class:`~orsbench.config.ServerConfig` only —
no client is patched — so what a cell shows is what a user of that client gets.
A profile registered later is played with the engine's defaults and the
default deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orsbench.config import ServerConfig
from orsbench.servers.faults import FAULTS

SCENARIO = "sparse-reward"
#: Profiles where the right outcome is a clear failure, not survival.
FAIL_CLEARLY = frozenset({"setup-failure", "tool-raises", "restart", "stream-no-end", "credits-402", "cut-before-task-id"})
DEADLINE_S = 20.0


@dataclass(frozen=True)
class Profile:
    name: str
    knobs: tuple[tuple[str, Any], ...] = ()
    #: The client is killed after this many seconds (a hang).
    deadline: float = DEADLINE_S
    #: A fresh server per client, so a seeded fault stream starts afresh for each.
    per_client: bool = False
    #: Whether the server runs the fault of this name (``False``: the baseline, or trouble on the client's side).
    fault: bool = True
    #: Whether the client's environment carries the openreward SDK's URL variables (``OPENREWARD_API_URL``,
    #: ``OPENREWARD_SESSION_URL``); ``False``: it is given the server's URL alone (``ORSBENCH_URL``).
    sdk_urls: bool = True
    #: What the profile does, where no fault of its name says it.
    summary: str = ""

    def config(self) -> ServerConfig:
        """The server configuration, with the request log the client checks grade from."""
        return ServerConfig(faults=(self.name,) if self.fault else (), request_log=True, **dict(self.knobs))


#: Scaled knobs per profile (seed 3: the first request of the episode is refused).
_KNOBS: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("none", fault=False),
        Profile("flaky-5xx", (("seed", 3),), per_client=True),
        Profile("rate-limit", (("seed", 3),), per_client=True),
        Profile("slow-setup", (("setup_delay", 1.0),)),
        Profile("stream-stall", (("ping_interval", 0.25),)),
        Profile("stream-no-end", deadline=6.0),
    )
}

#: Profiles left out, and why.
LEFT_OUT: dict[str, str] = {
    "short-ttl": "it needs an idle gap longer than the TTL inside the episode; conformance/test_client_robustness.py plays it for the openreward SDK and TRL",
}


#: Trouble on the client's side, played on the baseline server: a client must work with what a user gives it.
CLIENT_SIDE: tuple[Profile, ...] = (
    Profile(
        "url-only",
        fault=False,
        sdk_urls=False,
        summary="the client is given the server's URL alone (no OPENREWARD_API_URL / OPENREWARD_SESSION_URL): "
        "a client that takes a base URL must send everything there",
    ),
)


def profiles() -> list[Profile]:
    """``none`` (the baseline), every registered fault profile in registry order, then the client-side ones."""
    names = ["none", *(f.name for f in FAULTS.values() if f.kind == "profile")]
    return [_KNOBS.get(name, Profile(name)) for name in names if name not in LEFT_OUT] + list(CLIENT_SIDE)
