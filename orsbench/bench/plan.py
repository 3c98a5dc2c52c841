"""What one load episode does: environment, split, tool, input, calls — decided once.

Both load front ends (the Locust user in :mod:`orsbench.load` and the asyncio
driver in :mod:`orsbench.bench.driver`) run the same episode, so the plan is
resolved once, from the server's own discovery answers, and shared. A user who
names nothing gets a working episode on any ORS server: the first environment,
its first ``train`` split, its first tool, and an input built from that tool's
JSON Schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from orsbench import protocol, schema_examples
from orsbench.wire import WireClient, encode_secrets

#: The string used for every free-text field of a derived input. It matches no
#: echo target, so a default episode never finishes early.
SAMPLE_TEXT = "orsbench"


class PlanError(RuntimeError):
    """Discovery failed or contradicted the options given; the message says which."""


@dataclass(frozen=True)
class EpisodePlan:
    """One episode: ``create_session → create → prompt → task_tools → calls × call → delete → delete_session``."""

    env: str
    split: str
    num_tasks: int
    tool: str
    tool_input: dict[str, Any] = field(default_factory=dict)
    #: Tool calls per episode; fewer when a call returns ``finished: true`` (as a trainer stops).
    calls: int = 1
    #: Seconds to wait between the requests of an episode (a model "thinking"); 0 = none.
    think_time: float = 0.0
    #: Extra headers of every ``/create``: ``X-Secrets`` when the server needs secrets (never shown: §14).
    create_headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def index(self, n: int) -> int:
        """The task index of the ``n``-th episode: tasks are used round-robin."""
        return n % self.num_tasks if self.num_tasks > 0 else 0

    def path(self, route: str) -> str:
        return protocol.env_path(self.env, route)

    def describe(self) -> str:
        return (
            f"env={self.env} split={self.split} ({self.num_tasks} tasks) tool={self.tool}"
            f" input={self.tool_input} calls={self.calls} think={self.think_time:g}s"
        )


def example_input(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A small valid input for a tool's JSON Schema (required properties only, strings ``"orsbench"``).

    Built by the one example builder, :func:`orsbench.schema_examples.minimal_input`;
    ``{}`` when no valid input can be built (the server's answer then says why).
    """
    try:
        return schema_examples.minimal_input(schema, text=SAMPLE_TEXT)
    except schema_examples.NoInput:
        return {}


def discover(
    base_url: str,
    *,
    env: str | None = None,
    split: str | None = None,
    tool: str | None = None,
    tool_input: dict[str, Any] | None = None,
    calls: int = 1,
    think_time: float = 0.0,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
) -> EpisodePlan:
    """Resolve a plan from ``/list_environments``, ``/{env}/splits``, ``/{env}/tools``, ``/{env}/num_tasks``."""
    if calls < 1:
        raise PlanError(f"calls per episode must be at least 1, got {calls}")
    with WireClient(base_url, api_key=api_key, timeout=15) as client:
        if env is None:
            envs = _json(client.list_environments(), "GET /list_environments")
            if not isinstance(envs, list) or not envs:
                raise PlanError(f"{base_url}/list_environments names no environment; pass the env name explicitly")
            env = str(envs[0])
        splits = _json(client.splits(env), f"GET /{env}/splits")
        names = [s.get("name") for s in splits if isinstance(s, dict)] if isinstance(splits, list) else []
        if split is None:
            split = next((s.get("name") for s in splits if s.get("type") == "train"), names[0] if names else None)
            if split is None:
                raise PlanError(f"environment {env!r} lists no splits")
        elif split not in names:
            raise PlanError(f"environment {env!r} has no split {split!r}; it has {names}")
        count = _json(client.num_tasks(env, split), f"POST /{env}/num_tasks").get("num_tasks", 0)
        tools = _json(client.tools(env), f"GET /{env}/tools").get("tools", [])
        by_name = {t["name"]: t for t in tools if isinstance(t, dict) and "name" in t}
        if tool is None:
            if not by_name:
                raise PlanError(f"environment {env!r} lists no tools; pass the tool name and input explicitly")
            tool = next(iter(by_name))
        if tool_input is None:
            if tool not in by_name:
                raise PlanError(
                    f"environment {env!r} lists no tool {tool!r} (it has {sorted(by_name)}); pass its input explicitly"
                )
            tool_input = example_input(by_name[tool].get("input_schema"))
    create_headers = {protocol.SECRETS_HEADER: encode_secrets(secrets)} if secrets else {}
    return EpisodePlan(env, split, int(count), tool, dict(tool_input), calls, think_time, create_headers)


def _json(exchange: Any, what: str) -> Any:
    if not exchange.ok:
        raise PlanError(f"{what} failed: status {exchange.status}, {exchange.error or exchange.body[:200]!r}")
    try:
        return exchange.json()
    except ValueError:
        raise PlanError(f"{what} did not answer JSON: {exchange.body[:200]!r}") from None
