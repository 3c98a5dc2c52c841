"""What one load episode does: environment, split, task, the calls and the waits — decided once.

Both load front ends (the Locust user in :mod:`orsbench.load` and the asyncio
driver in :mod:`orsbench.bench.driver`) run the same episode, so the plan is
resolved once and shared, and :meth:`EpisodePlan.actions` is the one episode
model both walk, request by request and wait by wait: the same settings give
the same episode, so the same figures.

Two kinds of episode:

* **learned** (:func:`learned_plan`, the default of ``orsbench bench`` and the
  Locust file): the calls the checker's player played on the server
  (:mod:`orsbench.bench.learn`), reward path included, replayed on the task it
  played;
* **one tool** (:func:`discover`, when a tool is named): ``calls`` × one tool with
  one input, tasks round-robin; a user who names nothing but the tool gets a
  working episode on any ORS server: the first environment, its first ``train``
  split, and an input built from that tool's JSON Schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Final

from orsbench import protocol, schema_examples
from orsbench.wire import WireClient, encode_secrets

#: The string used for every free-text field of a derived input. It matches no
#: echo target, so a default episode never finishes early.
SAMPLE_TEXT = "orsbench"


class PlanError(RuntimeError):
    """Discovery failed or contradicted the options given; the message says which."""


# The stages of the one episode model (:meth:`EpisodePlan.actions`), in the order an episode meets them.
CREATE_SESSION: Final = "create_session"
THINK: Final = "think"
CREATE: Final = "create"
PROMPT: Final = "prompt"
TASK_TOOLS: Final = "task_tools"
CALL: Final = "call"
DELETE: Final = "delete"
DELETE_SESSION: Final = "delete_session"

#: One step of an episode: ``(stage, argument)`` — seconds for ``think``, the step's number for ``call``.
Action = tuple[str, float]


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
    #: The learned calls ``(tool, input)`` in order (:func:`learned_plan`); empty: ``calls`` × ``tool(tool_input)``.
    script: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: The task every episode plays (the one the script was learned on); ``None``: tasks round-robin.
    task_index: int | None = None
    #: How the player's own episode ended: ``finished: true`` and its reward (a learned plan only).
    learned_finished: bool = False
    learned_reward: float | None = None

    def index(self, n: int) -> int:
        """The task index of the ``n``-th episode: the learned task, else tasks round-robin."""
        if self.task_index is not None:
            return self.task_index
        return n % self.num_tasks if self.num_tasks > 0 else 0

    def steps(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The calls of one episode, ``(tool, input)`` each, in order (fewer are made once one answers finished)."""
        return self.script or ((self.tool, self.tool_input),) * self.calls

    def tools(self) -> frozenset[str]:
        """The tools an episode calls (``/task_tools`` must list each)."""
        return frozenset(tool for tool, _ in self.steps())

    def actions(self) -> tuple[Action, ...]:
        """The one episode model: every request and every wait, in order, as both load front ends play it.

        ``create_session``, a think, ``create``, a think, ``prompt``, ``task_tools``, then per call a
        think and the call, then ``delete`` and ``delete_session``: the think time comes before
        create, prompt and each call. Once a call answers ``finished: true`` the remaining thinks and
        calls are skipped, as a trainer stops.
        """
        think: list[Action] = [(THINK, self.think_time)] if self.think_time > 0 else []
        calls = [a for n in range(len(self.steps())) for a in (*think, (CALL, float(n)))]
        return (
            (CREATE_SESSION, 0.0), *think, (CREATE, 0.0), *think, (PROMPT, 0.0), (TASK_TOOLS, 0.0),
            *calls, (DELETE, 0.0), (DELETE_SESSION, 0.0),
        )  # fmt: skip

    def path(self, route: str) -> str:
        return protocol.env_path(self.env, route)

    def describe(self) -> str:
        if self.script:
            ending = f"finished, reward {self.learned_reward!r}" if self.learned_finished else "not finished"
            shown = [f"{tool}({orjson_text(value)})" for tool, value in self.script[:5]]
            calls = ", ".join(shown) + (f", ... ({len(self.script) - 5} more)" if len(self.script) > 5 else "")
            return (
                f"env={self.env} split={self.split} task {self.task_index} (of {self.num_tasks}), learned by the player: "
                f"{len(self.script)} call(s) {calls} -> {ending}; think={self.think_time:g}s"
            )
        return (
            f"env={self.env} split={self.split} ({self.num_tasks} tasks) tool={self.tool}"
            f" input={self.tool_input} calls={self.calls} think={self.think_time:g}s"
        )


def orjson_text(value: Any, limit: int = 60) -> str:
    """A short JSON rendering of a learned input, for the plan's one-line description."""
    import orjson

    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def learned_plan(
    base_url: str,
    *,
    env: str | None = None,
    split: str | None = None,
    think_time: float = 0.0,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> EpisodePlan:
    """The episode the checker's player plays on ``base_url`` (:func:`orsbench.bench.learn.learn`), as a plan."""
    from orsbench.bench.learn import CannotPlay, learn

    try:
        learned = learn(base_url, env=env, split=split, api_key=api_key, secrets=secrets, timeout=timeout)
    except CannotPlay as exc:
        raise PlanError(str(exc)) from None
    return scripted_plan(
        base_url, learned.env, learned.split, learned.index, learned.steps, think_time=think_time, api_key=api_key,
        secrets=secrets, finished=learned.finished, reward=learned.reward,
    )  # fmt: skip


def scripted_plan(
    base_url: str,
    env: str,
    split: str,
    index: int,
    steps: tuple[tuple[str, dict[str, Any]], ...],
    *,
    think_time: float = 0.0,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
    finished: bool = False,
    reward: float | None = None,
) -> EpisodePlan:
    """A plan replaying ``steps`` on task ``index`` (a learned script handed on: ``bench --locust``, Locust workers)."""
    if not steps:
        raise PlanError("a scripted episode needs at least one call")
    first = discover(base_url, env=env, split=split, tool=steps[0][0], tool_input=steps[0][1], api_key=api_key, secrets=secrets)
    return EpisodePlan(
        first.env, first.split, first.num_tasks, steps[0][0], dict(steps[0][1]), len(steps), think_time,
        first.create_headers, tuple((t, dict(v)) for t, v in steps), index, finished, reward,
    )  # fmt: skip


def resolve_plan(
    base_url: str,
    *,
    env: str | None = None,
    split: str | None = None,
    tool: str | None = None,
    tool_input: dict[str, Any] | None = None,
    calls: int | None = None,
    think_time: float = 0.0,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
) -> EpisodePlan:
    """The episode a load front end plays: one tool when a tool, input or call count is named, else the learned one."""
    if tool is not None or tool_input is not None or calls is not None:
        return discover(
            base_url, env=env, split=split, tool=tool, tool_input=tool_input, calls=calls or 1, think_time=think_time,
            api_key=api_key, secrets=secrets,
        )  # fmt: skip
    return learned_plan(base_url, env=env, split=split, think_time=think_time, api_key=api_key, secrets=secrets)
