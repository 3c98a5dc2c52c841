"""The counts the docs state (checks, probes, cases, ...), generated from the registries.

A number written by hand goes stale the day an entry is added: docs/checks.md said 73 checks
while ``orsbench check --list`` had 88. So every such count in the docs is a marker the
registries fill in::

    grades what it saw with <!-- count:checks -->88<!-- /count --> named checks
    through <!-- count:probes words -->eight<!-- /count --> probes

(GitHub renders only the number; ``words`` spells it out.) ``python -m orsbench.reports.doc_counts``
rewrites every marker in the docs; ``--check`` only lists the stale ones and exits 1;
``tests/test_docs.py`` fails while one is stale. To count something new, add it to :data:`COUNTS`
(a name and the function that counts it) and put its marker where the docs say the number.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The documents whose counts are generated (relative to the repository root).
DOCUMENTS = ("README.md", "docs/checks.md", "docs/clients.md", "docs/architecture.md", "docs/protocol.md")
MARKER = re.compile(r"<!-- count:(?P<name>[a-z_-]+)(?P<words> words)? -->(?P<value>[^<]*)<!-- /count -->")


def _checks() -> int:
    from orsbench.checks import load_checks

    return len(load_checks())


def _probes() -> int:
    from orsbench.checks.collector import probe_names

    return len(probe_names())


def _violations() -> int:
    from orsbench.servers.faults.violations import VIOLATIONS

    return len(VIOLATIONS.names())


def _client_checks() -> int:
    from orsbench.clientcheck import CLIENT_CHECKS

    return len(CLIENT_CHECKS.values())


def _cases() -> int:
    from orsbench.clientcheck import cases

    return len(cases())


def _ors_servers() -> int:
    from orsbench.servers.implementations import ors_servers

    return len(ors_servers())


def _scenarios() -> int:
    from orsbench.scenarios import SCENARIOS

    return len(SCENARIOS.names())


#: Every count the docs may state: its marker name → how to count it.
COUNTS: dict[str, Callable[[], int]] = {
    "checks": _checks,
    "probes": _probes,
    "violations": _violations,
    "client-checks": _client_checks,
    "cases": _cases,
    "ors-servers": _ors_servers,
    "scenarios": _scenarios,
}

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def words(n: int) -> str:
    """``61`` → ``"sixty-one"`` (below 100; digits beyond)."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    return str(n)


def rendered(text: str, values: dict[str, int]) -> str:
    """``text`` with every marker's value set from ``values`` (an unknown name is a ``KeyError``: a typo in the docs)."""

    def fill(match: re.Match[str]) -> str:
        n = values[match["name"]]
        shown = words(n) if match["words"] else str(n)
        return f"<!-- count:{match['name']}{match['words'] or ''} -->{shown}<!-- /count -->"

    return MARKER.sub(fill, text)


def values() -> dict[str, int]:
    return {name: count() for name, count in COUNTS.items()}


def stale(root: Path = ROOT) -> list[str]:
    """``"docs/checks.md: checks says 73, the registry has 88"`` for each marker that is out of date."""
    known = values()
    out = []
    for document in DOCUMENTS:
        text = (root / document).read_text(encoding="utf-8")
        for match in MARKER.finditer(text):
            name = match["name"]
            if name not in known:
                out.append(f"{document}: no count named {name!r} (known: {', '.join(known)})")
                continue
            want = words(known[name]) if match["words"] else str(known[name])
            if match["value"] != want:
                out.append(f"{document}: {name} says {match['value']!r}, the registry has {want}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    problems = stale()
    unknown = [p for p in problems if "no count named" in p]
    if unknown:
        print("\n".join(unknown), file=sys.stderr)
        return 1
    if "--check" in argv:
        print("\n".join(problems) or "every count in the docs is the registries'")
        return 1 if problems else 0
    known = values()
    for document in DOCUMENTS:
        path = ROOT / document
        text = path.read_text(encoding="utf-8")
        new = rendered(text, known)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"updated {document}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
