"""``orsbench versions``: a client's releases over its matrix cases, with each pinned defect's first and last failing release."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from orsbench.cli import flags, reporting, subcommand, types

if TYPE_CHECKING:
    from orsbench.versions.history import History

#: The client targets whose releases can be installed: beside orsbench, or (platoon, benchflow) each release in an
#: environment of its own on the client's Python (3.12).
_CLIENTS = ("openreward", "trl", "inspect", "firehorse", "ors", "platoon", "benchflow")


def _targets() -> tuple[str, ...]:
    """The clients, then the servers whose releases run under ``orsbench check`` (``server:openreward``)."""
    from orsbench.versions.servers import SERVERS

    return (*_CLIENTS, *SERVERS)


@subcommand("versions")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "versions",
        help="run a client's releases over its matrix cases: where each pinned defect first and last fails",
        description="Install each release of a client into its own cached environment (a venv beside the system's "
        "packages; pip installs the release and whatever it needs at another version; platoon and benchflow: an environment "
        "on their own Python 3.12), play the client's matrix cases "
        "there with the matrix's runner, and read each cell against the pinned matrix. Between two releases run, a "
        "case whose verdict changes is bisected over the package index's releases in between, running only that case. "
        "Default releases per client: the floors its consumers pin, the releases where behaviour changed, the newest "
        "(about 30 in all). A server (server:openreward, server:ors-sdk) runs the other way round: each release's SDK "
        "twin under `orsbench check`, a case per scenario and check (SCENARIO:CHECK_ID). See docs/versions.md.",
        epilog="examples:\n"
        "  orsbench versions openreward --html history.html\n"
        "  orsbench versions trl --releases 1.9.0,1.16.0 --with openreward==0.1.109\n"
        "  orsbench versions openreward,trl,inspect,firehorse --recent 1 --markdown $GITHUB_STEP_SUMMARY   # newest.yml\n"
        "  orsbench versions openreward --shard 2/4 --json shard-2.json && orsbench versions --merge shards/ --html h.html\n"
        "  orsbench versions firehorse --record && orsbench matrix --predicted --markdown docs/compatibility.md   # the since column\n"
        "  orsbench versions server:openreward --releases 0.1.33,0.1.115,0.1.167 --cases echo,task-tool --html servers.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("clients", nargs="?", type=types.one_of(_targets, "client or server"), default=None, metavar="CLIENT[,CLIENT...]",
                        help=f"client targets whose releases to run ({', '.join(_CLIENTS)}), or server:openreward / server:ors-sdk: "
                        "the server's releases under orsbench check")  # fmt: skip
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--releases", type=types.names, default=None, metavar="A,B",
                       help="these releases (VERSION or VERSION+PACKAGE==VERSION, e.g. 1.16.0+openreward==0.1.109)")  # fmt: skip
    which.add_argument("--recent", type=types.positive(int), default=None, metavar="N", help="the newest N releases on the package index")
    which.add_argument("--merge", type=_folder, default=None, metavar="DIR", help="build one history from the shards' --json files under DIR (runs nothing)")
    parser.add_argument("--with", dest="pins", action="append", default=[], type=_pin, metavar="PACKAGE==VERSION",
                        help="hold a companion package at this release in every environment (repeatable): TRL with the SDK floor")  # fmt: skip
    parser.add_argument("--vary", default=None, metavar="PACKAGE", help="vary this package instead of the client's own (trl --vary openreward --with trl==1.16.0)")
    parser.add_argument("--cases", type=types.names, default=None, metavar="A,B",
                        help="matrix cases (mock:reward-nan, mock:two-envs, ...); 'all' for every one (default: where a pinned defect shows, and one plain case); "
                        "for a server: scenarios (every check of each) or SCENARIO:CHECK_ID (default: echo, task-tool, schema-zoo-index)")  # fmt: skip
    parser.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N", help="run shard K of N of the releases (a CI matrix), then --merge")
    parser.add_argument("--cache", type=types.output_folder, default=None, metavar="DIR",
                        help="where the release environments live (default: $ORSBENCH_VERSIONS_CACHE, else ~/.cache/orsbench/versions)")  # fmt: skip
    parser.add_argument("--record", nargs="?", const=True, default=None, type=types.output_file, metavar="FILE",
                        help="write each pinned defect's first and last failing release (each client's own series) into FILE "
                        "(default: orsbench/upstream/since.json, what orsbench matrix and docs/compatibility.md show); other clients' records are kept")  # fmt: skip
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the newest release run of a series differs from the pinned matrix (newest.yml)")  # fmt: skip
    reporting.add_report_arguments(
        parser,
        formats=("json", "html", "markdown"),
        helps={
            "json": "write the history as JSON here (one row per client, release and case; what --merge reads)",
            "html": "write a history page here: a release × case grid per client, changing cells marked",
            "markdown": "write the Markdown report here (the newest release against the pinned matrix: $GITHUB_STEP_SUMMARY)",
        },
        verbose_help="after the summary, every row: release, case, verdict and the error of a cell that did not play",
        quiet_help="no progress lines: only the summary",
    )
    flags.after_parse(parser, _flags_agree)
    parser.set_defaults(func=run)


def _folder(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no folder {text!r} (give the folder holding the shards' --json files)")
    return path


def _pin(text: str) -> str:
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give PACKAGE==VERSION, e.g. openreward==0.1.109")
    return f"{name.strip()}=={version.strip()}"


def _shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    try:
        shard = (int(k), int(n))
    except ValueError:
        shard = (0, 0)
    if not sep or not 1 <= shard[0] <= shard[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: give K/N with 1 <= K <= N, e.g. 2/4")
    return shard


def _flags_agree(args: argparse.Namespace) -> None:
    if args.record == "-":
        raise flags.UsageError("--record writes a file (orsbench/upstream/since.json by default): give a file name, not -")
    if args.merge is not None:
        if args.clients or args.pins or args.vary or args.cases or args.shard != (1, 1):
            raise flags.UsageError("--merge reads the shards' JSON and runs nothing: leave out the clients and the run's flags")
        return
    if not args.clients:
        raise flags.UsageError("name the clients whose releases to run (e.g. orsbench versions openreward), or --merge DIR")
    if args.releases is not None and len(args.clients) > 1:
        raise flags.UsageError("--releases names one client's releases: give one client (run the command once per client)")
    if args.vary and len(args.clients) > 1:
        raise flags.UsageError("--vary changes one client's series: give one client")
    from orsbench.versions.servers import is_server, parse_cases

    servers = [c for c in args.clients if is_server(c)]
    if servers and args.vary:
        raise flags.UsageError(f"--vary varies a client's companion; {servers[0]} varies only its own releases: leave out --vary")
    if servers and len(servers) < len(args.clients) and args.cases and args.cases != ["all"]:
        raise flags.UsageError("--cases means matrix cases for a client and scenarios for a server: run clients and servers separately")
    for server in servers:
        try:
            parse_cases(args.cases)
        except ValueError as exc:
            raise flags.UsageError(f"--cases: {exc}") from None
    if args.cases and args.cases != ["all"] and not servers:
        from orsbench.versions.run import all_cases

        for client in args.clients:
            unknown = [c for c in args.cases if c not in all_cases(client)]
            if unknown:
                raise flags.UsageError(f"{client} has no case {', '.join(unknown)}; its cases: {', '.join(all_cases(client))}")
    if args.releases is not None:
        from orsbench.versions.releases import parse_release

        for spec in args.releases:
            try:
                parse_release(args.clients[0], spec, package=args.vary)
            except ValueError as exc:
                raise flags.UsageError(f"--releases: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from orsbench.versions import report
    from orsbench.versions.history import load, merge

    out = reporting.people(args)
    if args.merge is not None:
        try:
            history = merge(load(args.merge))
        except ValueError as exc:
            print(f"orsbench versions --merge: {exc}", file=sys.stderr)
            return 2
    else:
        history = _run(args)
        if history is None:
            return 2
    if args.json:
        reporting.write_text(args.json, history.dumps())
    if args.record is not None:
        _record(args, history, out)
    if args.markdown:
        reporting.write_text(args.markdown, report.markdown(history))
    if args.html:
        from orsbench.versions.html import render_history

        reporting.write_text(args.html, render_history(history, first_release=_first_release(args)))
    for line in report.summary(history):
        print(line, file=out)
    if args.verbose:
        for row in history.rows:
            print(f"  {row.series} {row.release} {row.case}: {row.verdict}{' (bisection)' if row.bisected else ''}{' — ' + row.error if row.error else ''}", file=out)
    if args.strict:
        differs = {name: report.differs_from_pinned(history, name) for name in history.series}
        for name, cells in differs.items():
            for release, case, verdict, pinned in cells:
                print(f"{name} {release} {case}: {verdict}, the pinned matrix says {pinned}", file=out)
        return 1 if any(differs.values()) else 0
    return 0


def _first_release(args: argparse.Namespace) -> Callable[[str, str], str | None]:
    """A package's first release on the index (its cached list), so "since 0.1.0" can say no release is older."""
    from orsbench.versions.envs import cache_root, client_python
    from orsbench.versions.releases import Index

    index = Index(Path(args.cache) if getattr(args, "cache", None) else cache_root())

    def first_release(package: str, client: str) -> str | None:
        try:
            return (index.versions(package, python=client_python(client)) or [None])[0]
        except (RuntimeError, OSError, subprocess.SubprocessError):
            return None  # the index cannot tell: "since ≤ X", never "(first release)"

    return first_release


