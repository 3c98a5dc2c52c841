"""The JSON report: ``{"target", "passed", "summary", "checks": [...]}`` (shape in docs/checks.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from orsbench.reports.output import write_text

if TYPE_CHECKING:
    from orsbench.checks.runner import Report


def dumps(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=repr)


def write_json(report: Report, path: str | Path) -> None:
    """Write the report to ``path`` (``-`` for stdout)."""
    write_text(path, dumps(report))
