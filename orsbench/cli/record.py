"""``orsbench record URL --out FILE``: play an environment as `orsbench check` does and write a cassette."""

from __future__ import annotations

import argparse
import sys

from orsbench.cli import flags, subcommand, types

EPILOG = """\
examples:
  orsbench record http://127.0.0.1:8000 --out env.cassette.json
  orsbench record http://127.0.0.1:8000 --out env.cassette.json --tasks train:0-9 --episodes 10
  orsbench record http://127.0.0.1:8000 --out env.cassette.json --tasks 0,-1   # the first and the last task
  orsbench serve --cassette env.cassette.json          # replay it offline

The API key (--api-key or $ORSBENCH_API_KEY) and secrets (--secret, --secrets-file) are sent to the server
and never written to the cassette.
Format: docs/cassettes.md.
"""


@subcommand("record")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "record",
        help="play an ORS environment and record it as a cassette for offline replay",
        description="Play the environment at URL with the checker's probes (discovery, dataset, sessions, "
        "tool calls, one episode played to its end), list the tasks of every split, play one more episode per "
        "selected task, and write everything it answered to a cassette that `orsbench serve --cassette FILE` "
        "replays offline.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", metavar="URL", type=types.http_url, help="the ORS server to record")
    parser.add_argument("--out", required=True, type=types.output_file, metavar="FILE", help="the cassette file to write (checked before recording)")
    flags.add_tasks(parser, help="tasks to play episodes on (default: the first --episodes tasks of the checked split)")
    parser.add_argument("--episodes", type=types.positive(int), default=1, metavar="N", help="episodes to play beyond the probes' own, cycling over --tasks (default 1)")
    parser.add_argument("--env", help="environment to record (default: the server's first)")
    parser.add_argument("--split", help="split to probe (default: the first train split)")
    parser.add_argument("--timeout", type=types.positive(float), default=30.0, help="the longest one request may take, in seconds (default 30)")
    flags.add_api_key(parser, help="send this X-API-Key to the server; never recorded")
    types.add_secret_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from orsbench.checks.evidence import Options
    from orsbench.checks.record import record
    from orsbench.wire.cassette import write

    options = Options(env=args.env, split=args.split, timeout=args.timeout, api_key=flags.api_key_of(args), secrets=types.secrets_of(args))
    result = record(
        args.url,
        options=options,
        tasks=args.tasks.text if args.tasks else None,
        episodes=args.episodes,
        on_progress=lambda text: print(f"orsbench record: {text}", file=sys.stderr, flush=True),
    )
    if result.problem:
        print(f"orsbench record: {result.problem}", file=sys.stderr)
        return 2
    try:
        write(result.cassette, args.out)
    except OSError as exc:
        print(f"orsbench record: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"orsbench record: {result.env}: {result.calls} call(s) in {result.episodes + 1} played episode(s) written to {args.out}")
    return 0
