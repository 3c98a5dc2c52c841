"""Argument types for the command line: every flag is parsed in one place, once.

Each function is an ``argparse`` ``type=``: it turns the text into a value or
raises ``argparse.ArgumentTypeError`` with the fix, which argparse prints as a
usage error (exit 2) naming the flag. No subcommand re-parses a flag by hand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _number(kind: type, text: str) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None


def positive(kind: type = float) -> Callable[[str], float]:
    """A number greater than zero (a timeout, a TTL, an interval, a size)."""

    def parse(text: str) -> float:
        value = _number(kind, text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def non_negative(kind: type = float) -> Callable[[str], float]:
    """A number of zero or more (a delay, a latency, a count that may be off)."""

    def parse(text: str) -> float:
        value = _number(kind, text)
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
        return value

    parse.__name__ = f"non-negative {kind.__name__}"
    return parse


def port(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    value = int(_number(int, text))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port: use 1-65535, or 0 for a free one")
    return value


def param(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` → ``(KEY, VALUE)``; the scenario converts the value to its parameter's type."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def indices(text: str) -> tuple[int, ...]:
    """``0,5,-1`` → ``(0, 5, -1)``: task indices (negative ones count from the end)."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected task indices like 0,5,-1, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one task index")
    return values


def output_file(text: str) -> str:
    """A file to write a report to (``-``: stdout): its folder must exist, so a run is not lost at the end."""
    from pathlib import Path

    if text != "-":
        folder = Path(text).expanduser().parent
        if not folder.is_dir():
            raise argparse.ArgumentTypeError(f"cannot write {text!r}: no folder {str(folder)!r}")
        if Path(text).is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name")
    return text


def names(text: str) -> list[str]:
    """``A,B`` → ``["A", "B"]`` (a comma-separated list; use with ``action="extend"``)."""
    return [n.strip() for n in text.split(",") if n.strip()]


def fault_names(text: str) -> list[str]:
    """``NAME[,NAME]`` → the fault names, each one known (profiles and violations)."""
    from orsbench.servers.faults import FAULTS

    given = names(text)
    known = FAULTS
    unknown = [n for n in given if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault {', '.join(map(repr, unknown))}; see docs/robustness.md and docs/checks.md for the names"
        )
    return given
