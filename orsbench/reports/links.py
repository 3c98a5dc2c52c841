"""Links from a finding to the protocol section it cites (``docs/protocol.md §4.2`` → a URL with an anchor).

Checks cite sections by number; a reader of an HTML report wants to click
through to the text. The anchor is the one GitHub derives from the heading
(``### 4.2 Rewards`` → ``#42-rewards``), so the section titles are needed:
they are read from ``docs/protocol.md`` when it is there (a checkout) and
otherwise from the copy packaged beside this module
(``protocol_sections.json``, refreshed with ``python -m orsbench.reports.refresh_sections``;
a test keeps it in step with the document). A numbered item that is no heading
(``§11.6``) links to its enclosing section; an unknown one to the document.

Every link is absolute, since a report is read anywhere but where it was
written (a CI artifact, a pull-request comment, ``/tmp``). Where the document
lives, first found: the ``base`` a caller passes (``render_markdown(...,
docs_url=)``); ``$ORSBENCH_DOCS_URL`` (the GitHub Action sets it to the orsbench
repository it runs from, ``…/blob/<ref>``; set it to your fork or mirror); the
checkout's own ``docs/protocol.md`` as a ``file://`` URL (opens on the machine
that wrote the report, from wherever the report was written); in an install, the
copy the wheel carries (``orsbench/docs/protocol.md``, a link to the checkout's
file in the repository). Only where neither is there does a link fall back to
the bare relative path.

Where no base is set, a finding also names the command that prints its rule,
fix and protocol text in a terminal, :func:`explain_hint` (``orsbench explain ID``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

DOCUMENT = "docs/protocol.md"
DOCS_URL_ENV = "ORSBENCH_DOCS_URL"
_PACKAGED = Path(__file__).with_name("protocol_sections.json")
_CHECKOUT = Path(__file__).resolve().parents[2] / DOCUMENT
#: The copy a wheel carries (in a checkout, a symbolic link to :data:`_CHECKOUT`).
_INSTALLED = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
_HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s+(.*\S)\s*$")
_SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def sections_of(markdown: str) -> dict[str, str]:
    """Section number → the full heading text (``"4.2"`` → ``"4.2 Rewards"``), for numbered headings."""
    out: dict[str, str] = {}
    for line in markdown.splitlines():
        match = _HEADING.match(line)
        if match:
            number, title = match.groups()
            heading = line.lstrip("#").strip()
            out.setdefault(number, heading if title else number)
    return out


def document() -> Path | None:
    """The protocol document on this machine: the checkout's, else the installed copy, else ``None``."""
    for path in (_CHECKOUT, _INSTALLED):
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=1)
def sections() -> dict[str, str]:
    local = document()
    if local is not None:
        return sections_of(local.read_text(encoding="utf-8"))
    try:
        return dict(json.loads(_PACKAGED.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def docs_url(base: str | None = None) -> str:
    """The URL of docs/protocol.md under ``base`` (a repository's ``…/blob/<ref>``, a docs site's root), else the default."""
    base = (base or os.environ.get(DOCS_URL_ENV, "")).rstrip("/")
    if base:
        return f"{base}/{DOCUMENT}"
    local = document()
    return local.resolve().as_uri() if local is not None else DOCUMENT


def explain_hint(check_id: str, base: str | None = None) -> str | None:
    """``"orsbench explain ID"`` where links point at this machine (no ``base``, no ``$ORSBENCH_DOCS_URL``), else ``None``.

    Why: a ``file://`` link opens only where the report was written; the command prints the same
    text (rule, why, fix, protocol section) wherever orsbench is installed.
    """
    if (base or os.environ.get(DOCS_URL_ENV, "")).strip() or not check_id:
        return None
    return f"orsbench explain {check_id}"


def spec_links(spec: str, base: str | None = None) -> list[tuple[str, str]]:
    """``"docs/protocol.md §3, §11.6"`` → ``[("§3", url#anchor), ("§11.6", url#anchor)]`` (the document alone without a §)."""
    url = docs_url(base)
    found = _SECTION.findall(spec or "")
    if not found:
        return [(spec or DOCUMENT, url)] if spec else []
    known = sections()
    return [(f"§{n}", _anchored(url, n, known)) for n in found]


def _anchored(url: str, number: str, known: dict[str, str]) -> str:
    """The URL of section ``number``, or of its nearest enclosing heading (``§11.6`` is an item of ``§11``)."""
    parts = number.split(".")
    while parts:
        key = ".".join(parts)
        if key in known:
            return f"{url}#{slug(known[key])}"
        parts.pop()
    return url


def refresh() -> int:
    """Rewrite the packaged copy of the section titles from the checkout's docs/protocol.md."""
    if not _CHECKOUT.is_file():
        print(f"no {DOCUMENT} beside this checkout", file=sys.stderr)
        return 2
    table = sections_of(_CHECKOUT.read_text(encoding="utf-8"))
    _PACKAGED.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(table)} sections to {_PACKAGED}")
    return 0
