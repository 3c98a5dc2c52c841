"""The one sentence a report leads with: the verdict, and what made it.

A reader of a failing run acts on what failed, so that comes first — the failed
required check and its message, or how many failed and which — never the
coverage a run lacked (the required checks that did not run are listed above
it, and lead only where they *are* the failure: ``--strict``). Every format says
it in the same words: the terminal's last line, the Markdown summary's heading
line, the HTML page's verdict box.

It reads the report's JSON document (``Report.to_json()``), so a front end
with the same document gets the same sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

#: A check-client id names its case: ``client.tool_runs[sparse-reward+stream-drop]``.
_SCOPED = re.compile(r"^(?P<check>[^\[]+)\[(?P<case>.+)\]$")
#: At most this many ids are named on the line (the report lists them all).
NAMED = 3
#: A lone failure's message is cut to this many characters on the line.
MESSAGE_CHARS = 140


def split_id(result_id: str) -> tuple[str, str | None]:
    """``"client.tool_runs[echo]"`` → ``("client.tool_runs", "echo")``; a server check's id has no case."""
    match = _SCOPED.match(result_id)
    return (match["check"], match["case"]) if match else (result_id, None)


def _cut(text: str, limit: int = MESSAGE_CHARS) -> str:
    """One line, cut to ``limit``; runs of spaces are kept (a message may quote text whose spaces matter)."""
    line = re.sub(r"\s*[\r\n\t]+\s*", " ", str(text)).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _named(ids: list[str]) -> str:
    """``a, b ×2, c`` — ids by check (a check-client check failing in several cases is named once, with a count)."""
    counts = Counter(split_id(i)[0] for i in ids)
    shown = [f"{check} ×{n}" if n > 1 else check for check, n in counts.most_common()]
    more = len(shown) - NAMED
    return ", ".join(shown[:NAMED]) + (f" and {more} more" if more > 0 else "")


def _listed(ids: list[str], messages: Mapping[str, str], verb: str, what: str) -> str:
    """One id with its message (``x.y failed: …``); several by count and name (``3 required checks failed: …``)."""
    if len(ids) == 1:
        check, case = split_id(ids[0])
        return f"{check}{f' ({case})' if case else ''} {verb}: {_cut(messages.get(ids[0], ''))}"
    return f"{len(ids)} {what} {verb}: {_named(ids)}"


def reasons(doc: Mapping[str, Any]) -> list[str]:
    """What made the verdict, most actionable first (empty for a clean pass)."""
    summary: Mapping[str, Any] = doc.get("summary") or {}
    checks = doc.get("checks") or []
    messages = {c["id"]: c.get("message", "") for c in checks}
    strict = bool((doc.get("options") or {}).get("strict"))
    verdict = str(doc.get("verdict", ""))
    if doc.get("reason"):
        return [_cut(doc["reason"], 300)]
    out: list[str] = []
    failed = list(summary.get("failed_required") or [])
    if failed:
        out.append(_listed(failed, messages, "failed", "required checks"))
    stale = list(summary.get("stale") or [])
    if stale:
        out.append(f"{len(stale)} baseline entr{'y passes' if len(stale) == 1 else 'ies pass'} now (stale): {_named(stale)}")
    errors = list(summary.get("errors") or [])
    if errors:
        ids = [e for e in errors if e in messages]
        internal = [e for e in errors if e not in messages]
        if ids:
            out.append(_listed(ids, messages, "erred (orsbench itself)", "checks"))
        out += [f"internal error: {_cut(e)}" for e in internal[:1]]
    not_run = list(summary.get("required_not_run") or [])
    if not_run and (strict or verdict == "pass"):
        # Coverage leads only where it decides the verdict (--strict) or is all there is to say.
        hint = " (--strict)" if strict else "; --strict fails on them"
        out.append(f"{len(not_run)} required check(s) did not run{hint}")
    return out


def verdict_line(doc: Mapping[str, Any]) -> str:
    """``verdict: FAIL (exit 1) — reward.well_formed failed: reward True is a bool``."""
    head = f"verdict: {str(doc.get('verdict', 'error')).upper()} (exit {doc.get('exit_code')})"
    why = reasons(doc)
    return head + (f" — {'; '.join(why)}" if why else "")
