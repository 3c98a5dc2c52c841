"""Client targets: the ORS clients orsbench plays episodes with, one module each, in one registry.

A client target is a :class:`ClientTarget` registered in :data:`CLIENT_TARGETS`
by the module that drives it (``orsbench/clients/targets/<name>.py``)::

    from orsbench.clients.targets import ClientTarget, register

    def play(episode: AdapterEpisode) -> None: ...          # the episode, the way the client's users write it

    register(ClientTarget("mine", package="my-client", title="my client", play=play, modules=("my_client",)))

and the module's name added to :data:`MODULES`. A client that cannot be imported here (it needs another Python)
is a *command* target instead: ``command=Command(venv, "script.py")`` (:mod:`orsbench.clients.interpreters`)
runs a command adapter of ``orsbench/clients/commands/`` in its own virtual environment. Each target carries
its :class:`~orsbench.clients.consumers.Consumer` profile: what its user makes of an episode. Nothing else changes: the
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

from orsbench.clients.consumers import Consumer
from orsbench.extras import installed
from orsbench.registry import Registry, warm_modules

if TYPE_CHECKING:
    from orsbench.clients.interpreters import Command
    from orsbench.clients.transcript import AdapterEpisode

__all__ = [
    "CLIENT_TARGETS", "CLIENT_VARIANTS", "ELSEWHERE", "MODULES", "VARIANT_MODULES", "WARM_STARTUP_S", "ClientTarget",
    "playable", "playable_names", "register", "register_variant",
]  # fmt: skip

#: Seconds of start-up a client forked warm gets at most (:meth:`ClientTarget.startup_allowance`): its imports are
#: done in the parent, what is left is its own setting-up (an eval's task and model, a fork server's fork) — an
#: Inspect episode forked warm plays in 2-8 s on a busy 2-core machine, the others in less.
WARM_STARTUP_S = 10.0

#: The modules that register client targets, in listing order (a new target: one module, one line here).
MODULES = (
    "orsbench.clients.targets.openreward_sdk",
    "orsbench.clients.targets.ors_sdk",
    "orsbench.clients.targets.trl_spec",
    "orsbench.clients.targets.inspect_eval",
    "orsbench.clients.targets.firehorse",
    "orsbench.clients.targets.platoon",
    "orsbench.clients.targets.benchflow",
)

#: The modules that register client *variants*: other entry points of a registered client (an agent of its own, an MCP
#: bridge), each played by the adapter and graded by ``check-client`` like a target, but no row of the matrix.
VARIANT_MODULES = (
    "orsbench.clients.targets.platoon_react",
    "orsbench.clients.targets.firehorse_mcp",
    "orsbench.clients.targets.tasksets",
)


@dataclass(frozen=True)
class ClientTarget:
    """One ORS client orsbench can play an episode with, and the facts the matrix needs about it."""

    name: str
    #: The distribution whose version the reports name.
    package: str
    title: str
    #: Plays one episode (in the adapter's process), recording each call's outcome on the episode
    #: (a command target's: runs its command, :meth:`Command.play`).
    play: Callable[[AdapterEpisode], None] | None = None
    #: Top-level modules the client needs: imported before any fork (so children skip the import), and
    #: what :attr:`installed` looks for.
    modules: tuple[str, ...] = ()
    #: Modules the client imports on its way through an episode (its provider, its log writer): imported by
    #: :meth:`preload` too where they can be, so each forked episode skips them; not part of what "installed" means.
    warm: tuple[str, ...] = ()
    #: Run by :meth:`preload` after the imports: fills a process-wide cache the client would otherwise fill again in
    #: every forked episode (a best effort: where the client's internals moved, each episode fills it itself).
    warm_up: Callable[[], None] | None = None
    #: The orsbench extra that installs it (named in the message when it is missing).
    extra: str = "conformance"
    #: Seconds added to every deadline for the client's own start-up from cold (an Inspect eval's imports and
    #: set-up, a fresh Python's ``import openreward``); a client forked warm gets at most :data:`WARM_STARTUP_S`.
    startup_s: float = 0.0
    #: Episodes of this client that may play at once on a 2-core machine without starving each other.
    concurrency: int = 16
    #: An agent harness: it plays the script through a model (the scripted model, ``ORSBENCH_MODEL_URL``),
    #: so each of its episodes registers the script with one. The others never start a scripted model.
    takes_model: bool = False
    #: It trains on the episodes it plays (a trainer's rollouts), so an episode without a reward is no use to it.
    trains: bool = False
    #: What its user makes of an episode (reward convention, accepted range, images, failures).
    consumer: Consumer = Consumer("per-call")
    #: The discovery routes (docs/protocol.md §2.1) its code path reads on the way to an episode — a dataset, the
    #: shared tool list, the environments — as the request log of its episode shows them; ``()``: none.
    listings: tuple[str, ...] = ()
    #: A client in another Python: the command adapter that plays it, in its virtual environment.
    command: Command | None = None
    #: Its ``play`` plays all of ``ORSBENCH_EPISODES`` itself, through the client's own loop over episodes (an eval's
    #: samples, a run's trials), and writes the client's own aggregate; otherwise the adapter plays them one by one
    #: (a command target loops in its own process) and the client has no aggregate of its own (§13.15).
    plays_episodes: bool = False
    #: A variant's client (the :data:`CLIENT_TARGETS` name it is another entry point of); ``""``: a target.
    variant_of: str = ""

    def __post_init__(self) -> None:
        if self.play is None:
            if self.command is None:
                raise ValueError(f"client target {self.name!r} needs a play function or a command")
            object.__setattr__(self, "play", self.command.play)

    @property
    def version(self) -> str:
        if self.command is not None:
            return self.command.venv.version_of(self.package)
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    @property
    def installed(self) -> bool:
        """Whether every module the client needs can be imported here (a command target: its environment is built)."""
        if self.command is not None:
            return self.command.venv.ready
        return all(installed(module) for module in self.modules)

    @property
    def install_hint(self) -> str:
        """What to run to install it (or why it cannot be, here)."""
        if self.command is not None:
            return self.command.venv.missing() or "installed"
        return f'pip install "orsbench[{self.extra}]"'

    def preload(self) -> None:
        """Make its episodes start fast in children forked from this process: import its modules, or warm its command."""
        if self.command is not None:
            if self.command.venv.ready:
                self.command.warm()
            return
        for module in self.modules:
            importlib.import_module(module)
        warm_modules(self.warm)  # a dependency's internals may move: each episode imports what it needs itself
        if self.warm_up is not None:
            self.warm_up()
        _PRELOADED.add(self.name)

    @property
    def warmed(self) -> bool:
        """Whether its episodes start warm here: :meth:`preload` ran in this process (or its fork server runs)."""
        if self.command is not None:
            return self.command.warmed
        return self.name in _PRELOADED

    def startup_allowance(self) -> float:
        """Seconds a deadline adds for its start-up: :attr:`startup_s` from cold, at most :data:`WARM_STARTUP_S` warm.

        Why not always the cold figure: a client that hangs is waited for to its deadline, and the cold allowance
        (benchflow's 30 s, a fresh 3.12 Python importing openreward) made each of its hangs in the matrix wait 36 s
        where a warm fork has nothing left to import.
        """
        return min(self.startup_s, WARM_STARTUP_S) if self.warmed else self.startup_s


#: The targets :meth:`ClientTarget.preload` made warm in this process (forked children inherit it).
_PRELOADED: set[str] = set()

CLIENT_TARGETS: Registry[ClientTarget] = Registry("client target", modules=MODULES)
register = CLIENT_TARGETS.register

#: Client variants (:data:`VARIANT_MODULES`). Why a registry of their own: the matrix, ``clients URL`` and the
#: conformance suite predict every target's row from the pinned defects, cell by cell; a variant is graded case by
#: case (``python -m orsbench.clients.adapter NAME`` under ``check-client``) and its defects pinned by its own tests.
CLIENT_VARIANTS: Registry[ClientTarget] = Registry("client variant", modules=VARIANT_MODULES)
register_variant = CLIENT_VARIANTS.register


def playable(name: str) -> ClientTarget:
    """The target or variant called ``name`` (what ``python -m orsbench.clients.adapter NAME`` plays)."""
    return CLIENT_VARIANTS.get(name) if name in CLIENT_VARIANTS else CLIENT_TARGETS.get(name)


def playable_names() -> list[str]:
    """Every name the adapter plays: the targets, then the variants."""
    return [*CLIENT_TARGETS.names(), *CLIENT_VARIANTS.names()]


#: Trainers and harnesses said to consume ORS whose ORS code is not a package orsbench can install, and why
#: (docs/compatibility.md lists them): looked up on the package index (``pip download --no-deps``) and read.
ELSEWHERE: tuple[tuple[str, str], ...] = (
    (
        "SkyRL",
        "its PyPI packages (skyrl 0.4.0, skyrl-train 0.3.1, skyrl-gym 0.4.0) hold no ORS client; its ORS integration "
        "lives only in its repository's examples, which no package installs",
    ),
    (
        "ROLL",
        "not on the package index under its name (`roll` on PyPI is another project, a web framework)",
    ),
    (
        "marin",
        "its PyPI packages (marin-core, marin-rolloutengine, marin-rigging, marin-taskcompendium) hold no ORS or "
        "openreward code",
    ),
)
