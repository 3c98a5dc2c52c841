"""``orsbench check URL``: is this server speaking ORS as clients expect?

Exit codes: 0 every required check passed (warnings allowed); 1 a required
check failed, or a baseline entry is stale; 2 the target could not be reached
or is not an ORS server (and command-line usage errors, as argparse does);
3 an internal error of orsbench itself.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import TYPE_CHECKING, Any

from orsbench.servers.app import SERVERS  # a tuple of names; imports no server

if TYPE_CHECKING:
    from orsbench.checks import Baseline, Options

# The checker (jsonschema, the probes, the reports) is imported when a check runs, not when
# the parser is built: every `orsbench serve` process builds this parser too.

EPILOG = """\
examples:
  orsbench check http://127.0.0.1:8080
  orsbench check http://127.0.0.1:8080 --env myenv --json report.json --junit junit.xml
  orsbench check --serve echo                       # start an embedded mock and check it
  orsbench check --serve echo --fault reward-bool   # ... with one protocol violation (exit 1)
  orsbench check URL --only 'call.*' --expected-failures fixtures/expected-failures/ors-sdk.yaml

exit codes: 0 pass (warnings allowed), 1 a required check failed or a baseline entry is stale,
2 target unreachable / not an ORS server, 3 internal error of orsbench. Catalogue: docs/checks.md
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check an ORS server against the protocol (named checks; see --list)",
        description="Probe an ORS server once over the wire, grade the evidence with named checks, "
        "and report a verdict. Only the given URL is contacted.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", nargs="?", help="base URL of the ORS server, e.g. http://127.0.0.1:8080")
    target = parser.add_argument_group("embedded server (instead of URL)")
    target.add_argument("--serve", metavar="SCENARIO", help="start this scenario on 127.0.0.1, check it, stop it")
    target.add_argument(
        "--impl",
        choices=SERVERS,
        default="mock",
        help="with --serve: mock engine, openreward SDK twin or ors-sdk twin (default mock)",
    )
    target.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="with --serve: a scenario parameter")
    target.add_argument(
        "--fault", action="append", default=[], metavar="NAME[,NAME]", help="with --serve: apply faults (e.g. a violation)"
    )
    what = parser.add_argument_group("what to check")
    what.add_argument("--env", help="environment to check (default: the server's first)")
    what.add_argument("--split", help="split to take tasks from (default: the first split of type train)")
    what.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only checks whose id matches this glob (repeatable, or comma-separated)",
    )
    what.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="longest wait of any one probe; bounds long checks (default 30)"
    )
    what.add_argument(
        "--ttl", type=float, metavar="S", help="the server's session TTL, to check reaping (with --serve: serve with it)"
    )
    what.add_argument(
        "--ping-interval",
        type=float,
        metavar="S",
        help="keep-alive cadence the server promises (default: as reported, else 10; with --serve: serve with it)",
    )
    what.add_argument("--api-key", help="send this X-API-Key")
    what.add_argument(
        "--expected-failures", metavar="FILE", help="YAML baseline of known failures (a listed check that passes fails the run)"
    )
    out = parser.add_argument_group("reports")
    out.add_argument("--json", metavar="FILE", help="write the JSON report here ('-' for stdout)")
    out.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    out.add_argument("-v", "--verbose", action="store_true", help="show remediation and evidence under every finding")
    out.add_argument("-q", "--quiet", action="store_true", help="print only findings and the summary")
    out.add_argument("--list", action="store_true", help="list every check with its severity and exit")
    parser.set_defaults(func=run, _parser=parser)


def _patterns(values: list[str]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _options(args: argparse.Namespace, **overrides: Any) -> Options:
    from orsbench.checks import Options

    values = {k: getattr(args, k) for k in ("env", "split", "timeout", "ttl", "ping_interval", "api_key")}
    return Options(**{**values, **overrides})


def _list() -> int:
    from orsbench.checks import load_checks, severity
    from orsbench.reports.terminal import describe

    for check in load_checks().values():
        print(describe(check, severity(check.id)))
    return 0


def run(args: argparse.Namespace) -> int:
    from orsbench.checks import EXIT_INTERNAL, Baseline, BaselineError, load_checks, select

    parser: argparse.ArgumentParser = args._parser
    if args.list:
        return _list()
    if bool(args.url) == bool(args.serve):
        parser.error("give either a URL or --serve SCENARIO")
    if (args.param or args.fault) and not args.serve:
        parser.error("--param and --fault need --serve")
    only = _patterns(args.only)
    if only and not select(only):
        parser.error(f"--only {','.join(only)} matches no check (see --list)")
    baseline = None
    if args.expected_failures:
        try:
            baseline = Baseline.load(args.expected_failures, set(load_checks()))
        except BaselineError as exc:
            parser.error(str(exc))
    try:
        if args.serve:
            return _serve_and_check(args, only, baseline)
        return _check(args.url, _options(args), args, only, baseline)
    except KeyboardInterrupt:
        print("orsbench check: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception:  # noqa: BLE001 - exit 3 is the contract for our own bugs
        print("orsbench check: internal error\n" + traceback.format_exc(), file=sys.stderr)
        return EXIT_INTERNAL


def _check(url: str, options: Options, args: argparse.Namespace, only: list[str], baseline: Baseline | None) -> int:
    from orsbench.checks import run_checks
    from orsbench.reports import TerminalReporter, write_json, write_junit

    # With --json - the JSON owns stdout, so the table goes to stderr.
    terminal = TerminalReporter(sys.stderr if args.json == "-" else None, verbose=args.verbose, quiet=args.quiet)
    detail = ", ".join(f"{k} {v}" for k, v in (("env", options.env), ("split", options.split)) if v)
    terminal.start(url, detail)
    report = run_checks(url, options, only=only, baseline=baseline, on_probe=terminal.on_probe, on_result=terminal.on_result)
    terminal.finish(report)
    if args.json:
        write_json(report, args.json)
    if args.junit:
        write_junit(report, args.junit)
    return report.exit_code


def _serve_and_check(args: argparse.Namespace, only: list[str], baseline: Baseline | None) -> int:
    from orsbench.checks import EXIT_INTERNAL
    from orsbench.config import ServerConfig
    from orsbench.scenarios import get_scenario
    from orsbench.servers.app import effective_config
    from orsbench.servers.launch import ServerStartError, serve

    params: dict[str, Any] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            args._parser.error(f"--param needs KEY=VALUE, got {item!r}")
        params[key.strip()] = value
    from orsbench.servers.faults import load_all

    faults = tuple(_patterns(args.fault))
    unknown = [f for f in faults if f not in load_all()]
    if unknown:
        args._parser.error(f"unknown fault(s) {unknown}; see docs/checks.md and docs/robustness.md")
    knobs: dict[str, Any] = {"params": params, "faults": faults}
    if args.ttl is not None:
        knobs["ttl"] = args.ttl
    if args.ping_interval is not None:
        knobs["ping_interval"] = args.ping_interval
    try:
        scenario = get_scenario(args.serve, **params)
    except ValueError as exc:
        args._parser.error(str(exc))
    config = effective_config(scenario, ServerConfig(**knobs), set(knobs))
    try:
        with serve(args.serve, impl=args.impl, config=config) as server:
            # The embedded server's own knobs tell the timing checks what to expect.
            options = _options(args, env=args.env or server.env_name, ttl=config.ttl, ping_interval=config.ping_interval)
            return _check(server.url, options, args, only, baseline)
    except ServerStartError as exc:
        print(f"orsbench check: the embedded server did not start: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
