"""The server implementations orsbench can serve a scenario with: one record each, one registry.

An :class:`Implementation` says everything the rest of orsbench needs to know
about a way of serving scenarios — how to build its ASGI app, which extra it
needs, whether it speaks ORS at all, whether it can hold sessions, whether
fault profiles apply to it, which suites and benchmarks include it — so the
CLI choices, ``check --scenario``, ``bench``, ``bench --sessions``, the
conformance suite and the README's list of differences all read the same
record instead of each keeping a tuple of names.

A new implementation is one module (its ``build_app(scenarios, config)``) plus
one registration here::

    IMPLEMENTATIONS.register(Implementation("mine", "my server", build=_mine, extra="mine"))

Building is lazy (each ``build`` imports its module when called), so listing
the implementations — argparse choices on every start — imports no server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.extras import require
from orsbench.registry import Registry

if TYPE_CHECKING:
    from orsbench.scenarios import Scenario
    from orsbench.servers.engine import Engine
    from orsbench.servers.differences import Difference

#: ``build(scenarios, config) -> ASGI app``.
BuildFn = Callable[["Sequence[Scenario]", ServerConfig], Any]


@dataclass(frozen=True)
class Implementation:
    """One way of serving scenarios, and the facts every front end asks of it."""

    name: str
    #: What it is, for people (``--impl`` help, progress lines).
    summary: str
    #: Builds the ASGI app serving the scenarios with the config (imports its module lazily).
    build: BuildFn
    #: The ``orsbench[extra]`` it needs (``None``: the core install serves it).
    extra: str | None = None
    #: An ORS server (``check --scenario``, tests and the client matrix may serve it); the bench floor is not.
    speaks_ors: bool = True
    #: Can hold a session open across a long streaming call (``bench --sessions`` measures it).
    holds_sessions: bool = True
    #: Every fault (``--fault``) applies to it: faults change the mock engine through its seam. Any other
    #: ORS server takes the faults told at the HTTP level (``Fault.wrap``), wrapped around its app.
    takes_faults: bool = False
    #: The other project's server it runs the scenario through (a twin); empty for orsbench's own.
    #: A twin's known differences from the reference are listed in the README.
    runs: str = ""
    #: Measured by ``orsbench bench`` when no ``--impl`` is given.
    benched: bool = True
    #: The conformance suite serves every generic scenario on it.
    in_suite: bool = False

    def build_app(self, scenarios: Sequence[Scenario], config: ServerConfig) -> Any:
        """The ASGI app; ``ValueError`` for a config it cannot honour, :class:`MissingExtra` without its extra."""
        served = [s for scenario in scenarios for s in scenario.served()]  # companions (two-envs) beside it, everywhere
        if config.faults and not self.takes_faults:
            # Another server takes the faults told at the HTTP level: they wrap its app, as they wrap a proxied one.
            from orsbench.servers.faults import FAULTS, wrap_app

            engine_only = [name for name in config.faults if FAULTS.get(name).wrap is None]
            if engine_only or not self.speaks_ors:
                takers = ", ".join(i.name for i in IMPLEMENTATIONS.select(lambda i: i.takes_faults))
                raise ValueError(
                    f"fault {engine_only[0] if engine_only else config.faults[0]!r} changes the mock engine itself "
                    f"(--impl {takers}); around {self.name} only faults told at the HTTP level apply"
                )
            self.require()
            app = self.build(served, config.replace(faults=()))
            return wrap_app(app, config.faults, config.seed, ping_interval=config.ping_interval)
        self.require()
        return self.build(served, config)

    def require(self, feature: str | None = None) -> None:
        """Raise :class:`~orsbench.extras.MissingExtra` naming the extra when it is not installed."""
        if self.extra is not None:
            require(self.extra, feature or f"--impl {self.name} ({self.summary})")

    @property
    def differences(self) -> tuple[Difference, ...]:
        """Its known differences from the reference server (the data in :mod:`orsbench.servers.differences`)."""
        from orsbench.servers.differences import DIFFERENCES

        return DIFFERENCES.get(self.name, ())


IMPLEMENTATIONS: Registry[Implementation] = Registry("implementation", modules=("orsbench.servers.implementations",))


def ors_servers() -> list[str]:
    """The implementations that are ORS servers, in registry order."""
    return [i.name for i in IMPLEMENTATIONS.select(lambda i: i.speaks_ors)]


def differences_markdown() -> str:
    """The README block: one line per known difference of each twin (an implementation that ``runs`` another server)."""
    twins = IMPLEMENTATIONS.select(lambda i: bool(i.runs))
    return "\n".join(f"- `{impl.name}` `{d.id}`: {d.summary}" for impl in twins for d in impl.differences)


def benched_by_default() -> tuple[str, ...]:
    """What ``orsbench bench`` measures when no ``--impl`` is given."""
    return tuple(i.name for i in IMPLEMENTATIONS.select(lambda i: i.benched))


def holding_sessions() -> tuple[str, ...]:
    """Every implementation that can hold a session (what ``bench --sessions`` measures by default)."""
    return tuple(i.name for i in IMPLEMENTATIONS.select(lambda i: i.holds_sessions))


def in_suite() -> tuple[str, ...]:
    """The implementations the conformance suite serves every generic scenario on."""
    return tuple(i.name for i in IMPLEMENTATIONS.select(lambda i: i.in_suite))


# -- the built-in implementations --------------------------------------------------------------------
def _mock_engine(scenarios: Sequence[Scenario], config: ServerConfig) -> tuple[Engine, Any]:
    from orsbench.servers.engine import Engine
    from orsbench.servers.faults import apply_faults
    from orsbench.servers.replay import RecordedAnswers, answering

    engine = Engine(list(scenarios), config)
    app = apply_faults(engine, config.faults, config.seed) if config.faults else engine
    return engine, (RecordedAnswers(app, list(scenarios)) if answering(list(scenarios)) else app)


def mock_engine(scenarios: Sequence[Scenario], config: ServerConfig) -> tuple[Engine, Any]:
    """The mock engine serving ``scenarios`` (their companions beside them), and the app that serves it.

    What ``build_app`` of ``mock`` builds, with the engine itself handed back too: a process that hosts
    several engines at once (``check-client --hosted``) reads each one's sessions and adds its
    :class:`~orsbench.servers.engine.Hooks` through the engine's public seam.
    """
    return _mock_engine([served for scenario in scenarios for served in scenario.served()], config)


def _mock(scenarios: Sequence[Scenario], config: ServerConfig) -> Any:
    return _mock_engine(scenarios, config)[1]


def _sdk(scenarios: Sequence[Scenario], config: ServerConfig) -> Any:
    os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")  # the SDK would ask PyPI for updates
    from orsbench.servers.sdk_twin import build_app

    return build_app(list(scenarios), config)


def _ors_sdk(scenarios: Sequence[Scenario], config: ServerConfig) -> Any:
    from orsbench.servers.ors_sdk_twin import build_app

    return build_app(list(scenarios), config)


def _floor(scenarios: Sequence[Scenario], config: ServerConfig) -> Any:
    from orsbench.servers.floor import FloorApp

    return FloorApp(list(scenarios))


IMPLEMENTATIONS.register(
    Implementation("mock", "the mock engine, orsbench's own fast configurable server", _mock, takes_faults=True, in_suite=True)
)
IMPLEMENTATIONS.register(
    Implementation("sdk", "the openreward SDK twin", _sdk, extra="sdk", runs="openreward's Server", in_suite=True)
)
IMPLEMENTATIONS.register(
    Implementation("ors-sdk", "the ors-sdk twin", _ors_sdk, extra="ors-sdk", runs="ors-sdk's Server", benched=False)
)
#: Not an ORS server: it answers a load episode's requests with constants (:mod:`orsbench.servers.floor`),
#: the baseline ``orsbench bench`` measures against.
IMPLEMENTATIONS.register(
    Implementation(
        "floor", "a constant-answer baseline for `orsbench bench`; not a real server", _floor, speaks_ors=False, holds_sessions=False
    )
)
