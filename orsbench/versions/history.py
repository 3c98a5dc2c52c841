"""A client's history across releases: the rows run, and what they show — where cells change, and per pinned defect
its first and last failing release.

Everything derived (:meth:`History.analyse`) is computed from the rows and each series' facts alone, so shards'
JSON merge into one history (:func:`merge`) exactly as one run would have written it. JSON contract
(``History.to_json``)::

    {"kind": "orsbench-versions", "seconds", "shard",
     "series": {name: {"client", "package", "pins", "versions", "anchors", "cases", "expected": {case: verdict},
                       "pinned": {case: {"verdict", "defects"}}, "summaries": {defect: text},
                       "installs": {version: {"seconds", "reused", "error", "run_s"}},
                       "changes": [{"case", "last", "first", "before", "after", "exact"}],
                       "defects": [{"id", "summary", "cases", "decided_by", "first_failing", "last_failing", "ranges",
                                    "masked", "absent", "since_oldest_tested", "still_failing"}]}},
     "rows": [{"client", "series", "release", "version", "case", "verdict", "defects", "error", "bisected", "elapsed",
               "again"}],
     "counts": {"cells_run", "cells_anchored", "cells_bisected", "cells_confirmed", "cells_spanned"}}

``again`` is a second run's verdict (a change's two anchors before it is bisected, a boundary's two sides after);
a cell whose two runs disagree is listed in its series' ``unstable`` and left out of ``changes`` and ``defects``.

A defect's ranges are read from ``decided_by``: the cases where it is the only pinned defect (else all of its cases).
Its ``ranges`` are where its cases get the pinned (defective) verdict, ``absent`` where they get a correct
client's, ``masked`` where they get something else (a release that cannot play at all): there the defect is neither
seen nor fixed, and ``since_oldest_tested`` ("≤ first_failing") says no release before the first failing one was seen
without it. ``cells_spanned`` is what running every release between the oldest and newest tested on every case would have cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbench.versions.bisection import NOT_RUN
from orsbench.versions.releases import sort_versions

__all__ = ["KIND", "History", "Row", "SeriesFacts", "merge"]

KIND = "orsbench-versions"


@dataclass
class Row:
    """One (client, release, case) cell."""

    client: str
    series: str
    release: str
    version: str
    case: str
    verdict: str
    defects: list[str] = field(default_factory=list)
    error: str | None = None
    bisected: bool = False
    elapsed: float | None = None
    #: The verdict of a second run (a change's anchors, a boundary's sides): where it differs, the cell is unstable.
    again: str | None = None

    @property
    def stable(self) -> bool:
        return self.again is None or self.again == self.verdict

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.series, self.version, self.case)


@dataclass
class SeriesFacts:
    """What a series is and what the pinned matrix says of its cases (the yardstick each release is read against)."""

    client: str
    package: str
    pins: list[str]
    #: Every release of the package between the oldest and newest tested, oldest first (what bisection walks).
    versions: list[str]
    anchors: list[str]
    cases: list[str]
    #: What a correct client gets in each case.
    expected: dict[str, str]
    #: What the pinned release gets (``verdict``) and the pinned defects that explain it.
    pinned: dict[str, dict[str, Any]]
    summaries: dict[str, str] = field(default_factory=dict)
    installs: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    defects: list[dict[str, Any]] = field(default_factory=list)
    #: Cells that gave two verdicts in two runs of one release: left out of changes and defects.
    unstable: list[dict[str, Any]] = field(default_factory=list)
    #: A server series (``server:openreward``): per check that fails at some release run, its ``first_failing`` and
    #: ``last_failing`` release and its ``ranges`` (:mod:`orsbench.versions.servers`); empty for a client's series.
    checks: list[dict[str, Any]] = field(default_factory=list)

    def label(self, version: str) -> str:
        return version + "".join(f"+{pin}" for pin in self.pins)


@dataclass
class History:
    series: dict[str, SeriesFacts] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    shard: str | None = None

    # -- reading the rows -------------------------------------------------------------------------------------------
    def explained(self, name: str, case: str, verdict: str) -> list[str]:
        """The pinned defects that explain ``verdict`` in ``case``: the pinned ones, where the release does as the pinned one."""
        facts = self.series[name]
        pinned = facts.pinned.get(case) or {}
        if verdict != pinned.get("verdict") or verdict == facts.expected.get(case):
            return []
        return list(pinned.get("defects") or [])

    def seen(self, name: str, *, stable: bool = False) -> dict[tuple[str, str], str]:
        """``(version, case) -> verdict`` of a series' rows (``stable``: leaving out the cells that flipped)."""
        return {(r.version, r.case): r.verdict for r in self.rows if r.series == name and (r.stable or not stable)}

    def analyse(self) -> History:
        """Fill each row's defects and each series' changes and defect ranges from the rows."""
        for row in self.rows:
            row.defects = self.explained(row.series, row.case, row.verdict) if row.verdict != NOT_RUN else []
        for name, facts in self.series.items():
            seen = self.seen(name, stable=True)
            facts.unstable = [{"release": r.release, "case": r.case, "verdict": r.verdict, "again": r.again} for r in self.rows if r.series == name and not r.stable]
            order = {v: i for i, v in enumerate(facts.versions)}
            facts.changes, segments = [], {}
            for case in facts.cases:
                points = sorted((v for (v, c), verdict in seen.items() if c == case and verdict != NOT_RUN), key=order.__getitem__)
                tried = {v for (v, c) in seen if c == case}
                runs: list[dict[str, Any]] = []
                for prev, this in zip([None, *points], points):
                    verdict = seen[(this, case)]
                    if prev is not None and seen[(prev, case)] == verdict:
                        runs[-1]["to"] = this
                        continue
                    if prev is not None:
                        gap = facts.versions[order[prev] + 1 : order[this]]
                        exact = all(v in tried for v in gap)  # every release between was tried (and could not be run)
                        facts.changes.append({"case": case, "last": prev, "first": this, "before": seen[(prev, case)], "after": verdict, "exact": exact})
                    runs.append({"from": this, "to": this, "verdict": verdict})
                segments[case] = runs
            facts.defects = self._defects(facts, segments)
            facts.checks = self._failing_checks(facts, segments) if facts.client.startswith("server:") else []
        return self

    @staticmethod
    def _failing_checks(facts: SeriesFacts, segments: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A server's checks in the defects' vocabulary: where each one fails (``fail``), first and last."""
        order = {v: i for i, v in enumerate(facts.versions)}
        newest = max((run["to"] for runs in segments.values() for run in runs), key=order.__getitem__, default=None)
        out = []
        for case in facts.cases:
            runs = segments.get(case, [])
            ranges = [{"case": case, "from": r["from"], "to": r["to"]} for r in runs if r["verdict"] == "fail"]
            if ranges:
                out.append({"id": case, "first_failing": ranges[0]["from"], "last_failing": ranges[-1]["to"], "ranges": ranges,
                            "since_oldest_tested": runs[0]["verdict"] == "fail", "still_failing": runs[-1]["verdict"] == "fail" and runs[-1]["to"] == newest})  # fmt: skip
        return out

    @staticmethod
    def _defects(facts: SeriesFacts, segments: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        order = {v: i for i, v in enumerate(facts.versions)}
        # A release that fails a case both a correct client and the pinned release play to the end cannot play at all
        # (an API the adapter drives is missing, the client crashes): none of its cells says a defect is absent.
        plain = [c for c in facts.cases if facts.expected.get(c) == (facts.pinned.get(c) or {}).get("verdict") == "works"]
        broken = {run_v for c in plain for run in segments.get(c, []) if run["verdict"] != "works" for run_v in (run["from"], run["to"])}
        points = {c: [(v, run["verdict"]) for run in segments.get(c, []) for v in facts.versions[order[run["from"]] : order[run["to"]] + 1]] for c in facts.cases}
        seen_versions = {v for c in facts.cases for run in segments.get(c, []) for v in (run["from"], run["to"])}
        found: dict[str, dict[str, Any]] = {}
        for case in facts.cases:
            pinned = facts.pinned.get(case) or {}
            if pinned.get("verdict") == facts.expected.get(case):
                continue
            for defect in pinned.get("defects") or []:
                entry = found.setdefault(defect, {"id": defect, "summary": facts.summaries.get(defect, ""), "cases": [], "ranges": [], "masked": [], "absent": []})
                entry["cases"].append(case)
                last: tuple[str, str] | None = None
                for version, verdict in points[case]:
                    if version not in seen_versions:
                        continue  # between two runs with one verdict: it extends the run, it is no run of its own
                    # The pinned verdict: the defect shows. A correct client's, at a release that can play: it is absent.
                    # Anything else: another failure hides it — neither failing nor fixed there.
                    if verdict == pinned["verdict"]:
                        kind = "ranges"
                    elif verdict == facts.expected.get(case) and version not in broken:
                        kind = "absent"
                    else:
                        kind = "masked"
                    if last == (kind, verdict):
                        entry[kind][-1]["to"] = version
                    else:
                        entry[kind].append({"case": case, "from": version, "to": version, **({"verdict": verdict} if kind == "masked" else {})})
                    last = (kind, verdict)
        tested = sorted(seen_versions, key=order.__getitem__)
        for entry in found.values():
            # A case where this is the only pinned defect decides; where others share the case, its verdict cannot say
            # which of them shows (firehorse's second-setup-fails: a leaked session and an average over the scored).
            alone = [c for c in entry["cases"] if (facts.pinned.get(c) or {}).get("defects") == [entry["id"]]]
            entry["decided_by"] = alone or list(entry["cases"])
            for kind in ("ranges", "masked", "absent"):
                entry[kind] = [r for r in entry[kind] if r["case"] in entry["decided_by"]]
            ranges = entry["ranges"]
            entry["first_failing"] = min((r["from"] for r in ranges), key=order.__getitem__, default=None)
            entry["last_failing"] = max((r["to"] for r in ranges), key=order.__getitem__, default=None)
            first = entry["first_failing"]
            # "≤ first": no release before it was seen without the defect (the oldest run, or only hidden before it).
            entry["since_oldest_tested"] = first is not None and not any(order[a["from"]] < order[first] for a in entry["absent"])
            entry["still_failing"] = bool(tested) and entry["last_failing"] == tested[-1]
        return list(found.values())

    # -- figures ----------------------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        spanned = sum(len(f.versions) * len(f.cases) for f in self.series.values())
        bisected = sum(1 for r in self.rows if r.bisected)
        again = sum(1 for r in self.rows if r.again is not None)
        return {
            "cells_run": len(self.rows) + again,
            "cells_anchored": len(self.rows) - bisected,
            "cells_bisected": bisected,
            "cells_confirmed": again,
            "cells_spanned": spanned,
        }

    # -- JSON -------------------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "seconds": round(self.seconds, 1),
            "shard": self.shard,
            "series": {name: vars(facts) for name, facts in self.series.items()},
            "rows": [vars(row) for row in self.rows],
            "counts": self.counts(),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        if data.get("kind") != KIND:
            raise ValueError(f"not an orsbench versions history (its kind is {data.get('kind')!r}, not {KIND!r})")
        return cls(
            {name: SeriesFacts(**facts) for name, facts in data["series"].items()},
            [Row(**row) for row in data["rows"]],
            float(data.get("seconds") or 0.0),
            data.get("shard"),
        )


def merge(histories: Iterable[History]) -> History:
    """One history from several (the shards of one run): rows by (series, release, case) — a run one beats a ``not
    run`` —, each series' releases, anchors and installs joined; then everything derived again."""
    merged = History()
    rows: dict[tuple[str, str, str], Row] = {}
    for history in histories:
        merged.seconds = max(merged.seconds, history.seconds)
        for name, facts in history.series.items():
            mine = merged.series.get(name)
            if mine is None:
                merged.series[name] = SeriesFacts(**{k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in vars(facts).items()})
                continue
            mine.versions = sort_versions([*mine.versions, *facts.versions])
            mine.anchors = sort_versions([*mine.anchors, *facts.anchors])
            mine.installs.update(facts.installs)
            mine.cases += [c for c in facts.cases if c not in mine.cases]
            mine.expected.update(facts.expected)
            mine.pinned.update(facts.pinned)
            mine.summaries.update(facts.summaries)
        for row in history.rows:
            if row.key not in rows or rows[row.key].verdict == NOT_RUN:
                rows[row.key] = row
            elif rows[row.key].again is None and row.again is not None:  # the other shard ran it a second time
                rows[row.key].again = row.again
    merged.rows = sorted(rows.values(), key=lambda r: (r.series, merged.series[r.series].versions.index(r.version), r.case))
    return merged.analyse()


def load(folder: Path) -> list[History]:
    """Every history JSON under ``folder`` (a shard's ``--json``); ValueError naming a file that is not one."""
    found = []
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
        if isinstance(data, dict) and data.get("kind") == KIND:
            found.append(History.from_json(data))
    if not found:
        raise ValueError(f"no orsbench versions JSON under {folder} (each shard's --json)")
    return found
