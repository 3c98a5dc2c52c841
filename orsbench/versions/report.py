"""A history for people: the terminal's lines and Markdown (a PR comment, ``$GITHUB_STEP_SUMMARY``).

Both lead with what a reader acts on: each pinned defect's first and last failing release, the cells that changed
between releases, and — for the newest release — where it differs from the pinned matrix (what ``newest.yml``
writes to the run's summary).
"""

from __future__ import annotations

from orsbench.versions.bisection import NOT_RUN
from orsbench.versions.history import History, SeriesFacts
from orsbench.versions.play import CANNOT_DRIVE
from orsbench.versions.servers import is_server, per_release

__all__ = ["differs_from_pinned", "markdown", "summary"]


def _span(entry: dict) -> str:
    if entry["first_failing"] is None:
        return "not seen in any release run"
    first = ("≤ " if entry["since_oldest_tested"] else "") + entry["first_failing"]
    last = entry["last_failing"] + (" (newest run: still failing)" if entry["still_failing"] else "")
    spans: dict[tuple[str, str], list[str]] = {}
    for r in entry["ranges"]:
        spans.setdefault((r["from"], r["to"]), []).append(r["case"])
    gaps = " — failing in separate ranges: " + ", ".join(f"{a}–{b} ({', '.join(c)})" for (a, b), c in sorted(spans.items())) if len(spans) > 1 else ""
    hidden = {(m["from"], m["to"], m["verdict"]) for m in entry.get("masked", [])}
    masked = "; hidden by another failure at " + ", ".join(f"{a}–{b} ({v})" for a, b, v in sorted(hidden)) if hidden else ""
    return f"first failing {first}, last failing {last}{gaps}{masked}"


def differs_from_pinned(history: History, facts_name: str) -> list[tuple[str, str, str, str]]:
    """``(release, case, verdict, pinned verdict)`` where the series' newest release run differs from the pinned matrix."""
    facts = history.series[facts_name]
    rows = [r for r in history.rows if r.series == facts_name]
    if not rows:
        return []
    newest = max(rows, key=lambda r: facts.versions.index(r.version)).version
    return [
        (r.release, r.case, r.verdict, facts.pinned[r.case]["verdict"])
        for r in rows
        if r.version == newest and r.verdict != facts.pinned.get(r.case, {}).get("verdict")
    ]


def _errors(history: History, name: str) -> list[tuple[str, str]]:
    """Per release not run (or not drivable), the first reason given."""
    seen: dict[str, str] = {}
    for r in history.rows:
        if r.series == name and r.verdict in (NOT_RUN, CANNOT_DRIVE) and r.error and r.release not in seen:
            seen[r.release] = r.error
    return list(seen.items())


def _tally(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda item: -item[1]))


def summary(history: History) -> list[str]:
    """The terminal's lines."""
    lines = []
    for name, facts in history.series.items():
        rows = [r for r in history.rows if r.series == name]
        releases = sorted({r.version for r in rows}, key=facts.versions.index)
        lines.append(f"{name}: {len(releases)} release(s) run ({', '.join(releases)}) on {len(facts.cases)} case(s)")
        for entry in facts.defects:
            lines.append(f"  {entry['id']}: {_span(entry)}")
        if is_server(facts.client):
            lines += [f"  {label}: {_tally(counts)}{' — failed: ' + ', '.join(failed) if failed else ''}" for label, counts, failed in per_release(history, name)]
            lines += [f"  {c['id']} fails: {_span(c)}" for c in facts.checks]
        for change in facts.changes:
            exact = "" if change["exact"] else " (releases between not run)"
            lines.append(f"  {change['case']}: {change['before']} up to {change['last']}, {change['after']} from {change['first']}{exact}")
        for release, error in _errors(history, name):
            lines.append(f"  {release}: {error if error.startswith('orsbench') else 'not run — ' + error}")
        for u in facts.unstable:
            lines.append(f"  unstable: {u['release']} {u['case']} gave {u['verdict']}, then {u['again']} (left out of the changes)")
    counts = history.counts()
    lines.append(
        f"{counts['cells_run']} cells run ({counts['cells_anchored']} on the releases asked for, {counts['cells_bisected']} by bisection, "
        f"{counts['cells_confirmed']} a second time) "
        f"of {counts['cells_spanned']} that every release × case would be; {history.seconds:.0f} s"
    )
    return lines


