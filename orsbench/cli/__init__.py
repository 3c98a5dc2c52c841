"""``orsbench``: the command line. Each subcommand lives in its own module.

A subcommand module decorates its ``register(subparsers)`` with
:func:`subcommand`; ``register`` adds the parser and sets ``func`` (called with
the parsed namespace; its return value is the exit code). Adding a subcommand
means one module and its line in :data:`MODULES` (the order ``--help`` lists
them in).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from orsbench.registry import Registry

AddParser = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


@dataclass(frozen=True)
class Subcommand:
    """One ``orsbench NAME``: its name and the function that adds its parser."""

    name: str
    add_parser: AddParser


#: The modules that register subcommands, in ``--help`` order (see :mod:`orsbench.registry`).
MODULES = tuple(
    f"orsbench.cli.{name}" for name in ("serve", "scenarios", "bench", "check", "check_client", "matrix", "proxy", "record")
)
SUBCOMMANDS: Registry[Subcommand] = Registry("subcommand", modules=MODULES)


def subcommand(name: str) -> Callable[[AddParser], AddParser]:
    """Register a module's ``register(subparsers)`` as the subcommand ``name`` (decorator)."""

    def decorate(add_parser: AddParser) -> AddParser:
        SUBCOMMANDS.register(Subcommand(name, add_parser), origin=add_parser.__module__)
        return add_parser

    return decorate

DESCRIPTION = """\
orsbench: conformance, load and training-smoke harness for the Open Reward Standard (ORS).

Serve a mock ORS environment, check any ORS server against the protocol, and
measure how fast it serves whole episodes. Every server orsbench starts binds
127.0.0.1 unless told otherwise.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orsbench", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    from orsbench.version import __version__

    parser.add_argument("--version", action="version", version=f"orsbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS.values():
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from orsbench.extras import MissingExtra

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MissingExtra as exc:
        print(f"orsbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """The reader of our stdout went away (``orsbench check --list | head``): stop writing, quietly.

    Pointing stdout at /dev/null keeps the interpreter's final flush from raising
    a second BrokenPipeError (the recipe of Python's ``signal`` documentation).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
