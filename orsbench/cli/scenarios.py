"""``orsbench scenarios``: list the scenarios, one a line, name first."""

from __future__ import annotations

import argparse

from orsbench.cli import subcommand
from orsbench.scenarios import list_scenarios


@subcommand("scenarios")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "scenarios",
        help="list the built-in scenarios",
        description="List the built-in scenarios, one a line: the name, then what it does. "
        "With --verbose, also each scenario's parameters (set them with `orsbench serve NAME --param key=value`).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list each scenario's parameters")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    classes = list_scenarios()
    width = max(len(cls.name) for cls in classes)
    for cls in classes:
        print(f"{cls.name:<{width}}  {cls.summary}")
        if args.verbose:
            for key, (default, text) in cls.params_help.items():
                print(f"{'':<{width}}    --param {key}=VALUE  {text} (default {default!r})")
    return 0
