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

from orsbench.cli import flags, reporting, subcommand, types
from orsbench.servers.implementations import IMPLEMENTATIONS, ors_servers  # records only; imports no server

if TYPE_CHECKING:
    from orsbench.api import CheckPlan
    from orsbench.checks import Baseline, Options

# The checker (jsonschema, the probes, the reports) is imported when a check runs, not when
# the parser is built: every `orsbench serve` process builds this parser too.

EPILOG = """\
examples:
  orsbench check http://127.0.0.1:8080
  orsbench check http://127.0.0.1:8080 --env myenv --json report.json --junit junit.xml
  orsbench check --scenario echo                    # start an embedded mock and check it
  orsbench check --app my_env.py:MyEnv              # serve your Environment class, check it, stop it
  orsbench check --server-cmd "python my_env.py --port {port}" --wait 120   # any server command
  orsbench check --scenario echo --fault reward-bool   # ... with one protocol violation (exit 1)
  orsbench check URL --only 'call.*' --expected-failures fixtures/expected-failures/ors-sdk.yaml
  orsbench check URL --tasks 0,-1 --fuzz 100 --strict  # play two tasks, fuzz harder, no untested PASS
  orsbench check URL --explore 200 --explore-db .orsbench-explore   # 200 steps of random interleavings of sessions
  ORSBENCH_API_KEY=... orsbench check URL --secret OPENAI_API_KEY --secrets-file env.secrets   # key and secrets
  orsbench check http://balancer:8080 --sessions 12 --max-body 8MiB   # a deployment behind a balancer, deeper
  orsbench check URL --html report.html --markdown summary.md -v   # reports people read
  orsbench check URL --json - -q | jq .verdict      # the JSON report on stdout, the table on stderr

exit codes: 0 pass (warnings allowed), 1 a required check failed or a baseline entry is stale,
2 target unreachable (verdict UNREACHABLE) / an HTTP server that is not ORS (verdict NOT-ORS) / usage error,
3 internal error of orsbench. Catalogue: docs/checks.md
"""


@subcommand("check")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check an ORS server against the protocol (named checks; see --list)",
        description="Probe an ORS server once over the wire, grade the evidence with named checks, "
        "and report a verdict. Only the target is contacted: the URL given, or the server orsbench starts on 127.0.0.1.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", nargs="?", help="base URL of the ORS server, e.g. http://127.0.0.1:8080")
    target = parser.add_argument_group("a server orsbench starts on 127.0.0.1, checks and stops (instead of URL)")
    flags.add_scenario(target, help="a built-in scenario, served by --impl", old="--serve")
    target.add_argument(
        "--app",
        metavar="FILE.py:Class",
        help="your openreward Environment class(es), served by the SDK Server: FILE.py:Class or module:Class[,Class2]",
    )
    flags.add_server_cmd(
        target,
        help='any command that starts your ORS server; {port} is replaced by a free port, e.g. "python my_env.py --port {port}" '
        "(split like a shell line, run without a shell; stopped by its process group)",
    )
    target.add_argument(
        "--wait", type=types.positive(float), default=60.0, metavar="S",
        help="with --scenario/--app/--server-cmd: how long the server may take to answer /health (default 60)",
    )  # fmt: skip
    target.add_argument(
        "--impl",
        choices=ors_servers(),
        default="mock",
        help="with --scenario: " + "; ".join(f"{n}: {IMPLEMENTATIONS[n].summary}" for n in ors_servers()) + " (default mock)",
    )
    target.add_argument(
        "--param", type=types.param, action="append", default=[], metavar="KEY=VALUE", help="with --scenario: a scenario parameter"
    )
    target.add_argument(
        "--fault",
        type=types.fault_names,
        action="extend",
        default=[],
        metavar="NAME[,NAME]",
        help="with --scenario: apply faults (e.g. a violation)",
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
        "--timeout", type=types.positive(float), default=30.0, metavar="S", help="longest wait of any one probe; bounds long checks (default 30)"
    )
    what.add_argument(
        "--ttl", type=types.positive(float), metavar="S", help="the server's session TTL, to check reaping (with --scenario: serve with it)"
    )
    what.add_argument(
        "--ping-interval",
        type=types.positive(float),
        metavar="S",
        help="keep-alive cadence the server promises (default: as reported, else 10; with --scenario: serve with it)",
    )
    flags.add_api_key(what)
    types.add_secret_arguments(what)
    play = parser.add_argument_group("gameplay and fuzz (tool failures on valid input)")
    play.add_argument(
        "--fuzz",
        type=types.non_negative(int),
        default=25,
        metavar="N",
        help="inputs tried per tool: boundaries, then seeded hypothesis-jsonschema examples (default 25)",
    )
    play.add_argument("--no-fuzz", action="store_true", help="no fuzz: only the inputs played (faster)")
    flags.add_tasks(play, help="tasks to play to finished:true (default: first, middle and last of --split)")
    play.add_argument(
        "--strict", action="store_true", help="fail (exit 1) when a required check did not run, e.g. for want of a finished episode "
        "(a check the environment gives nothing to judge, such as keep-alives when no tool runs long, is n/a: no failure)"
    )
    many = parser.add_argument_group("sessions at once (docs/protocol.md §15)")
    many.add_argument(
        "--explore",
        type=types.non_negative(int),
        default=0,
        metavar="N",
        help="also run the stateful explorer: N steps of random interleavings of create, prompt, call, resume, ping and "
        "delete over 2-4 sessions, every step checked; a broken rule is shrunk to the shortest interleaving (default 0: off)",
    )
    many.add_argument("--explore-seed", type=int, metavar="S", help="seed of the explorer: the same seed tries the same interleavings (default 0)")
    many.add_argument(
        "--explore-db",
        type=types.output_folder,
        metavar="DIR",
        help="keep hypothesis' examples database in DIR: an interleaving that broke a rule is tried first next time (default: none)",
    )
    deployment = parser.add_argument_group("a deployment in front of the server: balancer, proxy, CDN (docs/deployments.md)")
    deployment.add_argument(
        "--sessions",
        type=types.positive(int),
        default=3,
        metavar="N",
        help="sessions the deployment.* checks use, each over time and every request on a new connection; more than 3 also "
        "uses each longer (default 3)",
    )
    deployment.add_argument(
        "--max-body",
        type=types.byte_size,
        default=2 * 1024 * 1024,
        metavar="SIZE",
        help="size of the one large /call body deployment.body_size sends, e.g. 8MiB; 0: none (default 2MiB)",
    )
    what.add_argument(
        "--expected-failures", metavar="FILE", help="YAML baseline of known failures (a listed check that passes fails the run)"
    )
    out = reporting.add_report_arguments(
        parser,
        html_help="write a self-contained HTML report here: findings open with their exchange and a curl reproducer",
        verbose_help="show remediation, evidence and a curl reproducer under every finding",
        links=True,
    )
    out.add_argument("--list", action="store_true", help="list every check with its severity and exit")
    parser.set_defaults(func=run, _parser=parser)


