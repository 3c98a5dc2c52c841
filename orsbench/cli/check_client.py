"""``orsbench check-client --client-cmd CMD``: grade any ORS client, given as a command, case by case.

Exit codes as ``orsbench check``: 0 every required client check passed; 1 a
required check failed; 2 a usage error; 3 an internal error of orsbench (a
case server that did not start).
"""

from __future__ import annotations

import argparse
import sys
import traceback

from orsbench.cli import flags, reporting, subcommand, types

EPILOG = """\
examples:
  orsbench check-client --list
  orsbench check-client --client-cmd "python my_adapter.py"
  orsbench check-client --client-cmd "node adapter.js {url} {env}" --cases echo,sparse-reward+stream-drop
  orsbench check-client --client-cmd "python -m orsbench.clientcheck.reference" --json client.json --junit junit.xml
  orsbench check-client --client-cmd "python my_adapter.py" --html client.html --markdown "$GITHUB_STEP_SUMMARY" --jobs 4

The command runs once per case with ORSBENCH_URL, ORSBENCH_ENV, ORSBENCH_SPLIT, ORSBENCH_INDEX,
ORSBENCH_SCRIPT, ORSBENCH_OUT and ORSBENCH_SECRETS set ({url} {env} {split} {index} {script} {out}
in the command are replaced, shell-quoted) and appends one JSON line per call to $ORSBENCH_OUT.
The contract and the checks: docs/clients.md; the rules: docs/protocol.md §12.

exit codes: 0 pass, 1 a required client check failed, 2 usage error (a command the shell cannot find or
run, exit 127 or 126, is one), 3 internal error of orsbench.
"""


@subcommand("check-client")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check-client",
        help="grade any ORS client, given as a command, on every case (see docs/clients.md)",
        description="Serve each case (a scenario, optionally under a fault) on 127.0.0.1, run the client command "
        "against it under a deadline, and grade named client checks from both ends: what the server saw and "
        "what the client reported in $ORSBENCH_OUT.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.add_client_cmd(parser, help="your client's adapter command, run by /bin/sh once per case (docs/clients.md)")
    parser.add_argument(
        "--cases", type=types.names, action="extend", default=[], metavar="A,B", help="only these cases (default: every case; see --list)"
    )
    parser.add_argument("--list", action="store_true", help="list the cases (what a correct client does in each) and exit")
    parser.add_argument(
        "--timeout",
        type=types.positive(float),
        metavar="S",
        help="deadline of the command in each case, in seconds (default: the case's own, 20 for most)",
    )
    flags.add_jobs(parser, default=2, what="cases played (each starts a server and your command)")
    reporting.add_report_arguments(parser, junit_help="write JUnit XML here (one testcase per check and case)", links=True)
    parser.set_defaults(func=run, _parser=parser)


def _list() -> int:
    from orsbench.clientcheck import cases

    for case in cases():
        outcome = "finishes" if case.expect == "finish" else "reports an error"
        print(f"{case.name:<34} {case.deadline:>4g} s  a correct client {outcome:<16}  {case.summary}")
    return 0


def run(args: argparse.Namespace) -> int:
    from orsbench.checks import EXIT_INTERNAL
    from orsbench.clientcheck import contract, get_case
    from orsbench.registry import UnknownName

    if args.list:
        return _list()
    if not args.client_cmd or not args.client_cmd.strip():
        raise flags.UsageError('give the client command: --client-cmd "python my_adapter.py" (or --list to see the cases)')
    refused = contract.refused_placeholders(args.client_cmd)
    if refused:
        known = " ".join(f"{{{name}}}" for name in contract.PLACEHOLDERS)
        raise flags.UsageError(
            f"--client-cmd uses {', '.join(refused)}: secrets never go on a command line (ps shows it to every user); "
            f"read $ORSBENCH_SECRETS instead. Placeholders: {known}"
        )
    try:
        chosen = [get_case(name) for name in dict.fromkeys(args.cases)] if args.cases else None
    except UnknownName as exc:
        raise flags.UsageError(f"--cases: {exc}") from None
    if problem := contract.not_runnable(args.client_cmd):  # exit 127/126 from every case: said once, before any
        raise flags.UsageError(problem)
    try:
        return _check(args, chosen)
    except KeyboardInterrupt:
        print("orsbench check-client: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except (BrokenPipeError, flags.UsageError):
        raise
    except Exception:  # noqa: BLE001 - exit 3 is the contract for our own bugs
        print("orsbench check-client: internal error\n" + traceback.format_exc(), file=sys.stderr)
        return EXIT_INTERNAL


def _check(args: argparse.Namespace, chosen: list | None) -> int:
    from orsbench.clientcheck import cases, check_client, contract
    from orsbench.servers import launch

    launch.use_zygote()  # one preloaded process forks every case server: ~0.2 s each instead of ~2 s
    selected = chosen if chosen is not None else cases()
    terminal = reporting.terminal_of(args)
    print(f"orsbench check-client {args.client_cmd}  ({len(selected)} case(s), {args.jobs} at a time)", file=terminal.out, flush=True)
    unrunnable: list[str] = []

    def on_case(run, results) -> None:  # type: ignore[no-untyped-def]
        from orsbench.clientcheck.judgement import judge

        stopped = f", stopped for {run.stopped_for}" if run.stopped_for else ""
        if problem := contract.did_not_run(args.client_cmd, run.exit_code, run.requests_total, run.stderr):
            terminal.on_probe(f"{run.case.name} (exit {run.exit_code}{stopped})", run.duration_s, run.requests_total)
            unrunnable.append(problem)
            return  # not the client's verdict: the command never ran
        # The case's verdict in the words of the matrix and `orsbench clients` (one judgement, clientcheck.judgement).
        verdict = "" if run.server_error else f": {judge(run, results).words}"
        terminal.on_probe(f"{run.case.name}{verdict} (exit {run.exit_code}{stopped})", run.duration_s, run.requests_total)
        if run.server_error:
            print(f"      case server failed: {run.server_error[:300]}", file=terminal.out, flush=True)
        for result in results:
            terminal.on_result(result)

    report = check_client(args.client_cmd, selected, timeout=args.timeout, jobs=args.jobs, on_case=on_case)
    if unrunnable:  # the shell could not find or run the command: the command line is wrong, not the client
        raise flags.UsageError(unrunnable[0])
    terminal.finish(report)
    reporting.write_reports(report, args, title="orsbench check-client")
    return report.exit_code
