"""Reports of a check run: a terminal table with progress, a JSON document, JUnit XML for CI,
a self-contained HTML page and a Markdown summary for people.

All of them read only :class:`~orsbench.checks.runner.Report` and
:class:`~orsbench.checks.model.CheckResult`; none of them judges anything. Each is a handler of a
run's one stream of typed events (:mod:`.events`; the file formats in :mod:`.handlers`), so every
format renders the same run.
"""

from orsbench.reports.html import render_check, render_live, render_matrix, write_html
from orsbench.reports.json_report import write_json
from orsbench.reports.junit import junit_xml, write_junit
from orsbench.reports.markdown import render_markdown, write_markdown
from orsbench.reports.terminal import TerminalReporter

__all__ = [
    "TerminalReporter",
    "junit_xml",
    "render_check",
    "render_live",
    "render_markdown",
    "render_matrix",
    "write_html",
    "write_json",
    "write_junit",
    "write_markdown",
]
