"""Where a rendered report goes: a file, or stdout for ``-`` (the one definition every writer uses)."""

from __future__ import annotations

import sys
from pathlib import Path

#: The path that means stdout (``--json -``).
STDOUT = "-"


def write_text(path: str | Path, text: str) -> None:
    """Write a rendered report to ``path`` (``-``: stdout, flushed), ending in one newline."""
    text = text if text.endswith("\n") else text + "\n"
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).expanduser().write_text(text, encoding="utf-8")
