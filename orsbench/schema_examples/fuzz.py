"""Boundary inputs and the seeded hypothesis search the checker's fuzz uses.

:func:`boundary_inputs` changes one property of a valid input at a time to an
edge value (empty, whitespace, non-ASCII, very long, JSON written in a string,
numbers as strings, numeric bounds); :func:`input_strategy` draws valid inputs
with hypothesis-jsonschema; :func:`search` finds the smallest one a tool fails on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from orsbench.protocol import JSON
from orsbench.schema_examples.resolve import NoInput, expand, is_number, object_view, properties
from orsbench.schema_examples.validate import errors

#: A long string: longer than any prompt field a tool is likely to expect, short enough for one request.
LONG_STRING_LENGTH = 10_000
#: A numeric string longer than Python's ``int()`` accepts (4,300 digits since 3.11): a scorer that
#: parses an answer as a number raises ``ValueError`` on it instead of grading it.
LONG_NUMERIC_LENGTH = 5_000
#: Strings on the edges real tools mishandle: empty, whitespace only, non-ASCII (accents, CJK, emoji,
#: right-to-left), control-ish characters, very long; strings that hold JSON (a scorer that
#: ``json.loads`` an answer and indexes the result), numbers written as strings (a scorer that takes
#: ``"12"`` for an option number), and numeric strings too long for an int64 or for ``int()``.
BOUNDARY_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "   ",
    "\t\n",
    "é漢字🙂",
    "مرحبا",
    "0",
    "-1",
    "12",
    "3.5",
    "{}",
    "[1]",
    '{"a": 1}',
    "null",
    "9" * 40,
    "1" * LONG_NUMERIC_LENGTH,
    "x" * LONG_STRING_LENGTH,
)
#: Numbers on the edges: zero, negatives, one, large, fractional.
BOUNDARY_NUMBERS: tuple[float, ...] = (0, -1, 1, -(2**31), 2**31, 0.5, -0.5, 1e12)


def _leaf_boundaries(node: Any, root: JSON) -> list[Any]:
    """Edge values for one property, before validation: bounds, zero, negatives, empty/long/non-ASCII, null."""
    node = expand(node, root, 0) if isinstance(node, dict) else node
    if not isinstance(node, dict):
        return []
    out: list[Any] = []
    if node.get("enum"):
        out += list(node["enum"])
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    for key in ("anyOf", "oneOf"):
        for member in node.get(key) or []:
            out += _leaf_boundaries(member, root)
    if "string" in kinds:
        low, high = node.get("minLength"), node.get("maxLength")
        out += list(BOUNDARY_STRINGS)
        if isinstance(low, int):
            out += ["x" * low, "é" * low]
        if isinstance(high, int):
            out += ["x" * high, "é" * high, "x" * (high + 1)]
    if "integer" in kinds or "number" in kinds:
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = node.get(key)
            if is_number(bound):
                out += [bound, bound + 1, bound - 1]
        out += [v for v in BOUNDARY_NUMBERS if "number" in kinds or float(v).is_integer()]
        out = [int(v) if "number" not in kinds and is_number(v) and float(v).is_integer() else v for v in out]
    if "boolean" in kinds:
        out += [True, False]
    if "array" in kinds:
        out += [[]]
    if "null" in kinds:
        out.append(None)
    return out


_DURATION = re.compile(r"\b(seconds?|secs?|sleep|wait|delay|timeout|duration|how long|ms|milliseconds?)\b", re.I)


def duration_fields(schema: Any) -> set[str]:
    """Numeric properties that ask the tool to take time (``seconds``, "how long to wait", ...).

    The fuzz holds them at the minimal input's value: a tool that sleeps for the
    2**31 seconds it was asked to is doing its job, not hanging.
    """
    out = set()
    for name, node in properties(schema).items():
        text = f"{name} {node.get('description', '') if isinstance(node, dict) else ''}".replace("_", " ")
        if _DURATION.search(text):
            out.add(name)
    return out


def boundary_inputs(schema: Any, base: JSON) -> list[JSON]:
    """Valid inputs that each change one property of ``base`` to an edge value, smallest first.

    Every input returned validates against ``schema``; optional properties are
    tried too (a tool that raises when an optional field is ``null`` is still a
    tool that raises on valid input). Duration-like properties keep their value
    (:func:`duration_fields`).
    """
    if not isinstance(schema, dict):
        return []
    view = object_view(schema, schema)
    out: list[JSON] = []
    seen = {json.dumps(base, sort_keys=True)}
    held = duration_fields(schema)
    for name, node in (view.get("properties") or {}).items():
        if name in held:
            continue
        for value in _leaf_boundaries(node, schema):
            candidate = {**base, name: value}
            key = json.dumps(candidate, sort_keys=True, default=repr)
            if key in seen or errors(candidate, schema):
                continue
            seen.add(key)
            out.append(candidate)
    return sorted(out, key=lambda c: len(json.dumps(c, default=repr)))


def can_fuzz() -> bool:
    """Whether hypothesis and hypothesis-jsonschema are installed (the ``conformance`` extra)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in ("hypothesis", "hypothesis_jsonschema"))
    except ImportError:  # an import hook that refuses the package
        return False


