"""Dataset: ``OpenRewardSpec.train_dataset`` is the server's task list, fetched economically (P11).

Rows equal the server's tasks for the split (``prompt`` = one empty user
message, ``task_index``, task-spec keys folded in); ``num_tasks`` and
``indices`` fetch only what they need (requests counted on the server);
``include_metadata=False``; other splits; the index-API fallback; reserved
columns; and a dataset row handed to ``reset(**row)`` — as GRPOTrainer does —
opens that row's task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from orsbench.upstream import defects
from conformance.params import targets
from conformance.targets import Declared, RequestDelta, SuiteTarget
from orsbench import protocol
from orsbench.scenarios import get_scenario

RESERVED = ("prompt", "task_index")
EMPTY_PROMPT = [{"role": "user", "content": ""}]
TASK = "POST /{env}/task"
TASKS = "POST /{env}/tasks"
NUM_TASKS = "POST /{env}/num_tasks"


def expected_rows(tasks: list[dict[str, Any]], indexes: list[int]) -> list[dict[str, Any]]:
    """The rows the spec should build: reserved columns, then every task-spec key (``None`` where a task lacks it)."""
    chosen = [tasks[i] for i in indexes]
    keys = sorted({k for task in chosen for k in task} - set(RESERVED))
    return [{"prompt": EMPTY_PROMPT, "task_index": i, **{k: task.get(k) for k in keys}} for i, task in zip(indexes, chosen)]


def _ragged(d: Declared) -> defects.Defect | None:
    """Why the spec's rows differ from the server's tasks: tasks in a non-default environment (§13.6), or ragged objects."""
    if len(get_scenario(d.scenario).served()) > 1:
        return defects.DEFECTS["env-name-not-sent"]  # the rows come from the server's default environment
    return defects.DEFECTS["ragged-metadata"] if d.ragged_objects else None


def _task_spec_column(d: Declared) -> defects.Defect | None:
    return defects.DEFECTS["task-spec-column"] if "task_spec" in d.task_keys else None


@pytest.mark.parametrize("target", targets(defect=_ragged), indirect=True)
def test_rows_equal_the_server_tasks(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    tasks = target.served.tasks("train")
    rows = new_spec(target).train_dataset.to_list()
    assert rows == expected_rows(tasks, list(range(len(tasks))))


@pytest.mark.parametrize("target", targets(defect=_ragged), indirect=True)
def test_num_tasks_fetches_only_those_tasks(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    tasks = target.served.tasks("train")
    k = min(2, len(tasks))
    spec = new_spec(target, num_tasks=k)
    with RequestDelta(target) as seen:
        rows = spec.train_dataset.to_list()
    assert rows == expected_rows(tasks, list(range(k)))
    assert (seen[NUM_TASKS], seen[TASK], seen[TASKS]) == (1, k, 0), seen.delta


@pytest.mark.parametrize("target", targets(defect=_ragged), indirect=True)
def test_num_tasks_beyond_the_split_is_capped(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    tasks = target.served.tasks("train")
    rows = new_spec(target, num_tasks=len(tasks) + 5).train_dataset.to_list()
    assert rows == expected_rows(tasks, list(range(len(tasks))))


@pytest.mark.parametrize("target", targets(defect=_ragged), indirect=True)
def test_indices_fetch_only_those_tasks_in_order(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    tasks = target.served.tasks("train")
    indexes = [len(tasks) - 1, 0]
    spec = new_spec(target, indices=indexes)
    with RequestDelta(target) as seen:
        rows = spec.train_dataset.to_list()
    assert rows == expected_rows(tasks, indexes)
    assert (seen[NUM_TASKS], seen[TASK], seen[TASKS]) == (0, len(indexes), 0), seen.delta


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_index_out_of_range_is_an_error(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    """An ``indices`` entry past the end is refused loudly, not turned into a row."""
    count = len(target.served.tasks("train"))
    with pytest.raises(Exception, match=protocol.DETAIL_INVALID_INDEX):  # the SDK's own HTTP error type
        _ = new_spec(target, indices=[count]).train_dataset


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_include_metadata_false_keeps_reserved_columns_only(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    tasks = target.served.tasks("train")
    rows = new_spec(target, include_metadata=False).train_dataset.to_list()
    assert rows == [{"prompt": EMPTY_PROMPT, "task_index": i} for i in range(len(tasks))]


@pytest.mark.parametrize("target", targets(defect=_ragged), indirect=True)
def test_other_split_rows_and_sessions(target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]) -> None:
    """``split="test"``: rows are the test tasks and ``reset`` opens test-split sessions."""
    assert "test" in target.served.splits, f"{target} has no test split"
    tasks = target.served.tasks("test")
    spec = new_spec(target, split="test", discover_task_tools=False)
    rows = spec.train_dataset.to_list()
    assert rows == expected_rows(tasks, list(range(len(tasks))))
    adapter = make_adapter(spec, target)
    last = len(tasks) - 1
    assert adapter.reset(task_index=last) == target.served.prompt_text(last, split="test")


@pytest.mark.parametrize("target", targets(["schema-zoo-index"]), indirect=True)
def test_index_api_fallback(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    """P11: when ``/tasks`` is unsupported (400), the whole split comes from ``/num_tasks`` + one ``/task`` each."""
    tasks = target.served.tasks("train")
    assert target.served.wire.tasks(target.served.env, "train").status == 400
    spec = new_spec(target)
    with RequestDelta(target) as seen:
        rows = spec.train_dataset.to_list()
    assert rows == expected_rows(tasks, list(range(len(tasks))))
    assert (seen[TASKS], seen[NUM_TASKS], seen[TASK]) == (1, 1, len(tasks)), seen.delta


@pytest.mark.parametrize("target", targets(["schema-zoo-prompt"]), indirect=True)
def test_reserved_columns_are_never_overwritten(target: SuiteTarget, new_spec: Callable[..., Any]) -> None:
    """P11: task specs with ``prompt`` and ``task_index`` keys keep the chat prompt and the real index."""
    tasks = target.served.tasks("train")
    assert all("prompt" in t and "task_index" in t for t in tasks)
    rows = new_spec(target).train_dataset.to_list()
    assert [r["prompt"] for r in rows] == [EMPTY_PROMPT] * len(tasks)
    assert [r["task_index"] for r in rows] == list(range(len(tasks)))


@pytest.mark.parametrize("target", targets(defect=_task_spec_column), indirect=True)
def test_reset_with_a_dataset_row_opens_that_task(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """GRPOTrainer calls ``reset(**row)`` with the whole row: the session must be on that row's task."""
    spec = new_spec(target, discover_task_tools=False)
    rows = spec.train_dataset.to_list()
    adapter = make_adapter(spec, target)
    last = len(rows) - 1
    assert adapter.reset(**rows[last]) == target.served.prompt_text(last)


def test_num_tasks_and_indices_together_are_rejected() -> None:
    from trl.experimental.openreward import OpenRewardSpec

    with pytest.raises(ValueError, match="num_tasks or indices"):
        OpenRewardSpec("http://127.0.0.1:9", num_tasks=2, indices=[0])