def markdown(history: History) -> str:
    """The Markdown report: per series its defects' spans, its changes, the newest release against the pinned matrix,
    and the release × case grid."""
    out = ["# orsbench versions", ""]
    for name, facts in history.series.items():
        out += [f"## {name} ({facts.package} releases{', with ' + ', '.join(facts.pins) if facts.pins else ''})", ""]
        if facts.defects:
            out += ["| pinned defect | first failing | last failing | read from |", "|---|---|---|---|"]
            for e in facts.defects:
                first = "—" if e["first_failing"] is None else ("≤ " if e["since_oldest_tested"] else "") + e["first_failing"]
                last = "—" if e["last_failing"] is None else e["last_failing"] + (" (still)" if e["still_failing"] else "")
                out.append(f"| `{e['id']}` | {first} | {last} | {', '.join(e.get('decided_by') or e['cases'])} |")
            out.append("")
        diff = differs_from_pinned(history, name)
        if diff:
            out += [f"**The newest release run differs from the pinned matrix in {len(diff)} case(s):**", "", "| release | case | verdict | pinned |", "|---|---|---|---|"]
            out += [f"| {rel} | {case} | {v} | {p} |" for rel, case, v, p in diff] + [""]
        else:
            out += ["The newest release run agrees with the pinned matrix on every case.", ""]
        if facts.changes:
            out += ["| case | last with | first with | exact |", "|---|---|---|---|"]
            out += [f"| {c['case']} | {c['last']}: {c['before']} | {c['first']}: {c['after']} | {'yes' if c['exact'] else 'no'} |" for c in facts.changes]
            out.append("")
        if is_server(facts.client):  # a column per check would be hundreds wide: per release, its tally and failures
            out += ["| check | first failing | last failing |", "|---|---|---|"]
            out += [f"| `{c['id']}` | {('≤ ' if c['since_oldest_tested'] else '') + c['first_failing']} | {c['last_failing']}{' (still)' if c['still_failing'] else ''} |" for c in facts.checks]
            out += ["", "| release | cells | failed |", "|---|---|---|"]
            out += [f"| {label} | {_tally(counts)} | {', '.join(f'`{f}`' for f in failed) or '—'} |" for label, counts, failed in per_release(history, name)]
            out.append("")
        else:
            out += _grid(history, name, facts)
        for release, error in _errors(history, name):
            out.append(f"- **{release}**: {error}")
        for u in facts.unstable:
            out.append(f"- unstable: **{u['release']}** `{u['case']}` gave {u['verdict']}, then {u['again']} (left out of the changes)")
        out.append("")
    counts = history.counts()
    out.append(
        f"{counts['cells_run']} cells run ({counts['cells_bisected']} by bisection) of {counts['cells_spanned']} release × case cells spanned."
    )
    return "\n".join(out) + "\n"


_SHORT = {"works": "✓", "fails clearly": "clear", "fails silently": "**silent**", "hangs": "**hangs**", NOT_RUN: "—", CANNOT_DRIVE: "n/a"}


def _grid(history: History, name: str, facts: SeriesFacts) -> list[str]:
    seen = history.seen(name)
    releases = sorted({v for v, _ in seen}, key=facts.versions.index)
    out = ["| release | " + " | ".join(facts.cases) + " |", "|---" * (len(facts.cases) + 1) + "|"]
    out.append("| *pinned* | " + " | ".join(_SHORT.get(facts.pinned[c]["verdict"], facts.pinned[c]["verdict"]) for c in facts.cases) + " |")
    for v in releases:
        cells = [_SHORT.get(seen[(v, c)], seen[(v, c)]) if (v, c) in seen else "" for c in facts.cases]
        out.append(f"| {facts.label(v)} | " + " | ".join(cells) + " |")
    return out + [""]
