"""The order in which conformance's xdist groups reach the workers: the groups that wait beside the client batches.

With ``--dist loadgroup`` (``conftest.py`` switches ``-n`` to it) xdist keeps one queue of groups, largest
first, and hands a worker the next group when it has two tests left. Two groups mostly wait: the wire checks
on the slow scenario (its slow tool) and client robustness (clients riding out retry budgets and TTLs) — their
workers used 1.3 s of CPU in 37.6 s and 1.8 s in 32.6 s. At the back of the queue that waiting trailed the run
with one core idle. Handed out first, each waits while the other worker plays a client batch, whose lanes of
forked clients keep both cores busy.
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


class FrontLoadedScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` scheduling with its queue put in :func:`front_loaded` order before the first hand-out."""

    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            self._ordered = True
            self.workqueue = OrderedDict((group, self.workqueue[group]) for group in front_loaded(list(self.workqueue)))
        super()._assign_work_unit(node)
