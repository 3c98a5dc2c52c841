"""The protocol the checker enforces ships with it: every citation resolves inside the repository.

Each check cites sections of ``docs/protocol.md`` (``§N`` or ``§N.M``; ``§11.K`` is item K of
section 11's list). These tests keep the citations, the catalogue in docs/checks.md and the
reports true to that file, and keep anything from pointing at notes that are not in the repository.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orsbench.checks import load_checks, run_checks
from orsbench.checks.registry import SPEC_DOCUMENT

ROOT = Path(__file__).parent.parent
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
#: Documents outside the repository that a citation must never name.
OUTSIDE = ("ors-wire-protocol", "shared/reference", "checker-anchors", "client-pain-points")


def sections() -> set[str]:
    """Every citable section: headings ``## N.`` / ``### N.M``, and the items of §11's numbered list."""
    found = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", PROTOCOL, flags=re.MULTILINE))
    choices = PROTOCOL.split("\n## 11. ")[1]
    found |= {f"11.{n}" for n in re.findall(r"^(\d+)\. \*\*", choices, flags=re.MULTILINE)}
    return found


def test_the_spec_document_is_in_the_repository():
    assert SPEC_DOCUMENT == "docs/protocol.md" and (ROOT / SPEC_DOCUMENT).is_file()


def test_sections_are_numbered_in_order():
    top = [int(n) for n in re.findall(r"^## (\d+)\. ", PROTOCOL, flags=re.MULTILINE)]
    # §12 client obligations (check-client), §13 hazards, §14 secrets, §15 sessions at once, §16 deployments: every section in order, none missing.
    assert top == list(range(1, 17))
    assert {f"11.{k}" for k in range(1, 19)} <= sections()


@pytest.mark.parametrize("check", list(load_checks().values()), ids=lambda c: c.id)
def test_every_check_cites_sections_that_exist(check):
    assert re.fullmatch(r"§\d+(\.\d+)?(, §\d+(\.\d+)?)*", check.spec), f"{check.id}: {check.spec!r} is not a list of §N"
    missing = set(SECTION.findall(check.spec)) - sections()
    assert not missing, f"{check.id} cites {sorted(missing)}, which docs/protocol.md does not have"


def test_cross_references_inside_the_protocol_resolve():
    missing = set(SECTION.findall(PROTOCOL)) - sections()
    assert not missing, sorted(missing)


def test_the_catalogue_shows_each_checks_citation():
    catalogue = (ROOT / "docs" / "checks.md").read_text().split("<!-- catalogue:start -->")[1].split("<!-- catalogue:end -->")[0]
    cited = {}
    for line in catalogue.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)]
        if len(cells) > 6 and cells[1].startswith("`"):
            cited[cells[1].strip("`")] = cells[5]
    assert cited == {c.id: c.spec for c in load_checks().values()}


def _text_files() -> list[Path]:
    skip = {".git", "__pycache__", ".venv", "node_modules", "__snapshots__"}
    out = []
    for path in ROOT.rglob("*"):
        if path.is_file() and not skip & set(path.relative_to(ROOT).parts) and path.suffix in {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".json"}:
            out.append(path)
    return out


def test_nothing_in_the_repository_cites_notes_outside_it():
    offenders = []
    for path in _text_files():
        if path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in OUTSIDE if name in text]
    assert not offenders, offenders


def test_a_reports_citations_point_into_docs_protocol(ors_server_factory, tmp_path):
    server = ors_server_factory("echo")
    report = run_checks(server.url, only=["discovery.*", "reward.*"])
    text = json.dumps(report.to_json())
    assert not [name for name in OUTSIDE if name in text]
    assert report.to_json()["spec"] == "docs/protocol.md"
    for result in report.results:
        assert result.spec.startswith("docs/protocol.md §"), result.spec
        assert set(SECTION.findall(result.spec)) <= sections(), result.spec
