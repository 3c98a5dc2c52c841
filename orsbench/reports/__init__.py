"""Reports of a check run: a terminal table with progress, a JSON document, JUnit XML for CI.

All three read only :class:`~orsbench.checks.runner.Report` and
:class:`~orsbench.checks.model.CheckResult`; none of them judges anything.
"""

from orsbench.reports.json_report import write_json
from orsbench.reports.junit import junit_xml, write_junit
from orsbench.reports.terminal import TerminalReporter

__all__ = ["TerminalReporter", "junit_xml", "write_json", "write_junit"]
