"""One check explained in words: its rule, why it matters, its fix and the protocol text it enforces.

What ``orsbench explain CHECK_ID`` prints, for a server check (:data:`~orsbench.checks.registry.CHECKS`)
or a client check (:data:`~orsbench.clientcheck.checks.CLIENT_CHECKS`). Everything comes from the
check's own registration and from ``docs/protocol.md`` on this machine — the checkout's, or the copy
an installed wheel carries (:func:`orsbench.reports.links.document`) — so a finding's
``docs/protocol.md §N`` can be read wherever orsbench is installed, with no network.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass

from orsbench.checks.model import Severity
from orsbench.reports import links

#: Why a server check's severity is what it is (the rule of thumb of :mod:`orsbench.checks.registry`).
SERVER_WHY = {
    Severity.REQUIRED: "required — the reference client (openreward SDK) or TRL's OpenRewardSpec breaks, hangs, retries "
    "forever or trains on wrong data when a server gets this wrong; a failure fails `orsbench check` (exit 1).",
    Severity.RECOMMENDED: "recommended — the reference server does it and clients benefit, but cope without it (a fallback, "
    "a retry, a default); a failure is reported and the run still passes.",
    Severity.ADVISORY: "advisory — a detail of the reference or a portability hint; reported, never fatal.",
}
#: Lines of one section's text printed before it is cut (the link has the rest).
MAX_SECTION_LINES = 40
_HEADING = re.compile(r"^(#{2,4})\s+(\d+(?:\.\d+)*)\.?\s")
_ITEM = re.compile(r"^(\d+)\.\s")


@dataclass(frozen=True)
class Explained:
    """What is said of one check (either kind)."""

    id: str
    kind: str  # "server check" or "client check"
    severity: str
    rule: str
    why: str
    fix: str
    spec: str
    details: tuple[str, ...] = ()


def known() -> dict[str, Explained]:
    """Every check either kind of run can report, by id (server checks first, in catalogue order)."""
    from orsbench.checks.registry import load_checks
    from orsbench.clientcheck.checks import CLIENT_CHECKS
    from orsbench.verdict import verdict_of

    out: dict[str, Explained] = {}
    for c in load_checks().values():
        details = [f"probe: {c.probe}"]
        if c.requires:
            details.append(f"needs: {', '.join(c.requires)} (skipped, naming it, when one did not pass)")
        if broken := _violations_breaking(c.id):
            details.append(f"see it fail: orsbench check --scenario echo --fault {broken[0]}  (violations: {', '.join(broken)})")
        out[c.id] = Explained(c.id, "server check", c.severity.value, c.title, SERVER_WHY[c.severity], c.remediation, c.spec, tuple(details))
    for c in CLIENT_CHECKS.values():
        verdict = verdict_of([c.effect])
        why = (
            f"{c.severity.value} — a client that fails it {c.effect}"
            + (f": the episode's verdict is '{verdict}'." if str(verdict) != "works" else ", which is listed beside the verdict but does not change it.")
        )
        details = [f"reads: the client's {c.role}"]
        if c.requires:
            details.append(f"needs: {', '.join(c.requires)}")
        out[c.id] = Explained(c.id, "client check", c.severity.value, c.title, why, c.remediation, c.spec, tuple(details))
    return out


def _violations_breaking(check_id: str) -> list[str]:
    """The planted server defects (``--fault NAME``) that fail this check, on the echo scenario."""
    from orsbench.servers.faults.violations import VIOLATIONS

    return [v.name for v in VIOLATIONS.values() if check_id in v.breaks and v.scenario == "echo" and not v.knobs]


def matching(pattern: str, catalogue: dict[str, Explained]) -> list[str]:
    """The ids ``pattern`` names: itself, or every id a glob (``reward.*``) matches."""
    if pattern in catalogue:
        return [pattern]
    return [i for i in catalogue if fnmatch.fnmatchcase(i, pattern)] if any(ch in pattern for ch in "*?[") else []


def close_matches(pattern: str, catalogue: dict[str, Explained], n: int = 6) -> list[str]:
    """Ids that look like ``pattern``: a misspelling, or the ids of a group named alone (``reward``)."""
    group = [i for i in catalogue if i.split(".", 1)[0] == pattern.rstrip(".")]
    tail = [i for i in catalogue if i.split(".", 1)[-1] == pattern]
    return list(dict.fromkeys([*tail, *difflib.get_close_matches(pattern, list(catalogue), n=n, cutoff=0.6), *group]))[:n]


def section_text(number: str, markdown: str) -> tuple[str, list[str]] | None:
    """Section ``number``'s heading and its own text (up to the next heading), or a numbered item of it (``§11.6``)."""
    lines = markdown.splitlines()
    for start, line in enumerate(lines):
        match = _HEADING.match(line)
        if match and match.group(2) == number:
            body: list[str] = []
            for following in lines[start + 1 :]:
                if following.startswith("#"):
                    break
                body.append(following)
            return line.lstrip("#").strip(), _trim(body)
    parent, _, item = number.rpartition(".")
    found = section_text(parent, markdown) if parent else None
    if found is None:
        return None
    heading, body = found
    for start, line in enumerate(body):
        match = _ITEM.match(line)
        if match and match.group(1) == item:
            end = next((j for j in range(start + 1, len(body)) if _ITEM.match(body[j]) or (body[j] and not body[j].startswith(" "))), len(body))
            return f"{heading}, item {item}", _trim(body[start:end])
    return heading, body


def _trim(body: list[str]) -> list[str]:
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return body


def explain(check_id: str, catalogue: dict[str, Explained] | None = None) -> str:
    """The text ``orsbench explain CHECK_ID`` prints (``KeyError`` for an id no check has)."""
    c = (catalogue or known())[check_id]
    url = links.docs_url()
    document = links.document()
    markdown = document.read_text(encoding="utf-8") if document is not None else ""
    out = [
        f"{c.id} — {c.severity} {c.kind}",
        f"  rule: {c.rule}",
        f"  why it matters: {c.why}",
        f"  fix:  {c.fix}",
        f"  protocol: {c.spec if links.DOCUMENT in c.spec else f'{links.DOCUMENT} {c.spec}'}",
        *(f"  {line}" for line in c.details),
    ]
    for label, href in links.spec_links(c.spec):
        out += ["", f"{label}  {href}"]
        found = section_text(label.lstrip("§"), markdown) if markdown else None
        if found is None:
            out.append(f"  (the text is in {url})")
            continue
        heading, body = found
        out.append(f"  {heading}")
        for line in body[:MAX_SECTION_LINES]:
            out.append(f"    {line}" if line.strip() else "")
        if len(body) > MAX_SECTION_LINES:
            out.append(f"    … {len(body) - MAX_SECTION_LINES} more line(s): {href}")
    return "\n".join(out) + "\n"
