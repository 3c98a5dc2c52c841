"""The report flags of the commands that grade (``check``, ``check-client``), and the one way they are written.

Both commands grade into the same :class:`~orsbench.checks.runner.Report`, so
they offer the same outputs with the same meaning: a terminal table (to stderr
when a report owns stdout), ``--json``, ``--junit``, ``--html``, ``--markdown``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orsbench.cli import types

if TYPE_CHECKING:
    from orsbench.reports import TerminalReporter


def add_report_arguments(
    parser: argparse.ArgumentParser,
    *,
    junit_help: str = "write JUnit XML here",
    html_help: str = "write a self-contained HTML report here",
    verbose_help: str = "show remediation and evidence under every finding",
) -> argparse._ArgumentGroup:
    """The ``reports`` group; a command adds its own flags to the group it returns."""
    out = parser.add_argument_group("reports")
    out.add_argument("--json", type=types.output_file, metavar="FILE", help="write the JSON report here ('-' for stdout)")
    out.add_argument("--junit", type=types.output_file, metavar="FILE", help=junit_help)
    out.add_argument("--html", type=types.output_file, metavar="FILE", help=html_help)
    out.add_argument(
        "--markdown", type=types.output_file, metavar="FILE",
        help="write a compact Markdown summary here (a PR comment, $GITHUB_STEP_SUMMARY; '-' for stdout)",
    )  # fmt: skip
    out.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    out.add_argument("-q", "--quiet", action="store_true", help="print only findings and the summary")
    return out


def stdout_conflict(args: argparse.Namespace) -> str | None:
    """The usage error when two reports both want stdout, else None."""
    if args.json == "-" and args.markdown == "-":
        return "--json - and --markdown - both want stdout: write one of them to a file"
    return None


def terminal_of(args: argparse.Namespace) -> TerminalReporter:
    """The progress table; on stderr when ``--json -`` or ``--markdown -`` owns stdout."""
    import sys

    from orsbench.reports import TerminalReporter

    to_stdout = "-" in (args.json, args.markdown)
    return TerminalReporter(sys.stderr if to_stdout else None, verbose=args.verbose, quiet=args.quiet)


def write_reports(report: Any, args: argparse.Namespace, *, title: str) -> None:
    """Every report file the flags ask for, from the one report."""
    from orsbench.reports import render_check, write_html, write_json, write_junit, write_markdown

    if args.json:
        write_json(report, args.json)
    if args.junit:
        write_junit(report, args.junit)
    if args.html:
        write_html(render_check(report, title=title), args.html)
    if args.markdown:
        write_markdown(report, args.markdown, title=title)
