"""Argument types for the command line: every flag is parsed in one place, once.

Each function is an ``argparse`` ``type=``: it turns the text into a value or
raises ``argparse.ArgumentTypeError`` with the fix, which argparse prints as a
usage error (exit 2) naming the flag. No subcommand re-parses a flag by hand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping


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


# -- secrets ------------------------------------------------------------------------------
# One parser for every command that sends secrets to an environment (check, record, proxy,
# matrix, bench --url; the pytest plugin's --ors-secret). A value never appears in a message:
# argparse quotes a rejected argument only when the type raises something other than
# ArgumentTypeError, so every failure here is one, and says what is wrong with the *name*.

SECRET_HELP = (
    "a secret the environment's /create needs, sent as X-Secrets: NAME=VALUE, or NAME alone to read it from "
    "the environment variable NAME (keeps it out of `ps`); repeatable"
)
SECRETS_FILE_HELP = "secrets from a file: NAME=VALUE lines (# comments), or a JSON object {NAME: VALUE}; see docs/protocol.md §14"


def _secret_name(name: str, where: str) -> str:
    name = name.strip()
    if not name or any(c.isspace() or c in "=\"'" for c in name):
        raise argparse.ArgumentTypeError(f"{where}: a secret needs a NAME (no spaces or quotes) before '='")
    return name


def secret(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` → ``(NAME, VALUE)``; ``NAME`` alone → its value from the environment variable ``NAME``."""
    import os

    name, sep, value = text.partition("=")
    name = _secret_name(name, "expected NAME=VALUE or NAME")
    if not sep:
        if name not in os.environ:
            raise argparse.ArgumentTypeError(f"no environment variable {name!r} to read the secret from (give NAME=VALUE)")
        value = os.environ[name]
    if not value:
        raise argparse.ArgumentTypeError(f"secret {name!r} is empty")
    return name, value


def secrets_file(text: str) -> dict[str, str]:
    """A file of secrets: ``NAME=VALUE`` lines (blank lines and ``#`` comments ignored), or a JSON object."""
    import json
    from pathlib import Path

    path = Path(text).expanduser()
    try:
        content = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text") from None
    if content.lstrip().startswith("{"):
        try:
            data = json.loads(content)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} starts with '{{' but is not a JSON object") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise argparse.ArgumentTypeError(f"{text!r}: the JSON must map each NAME to a string VALUE")
        return {_secret_name(str(k), f"{text!r}"): v for k, v in data.items()}
    out: dict[str, str] = {}
    for number, line in enumerate(content.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{text!r} line {number}: expected NAME=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[_secret_name(name, f"{text!r} line {number}")] = value
    return out


def add_secret_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--secret NAME=VALUE`` (repeatable) and ``--secrets-file FILE``; read both back with :func:`secrets_of`."""
    parser.add_argument("--secret", dest="secret", type=secret, action="append", default=[], metavar="NAME=VALUE", help=SECRET_HELP)
    parser.add_argument("--secrets-file", dest="secrets_file", type=secrets_file, action="append", default=[], metavar="FILE", help=SECRETS_FILE_HELP)


def merge_secrets(files: Iterable[Mapping[str, str]], pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Secrets from files first, then each ``NAME=VALUE`` pair (a later one wins)."""
    out: dict[str, str] = {}
    for entries in files:
        out.update(entries)
    out.update(pairs)
    return out


def secrets_of(args: argparse.Namespace) -> dict[str, str]:
    """The secrets ``--secrets-file`` and ``--secret`` give."""
    return merge_secrets(getattr(args, "secrets_file", None) or [], getattr(args, "secret", None) or [])
