"""conformance/scheduling.py: the groups that wait are handed out first, each beside a client batch; the groups gathered
in the background last."""

from __future__ import annotations

from collections import OrderedDict
import pytest
from xdist.scheduler import LoadGroupScheduling

from conformance.scheduling import FrontLoadedScheduling, front_loaded


def test_each_waiting_group_goes_out_beside_a_client_batch_and_the_rest_keeps_xdist_order() -> None:
    queue = [
        "schema-zoo.mock", "clients-ors-sdk", "clients-mock", "clients-profiles-1", "clients-sdk", "echo.mock", "wire-checks-mock-slow",
        "clients-profiles-0", "client-robustness",
    ]  # fmt: skip
    assert front_loaded(queue) == [
        "client-robustness", "clients-ors-sdk", "clients-profiles-1", "clients-mock", "clients-profiles-0", "clients-sdk",
        "schema-zoo.mock", "echo.mock", "wire-checks-mock-slow",
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
