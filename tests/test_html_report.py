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
from orsbench.reports.html import anchor
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
    return M.predicted(C.plan(clients, servers, None), clients, servers).to_json()


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


def test_the_docs_url_flag_sets_where_protocol_links_point(tmp_path, monkeypatch):
    """The configurable base on the command line (the Action sets $ORSBENCH_DOCS_URL; a flag wins over it)."""
    monkeypatch.setenv("ORSBENCH_DOCS_URL", "https://example.org/wrong")
    base = "https://github.com/example/orsbench/blob/v0.1.0"
    md = tmp_path / "r.md"
    argv = [sys.executable, "-m", "orsbench", "check", "--scenario", "echo", "--fault", "reward-bool", "--no-fuzz", "-q"]
    done = subprocess.run([*argv, "--markdown", str(md), "--docs-url", base + "/"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"[§4.2]({base}/docs/protocol.md#42-rewards)" in md.read_text() and "example.org/wrong" not in md.read_text()
    bad = subprocess.run([*argv, "--markdown", str(md), "--docs-url", "docs"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not an absolute URL" in bad.stderr and "Traceback" not in bad.stderr


def test_a_bad_report_path_is_a_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "check", "--scenario", "echo", "--html", "/no/such/folder/r.html"], capture_output=True, text=True
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
    # No base set: the link opens this machine's copy, and the command that prints the text is named beside it.
    assert cells[4] == fix.replace("|", "\\|") and cells[5] == f"[§4.2]({_CHECKOUT.as_uri()}#42-rewards) · `orsbench explain reward.well_formed`"
    for line in rows[2:]:
        assert all(href.startswith(("file:///", "https://")) for href in re.findall(r"\]\(([^)]+)\)", line)), line
    base = "https://github.com/example/orsbench/blob/v0.1.0"
    assert f"[§4.2]({base}/docs/protocol.md#42-rewards) |" in render_markdown(broken, docs_url=base)  # a base: no local hint
    assert "orsbench explain reward.well_formed" in render_check(broken)
    monkeypatch.setenv("ORSBENCH_DOCS_URL", base + "/")
    assert f"[§4.2]({base}/docs/protocol.md#42-rewards) |" in render_markdown(broken)
    assert f'href="{base}/docs/protocol.md#42-rewards"' in render_check(broken) and "orsbench explain" not in render_check(broken)


# -- check-client: the case × check grid ------------------------------------------------------
def client_report(failing: dict[str, list[str]], *, verdict_fail: bool = True) -> dict:
    """A check-client report document as the real model makes it: every case of the catalogue, every client
    check passing, except ``failing`` (case → checks), each with a message, evidence and the client's words."""
    from orsbench.checks.model import CheckResult, Status
    from orsbench.checks.runner import Report
    from orsbench.clientcheck import CLIENT_CHECKS, cases, scoped
    from orsbench.checks.evidence import Options

    report = Report(target="python my_adapter.py", options=Options())
    for case in cases():
        results = []
        for check in CLIENT_CHECKS.values():
            bad = check.id in failing.get(case.name, [])
            results.append(
                CheckResult(
                    id=check.id, title=check.title, status=Status.FAIL if bad else Status.PASS, severity=check.severity,
                    message=f"{check.id} broke in {case.name}" if bad else "fine", measured=None,
                    evidence=[{"request": "POST /echo/call", "status": 200, "body": "event: end\ndata: {}\n\n"}] if bad else [],
                    remediation=check.remediation, spec=f"docs/protocol.md {check.spec}",
                    client={"exit_code": 1, "stopped_for": None, "errors": ["boom"], "stderr_tail": "Traceback: boom"} if bad else None,
                )
            )
        report.results += scoped(results, case.name)
    doc = report.to_json()
    assert doc["verdict"] == ("fail" if verdict_fail else "pass")
    return doc


#: Failures in cases late in the catalogue: in a flat list they were thousands of pixels down.
LATE = {"secrets": ["client.secrets"], "sparse-reward+stream-drop": ["client.resume_by_task_id"], "recover": ["client.episode_completed"]}


def test_the_check_client_page_is_a_case_by_check_grid_with_failing_cases_first():
    from orsbench.clientcheck import CLIENT_CHECKS, cases

    doc = client_report(LATE)
    page = render_check(doc, title="orsbench check-client")
    rows = re.findall(r'<tr class="r-(\w+)"><th class="case"><a href="#case-([^"]+)">([^<]+)</a></th>\n(.*?)</tr>', page, re.S)
    assert [name for *_, name, _ in rows][:3] == [c.name for c in cases() if c.name in LATE]  # failing rows first, in order
    assert {name for *_, name, _ in rows} == {c.name for c in cases()}
    assert [style for style, *_ in rows].count("fail") == 3
    headers = re.findall(r'<th class="check" title="([^"]+)">', page)
    assert headers == [c.id for c in CLIENT_CHECKS.values()]  # a column per check, in catalogue order
    cells = [re.findall(r'<td class="cell s-(\w+)">(?:<a href="#([^"]+)")?', row) for *_, row in rows]
    assert all(len(row) == len(headers) for row in cells)
    for (_, _, name, _), row in zip(rows, cells):
        for column, (style, href) in zip(headers, row):
            assert style == ("fail" if column in LATE.get(name, []) else "pass")
            assert href == anchor(f"{column}[{name}]") + "-detail" and f'id="{href}"' in page  # the cell opens its detail
    assert "0 failed" not in page and '<span class="c-fail">3 failed</span>' in page


def test_a_rule_broken_in_every_case_is_one_finding_line():
    from orsbench.clientcheck import cases

    doc = client_report({c.name: ["client.session_deleted"] for c in cases()})
    page = render_check(doc, title="orsbench check-client")
    findings = page[page.index("<h2>Findings</h2>") : page.index('<h2 id="grid">')]
    assert findings.count("<li>") == 1 and f"and {len(cases()) - 6} more case(s)" in findings


def test_zero_counts_are_not_drawn_in_alarm_colours_on_a_pass():
    page = render_check(client_report({}, verdict_fail=False), title="orsbench check-client")
    counts = page[page.index('<p class="counts"') : page.index("</p>", page.index('<p class="counts"'))]
    assert '<span class="c-zero">0 failed</span>' in counts and '<span class="c-zero">0 errors</span>' in counts
    assert "c-fail" not in counts and "c-error" not in counts
    server = render_check({"target": "x", "verdict": "pass", "exit_code": 0, "checks": [], "summary": {"pass": 3}})
    assert '<span class="c-zero">0 failed</span>' in server and '<span class="c-pass">3 passed</span>' in server


def test_a_text_difference_is_shown_around_the_first_differing_character():
    from orsbench.clientcheck.checks import difference

    sent = "alpha beta" + "   " + "gamma" * 50
    returned = "alpha beta" + "gamma" * 50
    diff = difference(sent, returned, "the environment sent", "the client returned")
    assert diff["at"] == 10 and diff["before"] == "alpha beta" and diff["expected"].startswith("   gamma") and diff["actual"].startswith("gamma")
    doc = client_report({}, verdict_fail=False)
    doc["checks"][0].update(status="fail", message="differs", measured={"difference": diff})
    page = render_check(doc)
    block = page[page.index('<div class="difference">') :]
    assert '<span class="same">alpha·beta</span><span class="differs">···gamma' in block
    assert '<span class="same">alpha·beta</span><span class="differs">gammagamma' in block


@needs_chromium
def test_a_browser_shows_every_failure_of_a_check_client_page_above_the_fold(tmp_path):
    """Issue 27: in the flat list the failures were at 2,000 and 5,000 px; in the grid every failing cell is on the
    first screen (1280 × 1000), red in the screenshot, and a click on one opens its evidence."""
    from PIL import Image

    path = tmp_path / "client.html"
    path.write_text(render_check(client_report(LATE), title="orsbench check-client"))
    facts_js = """(() => ({
      fold: window.innerHeight,
      failing: [...document.querySelectorAll('td.cell.s-fail')].map(td => td.getBoundingClientRect().bottom),
      findings: document.querySelector('h2 + p + ul.tight').getBoundingClientRect().bottom,
      red: getComputedStyle(document.querySelector('td.cell.s-fail')).backgroundColor,
    }))()"""
    with Chromium(height=1000) as browser:
        load = browser.load(path, facts_js)
        shot = browser.screenshot(tmp_path / "fold.png", height=1000)
        browser.evaluate("document.querySelector('td.cell.s-fail a').click(); 0")
        opened = browser.evaluate(
            "(() => { const d = document.querySelector(location.hash); const c = d.closest('details.check');"
            " return [location.hash, c.open, c.closest('details.case').open, !!c.querySelector('.client pre.stderr'),"
            " c.getBoundingClientRect().top >= 0 && c.getBoundingClientRect().top < window.innerHeight]; })()"
        )
    assert load.errors == [] and load.console == []
    facts = load.facts
    assert len(facts["failing"]) == 3 and max(facts["failing"]) <= facts["fold"] and facts["findings"] <= facts["fold"]
    red = tuple(int(v) for v in re.findall(r"\d+", facts["red"])[:3])
    pixels = Image.open(shot).convert("RGB")
    assert pixels.size == (1280, 1000)
    assert sum(1 for p in pixels.getdata() if p == red) > 3 * 200, "three red cells in the first screen"
    assert opened[0].endswith("-detail") and opened[1:] == [True, True, True, True]


def test_not_applicable_is_its_own_status_in_every_report(broken):
    """A check the environment gives nothing to judge (checker's Status.NOT_APPLICABLE) is neither a pass nor a skip."""
    from orsbench.reports import junit_xml

    n_a = [r for r in broken.results if r.status.value == "n/a"]
    assert n_a, "the echo mock has no long tool: call.keepalive_interval is not applicable"
    assert broken.to_json()["summary"]["n/a"] == len(n_a) and n_a[0].id not in {i["id"] for i in broken.required_not_run()}
    page = render_check(broken)
    assert f'<span class="c-skip">{len(n_a)} not applicable</span>' in page
    assert re.search(rf'id="{anchor(n_a[0].id)}">\s*<summary><span class="tag bg-skip">N/A</span>', page)
    assert re.search(rf"· {sum(1 for r in n_a if r.group == 'call')} n/a</span>", page)
    assert f"**{len(n_a)}** not applicable" in render_markdown(broken)
    xml = junit_xml(broken)
    case = xml[xml.index(f'name="{n_a[0].id}"') :]
    assert case.index("<skipped message=\"not applicable: ") < case.index("</testcase>")
    doc = client_report(LATE)
    doc["checks"][0]["status"] = "n/a"
    assert '<td class="cell s-na"><a href="#check-client-exits_in_time-' in render_check(doc)


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
