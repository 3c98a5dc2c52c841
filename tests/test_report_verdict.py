"""The sentence every report leads with (issue 27): what failed first, never only the coverage a run lacked."""

from __future__ import annotations

import re

import pytest

from orsbench.checks import Options, run_checks
from orsbench.reports import render_check, render_markdown
from orsbench.reports.verdict import reasons, split_id, verdict_line


def doc(verdict="fail", exit_code=1, checks=(), strict=False, **summary):
    return {
        "verdict": verdict,
        "exit_code": exit_code,
        "options": {"strict": strict},
        "checks": [{"id": i, "message": m} for i, m in checks],
        "summary": {"failed_required": [], "stale": [], "errors": [], "required_not_run": [], **summary},
    }


NOT_RUN = [{"id": "call.resume_running", "why": "no tool ran long enough"}, {"id": "call.keepalive_interval", "why": "no long call"}]


def test_one_failure_leads_with_its_id_and_message_and_leaves_the_unrun_checks_to_the_list():
    line = verdict_line(doc(checks=[("reward.well_formed", "reward True is a bool")], failed_required=["reward.well_formed"], required_not_run=NOT_RUN))
    assert line == "verdict: FAIL (exit 1) — reward.well_formed failed: reward True is a bool"


def test_several_failures_are_counted_and_named_and_a_client_check_once_per_check():
    ids = ["client.retry_after[a]", "client.retry_after[b]", "client.tool_runs[a]", "client.env_name[c]", "client.secrets[d]"]
    line = verdict_line(doc(failed_required=ids))
    assert line == "verdict: FAIL (exit 1) — 5 required checks failed: client.retry_after ×2, client.tool_runs, client.env_name and 1 more"
    assert split_id("client.retry_after[sparse-reward+rate-limit]") == ("client.retry_after", "sparse-reward+rate-limit")
    assert split_id("call.end_json") == ("call.end_json", None)


def test_a_case_is_named_beside_its_check_and_a_long_message_is_cut():
    line = verdict_line(doc(checks=[("client.exit_status[echo]", "x" * 500)], failed_required=["client.exit_status[echo]"]))
    assert line.startswith("verdict: FAIL (exit 1) — client.exit_status (echo) failed: xxx") and line.endswith("…") and len(line) < 220


def test_unrun_checks_lead_only_where_they_decide_or_are_all_there_is():
    assert verdict_line(doc("pass", 0, required_not_run=NOT_RUN)) == "verdict: PASS (exit 0) — 2 required check(s) did not run; --strict fails on them"
    assert verdict_line(doc("fail", 1, strict=True, required_not_run=NOT_RUN)) == "verdict: FAIL (exit 1) — 2 required check(s) did not run (--strict)"
    assert verdict_line(doc("pass", 0)) == "verdict: PASS (exit 0)"


def test_stale_entries_and_errors_say_what_they_are():
    stale = reasons(doc(failed_required=[], stale=["reward.well_formed"]))
    assert stale == ["1 baseline entry passes now (stale): reward.well_formed"]
    errors = reasons(doc("error", 3, checks=[("call.end_json", "internal error in the check: KeyError")], errors=["call.end_json", "probe play: boom"]))
    assert errors == ["call.end_json erred (orsbench itself): internal error in the check: KeyError", "internal error: probe play: boom"]


@pytest.fixture(scope="module")
def broken(ors_server_factory):
    server = ors_server_factory("echo", faults=("reward-bool",))
    return run_checks(server.url, Options(fuzz=0, timeout=10))


def test_markdown_and_html_lead_with_the_same_sentence(broken):
    why = reasons(broken.to_json())
    assert why and why[0].startswith("reward.well_formed failed: reward ")
    markdown = render_markdown(broken).splitlines()
    assert markdown[2].startswith("**reward.well_formed failed: reward "), markdown[:4]
    page = render_check(broken)
    head = page[: page.index("<h2>")]
    assert re.search(r'<p class="why c-fail" id="why">reward.well_formed failed: reward ', head)
