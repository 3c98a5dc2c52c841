"""The scripted episode every client plays: which tool calls win a scenario's first train task.

A client is judged on the same episode on every server, so the script comes
from the scenario object itself (in-process, no server): the task's answer is
read from the task spec, exactly as a perfect model would find it in the
prompt. A scenario registered later without a script here still gets one:
its first shared tool, called once with the arguments its schema requires —
then no reward is expected, only a clean run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orsbench.clients.schema_view import required_example
from orsbench.scenarios import get_scenario, playable_scenarios
from orsbench.scenarios.slow import Slow

JSON = dict[str, Any]

SPLIT = "train"
INDEX = 0

#: Scenarios no client episode is played on, and why.
LEFT_OUT: dict[str, str] = {
    "broken-session": "its sessions fail on purpose (constructor 500, a missing secret); the conformance suite's session tests cover it",
    "schema-conflict": "per-task schema variants of one tool; the conformance suite's binding tests cover it on the mock",
}

#: Scenario parameters every client episode is served with, and why.
SERVE_PARAMS: dict[str, JSON] = {
    "slow": dict(Slow.QUICK_PARAMS),  # the fault profile slow-setup covers the slow reset
}

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


@dataclass(frozen=True)
class Script:
    scenario: str
    steps: tuple[Step, ...]
    #: The reward and ``finished`` a correct client ends with (``None``: the script does not aim for one).
    reward: float | None = 1.0
    finished: bool = True

    @property
    def calls(self) -> dict[str, int]:
        """How often each tool must run on the server: exactly once per step."""
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.tool] = counts.get(step.tool, 0) + 1
        return counts


def scenarios() -> list[str]:
    """Every registered scenario a client episode is played on."""
    return [name for name in playable_scenarios() if name not in LEFT_OUT]


def _task(name: str) -> JSON:
    scenario = get_scenario(name, **SERVE_PARAMS.get(name, {}))
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


_SCRIPTS: dict[str, Callable[[JSON], list[Step]]] = {
    "echo": _echo,
    "task-tool": _task_tool,
    "sparse-reward": _sparse,
    "slow": _slow,
    "schema-zoo": _schema_zoo,
    "schema-zoo-index": lambda task: [Step("answer", {"word": task["word"]}, "right")],
    "schema-zoo-prompt": lambda task: [Step("answer", {"value": str(task["answer"])}, "right")],
    "pick": lambda task: [Step("pick", {"door": task["door"]}, "win")],
}


def script(name: str) -> Script:
    """The winning episode of ``name``'s first train task (a clean single call for unscripted scenarios)."""
    task = _task(name)
    if name in _SCRIPTS:
        return Script(name, tuple(_SCRIPTS[name](task)))
    scenario = get_scenario(name, **SERVE_PARAMS.get(name, {}))
    first = sorted(scenario.shared_tools(), key=lambda t: t.name)[0]
    return Script(name, (Step(first.name, required_example(first.input_schema)),), reward=None, finished=False)
