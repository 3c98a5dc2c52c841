"""``orsbench``: the command line. Each subcommand lives in its own module.

A subcommand module decorates its ``register(subparsers)`` with
:func:`subcommand`; ``register`` adds the parser and sets ``func`` (called with
the parsed namespace; its return value is the exit code). Adding a subcommand
means one module and its line in :data:`MODULES` (the order ``--help`` lists
them in).

The conventions every subcommand follows, so the command line reads as one:

* a flag's value is parsed by an ``argparse`` ``type=`` from :mod:`.types` (a bad
  value is argparse's usage error, exit 2, naming the flag);
* a command that produces a report adds its flags with
  :func:`.reporting.add_report_arguments` (``--json/--junit/--html/--markdown``,
  ``-`` for stdout, paths checked before the run, ``-q/-v``) and feeds its run's events to
  :func:`.reporting.stream_of` (a finished report alone: its end to :func:`.reporting.file_handlers`), or writes with :func:`.reporting.write_text`;
* shared ideas are added by :mod:`.flags` — ``--scenario``, ``--server-cmd``,
  ``--client-cmd``, ``--jobs``, ``--tasks``, ``--api-key`` (``$ORSBENCH_API_KEY``) —
  and an old spelling stays a release through :func:`.flags.renamed`;
* any other usage error is ``raise flags.UsageError("... the fix")`` (or a check
  registered with :func:`.flags.after_parse`); :func:`main` has the command's
  parser print it. Nothing prints a usage error by hand.
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
    f"orsbench.cli.{name}" for name in ("serve", "scenarios", "bench", "check", "check_client", "clients", "matrix", "proxy", "record", "explain", "load", "versions")
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
        # Each command's own parser prints its usage errors (``orsbench NAME: error: ...``).
        subparsers.choices[command.name].set_defaults(_parser=subparsers.choices[command.name])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``orsbench ARGV``; the exit code. A usage error exits 2 through argparse, as a bad flag does."""
    from orsbench.cli.flags import UsageError, run_after_parse
    from orsbench.extras import MissingExtra

    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if not getattr(args, "func", None):
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help()
        return 2
    if unknown and (passthrough := getattr(args, "_passthrough", None)):
        # A command that hands its arguments to another program (``load``: Locust's): unknown options are its,
        # in order (argparse puts the options before the first positional here, the remainder after it).
        setattr(args, passthrough, [*unknown, *getattr(args, passthrough)])
    elif unknown:  # argparse's top parser would say ``orsbench: error:``; the command's own names it
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        run_after_parse(args)
        return int(args.func(args) or 0)
    except UsageError as exc:
        args._parser.error(str(exc))  # SystemExit(2), as argparse's own errors
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
