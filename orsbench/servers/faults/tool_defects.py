"""Tool defects on the mock: tools that fail on *valid* input, for the checker's own measure.

Not protocol violations — the wire stays correct — but what environment
authors get wrong most: a tool that raises on an input its schema accepts, or
never answers. Each is registered like a violation (the checks it must fail)
and swaps one of the scenario's tools for a wrapper through the scenario's
public ``all_tools``; the same defects written on the openreward SDK live in
tests/envs/.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

from orsbench.scenarios.base import Tool
from orsbench.servers.faults.violations import violation

#: Longer than this, the hanging tool never answers (the fuzz's long string is 10,000 characters).
HANG_LENGTH = 1000


def _replace_tool(engine: Any, scenario: str, name: str, make: Any) -> None:
    target = engine.scenarios[scenario]
    tool: Tool = target.all_tools[name]
    target.all_tools[name] = dataclasses.replace(tool, fn=make(tool.fn))


@violation(
    "tool-raises-on-non-ascii",
    "echo(text) raises UnicodeEncodeError (an SSE error event) when text is not ASCII",
    ("tool.no_crash_on_valid_input",),
)
def tool_raises_on_non_ascii(engine: Any, app: Any, rng: random.Random) -> Any:
    def make(fn: Any) -> Any:
        def echo(scenario: Any, episode: Any, args: Any) -> Any:
            args.text.encode("ascii")
            return fn(scenario, episode, args)

        return echo

    _replace_tool(engine, "echo", "echo", make)
    return app


@violation(
    "tool-hangs-on-long-input",
    f"echo(text) never answers when text is longer than {HANG_LENGTH} characters",
    ("tool.no_hang",),
)
def tool_hangs_on_long_input(engine: Any, app: Any, rng: random.Random) -> Any:
    def make(fn: Any) -> Any:
        async def echo(scenario: Any, episode: Any, args: Any) -> Any:
            if len(args.text) > HANG_LENGTH:
                await asyncio.sleep(3600)
            return fn(scenario, episode, args)

        return echo

    _replace_tool(engine, "echo", "echo", make)
    return app
