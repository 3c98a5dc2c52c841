"""The fuzz's inputs (orsbench.schema_examples) and the gameplay's learning (orsbench.checks.gameplay), unit by unit."""

from __future__ import annotations

import pytest

from orsbench import schema_examples
from orsbench.checks.gameplay import Player, mine, validation_hints

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": -5, "maximum": 5, "description": "a number"},
        "text": {"type": "string", "maxLength": 12},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "seconds": {"type": "number", "description": "how long to wait"},
    },
    "required": ["n", "text"],
}


def test_boundaries_are_valid_hit_the_edges_and_hold_durations() -> None:
    base = schema_examples.minimal_input(SCHEMA)
    found = schema_examples.boundary_inputs(SCHEMA, base)
    assert found and all(not schema_examples.errors(v, SCHEMA) for v in found)
    values = [(k, v[k]) for v in found for k in v if k not in base or v[k] != base[k]]
    assert ("n", 0) not in values or base["n"] != 0  # zero is the base here
    assert ("n", -5) in values and ("n", 5) in values and ("n", -1) in values
    assert ("text", "x" * 12) in values and any(k == "text" and not str(v).isascii() for k, v in values)
    assert ("maybe", None) in values and ("text", "") not in values  # "" is the base
    assert all(k != "seconds" for k, _ in values)
    assert schema_examples.duration_fields(SCHEMA) == {"seconds"}


def test_the_search_is_seeded_bounded_and_shrinks() -> None:
    strategy = schema_examples.input_strategy(SCHEMA, {"n": 0, "text": ""})
    seen: list[dict] = []

    def fails(value: dict) -> bool:
        seen.append(value)
        return value["n"] < -2 and len(value["text"]) >= 3

    first = schema_examples.search(strategy, fails, examples=40, seed=7)
    again = schema_examples.search(strategy, fails, examples=40, seed=7)
    assert first == again == {"n": -3, "text": "000"}
    assert all(not schema_examples.errors(v, SCHEMA) for v in seen)
    assert all("seconds" not in v for v in seen)
    assert schema_examples.search(strategy, lambda v: False, examples=10, seed=0) is None


def _many_has_more() -> bool:
    from hypothesis.internal.conjecture import utils as cu

    return hasattr(cu.many, "more")


@pytest.mark.xfail(
    not _many_has_more(),  # pinned where the installed hypothesis lacks it (6.155.2 still has it; the newest does not)
    strict=True,
    reason="hypothesis-jsonschema 0.23.1 calls cu.many(...).more(), removed in newer hypothesis releases: "
    "AttributeError: 'many' object has no attribute 'more' for any object schema (schema_examples composes objects itself)",
)
def test_upstream_hypothesis_jsonschema_draws_objects() -> None:
    from hypothesis_jsonschema import from_schema

    schema_examples.search(from_schema(SCHEMA), lambda v: True, examples=1)


def test_mining_descriptions_prompts_and_validator_errors() -> None:
    assert mine("the operation, one of: +, -, *, /") == ["+", "-", "*", "/"]
    assert mine("Move up|down|left|right or say [wait]")[:5] == ["up", "down", "left", "right", "wait"]
    assert mine("Good. Next: 7") == [7]
    error = (
        "Tool input validation error: [{'type': 'literal_error', 'loc': ('direction',), "
        "'msg': \"Input should be 'up', 'down' or 'left'\", 'input': ''}]"
    )
    assert validation_hints(error, ["direction", "steps"]) == {"direction": ["up", "down", "left"]}


def test_the_player_learns_allowed_values_from_a_validator_only() -> None:
    tool = {"name": "move", "input_schema": {"type": "object", "properties": {"direction": {"type": "string"}}, "required": ["direction"]}}
    player = Player.build([tool], prompt="Find the exit.", task={})
    name, first = player.next_input()
    assert name == "move"
    player.observe(
        "move",
        {"ok": False, "reason": "input_validation", "error": "[{'loc': ('direction',), 'msg': \"Input should be 'north' or 'south'\"}]"},
    )
    assert player.next_input() == ("move", {"direction": "north"})
    player.observe("move", {"ok": True, "output": {"blocks": [{"type": "text", "text": "A wall. Try 'south'."}], "finished": False}})
    assert player.next_input() == ("move", {"direction": "south"})


def test_every_boundary_class_is_in_the_first_round_so_a_short_budget_keeps_control_characters() -> None:
    """Issue 24: a command tool that hung on control characters was missed once the list grew and the budget cut it."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]}
    base = {"a": "x", "b": "x"}
    rounds = schema_examples.boundary_rounds(schema, base)
    assert [r for r, _ in rounds] == sorted(r for r, _ in rounds)  # round by round
    first = [value for r, value in rounds if r == 0]
    for name, values in schema_examples.BOUNDARY_CLASSES:
        for prop in ("a", "b"):
            assert {**base, prop: values[0]} in first, (name, prop)
    cut = schema_examples.boundary_inputs(schema, base)[: len(first)]
    assert {**base, "a": "\x03"} in cut and {**base, "b": "\x03"} in cut


def test_a_failing_input_is_shrunk_through_smaller_valid_inputs() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}, "n": {"type": "integer"}}}
    base = {"answer": "a", "n": 1}
    drawn = {"answer": "y" * 400, "n": 1}
    simpler = schema_examples.simpler_inputs(schema, drawn, base)
    assert simpler and all(schema_examples.size(v) < schema_examples.size(drawn) for v in simpler)
    assert all(not schema_examples.errors(v, schema) and v["n"] == 1 for v in simpler)  # only what differs from base
    assert {"answer": "y" * 200, "n": 1} in simpler and {"answer": "", "n": 1} not in simpler  # minLength holds
    assert schema_examples.simpler_inputs(schema, base, base) == []


def test_a_shrunk_failure_must_tell_of_the_same_bug() -> None:
    from orsbench.checks.explore import _same_failure

    assert _same_failure(
        "SSE error event: 'ascii' codec can't encode characters in position 0-3",
        "SSE error event: 'ascii' codec can't encode character '\\xe9' in position 0",
    )
    assert not _same_failure("SSE error event: 'int' object is not subscriptable", "SSE error event: list index out of range")
