"""Named faults for ORS servers, selectable with ``--fault NAME[,NAME]``.

Two families share one registry:

* **violations** (:mod:`.violations`) each break exactly one ORS rule, so the
  checker's own tests can show that ``orsbench check`` fails exactly the check
  naming that rule;
* **profiles** (:mod:`.profiles`) reproduce real-world trouble — latency,
  5xx/429 bursts, dropped or stalled streams, restarts — that a robust client
  must survive.

Two shapes of fault:

* an **HTTP fault** is a plain ASGI middleware (:mod:`.middleware`) that wraps
  *any* ORS ASGI app — the mock engine, the SDK twin, a reverse proxy in front
  of a real server. It sees only the ASGI scope/receive/send, the protocol
  constants, SSE framing and its seeded ``random.Random``. Apply those alone
  with :func:`wrap_app`.
* an **engine fault** changes what the mock :class:`~orsbench.servers.engine.Engine`
  itself does, through its public seam only (route table, :class:`Hooks`,
  config) — see :mod:`.hooks`. :func:`apply_faults` applies both shapes.

Faults compose in the order given and are deterministic given the seed: the
fault at position ``i`` gets ``random.Random(seed * 1000 + i)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from orsbench.registry import Registry
from orsbench.servers.http import ASGIApp

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine

ApplyFn = Callable[["Engine", Any, random.Random], Any]


@dataclass(frozen=True)
class FaultContext:
    """What an HTTP fault may know of the server it wraps (nothing engine-specific)."""

    #: The server's keep-alive interval (stream-stall stays silent for a multiple of it).
    ping_interval: float = 10.0
    #: ``on_fault(name, status)`` is told each time a fault acts (``status``: the answer it
    #: gave, or ``None``); the engine counts these in ``/_orsbench/stats``.
    on_fault: Callable[[str, "int | None"], None] | None = None

    def count(self, name: str, status: int | None = None) -> None:
        if self.on_fault is not None:
            self.on_fault(name, status)


WrapFn = Callable[[ASGIApp, random.Random, FaultContext], ASGIApp]
Knobs = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ClientFacts:
    """What a fault profile means for a client played under it (the client matrix, check-client's cases).

    A profile registered without any is played with the engine's defaults, ridden out by a correct
    client, within :data:`CLIENT_DEADLINE_S`.
    """

    #: What a correct client does under it: ride it out and finish (``"finish"``), or stop with an error it
    #: reports (``"error"``: the profile is trouble no client can or should ride out).
    expect: Literal["finish", "error"] = "finish"
    #: :class:`~orsbench.config.ServerConfig` fields that scale its timings down for a client episode
    #: (``(("setup_delay", 1.0),)``), or seed it so the episode's first request is refused.
    knobs: Knobs = ()
    #: Seconds a client already started (a built-in one, forked ready) gets before it counts as hanging.
    deadline_s: float = 20.0
    #: A fresh server per client: a seeded fault stream then starts afresh for each, and where every episode waits
    #: seconds (a slow setup, a stalled stream) the clients wait side by side — on one server, client after client,
    #: seven clients' waits made the matrix's longest lane (25-27 s).
    per_client: bool = False
    #: Its refusals carry ``Retry-After`` (a client's retries are timed against it).
    retry_after: bool = False
    #: It refuses ``POST /create_session``: no ``/create`` ever reaches the server.
    refuses_session: bool = False
    #: It refuses the discovery routes (``/list_environments``, ``/{env}/tools``, ``/tasks``, ...: §2.1) and
    #: nothing else: a client that reads one must report the refusal; one that reads none plays its episode.
    refuses_discovery: bool = False
    #: Why no client is played under it (``None``: every client is).
    left_out: str | None = None
    #: A test aid for the server side, not trouble a client meets: check-client has no case for it.
    test_aid: bool = False
    #: A session's setup fails under it (a sticky 500 on its session-bound requests until ``/delete``).
    fails_setup: bool = False
    #: Episodes one client run plays under it (``ORSBENCH_EPISODES``, §13.15: tasks index..index+N-1, then its aggregate).
    episodes: int = 1
    #: The scenario it is played on, where not the client matrix's own (``sparse-reward``).
    scenario: str | None = None
    #: orsbench ends the client mid-episode: SIGTERM once this fault has acted (its counter in ``/_orsbench/stats``
    #: moved: the call it holds is in flight), SIGKILL after a grace period; what the server is left with is graded.
    terminate: bool = False


#: Seconds a client gets under a profile that says nothing of its own.
CLIENT_DEADLINE_S = ClientFacts.deadline_s


@dataclass(frozen=True)
class Fault:
    name: str
    summary: str
    kind: Literal["violation", "profile"]
    #: ``apply(engine, app, rng) -> app``: change ``engine`` through its seam and/or wrap ``app``.
    apply: ApplyFn
    #: For HTTP faults: ``wrap(app, rng, context) -> app``, usable around any ORS ASGI app.
    wrap: WrapFn | None = None
    #: For a profile: what a correct client does under it, and its timings scaled for a client episode.
    client: ClientFacts = ClientFacts()


#: The modules that register faults (see :mod:`orsbench.registry`).
MODULES = (
    "orsbench.servers.faults.violations",
    "orsbench.servers.faults.isolation",
    "orsbench.servers.faults.router",
    "orsbench.servers.faults.profiles",
    "orsbench.servers.faults.tool_defects",
)
#: Every named fault, both families, loaded from :data:`MODULES` on first use.
FAULTS: Registry[Fault] = Registry("fault", modules=MODULES)


def fault(
    name: str,
    summary: str,
    kind: Literal["violation", "profile"],
    *,
    wrap: WrapFn | None = None,
    client: ClientFacts = ClientFacts(),
) -> Callable[[ApplyFn], ApplyFn]:
    """Register an engine fault ``apply(engine, app, rng) -> app`` under ``name`` (decorator).

    ``wrap``, if given, is the same fault told at the HTTP level, for :func:`wrap_app`
    (the engine keeps its own, more faithful ``apply``). ``client``: a profile's facts for client episodes.
    """

    def decorate(fn: ApplyFn) -> ApplyFn:
        FAULTS.register(Fault(name, summary, kind, fn, wrap, client), origin=fn.__module__)
        return fn

    return decorate


def http_fault(
    name: str, summary: str, kind: Literal["violation", "profile"], *, client: ClientFacts = ClientFacts()
) -> Callable[[WrapFn], WrapFn]:
    """Register an HTTP fault ``wrap(app, rng, context) -> app`` under ``name`` (decorator).

    On the engine it is applied with a context that counts into the engine's stats. ``client``: a
    profile's facts for client episodes.
    """

    def decorate(fn: WrapFn) -> WrapFn:
        def apply(engine: "Engine", app: Any, rng: random.Random) -> Any:
            return fn(app, rng, engine_context(engine))

        FAULTS.register(Fault(name, summary, kind, apply, fn, client), origin=fn.__module__)
        return fn

    return decorate


def engine_context(engine: "Engine") -> FaultContext:
    """The context HTTP faults get on the engine: its ping interval; faults counted in its stats."""

    def on_fault(name: str, status: int | None) -> None:
        engine.stats.requests[f"fault {name}"] += 1
        if status is not None:
            engine.stats.statuses[status] += 1

    return FaultContext(ping_interval=engine.config.ping_interval, on_fault=on_fault)


def _lookup(names: tuple[str, ...]) -> list[Fault]:
    return [FAULTS.get(n) for n in names]  # UnknownName (a ValueError) lists the known faults


def apply_faults(engine: "Engine", names: tuple[str, ...], seed: int) -> Any:
    """Apply the named faults to ``engine``; returns the ASGI app to serve."""
    app: Any = engine
    for index, entry in enumerate(_lookup(names)):
        app = entry.apply(engine, app, random.Random(seed * 1000 + index))
    return app


def wrap_app(
    app: ASGIApp,
    names: tuple[str, ...],
    seed: int,
    *,
    ping_interval: float = 10.0,
    on_fault: Callable[[str, "int | None"], None] | None = None,
) -> ASGIApp:
    """Wrap any ORS ASGI app (a proxy, the SDK twin) in the named HTTP faults.

    Seeded exactly as :func:`apply_faults` seeds them, so the same names and seed
    give the same fault schedule on the engine and around any other server.
    Engine faults are refused with a :class:`ValueError` naming them.
    """
    entries = _lookup(names)
    engine_only = [e.name for e in entries if e.wrap is None]
    if engine_only:
        http = sorted(n for n, e in FAULTS.items() if e.wrap is not None)
        raise ValueError(
            f"fault {engine_only[0]!r} changes the mock engine itself and cannot wrap another server; "
            f"HTTP faults: {', '.join(http)}"
        )
    context = FaultContext(ping_interval=ping_interval, on_fault=on_fault)
    for index, entry in enumerate(entries):
        assert entry.wrap is not None
        app = entry.wrap(app, random.Random(seed * 1000 + index), context)
    return app


def http_fault_names() -> list[str]:
    """Every fault that can wrap any ORS ASGI app (see :func:`wrap_app`)."""
    return sorted(n for n, e in FAULTS.items() if e.wrap is not None)
