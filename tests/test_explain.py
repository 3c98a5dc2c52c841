"""``orsbench explain CHECK_ID``: every check's rule, why, fix and protocol text (issue 37, item 1)."""

from __future__ import annotations

import re

import pytest

from orsbench.checks.registry import load_checks
from orsbench.cli import main
from orsbench.clientcheck.checks import CLIENT_CHECKS
from orsbench.reports import explain, links


def test_every_check_of_either_kind_is_explained_with_the_text_of_every_section_it_cites() -> None:
    """A cited section with no text found would print a bare link: each one resolves in docs/protocol.md."""
    catalogue = explain.known()
    assert set(load_checks()) | set(CLIENT_CHECKS) == set(catalogue)
    markdown = links.document().read_text()
    for check_id, c in catalogue.items():
        cited = re.findall(r"§\s*(\d+(?:\.\d+)*)", c.spec)
        assert cited, (check_id, c.spec)
        for number in cited:
            assert explain.section_text(number, markdown), (check_id, number)
        text = explain.explain(check_id, catalogue)
        assert text.startswith(f"{check_id} — {c.severity} ") and f"fix:  {c.fix}" in text and "why it matters: " in text


def test_a_numbered_item_is_printed_alone() -> None:
    """``§11.6`` is item 6 of section 11, not the whole of §11."""
    heading, body = explain.section_text("11.6", links.document().read_text())
    assert heading.endswith("item 6") and body[0].startswith("6. **SSE framing**") and not any(line.startswith("7.") for line in body)


def test_explain_prints_the_rule_and_the_protocol_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "reward.well_formed", "client.exit_status"]) == 0
    out = capsys.readouterr().out
    assert "reward.well_formed — required server check" in out and "see it fail: orsbench check --scenario echo --fault reward-bool" in out
    assert "4.2 Rewards" in out and "client.exit_status — required client check" in out and "12.1 Run, report, exit" in out
    assert "fails clearly" in out  # a client check's why: what its failure makes of the verdict


def test_a_glob_explains_a_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "reward.*"]) == 0
    out = capsys.readouterr().out
    assert sorted(re.findall(r"^(reward\.\w+) — ", out, re.M)) == sorted(i for i in load_checks() if i.startswith("reward."))


@pytest.mark.parametrize(("given", "close"), [("reward.wellformed", "reward.well_formed"), ("reward", "reward.well_formed"), ("exit_status", "client.exit_status")])
def test_an_unknown_id_is_a_usage_error_listing_close_ones(given: str, close: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explain", given])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 2 and err.startswith(f"orsbench explain: error: no check {given!r}; did you mean") and close in err, err


def test_reports_name_the_command_only_where_links_point_at_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(links.DOCS_URL_ENV, raising=False)
    assert links.explain_hint("reward.well_formed") == "orsbench explain reward.well_formed"
    assert links.explain_hint("reward.well_formed", "https://example.org/orsbench") is None
    monkeypatch.setenv(links.DOCS_URL_ENV, "https://example.org/orsbench")
    assert links.explain_hint("reward.well_formed") is None