def input_strategy(schema: Any, base: JSON | None = None) -> Any:
    """A hypothesis strategy of valid inputs for ``schema`` (hypothesis-jsonschema), or ``None``.

    hypothesis-jsonschema 0.23.1 cannot draw *objects* under hypothesis ≥ 6.150
    (it calls the removed ``many.more()``; pinned in tests/test_fuzz_tools.py),
    so objects are composed here with ``fixed_dictionaries`` from
    hypothesis-jsonschema strategies per property, and every drawn value is
    filtered through the full schema. Duration-like properties are held at
    ``base``'s value (or left out). ``None`` when no strategy can be made (an
    unsupported keyword, a remote ``$ref``, an unsatisfiable schema).
    """
    if schema is None:
        return None
    try:
        held = duration_fields(schema)
        strategy = _strategy(schema, schema, 0, held={k: v for k, v in (base or {}).items() if k in held}, drop=held)
        return strategy.filter(lambda value: not errors(value, schema))
    except Exception:  # noqa: BLE001 - any schema hypothesis-jsonschema refuses: no fuzz, boundaries still run
        return None


def _strategy(node: Any, root: JSON, depth: int, held: JSON | None = None, drop: set[str] = frozenset()) -> Any:
    from hypothesis import strategies as st
    from hypothesis_jsonschema import from_schema

    if depth > 6:
        raise NoInput("too deep to fuzz")
    expanded = expand(node, root, 0) if isinstance(node, dict) else node
    if isinstance(expanded, dict) and (expanded.get("type") == "object" or "properties" in expanded):
        props = expanded.get("properties") or {}
        required = [n for n in expanded.get("required") or [] if n in props]
        held = held or {}
        fixed = {n: st.just(held[n]) if n in held else _strategy(props[n], root, depth + 1) for n in required}
        optional = {n: _strategy(v, root, depth + 1) for n, v in props.items() if n not in required and n not in drop}
        return st.fixed_dictionaries(fixed, optional=optional)
    if isinstance(expanded, dict) and expanded.get("type") == "array" and isinstance(expanded.get("items"), dict):
        # Arrays of objects reach the same removed many.more() inside hypothesis-jsonschema: compose them here too.
        items = _strategy(expanded["items"], root, depth + 1)
        low = int(expanded.get("minItems") or 0)
        high = expanded.get("maxItems")
        unique = {"unique_by": lambda v: json.dumps(v, sort_keys=True)} if expanded.get("uniqueItems") else {}
        return st.lists(items, min_size=low, max_size=min(int(high), low + 5) if high is not None else low + 5, **unique)
    for key in ("anyOf", "oneOf"):
        branches = expanded.get(key) if isinstance(expanded, dict) else None
        if isinstance(branches, list) and branches and not {"type", "properties", "items", "allOf"} & set(expanded):
            return st.one_of([_strategy(branch, root, depth + 1) for branch in branches])
    leaf = expanded if isinstance(expanded, dict) else {}
    defs = {k: v for k, v in root.items() if k in ("$defs", "definitions")}
    return from_schema({**defs, **leaf}, allow_x00=False)


def search(
    strategy: Any,
    fails: Any,
    *,
    examples: int,
    seed: int = 0,
) -> Any | None:
    """The smallest value of ``strategy`` for which ``fails(value)`` is true, or ``None``.

    Seeded and bounded: at most ``examples`` generated values, then hypothesis
    shrinks the first failure it finds (``fails`` can stop the shrinking by
    answering ``False`` once its own call budget is spent).
    """
    import random

    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample, Unsatisfiable

    config = settings(
        max_examples=max(1, examples),
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    from hypothesis.errors import Flaky

    first: list[Any] = []

    def remembered(value: Any) -> bool:
        failed = bool(fails(value))
        if failed and not first:
            first.append(value)
        return failed

    try:
        return find(strategy, remembered, settings=config, random=random.Random(seed))
    except (NoSuchExample, Unsatisfiable):
        return None
    except Flaky:
        # A server that fails an input once and not when asked again (a timeout, a race): the first
        # failing input is the finding; it just cannot be shrunk reliably.
        return first[0] if first else None
