"""The history page: a release × case grid per series, in the spirit of wpt.fyi — one self-contained file.

Each row is a release run (oldest first, the pinned matrix's prediction above them), each column a case; a cell is
coloured by its verdict, and a cell whose verdict differs from the release run before it is outlined (``changed``):
that is where to look. Above each grid, each pinned defect with its first and last failing release and a link to
the change (the project's compare view where it has public tags, else the release's page on the package index).
Inline CSS, no script, nothing fetched; the Jinja2 template only lays out the view model built here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2

from orsbench.upstream.since import change_link
from orsbench.version import __version__
from orsbench.versions.bisection import NOT_RUN
from orsbench.versions.history import History, SeriesFacts
from orsbench.versions.play import CANNOT_DRIVE
from orsbench.versions.report import differs_from_pinned
from orsbench.versions.since import FirstRelease, since_of
from orsbench.versions.servers import NOT_CHECKED, NOT_SERVED, is_server

__all__ = ["render_history"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("orsbench.versions", "templates"),
    autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

_CLASS = {"works": "works", "fails clearly": "clearly", "fails silently": "silently", "hangs": "hangs", NOT_RUN: "notrun", CANNOT_DRIVE: "notrun",
          # a server's check statuses (orsbench versions server:openreward)
          "pass": "works", "warn": "clearly", "fail": "silently", "error": "hangs", "skip": "notrun", "n/a": "notrun",
          NOT_SERVED: "notrun", NOT_CHECKED: "notrun"}  # fmt: skip


def _telling(facts: SeriesFacts, seen: dict[tuple[str, str], str]) -> list[str]:
    """A server's columns: the checks that fail somewhere, or whose status differs between releases that checked them.

    A check that only goes from ``not served``/``not checked`` to one status is left out: every check of a scenario
    an old release cannot serve does that, and the per-release tally (Markdown, terminal) says it once."""
    by_case: dict[str, set[str]] = {}
    for (_, case), verdict in seen.items():
        if verdict not in (NOT_SERVED, NOT_CHECKED, NOT_RUN):
            by_case.setdefault(case, set()).add(verdict)
    return [c for c in facts.cases if len(by_case.get(c, ())) > 1 or "fail" in by_case.get(c, ())]


def _series_view(history: History, name: str, facts: SeriesFacts, first_release: FirstRelease) -> dict[str, Any]:
    seen = history.seen(name)
    cases = _telling(facts, seen) if is_server(facts.client) else facts.cases
    errors = {(r.version, r.case): r.error for r in history.rows if r.series == name}
    bisected = {(r.version, r.case) for r in history.rows if r.series == name and r.bisected}
    flipped = {(r.version, r.case): r.again for r in history.rows if r.series == name and not r.stable}
    releases = sorted({v for v, _ in seen}, key=facts.versions.index)
    rows, before = [], {}
    for v in releases:
        cells = []
        for case in cases:
            verdict = seen.get((v, case))
            if verdict is None:
                cells.append({"text": "", "cls": "empty", "title": "not run at this release (unchanged either side)", "bisected": False})
                continue
            unstable = (v, case) in flipped
            changed = verdict != NOT_RUN and not unstable and case in before and before[case] != verdict
            title = f"{facts.label(v)} · {case}: {verdict}" + (f" — {errors[(v, case)]}" if errors.get((v, case)) else "")
            if unstable:
                title += f" — run again: {flipped[(v, case)]} (unstable: left out of the changes)"
            cls = _CLASS.get(verdict, "other") + (" changed" if changed else "") + (" unstable" if unstable else "")
            cells.append({"text": verdict, "cls": cls, "title": title, "bisected": (v, case) in bisected})
            if verdict != NOT_RUN and not unstable:
                before[case] = verdict
        skipped = facts.versions.index(v) - facts.versions.index(rows[-1]["version"]) - 1 if rows else 0
        rows.append({"version": v, "label": facts.label(v), "cells": cells, "skipped": skipped, "anchor": v in facts.anchors,
                     "install": facts.installs.get(v, {})})  # fmt: skip
    pinned = [{"text": facts.pinned[c]["verdict"], "cls": _CLASS.get(facts.pinned[c]["verdict"], "other")} for c in cases]
    order = facts.versions.index
    defects = []
    for d in facts.defects:
        links = []
        for case in d["cases"]:
            for c in facts.changes:
                if c["case"] == case:
                    links.append({"text": f"{c['last']} → {c['first']}", "url": change_link(facts.package, c["last"], c["first"])})
        # The words and link orsbench matrix shows (for the client's own series).
        since = since_of(history, name, d, first_release=first_release(facts.package, facts.client))
        defects.append({**d, "links": links, "since": since.words, "since_url": since.url, "fix_url": since.fix_url,
                        "span": None if d["first_failing"] is None else order(d["last_failing"]) - order(d["first_failing"]) + 1})  # fmt: skip
    return {
        "name": name,
        "facts": facts,
        "cases": cases,
        "hidden": len(facts.cases) - len(cases),
        "checks": [{**c, "links": [{"text": f"{ch['last']} → {ch['first']}", "url": change_link(facts.package, ch["last"], ch["first"])}
                                   for ch in facts.changes if ch["case"] == c["id"]]} for c in facts.checks],  # fmt: skip
        "rows": rows,
        "pinned": pinned,
        "defects": defects,
        "changes": [{**c, "url": change_link(facts.package, c["last"], c["first"])} for c in facts.changes],
        "diff": differs_from_pinned(history, name),
    }


def render_history(history: History, *, first_release: FirstRelease = lambda package, client: None) -> str:
    """The whole page (``first_release``: a package's oldest release on the index, where it is known)."""
    series = [_series_view(history, name, facts, first_release) for name, facts in history.series.items()]
    return _ENV.get_template("history.html.j2").render(
        series=series,
        counts=history.counts(),
        seconds=round(history.seconds),
        version=__version__,
        when=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
