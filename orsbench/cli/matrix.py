"""``orsbench matrix``: which ORS client works with which server, scenario and fault profile."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from orsbench.cli import flags, reporting, subcommand, types
from orsbench.cli.clients import add_live_arguments


@subcommand("matrix")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="play every client against every server, scenario and fault profile",
        description="Play a scripted episode with each installed ORS client target (openreward SDK, ors-sdk, TRL "
        "OpenRewardSpec, inspect-openreward under `inspect eval`, firehorse-cli under its own CLI — the two harnesses on orsbench's scripted model) on each server implementation and scenario, "
        "and on the mock under each fault profile, through the client's built-in adapter; each episode is graded by "
        "the client checks of `orsbench check-client`. Each cell: works / fails clearly / fails silently / hangs, "
        "with the pinned upstream defects. "
        "Servers bind 127.0.0.1; every episode runs in a child killed at its deadline.",
        epilog="examples:\n  orsbench matrix --clients trl,inspect --servers mock --profiles none,flaky-5xx --markdown m.md --jobs 2\n"
        "  orsbench matrix --predicted --json - | jq .cells   # the JSON on stdout, the summary on stderr\n"
        "  orsbench clients http://127.0.0.1:8000   # your own server (was: orsbench matrix --url URL)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mine = parser.add_argument_group(
        "your own server (--url): deprecated, use `orsbench clients URL`",
        "`orsbench matrix --url URL` still plays your server for a release (a note on stderr says so); it is "
        "`orsbench clients URL` now, with the same flags.",
    )
    mine.add_argument("--url", type=types.http_url, default=None, help="your ORS server on this machine (deprecated: orsbench clients URL)")
    add_live_arguments(mine, prefix="with --url: ")
    parser.add_argument(
        "--clients", type=types.one_of(_client_names, "client"), default=None, metavar="A,B", help="client targets to run (default: every installed one)"
    )
    parser.add_argument("--servers", type=types.one_of(_server_names, "server"), default=None, metavar="A,B", help="server implementations (default: all)")
    parser.add_argument(
        "--profiles", type=types.one_of(_profile_names, "fault profile", extra=("no",)), default=None, metavar="A,B",
        help="fault profiles on the mock; 'no' for none (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=types.positive(float), default=900.0, metavar="S", help="stop starting cells after this many seconds (default 900)"
    )
    flags.add_jobs(parser, default=3, what="servers playing")
    flags.renamed(parser, "--parallel", "--jobs", dest="jobs", type=types.positive(int), metavar="N")
    parser.add_argument("--predicted", action="store_true", help="write what the pinned defects predict, without running (docs/compatibility.md)")
    reporting.add_report_arguments(
        parser,
        formats=("json", "html", "markdown"),
        helps={
            "json": "write the JSON result here",
            "markdown": "write the per-client report here",
            "html": "write a self-contained HTML page: a coloured grid per client, each cell opening to its episode",
        },
        verbose_help="under each cell that does not work, print the client's error and the checks it broke",
        quiet_help="no progress lines: only the summary",
    )
    flags.after_parse(parser, _flags_agree)
    parser.set_defaults(func=run)


def _client_names() -> list[str]:
    from orsbench.clients.targets import CLIENT_TARGETS

    return CLIENT_TARGETS.names()


def _server_names() -> list[str]:
    from orsbench.clients import cells

    return cells.servers()


def _profile_names() -> list[str]:
    from orsbench.clientcheck.profiles import profiles

    return [p.name for p in profiles()]


def _flags_agree(args: argparse.Namespace) -> None:
    """The flags of the two modes (orsbench's own servers; ``--url``) are not mixed."""
    if args.url is not None:
        if args.servers or args.profiles or args.predicted:
            raise flags.UsageError("--url plays your server: leave out --servers, --profiles and --predicted")
        return
    if args.env is not None or types.secrets_of(args) or args.api_key is not None:
        raise flags.UsageError("--env, --api-key and --secret/--secrets-file need --url (the matrix's own servers need none of them)")
    if args.client_cmd:
        raise flags.UsageError(
            "--client-cmd needs --url (your server); to grade your client on orsbench's own cases run "
            'orsbench check-client --client-cmd "..."'
        )


def run(args: argparse.Namespace) -> int:
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS
    from orsbench.reports import clients as report

    if args.url is not None:
        from orsbench.cli import clients

        print(flags.deprecation_note("orsbench matrix --url URL", "orsbench clients URL"), file=sys.stderr, flush=True)
        return clients.run(args)
    # By default every client target that is installed here (all of them for --predicted: the docs list every one).
    clients = args.clients or [n for n in CLIENT_TARGETS.names() if args.predicted or CLIENT_TARGETS[n].installed]
    servers = args.servers or C.servers()
    profile_names = [] if args.profiles == ["no"] else args.profiles
    cells = C.plan(clients, servers, profile_names)
    started = time.monotonic()
    progress = _progress(args)
    if args.predicted:
        result = M.predicted(cells, clients, servers)
    else:
        from orsbench.servers import launch

        launch.use_zygote()  # one preloaded process forks every cell's server: an SDK twin in ~0.5 s, not ~6 s of CPU
        progress(f"orsbench matrix: {len(cells)} cells ({len(clients)} clients × {len(servers)} servers), budget {args.budget:g} s")
        result = M.run(cells, clients, servers, budget=args.budget, parallel=args.jobs, progress=progress, on_outcome=_details(args))
    result.seconds = round(time.monotonic() - started, 1)
    if args.json:
        reporting.write_text(args.json, report.to_json(result))
    if args.markdown:
        reporting.write_text(args.markdown, report.matrix_markdown(result))
    if args.html:
        from orsbench.reports import render_matrix

        reporting.write_text(args.html, render_matrix(result))
    out = reporting.people(args)
    for line in report.matrix_summary(result):
        print(line, file=out)
    print(f"{len(cells)} cells in {result.seconds} s", file=out)
    return 0


def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    if args.quiet:
        return lambda _line: None
    return lambda line: print(line, file=sys.stderr, flush=True)


def _details(args: argparse.Namespace) -> Callable[[Any, Any], None]:
    """With ``-v``: under each cell that does not work, the client's error and the checks it broke."""
    from orsbench.verdict import Verdict

    def show(cell: Any, outcome: Any) -> None:
        if not args.verbose or outcome.verdict == Verdict.WORKS:
            return
        if outcome.error:
            print(f"      error: {str(outcome.error)[:300]}", file=sys.stderr, flush=True)
        for problem in outcome.problems:
            print(f"      broke: {problem[:300]}", file=sys.stderr, flush=True)

    return show