def _patterns(values: list[str]) -> list[str]:
    return [name for value in values for name in types.names(value)]


def _options(args: argparse.Namespace, **overrides: Any) -> Options:
    from orsbench.checks import Options

    values = {k: getattr(args, k) for k in ("env", "split", "timeout", "ttl", "ping_interval", "strict", "explore", "explore_seed", "explore_db", "sessions", "max_body")}
    values["api_key"] = flags.api_key_of(args)
    if args.tasks is not None:
        values["tasks"] = args.tasks.indices
        values["split"] = args.tasks.split or args.split
    values["fuzz"] = 0 if args.no_fuzz else args.fuzz
    values["secrets"] = types.secrets_of(args)
    return Options(**{**values, **overrides})


def _list() -> int:
    from orsbench.checks import load_checks
    from orsbench.reports.terminal import describe

    for check in load_checks().values():
        print(describe(check, check.severity))
    return 0


def run(args: argparse.Namespace) -> int:
    from orsbench.checks import EXIT_INTERNAL, EXIT_UNREACHABLE, Baseline, BaselineError, load_checks, select
    from orsbench.servers.launch import ServerStartError

    parser: argparse.ArgumentParser = args._parser
    if args.list:
        return _list()
    plan = _plan(args, parser)
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
        return _check(plan, args, only, baseline)
    except ServerStartError as exc:
        if args.scenario:  # our own scenario did not come up: orsbench's bug
            print(f"orsbench check: the embedded server did not start: {exc}", file=sys.stderr)
            return EXIT_INTERNAL
        print(f"orsbench check: the server to check did not start: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        print("orsbench check: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except BrokenPipeError:  # stdout closed under us: the CLI's main ends quietly
        raise
    except Exception:  # noqa: BLE001 - exit 3 is the contract for our own bugs
        print("orsbench check: internal error\n" + traceback.format_exc(), file=sys.stderr)
        return EXIT_INTERNAL


def _plan(args: argparse.Namespace, parser: argparse.ArgumentParser) -> CheckPlan:
    """The one target the flags name, validated before anything starts (a usage error otherwise)."""
    from orsbench.api import prepare
    from orsbench.servers.targets import CheckTarget, resolve
    from orsbench.servers.user_app import AppTarget

    given = {"URL": args.url, "--scenario": args.scenario, "--app": args.app, "--server-cmd": args.server_cmd}
    named = [flag for flag, value in given.items() if value]
    if len(named) != 1:
        both = f" (got {' and '.join(named)})" if named else ""
        parser.error(f"give one target: a URL, --scenario SCENARIO, --app FILE.py:Class or --server-cmd COMMAND{both}")
    if (args.param or args.fault) and not args.scenario:
        parser.error("--param and --fault need --scenario")
    if args.tasks is not None and args.tasks.split and args.split and args.tasks.split != args.split:
        parser.error(f"--tasks {args.tasks.text} names split {args.tasks.split!r}, --split names {args.split!r}: give one")
    impl = args.impl if args.scenario else "mock"
    try:
        if args.url:
            target = CheckTarget("url", args.url)
        elif args.scenario:
            target = CheckTarget("scenario", args.scenario)
        elif args.app:
            target = resolve(AppTarget.parse(args.app))  # AppTargetError (a ValueError) names the spelling
        else:
            target = CheckTarget("command", args.server_cmd)
        return prepare(target, impl=impl, params=dict(args.param), faults=args.fault, wait=args.wait, **vars(_options(args)))
    except ValueError as exc:  # a bad URL, scenario, parameter, app spelling or command: the message names the fix
        parser.error(str(exc))


def _check(plan: CheckPlan, args: argparse.Namespace, only: list[str], baseline: Baseline | None) -> int:
    """Run the plan, its events streamed to the terminal and to every report the flags ask for."""
    with reporting.stream_of(args, title="orsbench check") as stream:
        report = plan.run(only=only, baseline=baseline, on_start=stream.on_start, on_probe=stream.on_probe, on_result=stream.on_result)
        stream.finish(report)
    return report.exit_code
