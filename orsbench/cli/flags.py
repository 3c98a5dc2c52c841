"""The flags several commands share, each spelt one way, added by one call (the report flags: :mod:`.reporting`).

One name per idea, on every command that has the idea:

============================  =====================================================================
``--scenario NAME``           a built-in scenario orsbench serves (``check``, ``bench``; ``serve``'s
                              positional ``SCENARIO`` is the same)
``--server-cmd COMMAND``      a command that starts *your server* (``{port}`` filled in; split like a
                              shell line, run without a shell)
``--app FILE.py:Class``       *your* openreward Environment class(es), served by the SDK Server
``--client-cmd COMMAND``      *your client*'s adapter command (run by ``/bin/sh`` once per case)
``--jobs N``                  how many units of work orsbench runs at once (cases, servers)
``--tasks [SPLIT:]I[-J][,K]`` which tasks to play (negative indices count from the end)
``--api-key KEY``             the key sent to a server (default ``$ORSBENCH_API_KEY``)
============================  =====================================================================

An old spelling keeps working for one release through :func:`renamed`: it sets what the new
flag sets and says so on stderr. A usage error a flag's ``type`` cannot see (two flags that
exclude each other, a flag that needs another) is raised as :class:`UsageError` — from a
check registered with :func:`after_parse` or from the command itself — and printed by
argparse (``orsbench COMMAND: error: ...``, exit 2), never by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from orsbench import config
from orsbench.cli import types

#: The environment variable every command that talks to a server reads its API key from (one definition:
#: :data:`orsbench.config.API_KEY_ENV`).
API_KEY_ENV = config.API_KEY_ENV

Group = argparse.ArgumentParser | argparse._ArgumentGroup


class UsageError(Exception):
    """The command line is wrong; the message names the fix. ``orsbench``'s ``main`` has argparse print it (exit 2)."""


# -- checks after parsing -------------------------------------------------------------------------
def after_parse(parser: argparse.ArgumentParser, check: Callable[[argparse.Namespace], None]) -> None:
    """Run ``check(args)`` once the command line is parsed, before the command starts (it raises :class:`UsageError`)."""
    checks = list(parser.get_default("_after_parse") or [])
    parser.set_defaults(_after_parse=[*checks, check])


def run_after_parse(args: argparse.Namespace) -> None:
    """Every check :func:`after_parse` registered for the parsed command, in order."""
    for check in getattr(args, "_after_parse", None) or []:
        check(args)


# -- old spellings ---------------------------------------------------------------------------------
def deprecation_note(old: str, new: str) -> str:
    return f"orsbench: {old} is deprecated and goes in the next release; use {new}"


class _Renamed(argparse.Action):
    """An old flag: does what the new one does (store, append, extend or store_true) and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, how: str = "store", **kwargs: Any) -> None:
        if how == "store_true":
            kwargs.update(nargs=0)
        super().__init__(option_strings, dest, **kwargs)
        self.new, self.how = new, how

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(deprecation_note(option_string or self.option_strings[0], self.new), file=sys.stderr, flush=True)
        if self.how == "store_true":
            setattr(namespace, self.dest, True)
        elif self.how in ("append", "extend"):
            items = list(getattr(namespace, self.dest, None) or [])
            items.append(values) if self.how == "append" else items.extend(values)
            setattr(namespace, self.dest, items)
        else:
            setattr(namespace, self.dest, values)


def renamed(group: Group, old: str, new: str, *, dest: str, how: str = "store", **kwargs: Any) -> None:
    """Keep ``old`` working for a release as an alias of ``new`` (same ``dest``; hidden from ``--help``)."""
    group.add_argument(old, dest=dest, action=_Renamed, new=new, how=how, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


# -- the shared flags ------------------------------------------------------------------------------------
def add_jobs(group: Group, *, default: int, what: str) -> None:
    """``--jobs N``: how many ``what`` orsbench runs at once."""
    group.add_argument("--jobs", "-j", type=types.positive(int), default=default, metavar="N", help=f"{what} at once (default {default})")


def add_api_key(group: Group, *, help: str = "send this X-API-Key to the server") -> None:
    """``--api-key KEY``, defaulting to ``$ORSBENCH_API_KEY``; read it back with :func:`api_key_of`."""
    group.add_argument(
        "--api-key", dest="api_key", default=None, metavar="KEY",
        help=f"{help} (default: ${API_KEY_ENV}, which keeps it out of `ps`; never written to a report)",
    )  # fmt: skip


def api_key_of(args: argparse.Namespace) -> str | None:
    """The key ``--api-key`` gives, else ``$ORSBENCH_API_KEY``, else ``None``."""
    given = getattr(args, "api_key", None)
    return given if given is not None else (os.environ.get(API_KEY_ENV) or None)


def add_scenario(group: Group, *, help: str, default: str | None = None, old: str | None = None) -> None:
    """``--scenario NAME`` (a built-in scenario, checked against the registry); ``old`` is a deprecated spelling."""
    from orsbench.scenarios import SCENARIOS

    names = sorted(SCENARIOS)
    group.add_argument("--scenario", dest="scenario", default=default, choices=names, metavar="SCENARIO", help=f"{help} ({', '.join(names)})")
    if old:
        renamed(group, old, "--scenario", dest="scenario", choices=names, metavar="SCENARIO")


def add_server_cmd(group: Group, *, help: str) -> None:
    """``--server-cmd COMMAND`` (your server); the old ``--cmd`` for a release."""
    group.add_argument("--server-cmd", dest="server_cmd", default=None, metavar="COMMAND", help=help)
    renamed(group, "--cmd", "--server-cmd", dest="server_cmd", metavar="COMMAND")


def add_app(group: Group, *, help: str) -> None:
    """``--app FILE.py:Class`` (your openreward Environment class(es), served by the SDK Server)."""
    group.add_argument("--app", metavar="FILE.py:Class", default=None, help=help)


def add_client_cmd(group: Group, *, help: str, repeatable: bool = False) -> None:
    """``--client-cmd COMMAND`` (your client's adapter, run by ``/bin/sh``); the old ``--cmd`` for a release."""
    if repeatable:
        group.add_argument("--client-cmd", dest="client_cmd", action="append", default=[], metavar="COMMAND", help=help)
        renamed(group, "--cmd", "--client-cmd", dest="client_cmd", how="append", metavar="COMMAND")
    else:
        group.add_argument("--client-cmd", dest="client_cmd", default=None, metavar="COMMAND", help=help)
        renamed(group, "--cmd", "--client-cmd", dest="client_cmd", metavar="COMMAND")


def add_tasks(group: Group, *, help: str) -> None:
    """``--tasks [SPLIT:]I[-J][,K]`` (:func:`orsbench.cli.types.tasks`)."""
    group.add_argument(
        "--tasks", type=types.tasks, default=None, metavar=types.TASKS_METAVAR,
        help=f"{help}; e.g. 0,-1 or train:0-9 (negative counts from the end; write --tasks=-3--1 for a range from the end)",
    )  # fmt: skip
