"""One dummy of each extension point, for ``tests/test_architecture.py`` (never registered on import).

Each dummy is written exactly as ``docs/architecture.md`` says a real one is — a
scenario class, an :class:`~orsbench.servers.implementations.Implementation`
record around its own ASGI app, a :class:`~orsbench.checks.registry.Check`, a
:class:`~orsbench.servers.faults.Fault`, a CLI
:class:`~orsbench.cli.Subcommand` — and the tests add each with
``Registry.temporarily``, so the catalogue is untouched once they end.

Run as a script (``python tests/architecture_dummies.py PORT``) it is a server
command for the launcher: it registers the dummy scenario and the dummy
implementation for the life of the process and runs ``orsbench serve`` with
them, the same front end a user runs.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from orsbench.checks.evidence import Evidence
from orsbench.checks.model import CheckOutcome, Severity, failed, passed
from orsbench.checks.registry import Check
from orsbench.cli import Subcommand
from orsbench.clients.targets import ClientTarget
from orsbench.config import ServerConfig
from orsbench.scenarios import SCENARIOS, Episode, Scenario, Split, ToolResult, text, tool
from orsbench.servers.faults import Fault, FaultContext, engine_context
from orsbench.servers.http import ASGIApp, Receive, Scope, Send
from orsbench.servers.implementations import IMPLEMENTATIONS, Implementation

SERVED_BY = (b"x-served-by", b"dummy")
FAULTED = (b"x-dummy-fault", b"applied")


# -- a scenario ------------------------------------------------------------------------------------
class SayInput(BaseModel):
    text: str


class DummyScenario(Scenario):
    """One task: say its word with ``say(text)`` to win."""

    name = "dummy-architecture"
    summary = "a dummy scenario (tests/test_architecture.py): say the task's word"

    def splits(self) -> list[Split]:
        return [Split("train", "train")]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [{"id": "dummy-0", "word": "hello"}]

    def prompt(self, episode: Episode) -> list[dict[str, Any]]:
        return [text(f"Say '{episode.task['word']}' with say(text=...).")]

    @tool(SayInput)
    def say(self, episode: Episode, args: SayInput) -> ToolResult:
        """Say a word; reward 1.0 and finished when it is the task's."""
        won = args.text == episode.task["word"]
        return ToolResult([text("yes" if won else "no")], reward=1.0 if won else 0.0, finished=won)


# -- a server implementation -------------------------------------------------------------------------
class AddHeader:
    """An ASGI wrapper adding one response header: how the dummies show it was *they* that answered."""

    def __init__(self, app: ASGIApp, header: tuple[bytes, bytes]) -> None:
        self.app, self.header = app, header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, tagged)


def build_dummy(scenarios: Sequence[Scenario], config: ServerConfig) -> ASGIApp:
    """The dummy implementation's ``build_app``: the mock engine's routes, every answer marked as ours."""
    from orsbench.servers.engine import Engine

    return AddHeader(Engine(list(scenarios), config), SERVED_BY)


DUMMY_IMPLEMENTATION = Implementation("dummy", "a dummy implementation (tests/test_architecture.py)", build_dummy)


# -- a check -------------------------------------------------------------------------------------------
def served_by_dummy(ev: Evidence) -> CheckOutcome:
    ex = ev.get("health")
    if ex is not None and ex.headers.get(SERVED_BY[0].decode()) == SERVED_BY[1].decode():
        return passed("the dummy implementation answered /health", None, ex)
    return failed("/health was not answered by the dummy implementation", None, ex)


DUMMY_CHECK = Check(
    "dummy.served_by",
    "the dummy implementation answers",
    "discovery",
    "§1",
    "serve with --impl dummy",
    ("discovery.health",),
    served_by_dummy,
    Severity.REQUIRED,
)


# -- a fault --------------------------------------------------------------------------------------------
def dummy_wrap(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return AddHeader(app, FAULTED)


DUMMY_FAULT = Fault(
    "dummy-fault",
    "marks every answer (tests/test_architecture.py)",
    "profile",
    apply=lambda engine, app, rng: dummy_wrap(app, rng, engine_context(engine)),
    wrap=dummy_wrap,
)


# -- a CLI subcommand -----------------------------------------------------------------------------------
DUMMY_EXIT = 7


def add_dummy_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dummy-architecture", help="a dummy subcommand (tests/test_architecture.py)")
    parser.set_defaults(func=lambda _args: DUMMY_EXIT)


DUMMY_SUBCOMMAND = Subcommand("dummy-architecture", add_dummy_parser)


# -- a client target ---------------------------------------------------------------------------------
def play_dummy_client(episode: Any) -> None:
    """The dummy client: the openreward SDK's sync session API, as any SDK-based target drives it."""
    import openreward

    from orsbench.clients.targets import sync_session

    sync_session.play(openreward.OpenReward().environments.get(episode.env), episode)


DUMMY_CLIENT = ClientTarget("dummy-architecture", "openreward", "a dummy client target", play_dummy_client, modules=("openreward",), extra="sdk")


if __name__ == "__main__":
    from orsbench.cli import main

    with SCENARIOS.temporarily(DummyScenario), IMPLEMENTATIONS.temporarily(DUMMY_IMPLEMENTATION):
        sys.exit(main(["serve", DummyScenario.name, "--impl", DUMMY_IMPLEMENTATION.name, "--port", sys.argv[1]]))
