"""``orsbench matrix``: which ORS client survives which server, scenario and fault profile."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from orsbench.cli import subcommand, types


@subcommand("matrix")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="play every client against every server, scenario and fault profile",
        description="Play a scripted episode with each installed ORS client target (openreward SDK, ors-sdk, TRL "
        "OpenRewardSpec, inspect-openreward under `inspect eval`, firehorse-cli under its own CLI — the two harnesses on orsbench's scripted model) on each server implementation and scenario, "
        "and on the mock under each fault profile, through the client's built-in adapter; each episode is graded by "
        "the client checks of `orsbench check-client`. Each cell: survives / fails clearly / fails silently / hangs, "
        "with the pinned upstream defects. "
        "Servers bind 127.0.0.1; every episode runs in a child killed at its deadline.",
        epilog="examples:\n  orsbench matrix --clients trl,inspect --servers mock --profiles none,flaky-5xx --markdown m.md\n"
        "  orsbench matrix --url http://127.0.0.1:8000 --secret API_KEY=... --markdown clients.md   # your own server\n"
        '  orsbench matrix --url http://127.0.0.1:8000 --cmd "node my_adapter.js" --html clients.html   # and your own client',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mine = parser.add_argument_group(
        "your own server (--url): which installed clients can use it",
        "The checker's own player plays one episode on the server (a winning one where it finds one); every installed "
        "client (and each --cmd adapter command) then replays those calls through its adapter. One row per client: trains (TRL) / evaluates / fails — "
        "because ..., beside the binding problems predicted from /tools. Loopback URLs only; secrets reach the clients "
        "by environment, never a command line.",
    )
    mine.add_argument("--url", default=None, help="your ORS server on this machine, e.g. http://127.0.0.1:8000")
    mine.add_argument("--env", default=None, metavar="E", help="with --url: the environment to play (default: the server's first)")
    mine.add_argument("--timeout", type=float, default=60.0, metavar="S", help="with --url: seconds each client's episode may take (default 60)")
    mine.add_argument(
        "--cmd",
        action="append",
        default=[],
        metavar="COMMAND",
        help="with --url: also play your own client, given as a check-client adapter command (docs/clients.md); repeatable",
    )
    types.add_secret_arguments(mine)
    parser.add_argument("--clients", type=types.names, default=None, metavar="A,B", help="client targets to run (default: every installed one)")
    parser.add_argument("--servers", type=types.names, default=None, metavar="A,B", help="server implementations (default: all)")
    parser.add_argument("--profiles", type=types.names, default=None, metavar="A,B", help="fault profiles on the mock; 'no' for none (default: all)")
    parser.add_argument("--budget", type=float, default=900.0, metavar="S", help="stop starting cells after this many seconds (default 900)")
    parser.add_argument("--parallel", type=int, default=3, metavar="N", help="servers playing at once (default 3)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="F", help="write the per-client report here")
    parser.add_argument("--json", type=Path, default=None, metavar="F", help="write the JSON result here")
    parser.add_argument("--html", type=types.output_file, default=None, metavar="F", help="write a self-contained HTML page: a coloured grid per client, each cell opening to its episode (with --url: one row per client)")
    parser.add_argument("--predicted", action="store_true", help="write what the pinned defects predict, without running (docs/compatibility.md)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS
    from orsbench.clientcheck.profiles import profiles

    known = {"--clients": CLIENT_TARGETS.names(), "--servers": C.servers(), "--profiles": [p.name for p in profiles()] + ["no"]}
    for flag, given in (("--clients", args.clients), ("--servers", args.servers), ("--profiles", args.profiles)):
        unknown = sorted(set(given or []) - set(known[flag]))
        if unknown:
            print(f"orsbench matrix: error: {flag}: unknown {', '.join(unknown)}; choose from {', '.join(known[flag])}", file=sys.stderr)
            return 2
    if args.url is not None:
        return _run_url(args)
    if args.env is not None or types.secrets_of(args):
        print("orsbench matrix: error: --env and --secret/--secrets-file need --url (the matrix's own servers need neither)", file=sys.stderr)
        return 2
    if args.cmd:
        print(
            "orsbench matrix: error: --cmd needs --url (your server); to grade your client on orsbench's own cases run "
            'orsbench check-client --cmd "..."',
            file=sys.stderr,
        )
        return 2
    if args.parallel < 1 or args.budget <= 0:  # checked here, not by argparse: main() returns 2 instead of exiting
        print("orsbench matrix: error: --parallel must be >= 1 and --budget > 0", file=sys.stderr)
        return 2
    # By default every client target that is installed here (all of them for --predicted: the docs list every one).
    clients = args.clients or [n for n in CLIENT_TARGETS.names() if args.predicted or CLIENT_TARGETS[n].installed]
    servers = args.servers or C.servers()
    profile_names = [] if args.profiles == ["no"] else args.profiles
    cells = C.plan(clients, servers, profile_names)
    started = time.monotonic()
    if args.predicted:
        result = M.predicted(cells, clients, servers)
    else:
        print(f"orsbench matrix: {len(cells)} cells ({len(clients)} clients × {len(servers)} servers), budget {args.budget:g} s", file=sys.stderr)
        result = M.run(cells, clients, servers, budget=args.budget, parallel=args.parallel, progress=lambda line: print(line, file=sys.stderr, flush=True))
    result["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(M.markdown(result))
    if args.html:
        from orsbench.reports import render_matrix, write_html

        write_html(render_matrix(result), args.html)
    for name, counts in M.summary(result).items():
        print(f"{name:<11} " + "  ".join(f"{v}: {n}" for v, n in counts.items() if n))
    print(f"{len(cells)} cells in {result['seconds']} s")
    return 0


def _run_url(args: argparse.Namespace) -> int:
    """``--url``: the installed clients on the user's own server (the logic: :mod:`orsbench.clients.live`)."""
    from orsbench.clients import live

    def usage(text: str) -> int:
        print(f"orsbench matrix: error: {text}", file=sys.stderr)
        return 2

    if args.servers or args.profiles or args.predicted:
        return usage("--url plays your server: leave out --servers, --profiles and --predicted")
    if args.timeout <= 0:
        return usage("--timeout must be > 0")
    try:
        live.check_url(args.url)
        result = live.play_on_url(
            args.url,
            args.env,
            args.clients,
            types.secrets_of(args),
            args.timeout,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            commands=args.cmd,
        )
    except live.LiveUsageError as exc:
        return usage(str(exc))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(live.markdown(result))
    if args.html:
        from orsbench.reports import render_live, write_html

        write_html(render_live(result, secrets=types.secrets_of(args).values()), args.html)
    for row in result["rows"]:
        print(live.line_of(row))
    return 0
