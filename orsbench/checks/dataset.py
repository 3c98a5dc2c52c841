"""Dataset checks: num_tasks, tasks, task, task_range, and their answers to bad splits and indices."""

from __future__ import annotations

from typing import Any

from orsbench.checks.evidence import NO_SUCH_SPLIT, Evidence, answer, expect_status, json_of, short
from orsbench.checks.model import CheckOutcome, Severity, failed, passed, skipped, warned
from orsbench.checks.registry import check
from orsbench.wire.evidence import Exchange


def _field(ex: Exchange | None, key: str) -> tuple[bool, Any]:
    ok, body = json_of(ex)
    if ex is None or ex.status != 200 or not ok or not isinstance(body, dict) or key not in body:
        return False, None
    return True, body[key]


def _no_split(ev: Evidence) -> CheckOutcome | None:
    if ev.split is None:
        return skipped("no split to draw tasks from", depends_on="discovery.splits")
    return None


@check(
    "dataset.num_tasks",
    severity=Severity.REQUIRED,
    passive=("dataset.num_tasks",),
    title='POST /{env}/num_tasks answers {"num_tasks": int ≥ 0}',
    probe="dataset",
    spec="§2.1",
    remediation='Answer POST /{env}/num_tasks {"split"} with 200 {"num_tasks": <non-negative integer>}.',
)
def num_tasks(ev: Evidence) -> CheckOutcome:
    if (skip := _no_split(ev)) is not None:
        return skip
    ex = ev.get("dataset.num_tasks")
    ok, value = _field(ex, "num_tasks")
    if not ok or type(value) is not int or value < 0:
        return failed(f'expected 200 {{"num_tasks": int ≥ 0}}, got {answer(ex)}', value, ex)
    return passed(f"{value} task(s) in {ev.split!r}", value, ex)


@check(
    "dataset.tasks_list",
    severity=Severity.REQUIRED,
    passive=("dataset.tasks",),
    title='POST /{env}/tasks answers {"tasks": [object, ...]}',
    probe="dataset",
    spec="§2.1",
    remediation='Answer POST /{env}/tasks {"split"} with 200 {"tasks": [<task object>, ...], "env_name": <env>} '
    "(or 400 when listing is not supported and num_tasks/task are).",
)
def tasks_list(ev: Evidence) -> CheckOutcome:
    if (skip := _no_split(ev)) is not None:
        return skip
    ex = ev.get("dataset.tasks")
    if ex is not None and ex.status == 400 and ev.get("dataset.num_tasks") and ev.get("dataset.num_tasks").status == 200:
        return warned(f"listing refused ({answer(ex)}); the index API is used instead", ex.status, ex)
    ok, tasks = _field(ex, "tasks")
    if not ok or not isinstance(tasks, list):
        return failed(f'expected 200 {{"tasks": [...]}}, got {answer(ex)}', None, ex)
    bad = [i for i, t in enumerate(tasks) if not isinstance(t, dict)]
    if bad:
        return failed(f"tasks {bad[:5]} are not JSON objects", bad, ex)
    return passed(f"{len(tasks)} task object(s)", len(tasks), ex)


@check(
    "dataset.num_tasks_matches_list",
    severity=Severity.REQUIRED,
    passive=("dataset.num_tasks+dataset.tasks",),
    title="num_tasks equals the length of the task list",
    probe="dataset",
    spec="§2.1",
    remediation="Make num_tasks(split) return len(list_tasks(split)).",
    requires=("dataset.num_tasks", "dataset.tasks_list"),
)
def num_tasks_matches_list(ev: Evidence) -> CheckOutcome:
    _, count = _field(ev.get("dataset.num_tasks"), "num_tasks")
    _, tasks = _field(ev.get("dataset.tasks"), "tasks")
    if count != len(tasks):
        return failed(
            f"num_tasks says {count}, the list has {len(tasks)}",
            {"num_tasks": count, "len(tasks)": len(tasks)},
            ev.get("dataset.num_tasks"),
        )
    return passed(f"both {count}", count)


@check(
    "dataset.task_matches_list",
    severity=Severity.REQUIRED,
    passive=("dataset.tasks+dataset.task.first", "dataset.tasks+dataset.task.last"),
    title="POST /{env}/task returns tasks[index]",
    probe="dataset",
    spec="§2.1",
    remediation='Make POST /{env}/task {"split", "index"} answer {"task": tasks[index]} — the same object the list holds.',
    requires=("dataset.tasks_list",),
)
def task_matches_list(ev: Evidence) -> CheckOutcome:
    _, tasks = _field(ev.get("dataset.tasks"), "tasks")
    if not tasks:
        return skipped("the split has no tasks")
    problems = []
    for name, index in (("dataset.task.first", 0), ("dataset.task.last", len(tasks) - 1)):
        ex = ev.get(name)
        ok, task = _field(ex, "task")
        if not ok:
            problems.append(f'task {index}: expected 200 {{"task": ...}}, got {answer(ex)}')
        elif task != tasks[index]:
            problems.append(f"task {index} is {short(task, 70)}, the list has {short(tasks[index], 70)}")
    if problems:
        return failed("; ".join(problems), problems, ev.get("dataset.task.first"), ev.get("dataset.task.last"))
    return passed(f"tasks 0 and {len(tasks) - 1} match the list", None)


