"""Find where each cell changes between two tested releases, running only the cells that change.

The tested releases of a series (its *anchors*: the default set, ``--releases`` or ``--recent``) are run on every
case. Between two adjacent anchors, a case whose verdict differs has a boundary somewhere among the releases in
between (the package index's full list); binary search finds it, running that one case on ``ceil(log2(g + 1))``
releases for a gap of ``g`` — and cases that change in the same gap share each run while their searches agree
(one install, one process). A case that does not change between two anchors is taken not to change in between:
a defect that comes and goes again *inside* one gap is not seen, which is why the anchors are chosen at the
releases where behaviour is known to change. A release that cannot be installed or driven (``not run``) is left out
of the search and the next one tried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Boundary", "Search", "search"]

#: ``observe(version, cases) -> {case: verdict}`` — run one release on some cases; ``"not run"`` where it could not.
Observe = Callable[[str, list[str]], dict[str, str]]

NOT_RUN = "not run"


@dataclass(frozen=True)
class Boundary:
    """Between ``last`` (the newest release with ``before``) and ``first`` (the oldest with ``after``), ``case`` changed."""

    case: str
    last: str
    first: str
    before: str
    after: str


@dataclass
class Search:
    """Everything observed: ``seen[(version, case)]``, which of them bisection ran, and the boundaries found."""

    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    #: A second run of a cell: the two anchors of a change before it is bisected, both sides of a boundary found.
    again: dict[tuple[str, str], str] = field(default_factory=dict)
    bisected: set[tuple[str, str]] = field(default_factory=set)
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    boundaries: list[Boundary] = field(default_factory=list)

    def observe(self, observe: Observe, version: str, cases: list[str], *, bisecting: bool) -> dict[str, str]:
        got = observe(version, list(cases))
        self.runs.append((version, tuple(cases)))
        for case in cases:
            self.seen[(version, case)] = got.get(case, NOT_RUN)
            if bisecting:
                self.bisected.add((version, case))
        return {case: self.seen[(version, case)] for case in cases}

    def confirm(self, observe: Observe, cells: Iterable[tuple[str, str]]) -> None:
        """Run each cell once more (one run per release), unless it ran twice already."""
        by_version: dict[str, list[str]] = {}
        for version, case in cells:
            if (version, case) not in self.again and case not in by_version.get(version, []):
                by_version.setdefault(version, []).append(case)
        for version, cases in by_version.items():
            got = observe(version, list(cases))
            self.runs.append((version, tuple(cases)))
            for case in cases:
                self.again[(version, case)] = got.get(case, NOT_RUN)

    def stable(self, version: str, case: str) -> bool:
        """The cell gave one verdict each time it ran (a hang on a loaded machine can be a deadline missed once)."""
        return self.again.get((version, case), self.seen.get((version, case))) == self.seen.get((version, case))


def search(versions: list[str], anchors: list[str], cases: list[str], observe: Observe, *, found: Search | None = None) -> Search:
    """Run ``anchors`` on ``cases``, then bisect every gap where a case's verdict changes (``versions``: oldest first).

    ``found``: observations already made (a second shard's overlap, a resumed run) — not run again.
    """
    done = found or Search()
    order = {v: i for i, v in enumerate(versions)}
    anchors = sorted(set(anchors), key=order.__getitem__)
    for anchor in anchors:
        todo = [c for c in cases if (anchor, c) not in done.seen]
        if todo:
            done.observe(observe, anchor, todo, bisecting=False)
    # Per case, the gaps between the anchors it ran at (an anchor that could not be installed joins its neighbours' gaps).
    gaps: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        ran = [a for a in anchors if done.seen.get((a, case), NOT_RUN) != NOT_RUN]
        for a, b in zip(ran, ran[1:]):
            gaps.setdefault((a, b), []).append(case)
    # A change between two anchors is run once more at both before it is bisected: a cell that flips between two runs
    # of one release (a deadline missed on a loaded machine) is no change, and bisecting it would place a false boundary.
    changed = {(a, b): [c for c in cs if done.seen[(a, c)] != done.seen[(b, c)]] for (a, b), cs in gaps.items()}
    done.confirm(observe, [(v, c) for (a, b), cs in changed.items() for c in cs for v in (a, b)])
    for (a, b), changing in sorted(changed.items(), key=lambda item: order[item[0][0]]):
        steady = [c for c in changing if done.stable(a, c) and done.stable(b, c)]
        _gap(done, versions[order[a] + 1 : order[b]], a, b, steady, observe)
    # And each boundary found, on both sides (bisection decided each step on one run).
    done.confirm(observe, [(v, b.case) for b in done.boundaries for v in (b.last, b.first)])
    return done


def _gap(done: Search, between: list[str], a: str, b: str, cases: list[str], observe: Observe) -> None:
    """Bisect the releases ``between`` anchors ``a`` and ``b`` for every case whose verdict differs at the two."""
    # Per changing case: the releases still in question, and the newest known to keep a's verdict / oldest with b's.
    open_: dict[str, list[str]] = {}
    edges: dict[str, tuple[str, str]] = {}
    #: Per case, the verdict whose last release is sought (a's; after a third verdict was placed, that one's).
    since: dict[str, str] = {}
    for case in cases:
        va, vb = done.seen.get((a, case)), done.seen.get((b, case))
        if va is None or vb is None or NOT_RUN in (va, vb) or va == vb:
            continue
        open_[case], edges[case], since[case] = list(between), (a, b), va
    while open_:
        # The midpoint of each case's interval; cases whose midpoints agree share one run.
        by_mid: dict[str, list[str]] = {}
        for case, candidates in list(open_.items()):
            if not candidates:
                lo, hi = edges[case]
                done.boundaries.append(Boundary(case, lo, hi, done.seen[(lo, case)], done.seen[(hi, case)]))
                del open_[case]
                if hi != b and done.seen[(hi, case)] != done.seen[(b, case)]:
                    # A third verdict between a's and b's (not checked → fail → pass): the rest of the gap changes
                    # again, so it is searched too, from the release just placed.
                    open_[case], edges[case], since[case] = between[between.index(hi) + 1 :], (hi, b), done.seen[(hi, case)]
                continue
            by_mid.setdefault(candidates[len(candidates) // 2], []).append(case)
        for mid, group in by_mid.items():
            todo = [c for c in group if (mid, c) not in done.seen]
            if todo:
                done.observe(observe, mid, todo, bisecting=True)
            for case in group:
                candidates = open_[case]
                at = candidates.index(mid)
                verdict = done.seen[(mid, case)]
                lo, hi = edges[case]
                if verdict == NOT_RUN:  # cannot tell here: drop it, try its neighbours
                    del candidates[at]
                elif verdict == since[case]:
                    edges[case] = (mid, hi)
                    del candidates[: at + 1]
                else:  # b's verdict, or a third one: the boundary of the sought verdict is before it either way
                    edges[case] = (lo, mid)
                    del candidates[at:]
