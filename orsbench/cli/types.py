"""Argument types for the command line: every flag is parsed in one place, once.

Each function is an ``argparse`` ``type=``: it turns the text into a value or
raises ``argparse.ArgumentTypeError`` with the fix, which argparse prints as a
usage error (exit 2) naming the flag. No subcommand re-parses a flag by hand.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple


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


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1048576, "mb": 1000000, "mib": 1048576}


def byte_size(text: str) -> int:
    """A size in bytes: ``2097152``, ``2MiB``, ``512KiB``, ``1.5m`` (k/m are binary, KB/MB decimal); 0 turns it off."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes or a unit, e.g. 2MiB, 512KiB, 2097152")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower() if match.group(2) else None])


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


class Tasks(NamedTuple):
    """What ``--tasks`` names: a split (or ``None``: the command's own), the indices, and the text as given."""

    split: str | None
    indices: tuple[int, ...]
    text: str


def tasks(text: str) -> Tasks:
    """``[SPLIT:]I[-J][,K...]`` → :class:`Tasks` (negative indices count from the end): one grammar for every command."""
    from orsbench.checks.evidence import parse_tasks

    try:
        split, values = parse_tasks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Tasks(split, tuple(values), text)


#: ``--tasks``'s metavar and help, the same on every command that plays tasks.
TASKS_METAVAR = "[SPLIT:]I[-J][,K]"


def json_object(text: str) -> dict[str, object]:
    """A JSON object given on the command line (a tool's input)."""
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object like '{{\"text\": \"hi\"}}', got {type(value).__name__}")
    return value


def http_url(text: str) -> str:
    """An ``http(s)://host[:port]`` URL (a server to talk to); a missing scheme suggests ``http://``."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        hint = f"; did you mean http://{text}?" if "://" not in text and text else ""
        raise argparse.ArgumentTypeError(f"expected an http(s) URL like http://127.0.0.1:8000, got {text!r}{hint}")
    return text


def one_of(known: Callable[[], Iterable[str]], what: str, *, extra: Iterable[str] = ()) -> Callable[[str], list[str]]:
    """``A,B`` → ``["A", "B"]``, each one of ``known()`` (read when the flag is parsed: a registry's names)."""

    def parse(text: str) -> list[str]:
        given = names(text)
        choices = [*known(), *extra]
        unknown = [n for n in given if n not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(map(repr, unknown))}; choose from {', '.join(choices)}")
        if not given:
            raise argparse.ArgumentTypeError(f"name at least one {what}")
        return given

    parse.__name__ = what
    return parse


def output_file(text: str) -> str:
    """A file to write a report to (``-``: stdout), checked when the flag is parsed so a long run is not lost at the end:
    its folder exists and is writable, it is not a folder, and an existing file is writable."""
    import os
    from pathlib import Path

    if text == "-":
        return text
    path = Path(text).expanduser()
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no folder {str(folder)!r}")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: the file is not writable")
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: the folder {str(folder)!r} is not writable")
    return text


def output_folder(text: str) -> str:
    """A folder to keep files in (created when missing), checked when the flag is parsed: not a file, and
    its parent (or itself, when it exists) writable."""
    import os
    from pathlib import Path

    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file; give a folder")
    where = path if path.exists() else path.parent
    if not where.is_dir():
        raise argparse.ArgumentTypeError(f"cannot keep files in {text!r}: no folder {str(where)!r}")
    if not os.access(where, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot keep files in {text!r}: {str(where)!r} is not writable")
    return str(path)


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


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHOWN_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")  # a conventional variable name: safe to say back


def _secret_name(name: str, where: str) -> str:
    name = name.strip()
    if not name or any(c.isspace() or c in "=\"':" for c in name):
        raise argparse.ArgumentTypeError(f"{where}: a secret needs a NAME (no spaces, quotes or ':') before '='")
    return name


def secret(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` → ``(NAME, VALUE)``; ``NAME`` alone → its value from the environment variable ``NAME``.

    No message says back what was given after a separator, nor a bare argument that does not look like a
    variable name: a typo such as ``NAME:VALUE`` must not print the value into a terminal or a CI log.
    """
    import os

    name, sep, value = text.partition("=")
    if not sep:
        if ":" in text:
            raise argparse.ArgumentTypeError("expected NAME=VALUE: use '=' between the name and the value, not ':' (the value is not shown)")
        if not _ENV_NAME.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(
                "expected NAME=VALUE, or NAME alone to read the environment variable NAME (what was given is not shown)"
            )
        name = text.strip()
        if name not in os.environ:
            shown = f" ${name}" if _SHOWN_NAME.fullmatch(name) else " of that name (the name is not shown: it may be a value)"
            raise argparse.ArgumentTypeError(f"no environment variable{shown} to read the secret from (give NAME=VALUE)")
        value = os.environ[name]
    name = _secret_name(name, "expected NAME=VALUE or NAME")
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
            colon = ": use '=' between the name and the value, not ':'" if ":" in line else ""
            raise argparse.ArgumentTypeError(f"{text!r} line {number}: expected NAME=VALUE{colon}")
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
