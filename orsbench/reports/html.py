"""Self-contained HTML reports: a check run (``check``, ``proxy``, ``check-client``), the client matrix and
``clients URL``.

A person acting on a failure wants to *see* it: the verdict first, then the
findings with the exchange that broke the rule, the section it breaks and the
command that shows it again. One file, inline CSS, no script and nothing
fetched, so it opens the same from ``file://``, a CI artifact or a mail
attachment. Failures and warnings are open; passes are folded (``<details>``).
A report whose every id names a case (``check-client``) is drawn as Autobahn
draws a fuzzing report: a case × check grid, failing cases first, each cell
linking to its check's detail (:func:`case_grid`).

The view model is built here (grouping, SSE events one per line, JSON
pretty-printed); the Jinja2 templates under ``templates/`` only lay it out,
with autoescaping on. Both entry points take either the report object or its
JSON document (``Report.to_json()``; the matrix result is JSON already), so
any front end with the same report model can call them.

Secrets never reach the page: request headers arrive masked from
:meth:`~orsbench.wire.evidence.Exchange.summary`, secret-named headers are
masked again here, and every known secret value (the run's API key, and any
passed as ``secrets``) is scrubbed from the finished text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from orsbench.version import __version__
from orsbench.verdict import Verdict
from orsbench.reports.links import explain_hint, spec_links
from orsbench.reports.terminal import label_of
from orsbench.reports.verdict import reasons, split_id
from orsbench.wire.reproduce import SECRET_VARIABLES
from orsbench.wire.redact import scrub
from orsbench.wire.sse import SSEComment, SSEParser

REDACTED = "<redacted>"
#: What a secret value found in the page becomes (escaped: the page is HTML).
_SCRUBBED = "&lt;redacted&gt;"
_OPEN = {"fail", "warn", "error"}

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("orsbench.reports", "templates"),
    autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def anchor(check_id: str) -> str:
    """The page's id for a check (``call.end_json`` → ``check-call-end_json``; ``[case]`` suffixes too)."""
    return "check-" + re.sub(r"[^A-Za-z0-9_-]+", "-", check_id).strip("-")


_ENV.filters["anchor"] = anchor

#: How a difference shows whitespace, so "sent three spaces, returned none" can be seen.
_VISIBLE = str.maketrans({" ": "·", "\t": "→", "\n": "⏎\n", "\r": "␍"})


def visible(text: str) -> str:
    """``text`` with its whitespace drawn (spaces as ·, tabs as →, line breaks as ⏎)."""
    return str(text).translate(_VISIBLE)


_ENV.filters["visible"] = visible


# -- the wire exchange ------------------------------------------------------------------
def _pretty(text: str) -> str:
    """JSON pretty-printed when it parses (a truncated body does not: shown as it came)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


#: How :meth:`~orsbench.wire.evidence.Exchange.summary` marks a body it cut.
_CUT = re.compile(r"\.\.\. \[(\d+) more chars\]$")


def _sse_lines(body: str, *, cut: bool = False) -> list[str]:
    """Each event of a stream on one line (``event: end  data: {...}``), comments (``: ping``) where they came."""
    parser = SSEParser()
    items = [*parser.feed(body.encode("utf-8"))]
    events, comments = len(parser.stream.events), len(parser.stream.comments)
    stream = parser.close()  # completes a last event the body did not end with a blank line
    items += [*stream.comments[comments:], *stream.events[events:]]
    lines = []
    for item in items:
        if isinstance(item, SSEComment):
            lines.append(f":{item.text}")
        else:
            lines.append(f"event: {item.event}  data: {item.data}".replace("\n", "\\n"))
    if stream.incomplete and not cut:
        lines.append(f"(the stream ended inside an event: {stream.incomplete})")
    return lines


def exchange_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """One evidence entry (``Exchange.summary()``) as the page shows it."""
    method, _, url = str(item.get("request", "")).partition(" ")
    headers = {
        k: (REDACTED if k.lower() in SECRET_VARIABLES else str(v)) for k, v in (item.get("request_headers") or {}).items()
    }
    response_headers = {str(k): str(v) for k, v in (item.get("headers") or {}).items()}
    body = str(item.get("body") or "")
    cut = _CUT.search(body)
    if cut:  # the report keeps the first characters of a body only (Exchange.summary)
        body = body[: cut.start()]
    content_type = response_headers.get("content-type", "")
    is_sse = content_type.startswith("text/event-stream") or body.startswith(("event:", "data:", ":"))
    return {
        "method": method,
        "url": url,
        "request_headers": headers,
        "request_body": _pretty(str(item.get("request_body") or "")),
        "status": item.get("status"),
        "headers": response_headers,
        "is_sse": bool(body) and is_sse,
        "events": _sse_lines(body, cut=bool(cut)) if body and is_sse else [],
        "body": _pretty(body) if body and not is_sse else body,
        "error": item.get("error"),
        "elapsed": item.get("elapsed_s"),
        "cut": int(cut.group(1)) if cut else 0,
    }


# -- a check run ------------------------------------------------------------------------
def _check_view(result: Mapping[str, Any], docs_url: str | None = None) -> dict[str, Any]:
    label, style = label_of(result["status"], result["severity"], result.get("baseline"))
    measured = result.get("measured")
    return {
        **result,
        "label": label,
        "style": style,
        "open": style in _OPEN,
        "anchor": anchor(result["id"]),
        "links": spec_links(result.get("spec", ""), docs_url),
        "explain": explain_hint(result["id"], docs_url),
        "exchanges": [exchange_view(e) for e in result.get("evidence") or []],
        "client": result.get("client"),
        "difference": _difference(measured),
        "measured_text": None if measured is None else json.dumps(measured, indent=2, ensure_ascii=False, default=repr)[:4000],
    }


def _difference(measured: Any) -> dict[str, Any] | None:
    """A check's ``measured["difference"]`` when it has the shape reports draw (``clientcheck.checks.difference``)."""
    diff = measured.get("difference") if isinstance(measured, Mapping) else None
    keys = ("at", "before", "expected", "actual", "expected_is", "actual_is", "expected_chars", "actual_chars")
    return dict(diff) if isinstance(diff, Mapping) and all(k in diff for k in keys) else None


