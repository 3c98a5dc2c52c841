"""The scripted episode every client plays: which tool calls win a scenario's first train task.

A client is judged on the same episode on every server, so the script comes
from the scenario object itself (in-process, no server): the task's answer is
read from the task spec, exactly as a perfect model would find it in the
prompt. A scenario registered later without a script here still gets one:
its first shared tool, called once with the arguments its schema requires —
then no reward is expected, only a clean run.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from orsbench.upstream.schema_view import required_example
from orsbench.scenarios import generic_scenarios, get_scenario, suite_params
from orsbench.scenarios.base import Episode

JSON = dict[str, Any]

SPLIT = "train"
INDEX = 0

#: The ``long_text`` length the schema-zoo script asks for: longer than one SSE chunk.
LONG_TEXT = 6000


@dataclass(frozen=True)
class Step:
    """One tool call; ``expect`` is the exact text the environment returns (``None``: not checked).

    ``pause_s``: seconds the client sits idle before the call (a session outliving a TTL).
    """

    tool: str
    args: JSON = field(default_factory=dict)
    expect: str | None = None
    pause_s: float = 0.0
    #: The reward the call returns, where the script knows it (``None``: none, or not said).
    reward: float | None = None
    #: The script goes on past its finishing call with this one: a correct client never sends it (§13.14).
    after_finished: bool = False
    #: The scripted model makes this call in the same reply as the call before it (a reply carrying several calls).
    with_previous: bool = False


@dataclass(frozen=True)
class Script:
    """The calls a case's client makes, as the server must see them, and how the episode ends.

    ``runs``: the adapter plays the script's one run (:attr:`one_run`, what ``ORSBENCH_SCRIPT`` holds) this many
    times in one process (``ORSBENCH_RUNS``, §13.16); :attr:`steps` are all of them, one run after another —
    what the server sees and the client reports, so every check that walks the steps walks both runs.
    """

    scenario: str
    steps: tuple[Step, ...]
    #: The reward and ``finished`` a correct client ends with (``None``: the script does not aim for one).
    reward: float | None = 1.0
    finished: bool = True
    runs: int = 1

    @property
    def one_run(self) -> tuple[Step, ...]:
        """The calls of one run (``ORSBENCH_SCRIPT``)."""
        return self.steps[: len(self.steps) // self.runs]

    def repeated(self, runs: int) -> Script:
        """This script played ``runs`` times in one process (``runs`` 1: itself)."""
        return self if runs <= 1 else replace(self, steps=self.one_run * runs, runs=runs)

    def once(self) -> Script:
        """One run of this script (a live session of a case of several runs is graded as one run)."""
        return self if self.runs <= 1 else replace(self, steps=self.one_run, runs=1)

    @property
    def rewards_before_the_end(self) -> bool:
        """Whether a call before the last of a run returns a reward (the episode's reward is spread over its calls)."""
        return any(step.reward is not None for step in self.one_run[:-1])

    @property
    def calls(self) -> dict[str, int]:
        """How often each tool must run on the server: exactly once per step up to the finishing one, never after it."""
        counts: dict[str, int] = {}
        for step in self.steps:
            if not step.after_finished:
                counts[step.tool] = counts.get(step.tool, 0) + 1
        return counts

    @property
    def goes_on_after_finished(self) -> bool:
        """The script asks for calls after the one that returns ``finished: true`` (§13.14)."""
        return any(step.after_finished for step in self.steps)

    @property
    def finishing_reply_goes_on(self) -> bool:
        """The scripted model's reply that carries the finishing call carries a call after it too (§13.14)."""
        return any(step.after_finished and step.with_previous for step in self.steps)

    def replies(self) -> list[int]:
        """How many calls each of the scripted model's replies carries, in order (a step ``with_previous`` joins the reply before)."""
        sizes: list[int] = []
        for step in self.one_run:
            if step.with_previous and sizes:
                sizes[-1] += 1
            else:
                sizes.append(1)
        return sizes

    def contract_json(self) -> dict[str, Any]:
        """The ``ORSBENCH_SCRIPT`` document: ``{"calls": [{"tool", "input"}, ...]}`` of one run (``pause_s`` where a step idles first).

        Steps after the finishing call are in it like any other: the script may go on past ``finished``, and a
        client stops there (§13.14).
        """
        return {"calls": [{"tool": s.tool, "input": s.args, **({"pause_s": s.pause_s} if s.pause_s else {})} for s in self.one_run]}


def going_on_after_finished(base: Script, *, calls: int = 2, same_reply: bool = False) -> Script:
    """``base`` with ``calls`` more after its finishing call: its first call again, then its finishing call again (§13.14).

    An eager model that looks once more and answers again. ``same_reply``: the scripted model makes the first of
    them in the same reply as the finishing call (a harness must not run a call that follows the finishing one).
    """
    first, last = base.steps[0], base.steps[-1]
    extra = [Step(first.tool, dict(first.args), after_finished=True, with_previous=same_reply)]
    if calls > 1:
        extra.append(Step(last.tool, dict(last.args), after_finished=True))
    return Script(base.scenario, (*base.steps, *extra[:calls]), reward=base.reward, finished=base.finished)


def scenarios() -> list[str]:
    """Every registered scenario a client episode is played on (each left-out one says why: ``Scenario.dedicated``)."""
    return generic_scenarios()


def _task(name: str) -> JSON:
    scenario = get_scenario(name, **suite_params(name))
    try:
        return scenario.list_tasks(SPLIT)[INDEX]
    except NotImplementedError:
        return scenario.get_task(SPLIT, INDEX)


def _echo(task: JSON) -> list[Step]:
    return [Step("echo", {"text": task["target"]}, "match")]


def _task_tool(task: JSON) -> list[Step]:
    steps = []
    if task["kind"] == "add":
        a, b = (int(x) for x in task["question"].removeprefix("What is ").removesuffix("?").split(" + "))
        steps.append(Step("add", {"a": a, "b": b}, str(a + b)))
    elif task["kind"] == "hint":
        steps.append(Step("hint", {}, f"The word is {task['answer']}."))
    return [*steps, Step("answer", {"value": task["answer"]}, "correct")]


def _sparse(task: JSON) -> list[Step]:
    from orsbench.scenarios.sparse_reward import digits

    values = digits(task)
    return [Step("reveal", {"position": i}) for i in range(len(values))] + [Step("submit", {"total": sum(values)})]


def _slow(task: JSON) -> list[Step]:
    steps = int(task["steps"])
    return [Step("step", {}, f"step {i + 1}") for i in range(steps)]


def _schema_zoo(task: JSON) -> list[Step]:
    from orsbench.scenarios.schema_zoo import long_text_value

    return [
        Step("long_text", {"size": LONG_TEXT}, long_text_value(LONG_TEXT)),
        Step("score", {"value": 1.0, "finish": True}, "reward 1.0"),
    ]


def _schema_edges(task: JSON) -> list[Step]:
    from orsbench.scenarios.schema_edges import INPUTS, answer_text

    return [*(Step(name, dict(args), answer_text(name)) for name, args in INPUTS.items()), Step("done", {}, "done")]


def _images(task: JSON) -> list[Step]:
    from orsbench.scenarios.hazards import look_text

    return [Step("look", {}, look_text()), Step("answer", {"colour": task["colour"]}, "correct")]


def _schema_keywords(task: JSON) -> list[Step]:
    from orsbench.scenarios.hazards import record_text

    args = {k: task[k] for k in ("title", "default", "examples")}
    return [Step("record", args, record_text(**args))]


def _dense(task: JSON) -> list[Step]:
    from orsbench.scenarios.hazards import step_text

    return [Step("step", {}, step_text(n, r), reward=r) for n, r in enumerate(task["rewards"], start=1)]


def _two_envs(task: JSON) -> list[Step]:
    from orsbench.scenarios.hazards import sign_text

    return [Step("sign", {"word": task["word"]}, sign_text("two-envs", True))]


#: Scripts whose episode reward is not 1.0: dense-reward's clients end on the last non-null reward (§13.3).
_REWARDS: dict[str, Callable[[JSON], float | None]] = {
    "dense-reward": lambda task: [r for r in task["rewards"] if r is not None][-1],
    "reward-range": lambda task: [r for r in task["rewards"] if r is not None][-1],
}


_SCRIPTS: dict[str, Callable[[JSON], list[Step]]] = {
    "echo": _echo,
    "task-tool": _task_tool,
    "sparse-reward": _sparse,
    "slow": _slow,
    "schema-zoo": _schema_zoo,
    "schema-edges": _schema_edges,
    "schema-zoo-index": lambda task: [Step("answer", {"word": task["word"]}, "right")],
    "schema-zoo-prompt": lambda task: [Step("answer", {"value": str(task["answer"])}, "right")],
    "pick": lambda task: [Step("pick", {"door": task["door"]}, "win")],
    "images": _images,
    "schema-keywords": _schema_keywords,
    "dense-reward": _dense,
    "reward-range": _dense,
    "two-envs": _two_envs,
}


def script(name: str) -> Script:
    """The winning episode of ``name``'s first train task (a clean single call for unscripted scenarios)."""
    task = _task(name)
    if name in _SCRIPTS:
        reward = _REWARDS[name](task) if name in _REWARDS else 1.0
        return Script(name, tuple(_SCRIPTS[name](task)), reward=reward)
    scenario = get_scenario(name, **suite_params(name))
    first = sorted(scenario.shared_tools(), key=lambda t: t.name)[0]
    return Script(name, (Step(first.name, required_example(first.input_schema)),), reward=None, finished=False)


class _Instant(Episode):
    """An episode whose sleeps take no time: the rewards of a script do not depend on its latency."""

    async def sleep(self, seconds: float) -> None:
        return None


@cache
def sent_rewards(name: str) -> tuple[Any, ...]:
    """The reward each call of ``name``'s script gets, in order, exactly as a server sends it (``None``: unscored).

    Played in-process on the scenario object (its tools on a fresh episode of the first train task, no server,
    no sleeps), so a scenario registered later gets its facts without a table: what a consumer that judges
    every call's reward (benchflow) makes of the episode is a fact of the cell. A call that raises ends it.
    """
    scenario = get_scenario(name, **suite_params(name))
    task = _task(name)
    episode = _Instant(scenario, task, SPLIT, INDEX)
    tools = scenario.session_tools(task)

    async def play() -> tuple[Any, ...]:
        await scenario.setup(episode)
        rewards = []
        for step in script(name).steps:
            tool = tools[step.tool]
            try:
                result = tool.fn(scenario, episode, tool.params.model_validate(step.args) if tool.params else None)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:  # noqa: BLE001 - the episode ends where a tool raises
                break
            rewards.append(getattr(result, "reward", None))
            if getattr(result, "finished", False):
                break
        return tuple(rewards)

    return asyncio.run(play())
