"""``orsbench explain CHECK_ID``: a check's rule, why it matters, its fix and the protocol text it enforces.

The words are :mod:`orsbench.reports.explain`'s; the protocol text is this machine's copy of
docs/protocol.md (a checkout's, or the one the wheel carries), so it needs no network. Reports
whose links point at this machine name this command beside each finding.
"""

from __future__ import annotations

import argparse
import sys

from orsbench.cli import flags, subcommand

EPILOG = """\
examples:
  orsbench explain reward.well_formed          # a server check (orsbench check)
  orsbench explain client.tool_once            # a client check (orsbench check-client)
  orsbench explain 'session.*'                 # every check a glob names
  orsbench check --list                        # every server check's id
"""


@subcommand("explain")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="explain a check: its rule, why it matters, its fix and its protocol section",
        description="Print what a check asserts, why it matters (its severity), how to fix a server or client that "
        "fails it, and the text of the docs/protocol.md section it cites — for the server checks of `orsbench check` "
        "and the client checks of `orsbench check-client`. An unknown id is a usage error listing the close ones.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("check_ids", nargs="+", metavar="CHECK_ID", help="a check id as reports name it, or a glob ('reward.*')")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from orsbench.reports import explain

    catalogue = explain.known()
    chosen: list[str] = []
    for pattern in args.check_ids:
        found = explain.matching(pattern, catalogue)
        if not found:
            close = explain.close_matches(pattern, catalogue)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `orsbench check --list` lists the server checks"
            raise flags.UsageError(f"no check {pattern!r}{hint}")
        chosen += [i for i in found if i not in chosen]
    print("\n".join(explain.explain(check_id, catalogue) for check_id in chosen), end="", file=sys.stdout)
    return 0
