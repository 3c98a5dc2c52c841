"""JUnit XML for CI: one testcase per check.

What turns a CI job red is exactly what makes ``orsbench check`` exit non-zero:
a failed required check or a stale baseline entry is a ``<failure>``, an
internal error an ``<error>``. A skipped check, one that is not applicable
(its message says so) and an expected (baselined) failure are ``<skipped>``; a failed recommended/advisory check and a warning
pass, with the finding in ``<system-out>``, so they are visible without
breaking the build.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from orsbench.checks.model import CheckResult, Status
from orsbench.reports.terminal import client_summary

if TYPE_CHECKING:
    from orsbench.checks.runner import Report


def _details(result: CheckResult) -> str:
    lines = [
        f"status: {result.status.value}",
        f"severity: {result.severity.value}",
        f"message: {result.message}",
        f"measured: {json.dumps(result.measured, ensure_ascii=False, default=repr)[:2000]}",
        f"remediation: {result.remediation}",
        f"spec: {result.spec}",
    ]
    if result.depends_on:
        lines.append(f"depends on: {result.depends_on}")
    for item in result.evidence:
        lines.append(f"evidence: {item['request']} → {item['status']} {item.get('body', '')[:400]}")
    if result.client:
        lines.append(f"client: {client_summary(result.client)}")
        lines += [f"client error: {e}" for e in result.client.get("errors") or []]
        if result.client.get("stderr_tail"):
            lines.append("client stderr (tail):\n" + str(result.client["stderr_tail"]))
    return "\n".join(lines)


def _case(suite: ET.Element, result: CheckResult) -> tuple[str, ...]:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"orsbench.check.{result.group}",
        name=result.id,
        time=f"{result.duration_s:.4f}",
    )
    kinds: tuple[str, ...] = ()
    if result.baseline == "stale" or result.blocking:
        ET.SubElement(
            case,
            "failure",
            message=result.message,
            type="stale-baseline" if result.baseline == "stale" else result.severity.value,
        ).text = _details(result)
        kinds = ("failure",)
    elif result.status is Status.ERROR:
        ET.SubElement(case, "error", message=result.message, type="internal").text = _details(result)
        kinds = ("error",)
    elif result.status in (Status.SKIP, Status.NOT_APPLICABLE) or result.baseline == "expected":
        # JUnit knows no "not applicable": it is a skip whose message says so (never a pass a dashboard would count).
        message = (
            f"expected failure (baseline): {result.message}"
            if result.baseline == "expected"
            else f"not applicable: {result.message}"
            if result.status is Status.NOT_APPLICABLE
            else result.message
        )
        ET.SubElement(case, "skipped", message=message)
        kinds = ("skipped",)
    ET.SubElement(case, "system-out").text = _details(result)
    return kinds


def junit_xml(report: Report) -> str:
    results = report.results
    suites = ET.Element("testsuites", name="orsbench check")
    suite = ET.SubElement(
        suites, "testsuite", name=f"orsbench.check {report.target}", timestamp=report.started_at, time=f"{report.duration_s:.3f}"
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("target", report.target),
        ("env", report.env),
        ("split", report.split),
        ("verdict", report.verdict),
        ("exit_code", report.exit_code),
        ("baseline", report.baseline),
    ):
        ET.SubElement(props, "property", name=key, value="" if value is None else str(value))
    counts = {"failure": 0, "error": 0, "skipped": 0}
    if report.reason:
        case = ET.SubElement(suite, "testcase", classname="orsbench.check.target", name="target.reachable", time="0")
        ET.SubElement(case, "error", message=report.reason, type=report.verdict).text = report.reason
        counts["error"] += 1
    for error in report.internal_errors:
        case = ET.SubElement(suite, "testcase", classname="orsbench.check.internal", name="orsbench.internal", time="0")
        ET.SubElement(case, "error", message=error, type="internal").text = error
        counts["error"] += 1
    for result in results:
        for kind in _case(suite, result):
            counts[kind] += 1
    total = len(suite.findall("testcase"))
    for element in (suite, suites):
        element.set("tests", str(total))
        element.set("failures", str(counts["failure"]))
        element.set("errors", str(counts["error"]))
    suite.set("skipped", str(counts["skipped"]))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def write_junit(report: Report, path: str | Path) -> None:
    Path(path).write_text(junit_xml(report) + "\n", encoding="utf-8")