#: The counts a report's head shows, in order: status key, the word after the number.
_COUNTED = (("pass", "passed"), ("fail", "failed"), ("warn", "warned"), ("skip", "skipped"), ("n/a", "not applicable"), ("error", "errors"))


def _counts(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``12 passed · 0 failed …``: a count is drawn in its colour only when it is not zero ("0 failed" is no alarm).

    A status with no results at all and no place in every report ("not applicable") is left out.
    """
    out = []
    for key, word in _COUNTED:
        n = int(summary.get(key) or 0)
        if key == "n/a" and not n:
            continue
        style = ("skip" if key == "n/a" else key) if n else "zero"
        out.append({"n": n, "text": f"{n} {word}", "style": style})
    return out


def _tally(checks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{"label": "n/a", "style": "skip", "n": 2}, ...]``: a group's counts by label (N/A apart from SKIP), first seen first."""
    counts: dict[str, dict[str, Any]] = {}
    for c in checks:
        entry = counts.setdefault(c["label"], {"label": c["label"].lower(), "style": c["style"], "n": 0})
        entry["n"] += 1
    return list(counts.values())


def _groups(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Checks by id prefix, in report order (as the terminal lists them); a group with a finding is open."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for check in checks:
        groups.setdefault(check["id"].split(".", 1)[0], []).append(check)
    out = []
    for name, members in groups.items():
        out.append({"name": name, "checks": members, "counts": _tally(members), "open": any(c["open"] for c in members)})
    return out


def _findings(checks: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The sections the terminal's summary prints, in its order (only the non-empty ones)."""
    sections = [
        ("Failed (required)", [c for c in checks if c["label"] == "FAIL" and c["style"] == "fail"]),
        ("Stale baseline entries (they pass now)", [c for c in checks if c["label"] == "STALE"]),
        ("Errors (orsbench itself)", [c for c in checks if c["label"] == "ERROR"]),
        ("Failed (recommended / advisory)", [c for c in checks if c["label"] == "FAIL" and c["style"] == "warn"]),
        ("Warnings", [c for c in checks if c["label"] == "WARN"]),
        ("Expected failures (baseline)", [c for c in checks if c["label"] == "XFAIL"]),
    ]
    return [(title, members) for title, members in sections if members]


def report_document(report: Any) -> tuple[dict[str, Any], list[str]]:
    """The report's JSON document, and the secrets the run knew (its API key, its ``--secret`` values)."""
    if isinstance(report, Mapping):
        return dict(report), []
    options = getattr(report, "options", None)
    known = [getattr(options, "api_key", None), *(getattr(options, "secrets", None) or {}).values()]
    return report.to_json(), [str(k) for k in known if k]


#: What a report document may leave out (another front end's report, a minimal one).
_DOCUMENT_DEFAULTS: dict[str, Any] = {
    "target": "",
    "env": None,
    "split": None,
    "verdict": "error",
    "exit_code": None,
    "reason": None,
    "started_at": "",
    "duration_s": 0,
    "baseline": None,
    "options": {},
    "summary": {},
    "spec": "docs/protocol.md",
}


def render_check(report: Any, *, title: str = "orsbench check", secrets: Iterable[str] = (), docs_url: str | None = None) -> str:
    """The HTML page of a check run (a ``Report`` or its JSON document); ``docs_url`` as :func:`~.links.docs_url` takes it."""
    data, known = report_document(report)
    data = {**_DOCUMENT_DEFAULTS, **data}
    checks = [_check_view(r, docs_url) for r in data.get("checks", [])]
    summary = {**dict.fromkeys(("pass", "fail", "warn", "skip", "error", "exchanges"), 0), "required_not_run": [], **(data["summary"] or {})}
    common = {
        "title": title,
        "report": data,
        "summary": summary,
        "checks": checks,
        "counts": _counts(summary),
        "findings": _findings(checks),
        "reasons": reasons(data),
        "generated": _now(),
        "version": data.get("orsbench_version") or __version__,
    }
    if checks and all(split_id(c["id"])[1] is not None for c in checks):
        not_run = not_run_by_check(summary["required_not_run"])
        page = _ENV.get_template("cases.html.j2").render(**common, **case_grid(checks), not_run=not_run)
    else:
        page = _ENV.get_template("check.html.j2").render(**common, cases=None, groups=_groups(checks))
    return scrub(page, [*known, *secrets], _SCRUBBED)


# -- check-client: a case × check grid ----------------------------------------------------
#: How a row of the grid ranks: a case with a failure first, then one with an error, a warning, the rest.
_RANK = {"fail": 0, "error": 1, "warn": 2}
#: The mark a grid cell shows for each label (the label itself is in its tooltip and its detail).
_MARK = {"PASS": "✓", "FAIL": "✗", "STALE": "✗", "WARN": "!", "XFAIL": "x", "ERROR": "⚠", "SKIP": "–", "N/A": "○"}


def _columns(rows: list[list[str]]) -> list[str]:
    """The checks in catalogue order, merged from each case's (a case lists a subsequence of the catalogue)."""
    order: list[str] = []
    for ids in rows:
        previous = None
        for check in ids:
            if check not in order:
                order.insert(order.index(previous) + 1 if previous is not None else 0, check)
            previous = check
    return order


def case_grid(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """check-client's report as Autobahn lays out a fuzzing report: a row per case, a column per check.

    Each cell links to its check's detail (evidence, the client's own words, the wire exchanges); a case
    the check does not apply to is an empty cell. Rows with a failure come first, so a failing client's
    problems are on the first screen; within a rank, cases keep the catalogue order.
    """
    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for c in checks:
        check, case = split_id(c["id"])
        c["check"], c["case"] = check, case
        c["mark"] = _MARK.get(c["label"], c["label"])
        c["cell"] = "na" if c["label"] == "N/A" else c["style"]
        by_case.setdefault(str(case), {})[check] = c
    columns = _columns([list(results) for results in by_case.values()])
    cases = []
    for position, (name, results) in enumerate(by_case.items()):
        styles = [c["style"] for c in results.values()]
        rank = min((_RANK[s] for s in styles if s in _RANK), default=len(_RANK))
        # Within a case, the detail lists its findings first, then the rest in catalogue order.
        detail = sorted(results.values(), key=lambda c: (_RANK.get(c["style"], len(_RANK)), columns.index(c["check"])))
        cases.append(
            {
                "name": name,
                "anchor": "case-" + anchor(name)[len("check-") :],
                "cells": [results.get(check) for check in columns],
                "checks": detail,
                "counts": _tally(detail),
                "open": rank < len(_RANK),
                "rank": (rank, position),
            }
        )
    cases.sort(key=lambda case: case["rank"])
    headers = [{"id": check, "short": check.split(".", 1)[-1]} for check in columns]
    return {"cases": cases, "columns": headers, "by_check": _by_check(checks)}


def _by_check(checks: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The findings sections with each check once — the cases it failed in beside it — so a client that fails
    one rule everywhere gets one line, not one per case, and the grid stays on the first screen."""
    out = []
    for title, members in _findings(checks):
        grouped: dict[str, dict[str, Any]] = {}
        for c in members:
            entry = grouped.setdefault(c["check"], {"check": c["check"], "message": c["message"], "cases": []})
            entry["cases"].append({"name": c["case"], "anchor": c["anchor"]})
        out.append((title, list(grouped.values())))
    return out


def not_run_by_check(not_run: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``summary.required_not_run`` by check: ``[{"check", "cases": [...], "why"}]`` (check-client's page)."""
    grouped: dict[str, dict[str, Any]] = {}
    for item in not_run:
        check, case = split_id(str(item["id"]))
        grouped.setdefault(check, {"check": check, "why": item["why"], "cases": []})["cases"].append(
            {"name": case, "anchor": anchor(str(item["id"]))}
        )
    return list(grouped.values())


# -- the client matrix ------------------------------------------------------------------
_VERDICT_STYLE = {Verdict.WORKS: "pass", Verdict.FAILS_CLEARLY: "warn", Verdict.FAILS_SILENTLY: "fail", Verdict.HANGS: "error"}


def _cell_view(row: Mapping[str, Any], defects: Mapping[str, str]) -> dict[str, Any]:
    extra = {k: v for k, v in row.items() if k not in {"client", "server", "scenario", "profile", "verdict", "expected", "defects", "elapsed", "problems", "error"}}
    return {
        "elapsed": None,
        "problems": [],
        "error": None,
        **row,
        "style": _VERDICT_STYLE.get(row["verdict"], "skip"),
        "defect_items": [(d, defects.get(d, "")) for d in row.get("defects") or []],
        "right": row["verdict"] == row.get("expected") == "fails clearly",
        "transcript": json.dumps(extra, indent=2, ensure_ascii=False, default=repr) if extra else "",
    }


def _document(result: Any) -> Mapping[str, Any]:
    """A typed result's JSON document (:mod:`orsbench.clientcheck.results`); a document is taken as it is."""
    return result.to_json() if hasattr(result, "to_json") else result


def render_matrix(result: Any, *, title: str = "orsbench matrix", secrets: Iterable[str] = ()) -> str:
    """The HTML page of ``orsbench matrix``'s result: one coloured grid per client, each cell opening to its episode.

    ``result``: a :class:`~orsbench.clientcheck.results.MatrixResult` (or its JSON document).
    """
    result = _document(result)
    servers = list(result.get("servers") or [])
    server_defects = {d["id"]: d["summary"] for ds in (result.get("server_defects") or {}).values() for d in ds}
    clients = []
    for name, info in (result.get("clients") or {}).items():
        defects = {**{d["id"]: d["summary"] for d in info.get("defects") or []}, **server_defects}
        rows_of = [r for r in result.get("cells", []) if r["client"] == name]
        keys = list(dict.fromkeys((r["profile"] or r["scenario"], r["profile"] is not None) for r in rows_of))
        rows = []
        for label, is_profile in keys:
            cells = []
            for server in servers:
                match = next(
                    (
                        r
                        for r in rows_of
                        if r["server"] == server and (r["profile"] or r["scenario"]) == label and (r["profile"] is not None) == is_profile
                    ),
                    None,
                )
                cells.append(None if match is None else _cell_view(match, defects))
            rows.append({"label": label, "is_profile": is_profile, "cells": cells})
        counts: dict[str, int] = {}
        for r in rows_of:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        clients.append({"name": name, "info": info, "rows": rows, "counts": counts})
    page = _ENV.get_template("matrix.html.j2").render(
        title=title,
        servers=servers,
        clients=clients,
        result=result,
        server_defects=result.get("server_defects") or {},
        verdicts=list(_VERDICT_STYLE) + ["not run"],
        styles={**_VERDICT_STYLE, "not run": "skip"},
        generated=_now(),
        version=__version__,
    )
    return scrub(page, secrets, _SCRUBBED)


# -- which clients can use your server (orsbench clients URL) ---------------------------
_LIVE_STYLE = {**_VERDICT_STYLE, "not installed": "skip"}


def render_live(result: Any, *, title: str = "orsbench clients", secrets: Iterable[str] = ()) -> str:
    """The HTML page of ``orsbench clients URL``: one row per client, its live verdict beside the predicted problems.

    ``result``: a :class:`~orsbench.clientcheck.results.LiveResult` (or its JSON document).
    """
    result = _document(result)
    rows = [
        {"command": None, "seconds": None, "defects": [], "words": row["verdict"], **row, "style": _LIVE_STYLE.get(row["verdict"], "error")}
        for row in result.get("rows", [])
    ]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    page = _ENV.get_template("live.html.j2").render(
        title=title,
        result=result,
        episode=result["episode"],
        rows=rows,
        counts=counts,
        styles={**_LIVE_STYLE, **{v: "error" for v in counts if v not in _LIVE_STYLE}},
        generated=_now(),
        version=__version__,
    )
    return scrub(page, secrets, _SCRUBBED)


# -- shared -----------------------------------------------------------------------------
def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_html(page: str, path: str | Path) -> None:
    Path(path).write_text(page, encoding="utf-8")
