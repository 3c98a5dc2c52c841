"""What the suite runs against: scenarios × implementations, and what each declares and serves.

A *target* is one scenario served by one implementation (the mock engine or
the SDK twin). Its expectations come from two places that must agree
(``test_server_serves_declared_tools`` checks it):

* :class:`Declared` — the scenario object itself, in-process, at collection
  time: its tools and which task exposes which task-scoped tool. Test
  parametrisation and the known-defect predicates use it, so a scenario
  registered later is covered without editing the suite.
* :class:`Served` — what the running server says over the wire (``WireClient``:
  no retries, no coercion): tools, task lists per split, task-scoped tools per
  task. The checks compare TRL's behaviour against it.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Self

from orsbench.protocol import JSON
from orsbench.scenarios import generic_scenarios, get_scenario, suite_params
from orsbench.servers.implementations import in_suite
from orsbench.servers.launch import RunningServer
from orsbench.wire import WireClient

#: The implementations every generic scenario is served on (registered ``in_suite``).
IMPLS = in_suite()
SPLIT = "train"


def slug(text: str) -> str:
    """A test-id and file-name safe spelling that stays unambiguous (``a.b/c`` → ``a.b%2Fc``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


def group(scenario: str, impl: str) -> str:
    """The xdist group: every test of one server runs on one worker, so each server starts once.

    (No ``@`` in it: xdist splits a node id at its last ``@`` to find the group.)
    """
    return f"{scenario}.{impl}"


@dataclass(frozen=True)
class Declared:
    """A scenario's tools and task-scoped exposure, from the scenario object (no server)."""

    scenario: str
    #: Every tool some train task can call: shared first, then task-scoped, first schema wins.
    tools: dict[str, JSON]
    #: Names of the tools each train task lists, by task index.
    task_tools: tuple[tuple[str, ...], ...]
    #: Every key any train task spec has.
    task_keys: frozenset[str] = frozenset()
    #: Some split has a task-spec key holding objects whose keys differ between tasks.
    ragged_objects: bool = False

    def first_task_with(self, tool: str) -> int:
        return next(i for i, names in enumerate(self.task_tools) if tool in names)

    @property
    def distinct_tasks(self) -> list[int]:
        """One task index per distinct tool set: probing these finds every tool."""
        seen: dict[tuple[str, ...], int] = {}
        for index, names in enumerate(self.task_tools):
            seen.setdefault(tuple(sorted(names)), index)
        return sorted(seen.values())


@cache
def declared(scenario_name: str) -> Declared:
    scenario = get_scenario(scenario_name, **suite_params(scenario_name))
    try:
        tasks = scenario.list_tasks(SPLIT)
    except NotImplementedError:
        tasks = [scenario.get_task(SPLIT, i) for i in range(scenario.num_tasks(SPLIT))]
    tools: dict[str, JSON] = {}
    per_task: list[tuple[str, ...]] = []
    for task in tasks:
        try:
            session_tools = scenario.session_tools(task)
        except Exception:  # noqa: BLE001 - a task whose session cannot start (broken-session) lists nothing
            session_tools = {}
        per_task.append(tuple(session_tools))
        for name, spec in session_tools.items():
            tools.setdefault(name, spec.spec())
    shared = [t.name for t in scenario.shared_tools()]
    ordered = {n: tools[n] for n in sorted(shared)} | {n: tools[n] for n in tools if n not in shared}
    keys = frozenset(k for task in tasks for k in task)
    return Declared(scenario_name, ordered, tuple(per_task), keys, _ragged(scenario))


def _ragged(scenario: Any) -> bool:
    for split in scenario.splits():
        try:
            tasks = scenario.list_tasks(split.name)
        except NotImplementedError:
            tasks = [scenario.get_task(split.name, i) for i in range(scenario.num_tasks(split.name))]
        for key in {k for task in tasks for k in task}:
            shapes = {frozenset(t[key]) for t in tasks if isinstance(t.get(key), dict)}
            if len(shapes) > 1:
                return True
    return False


@dataclass
class Served:
    """What a running server says about itself, read once over the wire."""

    server: RunningServer

    @cached_property
    def wire(self) -> WireClient:
        return WireClient(self.server.url)

    @property
    def env(self) -> str:
        return self.server.env_name

    @cached_property
    def shared_tools(self) -> list[JSON]:
        return self.wire.tools(self.env).json()["tools"]

    @cached_property
    def splits(self) -> list[str]:
        return [s["name"] for s in self.wire.splits(self.env).json()]

    _task_lists: dict[str, list[JSON]] = field(default_factory=dict)
    _task_tools: dict[int, list[JSON]] = field(default_factory=dict)

    def tasks(self, split: str = SPLIT) -> list[JSON]:
        """A split's tasks: ``/tasks``, or ``/num_tasks`` + ``/task`` where listing is unsupported."""
        if split not in self._task_lists:
            listed = self.wire.tasks(self.env, split)
            if listed.status == 200:
                self._task_lists[split] = listed.json()["tasks"]
            else:
                count = self.wire.num_tasks(self.env, split).json()["num_tasks"]
                self._task_lists[split] = [self.wire.task(self.env, split, i).json()["task"] for i in range(count)]
        return self._task_lists[split]

    def task_tools_of(self, index: int) -> list[JSON]:
        """``GET /task_tools`` of a fresh session on train task ``index`` (``[]`` if it cannot start)."""
        if index not in self._task_tools:
            sid = f"orsbench-conformance-{uuid.uuid4()}"
            self.wire.create(sid, split=SPLIT, index=index)
            try:
                listed = self.wire.task_tools(self.env, sid)
                self._task_tools[index] = listed.json()["tools"] if listed.status == 200 else []
            finally:
                self.wire.delete(sid)
        return self._task_tools[index]

    @property
    def task_tools(self) -> list[list[JSON]]:
        """``GET /task_tools`` on every train task."""
        return [self.task_tools_of(i) for i in range(len(self.tasks(SPLIT)))]

    def tools_over(self, indexes: list[int]) -> dict[str, JSON]:
        """The union over those tasks, shared first; the first schema seen wins (as TRL merges)."""
        union = {t["name"]: t for t in sorted(self.shared_tools, key=lambda t: t["name"])}
        for index in indexes:
            for spec in self.task_tools_of(index):
                union.setdefault(spec["name"], spec)
        return union

    def prompt_text(self, index: int, split: str = SPLIT, secrets: dict[str, str] | None = None) -> str:
        """The text of a task's prompt blocks, joined as TRL joins them."""
        sid = f"orsbench-conformance-{uuid.uuid4()}"
        self.wire.create(sid, split=split, index=index, secrets=secrets)
        try:
            answer = self.wire.prompt(self.env, sid)
            assert answer.status == 200, f"/prompt of {split}[{index}]: {answer.status} {answer.json_or_none()}"
            blocks = answer.json()
        finally:
            self.wire.delete(sid)
        return "\n".join(b["text"] for b in blocks if b.get("type") == "text" and b.get("text"))


@dataclass
class SuiteTarget:
    """One scenario on one implementation, with its server and both views of it."""

    scenario: str
    impl: str
    server: RunningServer
    served: Served = field(init=False)

    def __post_init__(self) -> None:
        self.served = Served(self.server)

    @property
    def declared(self) -> Declared:
        return declared(self.scenario)

    @cached_property
    def tools(self) -> dict[str, JSON]:
        """Every tool the server lets a train task call, read from one task per distinct declared tool set.

        ``test_server_serves_declared_tools`` reads every task and checks the declaration holds.
        """
        return self.served.tools_over(self.declared.distinct_tasks)

    @property
    def url(self) -> str:
        return self.server.url

    def stats(self) -> JSON:
        """``GET /_orsbench/stats`` over the target's kept-alive connection."""
        return self.served.wire.stats().json()

    def __str__(self) -> str:
        return f"{self.scenario} on {self.impl}"


class RequestDelta:
    """Requests a server received while the block ran, keyed like its stats (``"POST /{env}/task"``)."""

    def __init__(self, target: SuiteTarget) -> None:
        self.target = target
        self.delta: Counter[str] = Counter()

    def __enter__(self) -> Self:
        self._before = Counter(self.target.stats()["requests"])
        return self

    def __exit__(self, *exc: object) -> None:
        after = Counter(self.target.stats()["requests"])
        self.delta = Counter({k: after[k] - self._before[k] for k in after if after[k] != self._before[k]})

    def __getitem__(self, key: str) -> int:
        return self.delta[key]
