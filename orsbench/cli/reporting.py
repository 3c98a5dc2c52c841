"""The report flags of every command that produces a report, and the one way they are written.

``check``, ``check-client``, ``proxy``, ``matrix`` and ``bench`` offer the same flags with the
same meaning, added by one call to :func:`add_report_arguments`:

* ``--json FILE``, ``--junit FILE``, ``--html FILE``, ``--markdown FILE`` — each a format the
  command's result has (``formats=``); ``-`` writes it to stdout, and then everything a person
  reads (progress, the table, the verdict) goes to stderr;
* every path is checked when the command line is parsed — its folder exists and is writable — and
  two reports cannot both take stdout: a usage error (exit 2) before a long run starts, never
  a run lost at its end;
* ``-q/--quiet`` (less while it runs: only findings and the summary) and ``-v/--verbose`` (more
  under every finding); ``-q -v`` is quiet progress with detailed findings.

A command that runs checks feeds its run's events to :func:`stream_of` (the terminal and a handler
per report file, :mod:`orsbench.reports.events`); one that has only the finished
:class:`~orsbench.checks.runner.Report` hands its end to the terminal and :func:`file_handlers` on one
:class:`~orsbench.reports.events.EventStream`; one with a result of its own renderer writes with :func:`write_text`; and it prints for people on :func:`people`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from orsbench.cli import flags, types

if TYPE_CHECKING:
    from orsbench.reports import TerminalReporter
    from orsbench.reports.events import EventStream, Handler
    from orsbench.reports.handlers import FileHandler

#: Every report format, in ``--help`` order.
FORMATS = ("json", "junit", "html", "markdown")

_HELP = {
    "json": "write the JSON report here",
    "junit": "write JUnit XML here",
    "html": "write a self-contained HTML report here",
    "markdown": "write a compact Markdown summary here (a PR comment, $GITHUB_STEP_SUMMARY)",
}


def add_report_arguments(
    parser: argparse.ArgumentParser,
    *,
    formats: tuple[str, ...] = FORMATS,
    helps: dict[str, str] | None = None,
    junit_help: str | None = None,
    html_help: str | None = None,
    verbose_help: str = "show remediation and evidence under every finding",
    quiet_help: str = "print only findings and the summary",
    links: bool = False,
) -> argparse._ArgumentGroup:
    """The ``reports`` group (``formats`` of :data:`FORMATS`, ``-q``, ``-v``); a command adds its own flags to it.

    ``links``: the command's HTML and Markdown link each finding to its section of docs/protocol.md,
    so it takes ``--docs-url`` (where that document lives) too.
    """
    texts = {**_HELP, **(helps or {})}
    if junit_help:
        texts["junit"] = junit_help
    if html_help:
        texts["html"] = html_help
    out = parser.add_argument_group(
        "reports", "FILE - is stdout (people's text then goes to stderr); each FILE is checked before the run starts"
    )
    for name in formats:
        out.add_argument(f"--{name}", type=types.output_file, default=None, metavar="FILE", help=f"{texts[name]} ('-' for stdout)")
    out.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    out.add_argument("-q", "--quiet", action="store_true", help=quiet_help)
    if links:
        out.add_argument(
            "--docs-url", type=docs_url, default=None, metavar="URL",
            help="where the protocol links of --html/--markdown point: a repository's …/blob/<ref> or a docs site's root, "
            "holding docs/protocol.md (default: $ORSBENCH_DOCS_URL, else this checkout's docs/protocol.md as a file:// URL)",
        )  # fmt: skip
    parser.set_defaults(_formats=formats)
    flags.after_parse(parser, _one_report_on_stdout)
    return out


def docs_url(value: str) -> str:
    """``--docs-url``: an absolute http(s) or file URL (a report is read away from where it was written)."""
    if not value.startswith(("https://", "http://", "file://")):
        raise argparse.ArgumentTypeError(f"{value!r} is not an absolute URL: give https://…/blob/<ref> (or a file:// URL)")
    return value.rstrip("/")


def _on_stdout(args: argparse.Namespace) -> list[str]:
    return [f"--{name}" for name in getattr(args, "_formats", FORMATS) if getattr(args, name, None) == "-"]


def _one_report_on_stdout(args: argparse.Namespace) -> None:
    if conflict := stdout_conflict(args):
        raise flags.UsageError(conflict)


def stdout_conflict(args: argparse.Namespace) -> str | None:
    """The usage error when two reports both want stdout, else None."""
    taken = _on_stdout(args)
    if len(taken) > 1:
        return f"{' - and '.join(taken)} - all want stdout: write all but one of them to a file"
    return None


def stdout_taken(args: argparse.Namespace) -> bool:
    """Whether a report is written to stdout (``--json -`` and the like)."""
    return bool(_on_stdout(args))


def people(args: argparse.Namespace) -> TextIO:
    """Where text for people goes: stdout, or stderr when a report owns stdout."""
    return sys.stderr if stdout_taken(args) else sys.stdout


def terminal_of(args: argparse.Namespace) -> TerminalReporter:
    """The progress table; on stderr when a report owns stdout."""
    from orsbench.reports import TerminalReporter

    stream = sys.stderr if stdout_taken(args) else None
    return TerminalReporter(stream, verbose=getattr(args, "verbose", False), quiet=getattr(args, "quiet", False))


def file_handlers(args: argparse.Namespace, *, title: str) -> list[FileHandler]:
    """A handler for every report file the flags ask for (``--json``, ``--junit``, ...), in :data:`FORMATS` order."""
    from orsbench.reports.handlers import file_handlers as handlers

    formats = getattr(args, "_formats", FORMATS)
    return handlers({name: getattr(args, name, None) for name in formats}, title=title, docs_url=getattr(args, "docs_url", None))


def stream_of(args: argparse.Namespace, *, title: str, terminal: Handler | None = None) -> EventStream:
    """The run's event stream, handed to the terminal (:func:`terminal_of`, or ``terminal``) and every report the flags ask for.

    ``title`` is the command (``orsbench check``): the terminal's header and the HTML and Markdown titles.
    """
    from orsbench.reports.events import EventStream

    return EventStream([terminal or terminal_of(args), *file_handlers(args, title=title)], command=title)


def write_text(path: str | Path, text: str) -> None:
    """Write a rendered report to ``path`` (``-``: stdout), ending in one newline."""
    from orsbench.reports.output import write_text as write

    write(path, text)
