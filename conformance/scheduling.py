"""The order in which conformance's xdist groups reach the workers: the groups that wait beside the client batches.

With ``--dist loadgroup`` (``conftest.py`` switches ``-n`` to it) xdist keeps one queue of groups, largest
first, and hands a worker the next group when it has two tests left. Client robustness mostly waits (clients
riding out retry budgets and TTLs: 1.3 s of CPU in 10 s), and so do the fault-profile batches; at the back of
the queue that waiting trailed the run with one core idle, and two profile batches side by side left a core
half idle. So the waiting groups go out first, each beside a scenario batch, whose lanes of forked clients keep
the cores busy. The wire checks on the slow scenario waited longer still (2.3 s of CPU in 41 s): they now run
in a process of their own from the start (:mod:`conformance.background`), and their group, which only grades
that report, is handed out last.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadGroupScheduling

from conformance import background

#: Groups that mostly wait, in the order they go out: names, or the beginning of names (ending in ``-``) as their
#: tests' ``xdist_group`` marks give them. The fault-profile batches wait too — on retry budgets, stalls, slow
#: setups, hangs: played side by side they kept 1.5 of the two cores busy, beside a scenario batch all of them.
WAITING = ("client-robustness", "clients-profiles-")
#: Groups whose evidence a process of its own gathers from the start (:mod:`conformance.background`): handed out
#: last, when it has long been gathered.
LAST = tuple(f"wire-checks-mock-{scenario}" for scenario in background.BACKGROUND)  # test_wire_checks' group names
#: How the client batches' groups begin (``conformance/test_clients.py``: one batch per server, the profiles in halves).
BATCHES = "clients-"


def _rank(group: str) -> int | None:
    """Where ``group`` stands in :data:`WAITING` (None: it does not mostly wait)."""
    for rank, name in enumerate(WAITING):
        if group == name or (name.endswith("-") and group.startswith(name)):
            return rank
    return None


def front_loaded(groups: list[str]) -> list[str]:
    """``groups`` in xdist's order, but the waiting groups first, each paired with a client batch that keeps the cores
    busy, then the rest; the groups gathered in the background last."""
    waiting = sorted((g for g in groups if _rank(g) is not None), key=lambda g: _rank(g))  # type: ignore[arg-type,return-value]
    batches = [g for g in groups if g.startswith(BATCHES) and _rank(g) is None]
    head: list[str] = []
    for i in range(max(len(waiting), len(batches))):
        head += waiting[i : i + 1] + batches[i : i + 1]
    tail = [g for g in groups if g in LAST]
    return head + [g for g in groups if g not in head and g not in tail] + tail


class FrontLoadedScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` scheduling with its queue put in :func:`front_loaded` order before the first hand-out."""

    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            self._ordered = True
            self.workqueue = OrderedDict((group, self.workqueue[group]) for group in front_loaded(list(self.workqueue)))
        super()._assign_work_unit(node)
