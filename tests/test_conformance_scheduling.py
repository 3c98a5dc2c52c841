"""conformance/scheduling.py: the groups that wait are handed out first, each beside a client batch."""

from __future__ import annotations

from collections import OrderedDict
import pytest
from xdist.scheduler import LoadGroupScheduling

from conformance.scheduling import FrontLoadedScheduling, front_loaded, next_group


def test_each_waiting_group_goes_out_beside_a_client_batch_and_the_rest_keeps_xdist_order() -> None:
    queue = ["schema-zoo.mock", "clients-mock", "clients-sdk", "echo.mock", "wire-checks-mock-slow", "clients-profiles-0", "client-robustness"]
    assert front_loaded(queue) == [
        "wire-checks-mock-slow", "clients-mock", "client-robustness", "clients-sdk", "clients-profiles-0", "schema-zoo.mock", "echo.mock",
    ]  # fmt: skip


def test_a_run_without_those_groups_keeps_xdist_order() -> None:
    queue = ["schema-zoo.mock", "echo.mock", "slow.sdk"]
    assert front_loaded(queue) == queue


def test_the_scheduler_reorders_its_queue_once_before_the_first_hand_out(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[str] = []
    monkeypatch.setattr(LoadGroupScheduling, "_assign_work_unit", lambda self, node: handed.append(self.workqueue.popitem(last=False)[0]))
    scheduler = FrontLoadedScheduling.__new__(FrontLoadedScheduling)  # the queue alone: no config, no workers
    scheduler.workqueue = OrderedDict((g, {f"t@{g}": False}) for g in ["echo.mock", "clients-mock", "client-robustness"])
    for _ in range(3):
        scheduler._assign_work_unit(None)
    assert handed == ["client-robustness", "clients-mock", "echo.mock"]


def test_the_waiting_groups_go_to_one_worker_while_the_other_plays(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[tuple[str, str]] = []
    monkeypatch.setattr(LoadGroupScheduling, "_assign_work_unit", lambda self, node: handed.append((node, self.workqueue.popitem(last=False)[0])))
    scheduler = FrontLoadedScheduling.__new__(FrontLoadedScheduling)
    groups = ["clients-mock", "clients-sdk", "clients-ors-sdk", "wire-checks-mock-slow", "client-robustness", "echo.mock"]
    scheduler.workqueue = OrderedDict((g, {f"t@{g}": False}) for g in groups)
    # gw0 takes the slow wire checks; gw1's first batch ends first and asks again before gw0 does
    for node in ["gw0", "gw1", "gw1", "gw0", "gw1", "gw0"]:
        scheduler._assign_work_unit(node)
    assert handed == [
        ("gw0", "wire-checks-mock-slow"), ("gw1", "clients-mock"), ("gw1", "clients-sdk"),
        ("gw0", "client-robustness"), ("gw1", "clients-ors-sdk"), ("gw0", "echo.mock"),
    ]  # fmt: skip


def test_a_worker_with_no_group_of_its_kind_left_takes_the_head_of_the_queue() -> None:
    assert next_group(["client-robustness"], waiter_asks=False) is None
    assert next_group(["echo.mock"], waiter_asks=True) is None
    assert next_group(["echo.mock", "client-robustness"], waiter_asks=True) == "client-robustness"
