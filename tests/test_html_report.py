"""The HTML and Markdown reports: what they show, that they stand alone, and how a real browser renders them.

The browser tests open the pages in Debian's ``chromium`` (headless, over the
DevTools protocol: tests/browser.py) and skip, saying so, where it is not
installed; ``.ci/run`` installs it where it can (root with apt-get).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orsbench.checks import Options, load_checks, run_checks
from orsbench.reports import render_check, render_markdown, render_matrix
from orsbench.reports.links import _CHECKOUT, _PACKAGED, sections_of, slug, spec_links

from tests.browser import CHECK_FACTS, Chromium, find_chromium

ROOT = Path(__file__).resolve().parents[1]
needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="no chromium on PATH: apt-get install chromium (.ci/run does where it runs as root)"
)


@pytest.fixture(scope="module")
def broken(ors_server_factory):
    """A report of a server whose rewards are booleans (one required failure, with evidence)."""
    server = ors_server_factory("echo", faults=("reward-bool",))
    return run_checks(server.url, Options(fuzz=0, timeout=10))


@pytest.fixture(scope="module")
def predicted_matrix():
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS

    clients, servers = CLIENT_TARGETS.names(), C.servers()
    return M.predicted(C.plan(clients, servers, None), clients, servers)


# -- content ------------------------------------------------------------------------------
def test_the_page_leads_with_the_verdict_and_counts(broken):
    page = render_check(broken)
    s = broken.summary()
    head = page[: page.index("<h2>")]
    assert 'id="verdict">FAIL<' in head
    assert f"{s['pass']} passed" in head and f"{s['fail']} failed" in head and f"{len(broken.results)} checks" in head


def test_failures_open_with_exchange_reproducer_fix_and_section_passes_folded(broken):
    page = render_check(broken)
    block = re.search(r'<details class="check s-fail" id="check-reward-well_formed" open>(.*?)</details>\n', page, re.S)
    assert block, "the failing check is open"
    body = block.group(1)
    assert 'class="reproducer"' in body and "curl -sS -i -N" in body
    assert f'href="{_CHECKOUT.as_uri()}#42-rewards"' in body  # absolute: the page opens from anywhere
    assert broken.result("reward.well_formed").remediation.split(";")[0].replace('"', "&#34;") in body
    assert "POST http://127.0.0.1:" in body and "/echo/call" in body
    assert "event: task_id  data: " in body and "event: end  data: {&#34;ok&#34;:true" in body  # SSE events, one per line
    passes = re.findall(r'<details class="check s-pass" id="[^"]+"( open)?>', page)
    assert passes and not any(passes), "every pass is folded"


def test_the_page_stands_alone():
    """No script, stylesheet, image or frame from anywhere: it must open from file:// with no network."""
    page = render_check({"target": "http://127.0.0.1:1", "verdict": "pass", "exit_code": 0, "checks": [], "summary": {}})
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page)


def test_the_json_report_carries_reproduce_for_failures_only(broken):
    checks = broken.to_json()["checks"]
    assert all((c["reproduce"] is not None) == (c["status"] in ("fail", "warn") and bool(c["evidence"])) for c in checks)


def test_verbose_prints_the_reproducer(ors_server_factory):
    server = ors_server_factory("echo", faults=("reward-bool",))
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "check", server.url, "--no-fuzz", "-q", "-v", "--only", "reward.*,call.end_json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    tail = done.stdout.split("failed (required):", 1)[1]
    assert "reproduce:" in tail and f'BASE="${{BASE:-{server.url}}}"' in tail and "/echo/call" in tail


def test_check_writes_html_and_markdown(ors_server_factory, tmp_path):
    server = ors_server_factory("echo", faults=("reward-bool",))
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "check", server.url, "--no-fuzz", "--html", str(html), "--markdown", str(md)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert 'id="check-reward-well_formed" open' in html.read_text()
    summary = md.read_text()
    assert summary.startswith("### ❌ orsbench check: FAIL")
    assert "| ❌ FAIL | `reward.well_formed` | required |" in summary
    assert f"[§4.2]({_CHECKOUT.as_uri()}#42-rewards)" in summary and "```sh\n# reward.well_formed" in summary
    assert "`discovery.health`" not in summary  # passes are counted, not listed


def test_a_bad_report_path_is_a_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "check", "--serve", "echo", "--html", "/no/such/folder/r.html"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "no folder" in done.stderr


