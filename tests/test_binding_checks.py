"""The binding check group: silent on echo, loud on schema-zoo or schema-edges, and the same predicates as the pinned defects."""

from __future__ import annotations

import pytest

from orsbench.checks import Options, run_checks
from orsbench.checks.binding import BINDING_CHECKS, PROVIDER_NAME
from orsbench.checks.model import Status
from orsbench.checks import CHECKS, Severity
from orsbench.upstream import defects as D
from orsbench.scenarios import get_scenario
from orsbench.servers.launch import serve


@pytest.fixture(scope="module")
def reports() -> dict[str, object]:
    out = {}
    for scenario in ("echo", "schema-zoo", "schema-edges"):
        with serve(scenario) as server:
            out[scenario] = run_checks(server.url, Options(env=scenario), only=["binding.*"])
    return out


def test_every_binding_check_is_registered_with_a_soft_severity() -> None:
    for check_id in BINDING_CHECKS:
        assert CHECKS[check_id].severity in (Severity.RECOMMENDED, Severity.ADVISORY), check_id
        client, rule = check_id.split(".")[1:]
        assert client in ("trl", "inspect", "openreward", "ors") and rule


def test_silent_on_echo(reports: dict) -> None:
    for check_id in BINDING_CHECKS:
        assert reports["echo"].result(check_id).status is Status.PASS, check_id


@pytest.mark.parametrize("check_id", BINDING_CHECKS)
def test_loud_on_schema_zoo_or_schema_edges(reports: dict, check_id: str) -> None:
    results = [reports[scenario].result(check_id) for scenario in ("schema-zoo", "schema-edges")]
    assert Status.WARN in {r.status for r in results}, (check_id, [r.message for r in results])


def _zoo_tools() -> list[dict]:
    return [t.spec() for t in get_scenario("schema-zoo").shared_tools()]


def test_crash_findings_are_the_tools_the_conformance_suite_pins_keyword_crash(reports: dict) -> None:
    flagged = {f.split("'")[1] for f in reports["schema-zoo"].result("binding.trl.crash").measured}
    pinned = {t["name"] for t in _zoo_tools() if D.factory_defect([t]) is D.DEFECTS["keyword-crash"]}
    assert flagged == pinned and pinned


def test_inspect_findings_are_the_ref_parameters(reports: dict) -> None:
    flagged = {f.split("'")[1] for f in reports["schema-zoo"].result("binding.inspect.lost_type").measured}
    typed = ("sanitizer-drops-keyword-params", "inspect-ref-untyped", "inspect-items-dropped")
    assert flagged == {t["name"] for t in _zoo_tools() if getattr(D.inspect_binding_defect(t), "id", None) in typed}
    assert {"nested_model", "enum_arg", "tuple_arg", "dict_arg"} <= flagged


def test_provider_name_rule() -> None:
    assert PROVIDER_NAME.match("file-path") and not PROVIDER_NAME.match("a.b/c") and not PROVIDER_NAME.match("x" * 65)


def _flagged(reports: dict, scenario: str, check_id: str) -> set[str]:
    return {f.split("'")[1] for f in reports[scenario].result(check_id).measured or []}


def test_schema_edges_findings_are_the_tools_the_conformance_suite_pins(reports: dict) -> None:
    """docs/protocol.md §13.9: the crashes and refusals predicted from /tools are the pinned ones, tool by tool."""
    edges = [t.spec() for t in get_scenario("schema-edges").shared_tools()]
    assert _flagged(reports, "schema-edges", "binding.trl.crash") == {t["name"] for t in edges if D.factory_defect([t])} == {"any_value"}
    assert _flagged(reports, "schema-edges", "binding.inspect.refused_schema") == {"pair", "any_value"}
    kept = _flagged(reports, "schema-edges", "binding.inspect.lost_keywords")
    assert kept == {"either", "free_form", "exclusive", "counted", "const"}
    lost = reports["schema-edges"].result("binding.trl.lost_schema").measured
    assert any("'either'" in f and "top-level-only" in f for f in lost) and any("'quiet'" in f and "description-filled" in f for f in lost)
