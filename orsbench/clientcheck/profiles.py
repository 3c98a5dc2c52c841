"""The fault profiles every client plays on the mock engine, read from the profiles' own facts.

Each profile of :mod:`orsbench.servers.faults.profiles` is served on the
``sparse-reward`` scenario (a multi-call episode with one reward at the end).
What a profile means for a client — what a correct client does under it, its
timings scaled down through :class:`~orsbench.config.ServerConfig` (no client
is patched, so what a cell shows is what a user of that client gets), its
deadline, whether it is left out and why — is on the profile's registry entry
(:class:`~orsbench.servers.faults.ClientFacts`, ``Fault.client``). A profile
registered later is played with no edit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orsbench.clientcheck.episodes import Script, going_on_after_finished, script
from orsbench.config import ServerConfig
from orsbench.servers.faults import FAULTS, ClientFacts

SCENARIO = "sparse-reward"
#: The baseline: the profile's scenario with no fault (``--profiles none``).
BASELINE = "none"


@dataclass(frozen=True)
class Profile:
    """One fault profile as a client episode plays it (``none``: the baseline, no fault)."""

    name: str
    facts: ClientFacts = ClientFacts()
    #: Whether the server runs the fault of this name (``False``: the baseline, or trouble on the client's side).
    fault: bool = True
    #: Whether the client's environment carries the openreward SDK's URL variables (``OPENREWARD_API_URL``,
    #: ``OPENREWARD_SESSION_URL``); ``False``: it is given the server's URL alone (``ORSBENCH_URL``).
    sdk_urls: bool = True
    #: What the profile does, where no fault of its name says it (a profile on the client's side).
    summary: str = ""
    #: Times the client plays the script in its one process (``ORSBENCH_RUNS``; §13.16), each run a session of its own.
    runs: int = 1
    #: Calls the script makes after its finishing call (§13.14): a correct client never sends them.
    calls_after_finished: int = 0
    #: The scripted model makes the first call after the finishing one in the finishing call's own reply (§13.14).
    finishing_reply_goes_on: bool = False

    def script(self) -> Script:
        """The episode a client plays under this profile: the scenario's, going on past ``finished`` where it says so."""
        base = script(self.scenario)
        if not self.calls_after_finished:
            return base
        return going_on_after_finished(base, calls=self.calls_after_finished, same_reply=self.finishing_reply_goes_on)

    @property
    def scenario(self) -> str:
        """The scenario it is played on: the profile's own (``second-setup-fails``: ``pick``), else :data:`SCENARIO`."""
        return self.facts.scenario or SCENARIO

    @property
    def episodes(self) -> int:
        """Episodes one client run plays under it (``ORSBENCH_EPISODES``, §13.15)."""
        return self.facts.episodes

    @property
    def knobs(self) -> tuple[tuple[str, Any], ...]:
        return self.facts.knobs

    @property
    def deadline(self) -> float:
        """The client is killed after this many seconds (a hang)."""
        return self.facts.deadline_s

    @property
    def terminate_on(self) -> str | None:
        """The server counter whose first move is when orsbench sends the client SIGTERM (``None``: never)."""
        return f"fault {self.name}" if self.facts.terminate and self.fault else None

    @property
    def per_client(self) -> bool:
        """A fresh server per client, so a seeded fault stream starts afresh for each."""
        return self.facts.per_client

    @property
    def expects_error(self) -> bool:
        """Whether a correct client reports an error under it, rather than riding it out."""
        return self.facts.expect == "error"

    def config(self) -> ServerConfig:
        """The server configuration, with the request log the client checks grade from."""
        return ServerConfig(faults=(self.name,) if self.fault else (), request_log=True, **dict(self.knobs))


def left_out() -> dict[str, str]:
    """Profiles no client plays, and why (from each profile's ``left_out``)."""
    return {f.name: f.client.left_out for f in FAULTS.values() if f.kind == "profile" and f.client.left_out}


#: Trouble on the client's side, played on the baseline server: a client must work with what a user gives it.
CLIENT_SIDE: tuple[Profile, ...] = (
    Profile(
        "url-only",
        fault=False,
        sdk_urls=False,
        summary="the client is given the server's URL alone (no OPENREWARD_API_URL / OPENREWARD_SESSION_URL): "
        "a client that takes a base URL must send everything there",
    ),
    Profile(
        "script-past-finished",
        fault=False,
        calls_after_finished=2,
        summary="the script goes on after the call that returns finished: true (reveal, then submit once more): "
        "a correct client stops at finished and never sends them",
    ),
    Profile(
        "finish-mid-reply",
        fault=False,
        calls_after_finished=1,
        finishing_reply_goes_on=True,
        summary="the scripted model's reply that carries the finishing call carries one more call after it: "
        "an agent harness must not run the call that follows the finishing one",
    ),
    Profile(
        "two-runs",
        ClientFacts(deadline_s=2 * ClientFacts.deadline_s),
        fault=False,
        runs=2,
        summary="the client plays the script twice in one process (ORSBENCH_RUNS=2): the server must see two "
        "sessions, each created, played and deleted, the second as correct as the first (no cached session, "
        "closed connection pool or finished state carried over)",
    ),
)


def profiles() -> list[Profile]:
    """``none`` (the baseline), every registered fault profile a client plays in registry order, then the client-side ones."""
    played = [Profile(f.name, f.client) for f in FAULTS.values() if f.kind == "profile" and f.client.left_out is None]
    return [Profile(BASELINE, fault=False), *played, *CLIENT_SIDE]


def profile(name: str) -> Profile:
    """The profile called ``name`` (``none``: the baseline)."""
    return next(p for p in profiles() if p.name == name)