def test_the_matrix_is_a_grid_with_cells_that_open(predicted_matrix, tmp_path):
    page = render_matrix(predicted_matrix)
    cells = re.findall(r'<td class="cell s-(\w+)"><details><summary>([^<]+)', page)
    assert len(cells) == len(predicted_matrix["cells"])
    styles = {"works": "pass", "fails clearly": "warn", "fails silently": "fail", "hangs": "error"}
    assert all(styles[verdict.split(" (")[0].strip()] == style for style, verdict in cells)
    defective = next(c for c in predicted_matrix["cells"] if c["defects"])
    assert f"<code>{defective['defects'][0]}</code> — " in page


def test_matrix_html_from_the_cli(tmp_path):
    out = tmp_path / "m.html"
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "matrix", "--predicted", "--clients", "trl", "--html", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "<h2 id=\"client-trl\">" in out.read_text()


def test_the_markdown_summary_has_a_fix_column_and_absolute_links_under_a_configurable_base(broken, monkeypatch):
    """Issue 27: a pull-request comment is read on GitHub, a summary in a CI artifact anywhere: no relative link works there."""
    monkeypatch.delenv("ORSBENCH_DOCS_URL", raising=False)
    fix = broken.result("reward.well_formed").remediation
    rows = [line for line in render_markdown(broken).splitlines() if line.startswith("|")]
    assert rows[0] == "| | check | severity | finding | fix | protocol |"
    row = next(line for line in rows if "`reward.well_formed`" in line)
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)][1:-1]
    assert cells[4] == fix.replace("|", "\\|") and cells[5] == f"[§4.2]({_CHECKOUT.as_uri()}#42-rewards)"
    for line in rows[2:]:
        assert all(href.startswith(("file:///", "https://")) for href in re.findall(r"\]\(([^)]+)\)", line)), line
    base = "https://github.com/example/orsbench/blob/v0.1.0"
    assert f"[§4.2]({base}/docs/protocol.md#42-rewards)" in render_markdown(broken, docs_url=base)
    monkeypatch.setenv("ORSBENCH_DOCS_URL", base + "/")
    assert f"[§4.2]({base}/docs/protocol.md#42-rewards)" in render_markdown(broken)
    assert f'href="{base}/docs/protocol.md#42-rewards"' in render_check(broken)


# -- protocol links -----------------------------------------------------------------------
def test_the_packaged_section_titles_match_docs_protocol_md():
    """Refresh with `python -m orsbench.reports.refresh_sections` after a heading of docs/protocol.md changes."""
    assert json.loads(_PACKAGED.read_text()) == sections_of(_CHECKOUT.read_text())


def test_every_cited_section_has_an_anchor_in_the_document():
    anchors = {slug(h) for h in sections_of(_CHECKOUT.read_text()).values()}
    for check in load_checks().values():
        for label, href in spec_links(f"docs/protocol.md {check.spec}"):
            assert "#" in href and href.split("#", 1)[1] in anchors, (check.id, label, href)


def test_github_anchor_slugs():
    assert slug("4.2 Rewards") == "42-rewards"
    assert slug("3. Streams (server-sent events)") == "3-streams-server-sent-events"
    assert slug("11. Choices a server makes, and what the checker accepts") == "11-choices-a-server-makes-and-what-the-checker-accepts"


# -- a real browser -------------------------------------------------------------------------
@needs_chromium
def test_a_browser_renders_the_failing_check_open_with_its_exchange_and_reproducer(broken, tmp_path):
    path = tmp_path / "report.html"
    path.write_text(render_check(broken))
    with Chromium() as browser:
        load = browser.load(path, CHECK_FACTS)
    assert load.errors == [] and load.console == []
    facts = load.facts
    assert facts["verdict"] == "FAIL" and facts["external"] == []
    failing = next(o for o in facts["open"] if o["id"] == "check-reward-well_formed")
    assert failing["label"] == "FAIL" and failing["exchange"] and failing["reproducer"]
    assert "curl" in failing["reproducer_text"]
    assert facts["open_passes"] == 0 and facts["folded_passes"] > 50


@needs_chromium
def test_the_browser_helper_sees_console_errors(tmp_path):
    """The control for the test above: a page with a script error and a missing image is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); nope();</script><img src="missing.png"></body></html>')
    with Chromium() as browser:
        load = browser.load(bad)
    assert any("boom" in e for e in load.errors)
    assert any("ReferenceError" in e for e in load.errors)
    assert any("missing.png" in e for e in load.errors)


@needs_chromium
def test_the_full_matrix_page_is_small_and_loads_clean(predicted_matrix, tmp_path):
    """Size and console only; the load time is a benchmark (BENCHMARKS.md), not a timed test."""
    path = tmp_path / "matrix.html"
    path.write_text(render_matrix(predicted_matrix))
    assert path.stat().st_size < 5 * 2**20
    with Chromium() as browser:
        load = browser.load(path, "document.querySelectorAll('td.cell details').length")
    assert load.errors == [] and load.facts == len(predicted_matrix["cells"])
