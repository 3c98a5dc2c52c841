"""Client targets: the ORS clients orsbench plays episodes with, one module each, in one registry.

A client target is a :class:`ClientTarget` registered in :data:`CLIENT_TARGETS`
by the module that drives it (``orsbench/clients/targets/<name>.py``)::

    from orsbench.clients.targets import ClientTarget, register

    def play(episode: AdapterEpisode) -> None: ...          # the episode, the way the client's users write it

    register(ClientTarget("mine", package="my-client", title="my client", play=play, modules=("my_client",)))

and the module's name added to :data:`MODULES`. Nothing else changes: the
adapter (``python -m orsbench.clients.adapter NAME``), ``orsbench matrix``,
``matrix --url`` and the conformance suite all list targets from the registry.

A target's ``play`` drives its client through one :class:`~orsbench.clients.adapter.AdapterEpisode`
(where the server is, which task, the script's calls, the secrets) and
records what the client returned for each call; the adapter turns that into the
JSON-lines contract of ``docs/clients.md``, so a built-in target is graded exactly
like any user's adapter command.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orsbench.extras import installed
from orsbench.registry import Registry

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

__all__ = ["CLIENT_TARGETS", "MODULES", "ClientTarget", "register"]

#: The modules that register client targets, in listing order (a new target: one module, one line here).
MODULES = (
    "orsbench.clients.targets.openreward_sdk",
    "orsbench.clients.targets.ors_sdk",
    "orsbench.clients.targets.trl_spec",
    "orsbench.clients.targets.inspect_eval",
    "orsbench.clients.targets.firehorse_mcp",
)


@dataclass(frozen=True)
class ClientTarget:
    """One ORS client orsbench can play an episode with, and the facts the matrix needs about it."""

    name: str
    #: The distribution whose version the reports name.
    package: str
    title: str
    #: Plays one episode (in the adapter's process), recording each call's outcome on the episode.
    play: Callable[[AdapterEpisode], None]
    #: Top-level modules the client needs: imported before any fork (so children skip the import), and
    #: what :attr:`installed` looks for.
    modules: tuple[str, ...] = ()
    #: The orsbench extra that installs it (named in the message when it is missing).
    extra: str = "conformance"
    #: Seconds added to every deadline for the client's own start-up (an Inspect eval's set-up).
    startup_s: float = 0.0
    #: Episodes of this client that may play at once on a 2-core machine without starving each other.
    concurrency: int = 16
    #: It trains on the episodes it plays (a trainer's rollouts), so an episode without a reward is no use to it.
    trains: bool = False

    @property
    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    @property
    def installed(self) -> bool:
        """Whether every module the client needs can be imported here."""
        return all(installed(module) for module in self.modules)


CLIENT_TARGETS: Registry[ClientTarget] = Registry("client target", modules=MODULES)
register = CLIENT_TARGETS.register