@check(
    "dataset.task_negative_index",
    severity=Severity.ADVISORY,
    passive=("dataset.tasks+dataset.task.negative",),
    title="POST /{env}/task with index -1 returns the last task",
    probe="dataset",
    spec="§2.1, §11.14",
    remediation="Index tasks with Python semantics (index -1 is the last task), as the reference's default get_task does.",
    requires=("dataset.tasks_list",),
)
def task_negative_index(ev: Evidence) -> CheckOutcome:
    _, tasks = _field(ev.get("dataset.tasks"), "tasks")
    if not tasks:
        return skipped("the split has no tasks")
    ex = ev.get("dataset.task.negative")
    ok, task = _field(ex, "task")
    if not ok:
        return failed(f"expected 200 with the last task, got {answer(ex)}", None if ex is None else ex.status, ex)
    if task != tasks[-1]:
        return failed(f"index -1 gave {short(task, 80)}, not the last task", task, ex)
    return passed("index -1 is the last task", None, ex)


@check(
    "dataset.task_range_slice",
    severity=Severity.REQUIRED,
    title="POST /{env}/task_range slices like Python",
    probe="dataset",
    spec="§2.1, §11.14",
    remediation='Answer task_range {"split", "start"?, "stop"?} with {"tasks": tasks[start:stop]} (clamped; past the end → []).',
    requires=("dataset.tasks_list",),
)
def task_range_slice(ev: Evidence) -> CheckOutcome:
    _, tasks = _field(ev.get("dataset.tasks"), "tasks")
    cases = (
        ("dataset.range.slice", "[1:3]", tasks[1:3]),
        ("dataset.range.all", "[:]", tasks),
        ("dataset.range.past_end", "[n+5:n+9]", []),
    )
    problems = []
    for name, label, expected in cases:
        ex = ev.get(name)
        ok, got = _field(ex, "tasks")
        if not ok:
            problems.append(f'{label}: expected 200 {{"tasks": [...]}}, got {answer(ex)}')
        elif got != expected:
            problems.append(
                f"{label}: got {len(got) if isinstance(got, list) else short(got, 40)} task(s) ≠ the list's {len(expected)}"
            )
    if problems:
        return failed("; ".join(problems), problems, *(ev.get(n) for n, _, _ in cases))
    return passed("[1:3], [:] and past-the-end slices match the list", None)


@check(
    "dataset.invalid_split_400",
    severity=Severity.REQUIRED,
    passive=tuple(f"dataset.invalid_split.{r}" for r in ("tasks", "num_tasks", "task", "task_range")),
    title="an unknown split is answered 400 on tasks, num_tasks, task and task_range",
    probe="dataset",
    spec="§2.1",
    remediation='Answer an unknown split with 400 {"detail": "Invalid split"} on every dataset route, never 200 with an empty list.',
)
def invalid_split_400(ev: Evidence) -> CheckOutcome:
    routes = ("tasks", "num_tasks", "task", "task_range")
    exchanges = [ev.get(f"dataset.invalid_split.{r}") for r in routes]
    if all(e is None for e in exchanges):
        return skipped("not probed (no environment)")
    measured = {r: (e.status if e else None) for r, e in zip(routes, exchanges)}
    wrong = {r: answer(e) for r, e in zip(routes, exchanges) if e is not None and e.status != 400}
    if wrong:
        return failed(f"split {NO_SUCH_SPLIT!r}: " + "; ".join(f"{r} → {a}" for r, a in wrong.items()), measured, *exchanges)
    return passed("400 on all four routes", measured, exchanges[0])


@check(
    "dataset.invalid_index_400",
    severity=Severity.REQUIRED,
    passive=("dataset.task.past_end",),
    title="an index past the end is answered 400",
    probe="dataset",
    spec="§2.1",
    remediation='Answer POST /{env}/task with an out-of-range index with 400 {"detail": "Invalid index"}, not 5xx.',
    requires=("dataset.num_tasks",),
)
def invalid_index_400(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("dataset.task.past_end"), 400, f"index {ev.facts.count} (one past the end)")


@check(
    "dataset.env_name_echo",
    severity=Severity.REQUIRED,  # the openreward client reads body["env_name"]: KeyError, and TRL's train_dataset fails
    passive=("dataset.tasks",),
    title="tasks, task and task_range echo env_name",
    probe="dataset",
    spec="§1, §2.1",
    remediation='Include "env_name": <the path\'s env segment> in the /tasks, /task and /task_range answers.',
    requires=("dataset.tasks_list",),
)
def env_name_echo(ev: Evidence) -> CheckOutcome:
    problems = []
    read = 0
    for name in ("dataset.tasks", "dataset.task.first", "dataset.range.all"):
        ex = ev.get(name)
        if ex is None or ex.status != 200:
            continue
        read += 1
        ok, value = _field(ex, "env_name")
        if not ok:
            problems.append(f"{name.split('.', 1)[1]} has no env_name")
        elif not isinstance(value, str) or value.lower() != (ev.env or "").lower():
            problems.append(f"{name.split('.', 1)[1]} says env_name {value!r}, the path says {ev.env!r}")
    if problems:
        return failed("; ".join(problems), problems, ev.get("dataset.tasks"))
    if not read:
        return skipped("no tasks, task or task_range answer to read")
    return passed(f"env_name {ev.env!r} everywhere", ev.env)
