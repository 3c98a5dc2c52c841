"""``orsbench``: the command line. Each subcommand lives in its own module.

A subcommand module exposes ``register(subparsers)``, which adds its parser and
sets ``func`` (called with the parsed namespace; its return value is the exit
code). Adding a subcommand means adding its module to :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("serve", "scenarios", "bench", "check", "matrix")

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
    from orsbench import __version__

    parser.add_argument("--version", action="version", version=f"orsbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"orsbench.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
