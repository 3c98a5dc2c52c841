"""``orsbench clients URL``: which installed ORS clients (and your own) can use your environment, played live.

The logic is :mod:`orsbench.clients.live`; the words are the matrix's and check-client's
(:class:`orsbench.verdict.Verdict`); the reports are :mod:`orsbench.reports.clients`.
``orsbench matrix --url`` was its spelling until this release and still works, with a note on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from orsbench.cli import flags, reporting, subcommand, types

if TYPE_CHECKING:
    from orsbench.clientcheck.results import LiveRow

EPILOG = """\
examples:
  orsbench clients http://127.0.0.1:8000
  orsbench clients http://127.0.0.1:8000 --env myenv --secret OPENAI_API_KEY=sk-... --markdown clients.md
  orsbench clients http://127.0.0.1:8000 --client-cmd "node my_adapter.js" --html clients.html
  orsbench clients http://127.0.0.1:8000 --clients trl,inspect --json - | jq '.rows[] | {client, verdict}'

Each row: works (for a trainer: trains / would not train) · fails clearly · fails silently · hangs —
the words of `orsbench matrix` and `orsbench check-client`, from the same client checks. A failure a
pinned upstream defect explains names it (the client's bug, not your environment's).

exit codes: 0 every client asked about played to a verdict --fail-on does not name, 1 one did not
(default --fail-on fails-clearly,fails-silently,hangs; `--fail-on none` always 0), 2 usage error.
"""

#: ``--fail-on`` words → the row verdicts they name (a row's ``verdict``, or its words for a trainer).
FAIL_ON = {
    "fails-clearly": "fails clearly",
    "fails-silently": "fails silently",
    "hangs": "hangs",
    "would-not-train": "works — would not train",
    "not-installed": "not installed",
}
DEFAULT_FAIL_ON = ("fails-clearly", "fails-silently", "hangs")


@subcommand("clients")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "clients",
        help="which installed ORS clients (and your own) can use your server, played live",
        description="The checker's own player plays one episode on your server (a winning one where it finds one); "
        "every installed client target (openreward SDK, ors-sdk, TRL OpenRewardSpec, inspect-openreward, firehorse-cli) "
        "and each --client-cmd adapter command then replays those calls in a fresh session, through an orsbench proxy "
        "that keeps the request log the client checks of `orsbench check-client` grade. One row per client, beside the "
        "binding problems predicted from /tools. Loopback URLs only; secrets reach the clients by environment, never "
        "a command line.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", type=types.http_url, metavar="URL", help="your ORS server on this machine, e.g. http://127.0.0.1:8000")
    add_live_arguments(parser)
    parser.add_argument(
        "--fail-on", type=types.one_of(lambda: FAIL_ON, "verdict", extra=("none",)), default=list(DEFAULT_FAIL_ON),
        metavar="V,W", help=f"exit 1 when a client's row has one of these verdicts ({', '.join(FAIL_ON)}, or none; "
        f"default {','.join(DEFAULT_FAIL_ON)})",
    )  # fmt: skip
    reporting.add_report_arguments(
        parser,
        formats=("json", "html", "markdown"),
        helps={
            "json": "write the rows as JSON here",
            "markdown": "write the rows as a Markdown table here",
            "html": "write a self-contained HTML page here: one row per client",
        },
        verbose_help="under each row that does not work, the checks that decided its verdict and the rules it broke",
        quiet_help="no progress lines: only the rows",
    )
    parser.set_defaults(func=run)


def add_live_arguments(group: argparse.ArgumentParser | argparse._ArgumentGroup, *, prefix: str = "") -> None:
    """The flags of a live run on the user's server (``prefix``: how ``matrix --url``'s help introduces them)."""
    group.add_argument("--env", default=None, metavar="E", help=f"{prefix}the environment to play (default: the server's first)")
    group.add_argument(
        "--timeout", type=types.positive(float), default=60.0, metavar="S", help=f"{prefix}seconds each client's episode may take, and each request of the checker's player (default 60)"
    )
    flags.add_client_cmd(
        group,
        repeatable=True,
        help=f"{prefix}also play your own client, given as a check-client adapter command (run by /bin/sh; docs/clients.md); repeatable",
    )
    flags.add_api_key(group, help=f"{prefix}the key your server requires, sent by the player and given to every client")
    types.add_secret_arguments(group)
    if not prefix:
        group.add_argument(
            "--clients", type=types.one_of(_client_names, "client"), default=None, metavar="A,B",
            help="client targets to play (default: every one; those not installed are listed with the install command)",
        )  # fmt: skip


def _client_names() -> list[str]:
    from orsbench.clients.targets import CLIENT_TARGETS

    return CLIENT_TARGETS.names()


def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    if args.quiet:
        return lambda _line: None
    return lambda line: print(line, file=sys.stderr, flush=True)


def _client_cmd_problem(command: str) -> str | None:
    from orsbench.clientcheck import contract

    if not command.strip():
        return '--client-cmd is empty: give the adapter command, e.g. --client-cmd "python my_adapter.py"'
    return contract.not_runnable(command)


def run(args: argparse.Namespace) -> int:
    """Play the user's server with every client; write the rows (``matrix --url`` lands here too)."""
    from orsbench.clients import live
    from orsbench.reports import clients as report
    from orsbench.reports import render_live

    secrets = types.secrets_of(args)
    try:
        live.check_url(args.url)
        for command in args.client_cmd:
            if problem := _client_cmd_problem(command):
                raise flags.UsageError(problem)
        result = live.play_on_url(
            args.url,
            args.env,
            args.clients,
            secrets,
            args.timeout,
            progress=_progress(args),
            commands=args.client_cmd,
            api_key=flags.api_key_of(args),
        )
    except live.LiveUsageError as exc:
        raise flags.UsageError(str(exc)) from None
    for row in result.rows:
        if row.did_not_run:
            raise flags.UsageError(row.did_not_run)
    if args.json:
        reporting.write_text(args.json, report.to_json(result))
    if args.markdown:
        reporting.write_text(args.markdown, report.live_markdown(result))
    if args.html:
        reporting.write_text(args.html, render_live(result, secrets=secrets.values()))
    out = reporting.people(args)
    for line in report.live_notes(result):
        print(line, file=out)
    for row in result.rows:
        print(report.live_line(row), file=out)
        if args.verbose:
            for problem in row.problems:
                print(f"{'':<14} broke: {problem[:300]}", file=out)
            for rule, defect in row.rules.items():
                print(f"{'':<14} rule: {rule}" + (f" (pinned: {defect})" if defect else ""), file=out)
    failed = failing(result.rows, getattr(args, "fail_on", ()))
    if failed:
        names = ", ".join(f"{row.client} ({row.words})" for row in failed)
        print(f"orsbench clients: exit 1: {names} (--fail-on {','.join(args.fail_on)})", file=sys.stderr)
    return 1 if failed else 0


def failing(rows: Iterable[LiveRow], fail_on: Iterable[str]) -> list[LiveRow]:
    """The rows whose verdict ``fail_on`` names (``--fail-on``); ``matrix --url``, which has no such flag, fails on none.

    Why: a CI step of ``orsbench clients URL`` must go red when a client it was asked about cannot use the
    server. The row's verdict is read as the report prints it (``LiveRow.words``), so the flag's words
    are the report's.
    """
    named = {FAIL_ON[word] for word in fail_on if word in FAIL_ON}
    return [row for row in rows if str(row.verdict) in named or row.words in named]
