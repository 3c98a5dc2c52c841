"""What every room of the engine shares: its state, the hook points, ids and the ok:false answers.

Why a state class: the engine is one object (one route table, one session map, one
stats record on the hot path), written in several rooms — :mod:`.dataset`,
:mod:`.sessions`, :mod:`.calls` and :mod:`.routing` — each a mixin over
:class:`EngineState`. Attribute access stays one lookup on ``self`` (the load
harness measures this engine; an extra hop per request would show), and each
room can be read alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from random import getrandbits
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import orjson

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios.base import Scenario
from orsbench.servers.http import Request
from orsbench.servers.keepalive import KeepaliveClock
from orsbench.servers.state import Session, Stats, TaskRegistry

Outcome = tuple[str, str]
"""A tool call's result as the engine streams it: ``("end", result JSON)`` or ``("error", message)``."""
RootHandler = Callable[[Request], Awaitable[Any]]
EnvHandler = Callable[[Request, Scenario, str], Awaitable[Any]]

MESSAGE_BLOCK_TYPES = list(protocol.BLOCK_TYPES)


@dataclass
class Hooks:
    """Named points where a fault may change what the engine does, without touching its internals.

    Every list is empty on a faithful engine (each costs one truth test per use).
    Route handlers are changed through :meth:`Engine.wrap_route` and friends;
    these hooks reach what no route can: tool runs, session setup and the reaper.
    """

    #: ``before_tool(session, tool_name, tool_input)`` runs before a tool call is checked;
    #: an :data:`Outcome` it returns is the call's answer (the tool does not run).
    before_tool: list[Callable[[Session, str, dict[str, Any]], Outcome | None]] = field(default_factory=list)
    #: ``after_tool(session, tool_name, outcome)`` runs after a tool ran and its result was taken.
    after_tool: list[Callable[[Session, str, Outcome], None]] = field(default_factory=list)
    #: Replaces a session's setup work (``setup_delay`` then ``scenario.setup``); an exception it
    #: raises becomes the session's sticky setup error, as a scenario's own would.
    setup: Callable[[Session], Awaitable[None]] | None = None
    #: ``may_reap(session)``: the reaper deletes an idle session only if every one answers True.
    may_reap: list[Callable[[Session], bool]] = field(default_factory=list)
    #: ``tool_delay(session, tool_name)``: seconds a fresh tool call waits (keep-alives on its stream) before its
    #: tool runs — a long tool; any answer above 0 sends the call down the task path. Asked once per fresh call.
    tool_delay: list[Callable[[Session, str], float]] = field(default_factory=list)


class EngineState:
    """The attributes every room reads, set by :meth:`Engine.__init__ <.routing.Engine>`.

    The methods one room calls in another are declared here for readers and type
    checkers only; each is defined in the room named beside it.
    """

    config: ServerConfig
    scenarios: dict[str, Scenario]
    default_env: str
    sessions: dict[str, Session]
    tasks: TaskRegistry
    stats: Stats
    hooks: Hooks
    _started: float
    _reaper: asyncio.Task[None] | None
    _splits: dict[str, dict[str, Any]]
    _task_lists: dict[tuple[str, str], list[dict[str, Any]] | None]
    _tools_json: dict[str, bytes]
    _task_tools_json: dict[tuple[str, tuple[Any, ...]], bytes]
    _async_fns: dict[Any, bool]
    _keepalive: KeepaliveClock | None

    if TYPE_CHECKING:

        def keepalive_clock(self) -> KeepaliveClock: ...  # routing

        def _get_task(self, scenario: Scenario, split: str, index: int) -> dict[str, Any]: ...  # dataset

        async def _ready(self, request: Request) -> Session: ...  # sessions

        def _existing(self, request: Request) -> Session: ...  # sessions

        @staticmethod
        def _raise_setup_error(session: Session) -> None: ...  # sessions

        async def _delete(self, sid: str, *, reaped: bool = False) -> None: ...  # sessions



def uuid4_hex() -> str:
    """``uuid.uuid4().hex`` for ids, without a ``UUID`` object or a syscall per id.

    Same format and bits as ``uuid4`` (128 random bits, version 4, RFC variant),
    drawn from :mod:`random`, which is seeded from ``os.urandom`` and reseeded
    in a forked child. Session and task ids need to be unique, not secret.
    """
    return "%032x" % ((getrandbits(128) & _UUID4_CLEAR) | _UUID4_SET)


def uuid4_str() -> str:
    """``str(uuid.uuid4())``, the same way."""
    h = uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# uuid.UUID(version=4): clear the variant (2 bits) and version (4 bits), then set them.
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID4_SET = (0x8000 << 48) | (0x4000 << 64)




def tool_error(message: str, reason: str) -> str:
    """An ok:false tool answer with its §5 ``reason``."""
    return orjson.dumps({"ok": False, "error": message, "reason": reason}).decode()


def finished_error(name: str) -> str:
    """The ok:false answer to a tool call after the episode finished (reason ``episode_finished``)."""
    return tool_error(
        f"{name!r} was not run: the episode has finished (a tool returned finished=True), "
        "so no further tool calls are accepted.",
        protocol.REASON_EPISODE_FINISHED,
    )


def overrides(scenario: Scenario, method: str) -> bool:
    """Whether ``scenario`` implements ``method`` itself (else the engine skips or refuses it)."""
    return getattr(type(scenario), method) is not getattr(Scenario, method)
