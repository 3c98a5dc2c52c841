"""The order in which conformance's xdist groups reach the workers: the groups that wait beside the client batches.

With ``--dist loadgroup`` (``conftest.py`` switches ``-n`` to it) xdist keeps one queue of groups, largest
first, and hands a worker the next group when it has two tests left. Two groups mostly wait: the wire checks
on the slow scenario (its slow tool) and client robustness (clients riding out retry budgets and TTLs) — their
workers used 1.3 s of CPU in 37.6 s and 1.8 s in 32.6 s. At the back of the queue that waiting trailed the run
with one core idle. Handed out first, each waits while the other worker plays a client batch, whose lanes of
forked clients keep both cores busy.

Both go to one worker, one after the other: handed to whichever worker asked next, the second waiting group
went to the worker whose first batch had ended while the other still waited on the slow scenario — both
workers waiting, both cores idle (8 s of a 183 s run, measured from the workers' timelines).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadGroupScheduling

#: Groups that mostly wait (their names as their tests' ``xdist_group`` marks give them).
WAITING = ("wire-checks-mock-slow", "client-robustness")
#: How the client batches' groups begin (``conformance/test_clients.py``: one batch per server, the profiles in halves).
BATCHES = "clients-"


def front_loaded(groups: list[str]) -> list[str]:
    """``groups`` in xdist's order, but each waiting group first, paired with a client batch, then the other batches."""
    waiting = [g for g in groups if g in WAITING]
    batches = [g for g in groups if g.startswith(BATCHES)]
    head: list[str] = []
    for i in range(max(len(waiting), len(batches))):
        head += waiting[i : i + 1] + batches[i : i + 1]
    return head + [g for g in groups if g not in head]


def next_group(queue: list[str], waiter_asks: bool) -> str | None:
    """The group to hand out next from ``queue``: a waiting group to the worker that waits, any other to the rest
    (None: the head of the queue, as xdist would take it)."""
    for group in queue:
        if (group in WAITING) == waiter_asks:
            return group
    return None


class FrontLoadedScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` scheduling with its queue put in :func:`front_loaded` order before the first hand-out,
    and the waiting groups handed to one worker (the first to take one) while the others play."""

    _ordered = False
    _waiter: Any = None

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            self._ordered = True
            self.workqueue = OrderedDict((group, self.workqueue[group]) for group in front_loaded(list(self.workqueue)))
        queue = list(self.workqueue)
        if self._waiter is None and queue and queue[0] in WAITING:
            self._waiter = node
        group = next_group(queue, node is self._waiter)
        if group is not None:
            self.workqueue.move_to_end(group, last=False)
        super()._assign_work_unit(node)
