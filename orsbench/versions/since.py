"""From a history to the "since" record the matrix reads (:mod:`orsbench.upstream.since`): ``orsbench versions --record``.

Only a client's own series counts (its own package's releases, no companion pinned: :func:`own_series`); per pinned
defect the history's ranges, the boundary where it appeared and the one where it was fixed are carried over as they
are, so the matrix says exactly what the history page says. The first release on the package index is looked up in
the cached list (:class:`~orsbench.versions.releases.Index`), so "since 0.1.0" can say that no release is older.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from orsbench.upstream.since import Change, Since
from orsbench.version import __version__
from orsbench.versions.history import History, SeriesFacts
from orsbench.versions.releases import PACKAGES

__all__ = ["FirstRelease", "own_series", "records", "since_of"]

#: ``first_release(package, client) -> version | None``: the package's oldest release on the index (None: unknown).
FirstRelease = Callable[[str, str], str | None]


def own_series(history: History) -> dict[str, str]:
    """``client -> series name`` of the series that vary the client's own package with nothing else pinned."""
    return {f.client: name for name, f in history.series.items() if f.package == PACKAGES.get(f.client) and not f.pins}


def _change(facts: SeriesFacts, cases: list[str], *, first: str | None = None, last: str | None = None) -> Change | None:
    """The change in one of ``cases`` whose newer release is ``first`` (or whose older is ``last``)."""
    for c in facts.changes:
        if c["case"] in cases and (first is None or c["first"] == first) and (last is None or c["last"] == last):
            return Change(c["last"], c["first"], c["before"], c["after"], bool(c["exact"]))
    return None


def since_of(history: History, name: str, entry: dict[str, Any], *, first_release: str | None = None, recorded: dict[str, str] | None = None) -> Since:
    """One defect entry of series ``name`` (``SeriesFacts.defects``) as a :class:`Since`."""
    facts = history.series[name]
    order = facts.versions.index
    decided = list(entry.get("decided_by") or entry["cases"])
    spans = sorted({(r["from"], r["to"]) for r in entry["ranges"]}, key=lambda span: (order(span[0]), order(span[1])))
    run = sorted({r.version for r in history.rows if r.series == name}, key=order)
    first, last = entry["first_failing"], entry["last_failing"]
    return Since(
        client=facts.client,
        defect=entry["id"],
        package=facts.package,
        first_failing=first,
        last_failing=last,
        spans=tuple(_merged(spans, facts.versions)),
        since_oldest_tested=bool(entry["since_oldest_tested"]),
        still_failing=bool(entry["still_failing"]),
        tested=(run[0], run[-1]) if run else None,
        first_release=first_release,
        appeared=_change(facts, decided, first=first) if first is not None else None,
        fixed=_change(facts, decided, last=last) if last is not None and not entry["still_failing"] else None,
        recorded=dict(recorded or {}),
    )


def _merged(spans: list[tuple[str, str]], versions: list[str]) -> list[tuple[str, str]]:
    """Spans of several cases joined where they overlap or touch (one defect's failing releases, whichever case shows it)."""
    out: list[tuple[str, str]] = []
    for a, b in spans:
        if out and versions.index(a) <= versions.index(out[-1][1]) + 1:
            if versions.index(b) > versions.index(out[-1][1]):
                out[-1] = (out[-1][0], b)
            continue
        out.append((a, b))
    return out


def records(history: History, *, first_release: FirstRelease = lambda package, client: None, command: str = "") -> dict[str, dict[str, Since]]:
    """``client -> defect -> Since`` from each client's own series in ``history`` (what ``--record`` writes)."""
    recorded = {"by": command or "orsbench versions", "orsbench": __version__, "at": datetime.now(UTC).strftime("%Y-%m-%d")}
    out: dict[str, dict[str, Since]] = {}
    for client, name in own_series(history).items():
        facts = history.series[name]
        oldest = first_release(facts.package, client)
        out[client] = {e["id"]: since_of(history, name, e, first_release=oldest, recorded=recorded) for e in facts.defects}
    return out
