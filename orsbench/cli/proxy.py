"""``orsbench proxy UPSTREAM``: a transparent ORS proxy that grades, injects faults and records."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orsbench.cli import flags, reporting, subcommand, types
from orsbench.config import DEFAULT_EVIDENCE_LIMIT

EPILOG = """\
examples:
  orsbench proxy http://127.0.0.1:8000 --port 9000 --json proxy-report.json
      point your client at http://127.0.0.1:9000; Ctrl-C writes the report
  orsbench proxy http://127.0.0.1:8000 --fault stream-drop,flaky-5xx --seed 3
      the same upstream, with dropped streams and 5xx bursts injected
  orsbench proxy http://127.0.0.1:8000 --record env.cassette.json
      record the traffic as a cassette for `orsbench serve --cassette`
  orsbench proxy http://127.0.0.1:8000 --secrets-file env.secrets
      add the env's secrets (X-Secrets) to every /create your client sends; never recorded or reported

While it runs, GET /_orsbench/report on the proxy answers the report so far (JSON).
Recipes: docs/proxy.md.
"""

REPORT_PATH = "/_orsbench/report"


@subcommand("proxy")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "proxy",
        help="a transparent ORS proxy: grade real traffic, inject faults, record a cassette",
        description="Forward every request to UPSTREAM (an ORS server) and stream its answers back unbuffered "
        "(keep-alives, chunk boundaries and timing preserved). Meanwhile grade the traffic with every check "
        "that can be judged from observed exchanges (the ids and report formats of `orsbench check`), "
        "optionally inject fault profiles, and record a cassette. Binds 127.0.0.1 on a free port unless "
        "told otherwise; SIGINT/SIGTERM writes the reports (--json/--junit/--html/--markdown) and --record, and stops.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("upstream", metavar="UPSTREAM", type=types.http_url, help="the ORS server to forward to, e.g. http://127.0.0.1:8000")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else is reachable from outside)")
    parser.add_argument("--port", type=types.port, default=0, help="port to bind; 0 picks a free one (default 0)")
    parser.add_argument("--fault", dest="faults", type=types.fault_names, action="extend", default=[], metavar="NAME[,NAME]", help="inject HTTP-level fault profiles into the upstream's traffic: flaky-5xx, latency-jitter, rate-limit, stream-drop, stream-no-end, stream-stall (docs/robustness.md)")
    parser.add_argument("--seed", type=int, default=0, help="seed for fault profiles, as on the mock engine (default 0)")
    parser.add_argument("--ping-interval", type=types.positive(float), default=10.0, help="the upstream's keep-alive cadence in seconds; stream-stall stays silent for 4 of them (default 10, the reference's)")
    parser.add_argument("--record", type=types.output_file, metavar="FILE", help="write the traffic as a cassette on exit (docs/cassettes.md)")
    parser.add_argument(
        "--evidence-limit",
        type=types.non_negative(int),
        default=DEFAULT_EVIDENCE_LIMIT,
        metavar="N",
        help=f"keep at most N unnamed and played-call exchanges as evidence; later ones are judged on arrival and "
        f"folded into counts, so memory stays bounded and verdicts stay the same; 0 keeps everything (default {DEFAULT_EVIDENCE_LIMIT:,})",
    )
    parser.add_argument(
        "--grade-sample",
        type=_fraction,
        default=None,
        metavar="F",
        help="grade only a fraction F (0 < F <= 1) of whole sessions, chosen by a hash of the session id, under heavy "
        "load; every request is still forwarded (and recorded). The report says how many sessions it graded (default: all)",
    )
    parser.add_argument(
        "--request-log",
        action="store_true",
        help="also keep every request and its answer at /_orsbench/requests, as a case server does for the client checks "
        "(bounded; secrets recorded by name only)",
    )
    flags.add_api_key(parser, help="add this X-API-Key to every request forwarded upstream that carries no key of its own")
    types.add_secret_arguments(parser)
    reporting.add_report_arguments(
        parser,
        helps={name: f"write the grading report as {what} on exit" for name, what in
               (("json", "JSON (as `orsbench check --json`)"), ("junit", "JUnit XML"), ("html", "a self-contained HTML page"),
                ("markdown", "a compact Markdown summary"))},
        verbose_help="print one line per exchange as it is forwarded, and remediation and evidence under every finding on exit",
        quiet_help="on exit, only the summary line (no findings)",
        links=True,
    )  # fmt: skip
    parser.add_argument("--ready-file", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.1, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 1 (0.1 grades one session in ten), got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from orsbench.clientcheck.proxy_grading import ProxyGrading
    from orsbench.servers.request_log import RequestLog
    from orsbench.reports.events import EventStream
    from orsbench.reports.json_report import dumps
    from orsbench.servers.app import BindError, announce_ready, serve_forever
    from orsbench.servers.proxy_server import ProxyServer
    from orsbench.servers.proxy import ProxyApp, wrap_faults
    from orsbench.wire.cassette import CassetteRecorder

    secrets = types.secrets_of(args)
    recorder = CassetteRecorder(args.upstream, "orsbench proxy", secrets=secrets) if args.record else None
    also: list[Any] = [recorder] if recorder is not None else []
    if args.verbose:
        also.append(_Printer())
    grading = ProxyGrading(
        args.upstream, evidence_limit=args.evidence_limit, grade_sample=args.grade_sample, faults=bool(args.faults), also=also
    )
    clients, sample = grading.clients, grading.sample
    terminal = reporting.terminal_of(args)
    if terminal.out is sys.stdout:
        terminal.out = sys.stderr  # stdout carries the banner (the URL) for whoever started the proxy

    def live_report() -> tuple[int, str, bytes]:
        return 200, "application/json", dumps(grading.report()).encode()

    def write_outputs() -> None:
        report = grading.report(final=True)
        # the terminal and every report file render the run's end from one event stream, as in check
        handlers = [*([] if args.quiet else [terminal]), *reporting.file_handlers(args, title="orsbench proxy")]
        with EventStream(handlers, command="orsbench proxy") as stream:
            stream.finish(report)
        if recorder is not None:
            data = recorder.save(args.record)
            calls = sum(len(e["calls"]) for env in data["environments"].values() for e in env["episodes"])
            print(f"orsbench: recorded {calls} call(s) to {args.record}", file=sys.stderr)
        counts = report.summary()
        folded = f" ({report.folded:,} folded into counts)" if report.folded else ""
        sampled = (
            f" (--grade-sample {sample.fraction:g}: {sample.sessions_graded:,} of {sample.sessions_seen:,} sessions graded)"
            if sample is not None
            else ""
        )
        print(
            f"orsbench: graded {report.exchanges} exchange(s){folded} and {clients.sessions} client session(s){sampled}: "
            f"{counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, {counts['skip']} skip",
            file=sys.stderr,
            flush=True,
        )

    try:
        proxy = ProxyApp(
            args.upstream, observers=grading.inner, routes={REPORT_PATH: live_report},
            on_shutdown=[write_outputs], secrets=secrets, api_key=flags.api_key_of(args),
        )  # fmt: skip
        app = wrap_faults(proxy, tuple(args.faults), args.seed, ping_interval=args.ping_interval)
        if args.faults or args.request_log:  # outermost: it records what the faults answered, as on a case server
            app = RequestLog(app, keep=args.request_log, observers=grading.outer)  # with faults, the clients are graded here
    except ValueError as exc:  # a fault that works on the engine only, ...: the message names the fix
        raise flags.UsageError(str(exc)) from None

    faults = f", faults {', '.join(args.faults)}" if args.faults else ""
    on_ready = announce_ready(
        lambda url: f"orsbench: proxying {url} -> {proxy.upstream}{faults}; report at {url}{REPORT_PATH}; Ctrl-C stops",
        args.ready_file,
        stream=reporting.people(args),
    )

    try:
        if args.faults or args.request_log:  # the faults and the log are ASGI middlewares: uvicorn serves them
            serve_forever(app, host=args.host, port=args.port, on_ready=on_ready)  # SIGINT/SIGTERM: write_outputs, then exit
        else:  # the socket-level front: the same forwarding, without a scope and a task per request
            ProxyServer(proxy).run(host=args.host, port=args.port, on_ready=on_ready)
    except BindError as exc:
        raise flags.UsageError(f"{exc} (choose another --port, or 0 for a free one)") from None
    return 0


class _Printer:
    """``-v``: an observer (:mod:`orsbench.wire.observe`) printing one line per forwarded exchange, as it finishes
    (never its headers: they may carry a key)."""

    def started(self, exchange: Any, path: str) -> None:
        pass

    def ended(self, exchange: Any, path: str) -> None:
        status = exchange.status if exchange.status is not None else (exchange.error or "no answer")
        print(f"  {exchange.method} {exchange.url} -> {status} in {exchange.elapsed:.3f} s", file=sys.stderr, flush=True)
