"""The report of a pinned cell that failed as its pin says: the exception in one line, not a traceback.

Why: the suite carries ~780 strict ``xfail`` pins (:mod:`orsbench.upstream.defects`), and pytest formats a
full traceback for every one of them — reading and parsing the source of each frame, deep into trl, the
openreward SDK and inspect — although an XFAIL shows only its reason (``-rx``), JUnit XML only the reason,
and the report then crosses to the xdist controller to be thrown away. That formatting was ~19 s of the
two workers' CPU in a ~175 s run (25 ms a pin; BENCHMARKS.md, session 7).

Nothing is hidden: the outcome is pytest's own (the ``skipping`` plugin still turns the report into
XFAIL, and a strict pin that passes still fails the run); the failed check's message and where it was
raised stay in the report; ``--xfail-tb`` (show an XFAIL's traceback) and ``--runxfail`` (treat pins as
plain tests) get the full traceback as before, and so does any test whose ``xfail`` is conditional or
names ``raises`` (pytest decides those, not this module).
"""

from __future__ import annotations

import pytest


def expected_to_fail(item: pytest.Item) -> bool:
    """Whether pytest will report a failure of this item's call as XFAIL, whatever it raised.

    Only unconditional marks qualify: a condition or ``raises`` is for pytest to weigh.
    """
    config = item.config
    if config.getoption("runxfail", False) or config.getoption("xfail_tb", False):
        return False
    marks = list(item.iter_markers("xfail"))
    return bool(marks) and all(
        not mark.args and "condition" not in mark.kwargs and mark.kwargs.get("raises") is None and mark.kwargs.get("run", True)
        for mark in marks
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """A pinned cell's failed call: reported with ``path:line: Exception: message`` (None: pytest's own report)."""
    excinfo = call.excinfo
    if call.when != "call" or excinfo is None or not isinstance(excinfo.value, Exception) or not expected_to_fail(item):
        return None
    crash = excinfo.traceback[-1] if excinfo.traceback else None
    where = f"{crash.path}:{crash.lineno + 1}: " if crash is not None else ""
    return pytest.TestReport(
        item.nodeid,
        item.location,
        dict.fromkeys(item.keywords, 1),
        "failed",
        where + excinfo.exconly(),
        "call",
        # Captured output reaches the teardown report, as for every test (JUnit XML writes it from there).
        sections=[],
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )
