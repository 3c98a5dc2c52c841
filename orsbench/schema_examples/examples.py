"""Building examples: the minimal valid input, variants seeded from a task, and a deliberately invalid one.

Checks that need a tool call cannot know the tool: they read its
``input_schema`` and build the smallest value that validates — required
properties only, defaults and enum/const values where given, the lowest number
the bounds allow, the shortest string, the fewest array items. ``anyOf``/``oneOf``,
``type`` lists, ``prefixItems`` (and draft-07's list-form ``items``) and common ``format``\\ s are handled. Every value
built is validated against the full schema before it is used, so a generator
mistake can only lead to a skip ("no input could be built"), never to a false
accusation against the server. Patterns are tried against a few candidate
strings rather than solved.
"""

from __future__ import annotations

import contextvars
import copy
import math
import re
from collections.abc import Iterable
from typing import Any

from orsbench.protocol import JSON
from orsbench.schema_examples.resolve import MAX_DEPTH, NoInput, expand, is_number, merge, object_view
from orsbench.schema_examples.validate import errors, schema_problems

#: A value for each ``format`` that JSON Schema tools commonly check.
FORMAT_EXAMPLES = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "orsbench@example.com",
    "idn-email": "orsbench@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "/a",
    "regex": "a",
}
_PATTERN_CANDIDATES = (
    "a",
    "",
    "0",
    "1",
    "A",
    "a1",
    "abc",
    "orsbench",
    "x_1",
    "2024-01-01",
    "00000000-0000-4000-8000-000000000000",
)


#: The text strings are filled with while :func:`minimal_input` runs (``""``: the shortest string).
_FILL: contextvars.ContextVar[str] = contextvars.ContextVar("orsbench_schema_fill", default="")


def minimal_input(schema: Any, *, text: str = "") -> JSON:
    """The smallest JSON object that validates against a tool's ``input_schema`` (``{}`` for ``null``).

    ``text`` fills strings where the schema allows it (the load driver sends
    ``"orsbench"`` so its requests look like real ones); by default strings are
    as short as the schema allows.
    """
    if schema is None:
        return {}
    token = _FILL.set(text)
    try:
        return _minimal(schema)
    finally:
        _FILL.reset(token)


def _minimal(schema: Any) -> JSON:
    if not isinstance(schema, dict):
        raise NoInput(f"input_schema is a JSON {type(schema).__name__}")
    problems = schema_problems(schema)
    if problems:
        raise NoInput(problems[0])
    value = _build(schema, schema, 0)
    if value is None and not errors({}, schema):
        value = {}
    if not isinstance(value, dict):
        raise NoInput(f"the smallest value this schema accepts is not an object: {value!r}")
    problems = errors(value, schema)
    if problems:
        raise NoInput(f"the input built ({value!r}) does not validate: {problems[0]}")
    return value


def variants(schema: Any, base: JSON, seeds: Iterable[Any]) -> list[JSON]:
    """Valid inputs that put each seed value (e.g. a string from the task) into each property ``base`` fills.

    Only the properties the minimal input had to fill (the required ones) are
    varied: an optional knob such as ``seconds`` is left at its default, so a
    task's numbers cannot turn into a six-second sleep.
    """
    if not isinstance(schema, dict):
        return []
    props = [name for name in object_view(schema, schema).get("properties") or {} if name in base]
    out: list[JSON] = []
    seen = {repr(sorted(base.items()))}
    for value in seeds:
        for name in props:
            candidate = {**base, name: value}
            key = repr(sorted(candidate.items(), key=lambda kv: kv[0]))
            if key in seen or errors(candidate, schema):
                continue
            seen.add(key)
            out.append(candidate)
    return out


def invalid_input(schema: Any, base: JSON, padding: str = "orsbench") -> JSON | None:
    """An object that does *not* validate against ``schema``, carrying ``padding`` somewhere in it.

    Tries, in order: leaving out every required property (and sending only the
    padding), then giving one property a value of a type it cannot have. ``None``
    when the schema accepts anything (e.g. a tool with no input).
    """
    if not isinstance(schema, dict):
        return None
    view = object_view(schema, schema)
    marker = {"orsbench_padding": padding}
    if view.get("required"):
        candidate = dict(marker)
        if errors(candidate, schema):
            return candidate
    for name in view.get("properties") or {}:
        for wrong in (marker, [padding], padding, 1.5, True):
            candidate = {**base, name: wrong}
            if errors(candidate, schema) and not any(e.startswith("schema:") for e in errors(candidate, schema)):
                return candidate
    return None


def _valid(value: Any, schema: Any, root: JSON) -> bool:
    """Whether ``value`` satisfies the sub-schema ``schema`` (resolving refs against ``root``)."""
    if schema is True or schema == {}:
        return True
    wrapped = {
        **{k: v for k, v in root.items() if k in ("$defs", "definitions", "$schema")},
        **(schema if isinstance(schema, dict) else {}),
    }
    if schema is False:
        return False
    return not errors(value, wrapped)


def _build(schema: Any, root: JSON, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NoInput("the schema nests too deeply (a recursive $ref?)")
    if schema is True or schema is None:
        return None
    if schema is False:
        raise NoInput("a required part of the schema is `false` (accepts nothing)")
    schema = expand(schema, root, depth)
    if not isinstance(schema, dict):
        return None
    if "default" in schema and _valid(schema["default"], schema, root):
        return copy.deepcopy(schema["default"])
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _branch(schema, key, root, depth)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else [_infer(schema)]
    ordered = [k for k in kinds if k != "null"] + (["null"] if "null" in kinds else [])
    last: NoInput | None = None
    for one in ordered:
        try:
            return _build_type(one, schema, root, depth)
        except NoInput as exc:
            last = exc
    if last is not None:
        raise last
    return None


def _branch(schema: JSON, key: str, root: JSON, depth: int) -> Any:
    rest = {k: v for k, v in schema.items() if k != key}
    branches = schema[key]
    # Prefer a concrete value to null: a realistic call exercises the tool.
    ordered = sorted(branches, key=lambda b: isinstance(b, dict) and b.get("type") == "null")
    reasons = []
    for branch in ordered:
        merged = merge(rest, branch) if isinstance(branch, dict) else branch
        try:
            value = _build(merged, root, depth + 1)
        except NoInput as exc:
            reasons.append(str(exc))
            continue
        if _valid(value, {**rest, key: branches}, root):
            return value
        reasons.append(f"{value!r} does not satisfy {key}")
    raise NoInput(f"no branch of {key} can be built ({'; '.join(reasons[:3])})")


def _infer(schema: JSON) -> str | None:
    if any(k in schema for k in ("properties", "required", "additionalProperties", "minProperties")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "contains")):
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None


def _build_type(kind: str | None, schema: JSON, root: JSON, depth: int) -> Any:
    if kind is None or kind == "null":
        return None
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "string":
        return _string(schema)
    if kind == "array":
        return _array(schema, root, depth)
    if kind == "object":
        return _object(schema, root, depth)
    raise NoInput(f"unknown type {kind!r}")


def _number(schema: JSON, *, integer: bool) -> int | float:
    """The number closest to 0 inside the bounds (a multiple of ``multipleOf`` when given)."""
    lo, hi = -math.inf, math.inf
    lo_open = hi_open = False
    if is_number(schema.get("minimum")):
        lo = schema["minimum"]
    if is_number(schema.get("exclusiveMinimum")) and schema["exclusiveMinimum"] >= lo:
        lo, lo_open = schema["exclusiveMinimum"], True
    if is_number(schema.get("maximum")):
        hi = schema["maximum"]
    if is_number(schema.get("exclusiveMaximum")) and schema["exclusiveMaximum"] <= hi:
        hi, hi_open = schema["exclusiveMaximum"], True
    if integer:
        lo = lo if lo == -math.inf else (math.floor(lo) + 1 if lo_open else math.ceil(lo))
        hi = hi if hi == math.inf else (math.ceil(hi) - 1 if hi_open else math.floor(hi))
        lo_open = hi_open = False
    if lo > hi or (lo == hi and (lo_open or hi_open)):
        raise NoInput(f"no number satisfies the bounds of {schema!r}")
    if lo <= 0 <= hi and not (lo_open and lo == 0) and not (hi_open and hi == 0):
        value: float = 0
    elif lo > 0 or (lo_open and lo == 0):
        value = lo if not lo_open else lo + min(1.0, (hi - lo) / 2)
    else:
        value = hi if not hi_open else hi - min(1.0, (hi - lo) / 2)
    step = schema.get("multipleOf")
    if is_number(step) and step > 0:
        value = math.ceil(value / step) * step if value >= 0 else math.floor(value / step) * step
        if value > hi or value < lo or (hi_open and value == hi) or (lo_open and value == lo):
            raise NoInput(f"no multiple of {step} lies inside the bounds of {schema!r}")
    if integer or float(value).is_integer():
        return int(value)
    return value


def _string(schema: JSON) -> str:
    low = int(schema.get("minLength") or 0)
    high = schema.get("maxLength")
    fmt = schema.get("format")
    candidates = []
    if isinstance(fmt, str) and fmt in FORMAT_EXAMPLES:
        candidates.append(FORMAT_EXAMPLES[fmt])
    fill = _FILL.get()
    if fill and not fmt:
        candidates.append(fill if high is None else fill[: int(high)])
    candidates.append("a" * low)
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise NoInput(f"pattern {pattern!r} is not a regular expression Python can read: {exc}") from None
        candidates += list(_PATTERN_CANDIDATES) + [c * max(low, 1) for c in ("a", "0", "A")]
        candidates = [c for c in candidates if regex.search(c)]
        if not candidates:
            raise NoInput(f"cannot build a string matching pattern {pattern!r}")
    for value in candidates:
        if len(value) >= low and (high is None or len(value) <= high):
            return value
    raise NoInput(f"no string satisfies minLength {low} / maxLength {high}")


def _array(schema: JSON, root: JSON, depth: int) -> list[Any]:
    items: list[Any] = []
    prefix = schema.get("prefixItems")
    extra = schema.get("items", True)
    if not isinstance(prefix, list) and isinstance(extra, list):
        prefix, extra = extra, schema.get("additionalItems", True)  # draft-07's tuple: items as a list
    if isinstance(prefix, list):
        items = [_build(p, root, depth + 1) for p in prefix]
    low = int(schema.get("minItems") or 0)
    if len(items) < low:
        if extra is False:
            raise NoInput("minItems exceeds prefixItems and items is false")
        if schema.get("uniqueItems") and low - len(items) > 1:
            raise NoInput("cannot build several distinct array items")
        while len(items) < low:
            items.append(_build(extra, root, depth + 1))
    if "contains" in schema and not any(_valid(i, schema["contains"], root) for i in items):
        items.append(_build(schema["contains"], root, depth + 1))
    return items


def _object(schema: JSON, root: JSON, depth: int) -> JSON:
    props = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    extra = schema.get("additionalProperties", True)
    value: JSON = {}
    for name in required:
        sub = props.get(name, extra if isinstance(extra, dict) else True)
        value[name] = _build(sub, root, depth + 1)
    low = int(schema.get("minProperties") or 0)
    for name, sub in props.items():
        if len(value) >= low:
            break
        if name not in value:
            value[name] = _build(sub, root, depth + 1)
    if len(value) < low:
        raise NoInput(f"minProperties {low} exceeds the properties this schema declares")
    return value
