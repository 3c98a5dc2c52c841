"""A compact Markdown summary of a check run: a pull-request comment or ``$GITHUB_STEP_SUMMARY``.

Short on purpose: the verdict and counts, one table row per finding (id,
severity, message, the fix, the protocol section linked by an absolute URL:
:mod:`.links`), the required checks that
did not run, and the reproducer of each blocking failure folded under
``<details>`` (GitHub renders it). The full story is the HTML report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orsbench.reports.html import report_document
from orsbench.wire.redact import scrub
from orsbench.reports.links import explain_hint, spec_links
from orsbench.reports.output import write_text
from orsbench.reports.terminal import label_of
from orsbench.reports.verdict import reasons

_ICON = {"pass": "✅", "fail": "❌", "warn": "⚠️", "skip": "⏭️", "error": "💥", "unreachable": "🔌", "not-ors": "🚫", "usage": "❔"}
#: At most this many findings get a row (a summary, not the report).
MAX_ROWS = 50


def _cell(text: Any) -> str:
    """Table-safe text: one line, pipes escaped, cut to a readable length."""
    line = " ".join(str(text).split()).replace("|", "\\|")
    return line if len(line) <= 200 else line[:199] + "…"


def _folded(summary: dict[str, Any]) -> str:
    """The bounded proxy grader's folded count, when it folded any (``summary.evidence``)."""
    folded = (summary.get("evidence") or {}).get("folded")
    return f" ({folded:,} folded into counts)" if folded else ""


def render_markdown(
    report: Any, *, title: str = "orsbench check", secrets: tuple[str, ...] = (), docs_url: str | None = None
) -> str:
    """The summary of ``report`` (a ``Report`` or its JSON document); ``docs_url``: where docs/protocol.md's links point (:mod:`.links`)."""
    data, known = report_document(report)
    s = data.get("summary") or {}
    verdict = str(data.get("verdict", "error"))
    lines = [
        f"### {_ICON.get(verdict, '')} {title}: {verdict.upper()} — `{data.get('target')}`",
        "",
        *([f"**{_cell('; '.join(why))}**", ""] if (why := reasons(data)) else []),
        f"**{s.get('pass', 0)}** passed · **{s.get('fail', 0)}** failed · **{s.get('warn', 0)}** warned · "
        f"**{s.get('skip', 0)}** skipped · {f'**{n_a}** not applicable · ' if (n_a := s.get('n/a')) else ''}"
        f"**{s.get('error', 0)}** errors — {s.get('total', 0)} checks, "
        f"{s.get('exchanges', 0)} requests{_folded(s)}, {data.get('duration_s', 0)} s (exit {data.get('exit_code')})",
        "",
    ]
    findings = []
    for r in data.get("checks", []):
        label, style = label_of(r["status"], r["severity"], r.get("baseline"))
        if style in ("fail", "warn", "error"):
            findings.append((label, style, r))
    if findings:
        lines += ["| | check | severity | finding | fix | protocol |", "|---|---|---|---|---|---|"]
        for label, style, r in findings[:MAX_ROWS]:
            links = ", ".join(f"[{text}]({href})" for text, href in spec_links(r.get("spec", ""), docs_url))
            if hint := explain_hint(r["id"], docs_url):
                links += f" · `{hint}`"
            fix = _cell(r.get("remediation") or "")
            lines.append(f"| {_ICON[style]} {label} | `{r['id']}` | {r['severity']} | {_cell(r['message'])} | {fix} | {links} |")
        if len(findings) > MAX_ROWS:
            lines.append(f"| | … {len(findings) - MAX_ROWS} more | | see the HTML or JSON report | | |")
        lines.append("")
    not_run = s.get("required_not_run") or []
    if not_run:
        lines += [f"<details><summary>{len(not_run)} required check(s) did not run</summary>", ""]
        lines += [f"- `{item['id']}` — {_cell(item['why'])}" for item in not_run]
        lines += ["", "</details>", ""]
    blocking = [r for label, style, r in findings if style == "fail" and r.get("reproduce")]
    for r in blocking[:10]:
        lines += [f"<details><summary>reproduce <code>{r['id']}</code></summary>", "", "```sh", r["reproduce"], "```", "", "</details>", ""]
    return scrub("\n".join(lines).rstrip() + "\n", [*known, *secrets])


def write_markdown(report: Any, path: str | Path, **kwargs: Any) -> None:
    """Write the summary to ``path`` (``-`` for stdout). The GitHub Action appends it to $GITHUB_STEP_SUMMARY."""
    write_text(path, render_markdown(report, **kwargs))
