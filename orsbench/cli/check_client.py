"""``orsbench check-client --client-cmd CMD``: grade any ORS client, given as a command, case by case.

``orsbench check-client --hosted``: serve every case at once and grade whatever client plays them
(a trainer on Ray or Slurm, a notebook): :mod:`orsbench.clientcheck.hosted`.

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
  orsbench check-client --hosted --port 8123 --json client.json
      serve the i-th case at http://127.0.0.1:(8124+i) until each was played (or Ctrl-C);
      GET http://127.0.0.1:8123/_orsbench/cases lists them, /_orsbench/report is the report so far

The command runs once per case with ORSBENCH_URL, ORSBENCH_ENV, ORSBENCH_SPLIT, ORSBENCH_INDEX,
ORSBENCH_SCRIPT, ORSBENCH_OUT, ORSBENCH_SECRETS, ORSBENCH_RUNS and ORSBENCH_EPISODES set ({url} {env} {split} {index}
{script} {out} in the command are replaced, shell-quoted) and appends one JSON line per call to
$ORSBENCH_OUT; ORSBENCH_RUNS (1 but in the two-runs case) is how many times to play the script in
the one process, a session each, and ORSBENCH_EPISODES (1 but in the second-setup-fails case) how
many episodes each run plays (tasks ORSBENCH_INDEX onwards), ending with its aggregate line.
The contract and the checks: docs/clients.md; the rules: docs/protocol.md §12; hosted cases and
grading a trainer where it runs: docs/clients.md "Grade your trainer in place".

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
    hosted = parser.add_argument_group("hosted cases (instead of --client-cmd): serve every case at once, grade whoever plays them")
    hosted.add_argument(
        "--hosted",
        action="store_true",
        help="serve every case at once, each on its own port (its base URL), and grade each client session as it "
        "ends; GET /_orsbench/cases on --port is the manifest; ends when every case was played, at --duration, or on Ctrl-C",
    )
    hosted.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else is reachable from outside)")
    hosted.add_argument(
        "--port", type=types.port, default=0,
        help="the manifest's port; the i-th case gets PORT+1+i (default 0: free ports, listed at the start)",
    )  # fmt: skip
    hosted.add_argument("--duration", type=types.positive(float), metavar="S", help="end after S seconds even if some case was not played")
    hosted.add_argument("--strict", action="store_true", help="a case nobody played fails the run (default: a skip that says so)")
    hosted.add_argument("--ready-file", help=argparse.SUPPRESS)
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

    from orsbench.servers.faults import FAULTS

    for case in cases():
        outcome = "finishes" if case.expect == "finish" else "reports an error"
        outcome = "is sent SIGTERM" if case.terminate_on else outcome
        if any(name in FAULTS and FAULTS.get(name).client.refuses_discovery for name in case.faults):
            outcome += " (reports the 402 if it reads a listing, §13.12)"
        print(f"{case.name:<34} {case.deadline:>4g} s  a correct client {outcome:<16}  {case.summary}")
    return 0


def run(args: argparse.Namespace) -> int:
    from orsbench.checks import EXIT_INTERNAL
    from orsbench.clientcheck import contract, get_case
    from orsbench.registry import UnknownName

    if args.list:
        return _list()
    if args.hosted and args.client_cmd:
        raise flags.UsageError("--hosted serves the cases to clients you start yourself: give --hosted or --client-cmd, not both")
    if not args.hosted and (args.duration is not None or args.port or args.host != "127.0.0.1" or args.strict):
        raise flags.UsageError("--host, --port, --duration and --strict belong to --hosted")
    if args.hosted:
        try:
            chosen = [get_case(name) for name in dict.fromkeys(args.cases)] if args.cases else None
        except UnknownName as exc:
            raise flags.UsageError(f"--cases: {exc}") from None
        ended = [case.name for case in chosen or () if case.terminate_on is not None]
        if ended:
            raise flags.UsageError(
                f"--cases: {', '.join(ended)} ends the client with SIGTERM mid-call, and --hosted cannot signal a client it "
                "did not start: play it with --client-cmd"
            )
        return _hosted(args, chosen)
    if not args.client_cmd or not args.client_cmd.strip():
        raise flags.UsageError(
            'give the client command: --client-cmd "python my_adapter.py" (or --hosted to serve the cases, --list to see them)'
        )
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
    from orsbench.reports.events import CaseFinished, CheckFinished
    from orsbench.servers import launch

    launch.use_zygote()  # one preloaded process forks every case server: ~0.2 s each instead of ~2 s
    selected = chosen if chosen is not None else cases()
    unrunnable: list[str] = []
    with reporting.stream_of(args, title="orsbench check-client") as stream:
        stream.on_start(args.client_cmd, cases=len(selected), jobs=args.jobs)

        def on_case(run, results) -> None:  # type: ignore[no-untyped-def]
            from orsbench.clientcheck.judgement import judge

            if problem := contract.did_not_run(args.client_cmd, run.exit_code, run.requests_total, run.stderr):
                stream.emit(CaseFinished(run.case.name, run.exit_code, run.stopped_for, run.duration_s, run.requests_total))
                unrunnable.append(problem)
                return  # not the client's verdict: the command never ran
            # The case's one verdict (clientcheck.judgement), carried typed to the terminal: no verdict when its server failed.
            judgement = None if run.server_error else judge(run, results)
            stream.emit(
                CaseFinished(
                    run.case.name, run.exit_code, run.stopped_for, run.duration_s, run.requests_total, judgement, run.server_error
                )
            )
            for result in results:
                stream.emit(CheckFinished(result, case=run.case.name))

        report = check_client(args.client_cmd, selected, timeout=args.timeout, jobs=args.jobs, on_case=on_case)
        if unrunnable:  # the shell could not find or run the command: the command line is wrong, not the client
            raise flags.UsageError(unrunnable[0])
        stream.finish(report)
    return report.exit_code


def _hosted(args: argparse.Namespace, chosen: list | None) -> int:
    """Serve the cases until they were played (or ``--duration``, or a signal); then the report, as check-client's."""
    import signal

    from orsbench.checks import EXIT_INTERNAL
    from orsbench.clientcheck import cases
    from orsbench.clientcheck.hosted import CASES_PATH, REPORT_PATH, HostedServer, manifest_table
    from orsbench.reports.events import SessionGraded
    from orsbench.servers.app import BindError, serve_forever, write_ready_file

    # A case that ends its client with SIGTERM needs the client's process: a client started by the user has none here.
    selected = chosen if chosen is not None else [case for case in cases() if case.terminate_on is None]
    if args.timeout is not None:
        selected = [case.with_deadline(args.timeout) for case in selected]
    terminal = reporting.terminal_of(args)
    stream = reporting.stream_of(args, title="orsbench check-client --hosted", terminal=terminal)

    def on_graded(case: str, graded) -> None:  # type: ignore[no-untyped-def]
        stream.emit(
            SessionGraded(
                case, graded.label, graded.ended, tuple(graded.results), graded.duration_s, graded.requests, graded.judgement
            )
        )

    try:
        server = HostedServer(selected, on_graded=on_graded, strict=args.strict)
    except Exception:  # noqa: BLE001 - a case that cannot be built is our bug: exit 3
        print("orsbench check-client --hosted: internal error\n" + traceback.format_exc(), file=sys.stderr)
        return EXIT_INTERNAL
    stopped: list[int] = []
    # uvicorn stops on SIGINT/SIGTERM and raises the signal again once it has: here it is only noted,
    # so the run ends as any run does, with its report and check-client's exit code.
    previous = {sig: signal.signal(sig, lambda number, frame: stopped.append(number)) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_ready(url: str) -> None:
        manifest = [hosted.manifest() for hosted in server.cases.values()]
        until = f"until each was played or {args.duration:g} s" if args.duration else "until each was played"
        print(
            f"orsbench check-client --hosted: {len(manifest)} case(s), one port each, {until}; Ctrl-C ends the run\n"
            f"manifest: {url}{CASES_PATH}   report so far: {url}{REPORT_PATH}\n",
            file=terminal.out,
            flush=True,
        )
        if not args.quiet:
            print(manifest_table(manifest) + "\n", file=terminal.out, flush=True)
        if args.ready_file:
            write_ready_file(args.ready_file)(url)

    try:
        serve_forever(
            server, host=args.host, port=args.port, more_ports=server.ports(args.port),
            on_bound=lambda ports: server.assign(args.host, ports), on_ready=on_ready, until=lambda: server.wait(args.duration),
        )  # fmt: skip
    except BindError as exc:
        raise flags.UsageError(f"{exc} (choose another --port, whose next {len(selected)} ports are free too, or 0)") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    report = server.report(final=True)
    if stopped:
        print(f"orsbench check-client --hosted: stopped by {signal.Signals(stopped[0]).name}", file=terminal.out, flush=True)
    with stream:
        stream.finish(report)
    return report.exit_code