def _record(args: argparse.Namespace, history: History, out: TextIO) -> None:
    """Write the since record (``--record``) and say which clients it holds."""
    from orsbench.upstream.since import SINCE_FILE, dump
    from orsbench.versions.since import records

    found = records(history, first_release=_first_release(args), command="orsbench " + " ".join(sys.argv[1:]))
    path = SINCE_FILE if args.record is True else Path(args.record)
    dump(found, path)
    print(f"recorded since when each pinned defect fails for {', '.join(found) or 'no client (no client own series in this history)'} in {path}", file=out)


def _run(args: argparse.Namespace) -> History | None:
    """Plan each client's series from the flags and run them; None (after saying why) where the releases cannot be listed."""
    from orsbench.versions.envs import Cache, cache_root, client_python
    from orsbench.versions.releases import DEFAULTS, PACKAGES, Index, Series, parse_release
    from orsbench.versions.history import merge
    from orsbench.versions.run import Plan, all_cases, default_cases, run_versions
    from orsbench.versions.servers import DEFAULTS as SERVER_DEFAULTS
    from orsbench.versions.servers import SERVERS, parse_cases, run_servers

    folder = Path(args.cache) if args.cache else cache_root()
    progress = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    index = Index(folder)
    plans, server_plans = [], []
    for client in args.clients:
        server = SERVERS.get(client)
        if server is not None:
            cases = parse_cases(args.cases)
            package = server.package
        else:
            cases = all_cases(client) if args.cases == ["all"] else args.cases or default_cases(client)
            package = args.vary or PACKAGES[client]
        if args.releases is not None:
            specs = args.releases
        elif args.recent is not None:
            try:
                specs = index.versions(package, python=client_python(client))[-args.recent :]
            except (RuntimeError, OSError) as exc:
                print(f"orsbench versions: cannot list {package}'s releases ({exc}); name them with --releases", file=sys.stderr)
                return None
        else:
            specs = list(DEFAULTS.get(client) or SERVER_DEFAULTS.get(client, ()))
            if not specs or args.vary:
                print(f"orsbench versions: no default releases for {client}{' varying ' + args.vary if args.vary else ''}: name them with --releases or --recent", file=sys.stderr)
                return None
        by_series: dict[Series, list[str]] = {}
        for spec in specs:
            release = parse_release(client, spec, package=package, pins=tuple(args.pins))
            by_series.setdefault(release.series, []).append(release.version)
        (server_plans if server else plans).extend(Plan(series, tuple(versions), tuple(cases)) for series, versions in by_series.items())
    every = plans + server_plans
    progress(f"orsbench versions: {sum(len(p.anchors) for p in every)} release(s) in {len(every)} series; environments in {folder}")
    cache = Cache(folder, progress=progress)
    histories = [run(ps, cache=cache, index=index, progress=progress, shard=args.shard) for run, ps in ((run_versions, plans), (run_servers, server_plans)) if ps]
    if len(histories) == 1:
        return histories[0]
    history = merge(histories)
    history.seconds = sum(h.seconds for h in histories)
    return history
