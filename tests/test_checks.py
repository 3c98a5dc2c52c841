"""The checker's parts: registry and policy, schema-derived inputs, baseline, evidence reading, reports.

Runs against one shared echo mock (``ors_server_factory``); the per-scenario,
per-violation and CLI behaviour live in ``test_check_*.py``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from functools import cache
from io import StringIO
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from orsbench import protocol
from orsbench.checks import (
    CHECKS,
    PROBES,
    Baseline,
    BaselineError,
    Options,
    Severity,
    Status,
    load_checks,
    run_checks,
    schema_input,
)
from orsbench.checks.verdicts import framing_problems as _framing
from orsbench.wire.sse import parse
from orsbench.checks.evidence import result_of
from orsbench.checks.registry import check, closure, select
from orsbench.reports import TerminalReporter, junit_xml
from orsbench.reports.json_report import dumps
from orsbench.wire.evidence import Exchange


@cache
def _run(url: str, env: str):
    return run_checks(url, Options(env=env))


@pytest.fixture(scope="module")
def echo_report(ors_server_factory):
    server = ors_server_factory("echo")
    return _run(server.url, server.env_name)


# -- registry and policy ----------------------------------------------------------------------
def test_at_least_forty_named_checks_with_dotted_ids():
    checks = load_checks()
    assert len(checks) >= 40
    for check_id in checks:
        assert re.fullmatch(r"[a-z_]+\.[a-z0-9_]+(\.[a-z0-9_]+)?", check_id), check_id  # binding.<client>.<rule>


def test_every_check_is_registered_with_a_severity_and_cannot_be_without_one():
    assert all(isinstance(c.severity, Severity) for c in load_checks().values())
    with pytest.raises(TypeError):
        check("x.no_severity", title="t", probe="discovery", spec="§1", remediation="r")  # type: ignore[call-arg]


def test_every_issue_named_check_exists():
    for check_id in (
        "discovery.tools_schema",
        "dataset.invalid_split_400",
        "session.missing_sid_400",
        "call.first_event_task_id",
        "call.chunk_reassembly",
        "reward.well_formed",
        "session.ttl_reap",
        "call.keepalive_interval",
        "call.resume_by_task_id",
        "call.unknown_task_id_error",
        "routing.default_env_redirect",
        "session.delete_idempotent",
        "session.recreate_deleted_sid",
        "call.sse_framing",
        "call.error_reason",
        "reward.finished_bool",
    ):
        assert check_id in CHECKS


def test_requires_name_registered_checks_graded_no_later_than_the_dependent():
    for check in load_checks().values():
        for dep in check.requires:
            assert dep in CHECKS, f"{check.id} requires unknown {dep}"
            assert PROBES.names().index(CHECKS[dep].probe) <= PROBES.names().index(check.probe), f"{check.id} requires later {dep}"


def test_every_check_has_a_title_spec_section_and_one_line_remediation():
    for check in load_checks().values():
        assert check.title and "§" in check.spec, check.id
        assert check.remediation and "\n" not in check.remediation, check.id


def test_select_globs_and_closure_adds_dependencies():
    chosen = select(["call.finish_*"])
    assert [c.id for c in chosen] == ["call.finish_latch"]
    needed = {c.id for c in closure(chosen)}
    assert {"call.finish_latch", "call.episode_finishes", "call.end_json", "call.end_event", "session.create"} <= needed


# -- minimal valid input from JSON Schema ---------------------------------------------------------
class _Inner(BaseModel):
    x: int = Field(ge=3)
    tag: str = Field(pattern=r"^[a-z]+$", min_length=2)


class _Zoo(BaseModel):
    inner: _Inner
    inners: list[_Inner] = Field(min_length=1)
    pair: tuple[int, str]
    maybe: list[int] | None = None
    level: int | str
    ratio: float = Field(gt=0, lt=1)
    even: int = Field(le=-3, multiple_of=2)
    weights: dict[str, float]
    mode: str = Field(json_schema_extra={"enum": ["fast", "slow"]})


def test_minimal_input_handles_refs_tuples_anyof_bounds_patterns_and_enums():
    schema = _Zoo.model_json_schema()
    value = schema_input.minimal_input(schema)
    assert schema_input.errors(value, schema) == []
    _Zoo.model_validate(value)  # the tool's own model accepts it too
    assert value["inner"]["x"] == 3 and value["even"] == -4 and 0 < value["ratio"] < 1
    assert "maybe" not in value  # optional properties are left out
    assert value["mode"] == "fast"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 3}}, "required": ["n"]},
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "^Z{40}$"}}, "required": ["s"]},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}, "required": ["a"]},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}, "required": ["a"]},
        {"type": "object", "properties": {"r": {"$ref": "#"}}, "required": ["r"]},
        {"type": "strng"},
        {"type": "array"},
    ],
    ids=[
        "empty-bounds",
        "unmatchable-pattern",
        "dangling-ref",
        "remote-ref",
        "recursive-required",
        "invalid-type",
        "not-an-object",
    ],
)
def test_no_input_is_a_reason_not_a_guess(schema):
    with pytest.raises(schema_input.NoInput) as info:
        schema_input.minimal_input(schema)
    assert str(info.value)


def test_null_schema_means_empty_input_and_cannot_be_made_invalid():
    assert schema_input.minimal_input(None) == {}
    assert schema_input.invalid_input(None, {}) is None


def test_invalid_input_fails_validation_and_carries_the_padding():
    schema = _Zoo.model_json_schema()
    bad = schema_input.invalid_input(schema, schema_input.minimal_input(schema), "PADDING")
    assert schema_input.errors(bad, schema)
    assert "PADDING" in json.dumps(bad)


def test_variants_put_task_values_into_matching_properties():
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    assert schema_input.variants(schema, {"text": ""}, ["hello", 3, "hello"]) == [{"text": "hello"}]


def test_schema_problems_flags_non_object_and_remote_refs():
    assert schema_input.schema_problems({"type": "string"})
    assert schema_input.schema_problems({"type": "object", "properties": {"a": {"$ref": "http://x/y"}}})
    assert schema_input.schema_problems({"type": "object", "properties": {"a": {"type": "integer"}}}) == []


# -- baseline ------------------------------------------------------------------------------------------
def test_baseline_accepts_ids_and_objects_and_rejects_unknown_ids():
    known = set(load_checks())
    base = Baseline.parse(
        {"expected_failures": ["session.messages", {"id": "call.error_reason", "reason": "no reason field"}]}, known
    )
    assert base.entries == {"session.messages": "", "call.error_reason": "no reason field"}
    with pytest.raises(BaselineError, match="not a check id"):
        Baseline.parse({"expected_failures": ["call.*"]}, known)
    with pytest.raises(BaselineError, match="expected a list"):
        Baseline.parse({"expected_failures": "call.error_reason"}, known)


def test_every_example_baseline_in_fixtures_parses():
    files = sorted((Path(__file__).parent.parent / "fixtures" / "expected-failures").glob("*.yaml"))
    assert files
    for path in files:
        assert Baseline.load(path, set(load_checks())).entries, path


# -- reading evidence -------------------------------------------------------------------------------------
def _exchange(body: bytes, content_type: str = protocol.SSE_CONTENT_TYPE) -> Exchange:
    return Exchange("POST", "http://x/echo/call", {}, b"", status=200, headers={"content-type": content_type}, body=body)


def test_result_of_reassembles_chunks_and_classifies_endings():
    body = b'event: task_id\r\ndata: t\r\n\r\nevent: chunk\r\ndata: {"ok":\r\n\r\nevent: end\r\ndata:  true}\r\n\r\n'
    assert result_of(_exchange(body)) == ("result", {"ok": True})
    assert result_of(_exchange(b"event: task_id\r\ndata: t\r\n\r\n"))[0] == "no-end"
    assert result_of(_exchange(b"event: error\r\ndata: boom\r\n\r\n")) == ("error", "boom")
    assert result_of(_exchange(b"event: end\r\ndata: {'ok': True}\r\n\r\n"))[0] == "bad-json"
    # the wrong content type does not blind the checks: the body is still parsed as SSE
    assert result_of(_exchange(b'event: end\r\ndata: {"ok": true}\r\n\r\n', "application/json"))[0] == "result"


def test_framing_reports_mixed_endings_unknown_events_and_missing_space():
    assert _framing(parse(b"event: task_id\r\ndata: t\r\n\r\n")) == []
    assert any("mixed" in p for p in _framing(parse(b"event: end\ndata: x\r\n\r\n")))
    assert any("unknown event" in p for p in _framing(parse(b"event: end \r\ndata: x\r\n\r\n")))
    assert any("no space" in p for p in _framing(parse(b"event:end\r\ndata:x\r\n\r\n")))
    assert any("without a colon" in p for p in _framing(parse(b"event: end\r\ndata\r\n\r\n")))


# -- one real run: verdict, reports ----------------------------------------------------------------------
def test_echo_mock_passes_and_skips_name_their_reason(echo_report):
    assert echo_report.exit_code == 0
    assert not echo_report.ids(Status.FAIL) and not echo_report.ids(Status.ERROR)
    for result in echo_report.results:
        if result.status is Status.SKIP:
            assert result.message


def test_json_report_shape(echo_report):
    data = json.loads(dumps(echo_report))
    assert {"target", "passed", "summary", "checks"} <= set(data)
    assert data["passed"] is True and data["exit_code"] == 0
    assert data["summary"]["total"] == len(CHECKS) == len(data["checks"])
    assert data["summary"]["fail"] == 0
    for item in data["checks"]:
        assert {"id", "status", "severity", "measured", "evidence", "remediation"} <= set(item)
        assert item["status"] in {s.value for s in Status} and item["severity"] in {s.value for s in Severity}
        for ev in item["evidence"]:
            assert {"request", "status", "body"} <= set(ev) and len(ev["body"]) < 700  # truncated


def test_evidence_is_truncated_and_secrets_redacted(echo_report):
    big = echo_report.result("call.chunk_reassembly").evidence[0]
    assert "more chars]" in big["body"]
    sent = echo_report.result("session.sdk_headers_accepted").evidence[0]["request_headers"]
    assert sent[protocol.SECRETS_HEADER] == "<redacted>" and sent[protocol.API_KEY_HEADER] == "<redacted>"


def test_junit_xml_shape(echo_report):
    root = ET.fromstring(junit_xml(echo_report))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(CHECKS)
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    # A check that is not applicable is a JUnit skip too (JUnit has no such status; its message says which).
    assert int(suite.get("skipped")) == len(echo_report.ids(Status.SKIP)) + len(echo_report.ids(Status.NOT_APPLICABLE))
    assert {c.get("classname").split(".")[-1] for c in cases} >= {"discovery", "dataset", "session", "call", "reward"}


def test_terminal_report_streams_one_line_per_check_and_a_verdict(echo_report):
    out = StringIO()
    terminal = TerminalReporter(out, colour=False)
    for result in echo_report.results:
        terminal.on_result(result)
    terminal.finish(echo_report)
    lines = out.getvalue().splitlines()
    assert sum(1 for line in lines if line.split(" ")[0] in {"PASS", "SKIP", "N/A", "FAIL", "WARN"}) == len(CHECKS)
    # The verdict line says which required checks did not run (issue 10: honest coverage).
    not_run = echo_report.required_not_run()
    assert lines[-1] == "verdict: PASS (exit 0)" + (
        f" — {len(not_run)} required check(s) did not run; --strict fails on them" if not_run else ""
    )
    assert "\033[" not in out.getvalue()


def test_a_check_that_raises_is_an_error_and_exit_3(ors_server_factory):
    server = ors_server_factory("echo")

    def broken(ev):
        raise KeyError("oops")

    with CHECKS.replaced(dataclasses.replace(CHECKS["discovery.health"], fn=broken)):
        report = run_checks(server.url, Options(env=server.env_name), only=["discovery.*"])
    assert report.result("discovery.health").status is Status.ERROR
    assert "KeyError" in report.result("discovery.health").message
    assert report.exit_code == 3


def test_a_failed_dependency_skips_its_dependents_by_name(ors_server_factory):
    # (An unknown --env used to provoke this; it is a usage error now, so a broken tool listing does.)
    server = ors_server_factory("echo", faults=("tools-listing-bare-array",))
    report = run_checks(server.url, Options(), only=["discovery.*", "dataset.*"])
    skipped = report.result("discovery.tools_schema")
    assert skipped.status is Status.SKIP and skipped.depends_on == "discovery.tools_listing"
    assert "unmet dependency: discovery.tools_listing (fail)" in skipped.message


# -- the catalogue in docs/checks.md stays true -------------------------------------------------------------
DOC = (Path(__file__).parent.parent / "docs" / "checks.md").read_text()


def _section(name: str) -> str:
    return DOC.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]


def test_docs_catalogue_lists_every_check_once_with_its_severity():
    rows = {}
    for line in _section("catalogue").splitlines():
        match = re.match(r"\| `([a-z_.0-9]+)` \| (required|recommended|advisory) \|", line)
        if match:
            assert match.group(1) not in rows
            rows[match.group(1)] = match.group(2)
    assert rows == {c.id: c.severity.value for c in load_checks().values()}


def test_docs_list_every_violation_with_the_checks_it_breaks():
    from orsbench.servers.faults.violations import VIOLATIONS

    section = _section("violations")
    for name, violation in VIOLATIONS.items():
        row = next(line for line in section.splitlines() if line.startswith(f"| `{name}` |"))
        for check_id in violation.breaks + violation.also:
            assert f"`{check_id}`" in row, (name, check_id)


def test_a_probe_registers_itself_and_the_collector_runs_it_by_name():
    from orsbench.checks.collector import PROBES, Collector, Probe, probe_names
    from orsbench.checks.evidence import Evidence
    from orsbench.registry import UnknownName

    assert probe_names() == ("discovery", "dataset", "affinity", "session", "call", "deployment", "play", "fuzz", "quality", "isolation", "timing")
    seen = []
    collector = Collector(None, Evidence("http://127.0.0.1:9", Options()))  # type: ignore[arg-type]  # the dummy sends nothing
    with PROBES.temporarily(Probe("dummy", lambda col: seen.append(col))):
        assert probe_names()[-1] == "dummy"
        collector.run("dummy")
    assert seen == [collector] and collector.ev.probes_run == ["dummy"]
    with pytest.raises(UnknownName, match="unknown probe 'dummy'; known: discovery"):
        collector.run("dummy")


def test_evidence_loads_reads_json_as_the_standard_library_does():
    """The graders' JSON reader (orjson where it agrees) never reads a value differently from json.loads."""
    import json as stdjson

    from orsbench.checks.evidence import loads

    texts = ['{"a": 1, "a": 2}', "1e400", "-0", "1.0000000000000002", '"\\ud800"', "NaN", " [1] ",
             "18446744073709551615", "18446744073709551616", "-9223372036854775809", '{"n": 123456789012345678901234567890}']
    for text in texts:
        for data in (text, text.encode()):
            got, want = loads(data), stdjson.loads(data)
            assert repr(got) == repr(want) and type(got) is type(want), text
    for bad in ("{", b"\xff", "[1,]"):
        with pytest.raises(ValueError):
            loads(bad)
