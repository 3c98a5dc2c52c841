"""The one JSON-Schema example builder: minimal, boundary, fuzzed and invalid tool inputs.

Minimal valid (and deliberately invalid) tool inputs from a server's own JSON Schemas,
plus the *boundary* inputs and the seeded hypothesis strategy (hypothesis-jsonschema)
the checker's fuzz uses to find inputs on which a tool raises or hangs
(:func:`boundary_inputs`, :func:`input_strategy`). The checker
(``orsbench.checks``), the load driver and the conformance suite build their
examples here.

Checks that need a tool call cannot know the tool: they read its
``input_schema`` and build the smallest value that validates — required
properties only, defaults and enum/const values where given, the lowest number
the bounds allow, the shortest string, the fewest array items. ``$ref`` into
``$defs``/``definitions``, ``allOf``, ``anyOf``/``oneOf``, ``type`` lists,
``prefixItems`` and common ``format``\\ s are handled. Every value built is
validated with ``jsonschema`` against the full schema before it is used, so a
generator mistake can only lead to a skip ("no input could be built"), never to
a false accusation against the server.

Schemas are untrusted input: recursion is bounded, only local ``$ref`` is
followed, and patterns are tried against a few candidate strings rather than
solved.
"""

from __future__ import annotations

import contextvars
import copy
import json
import math
import re
from collections.abc import Iterable
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from orsbench.protocol import JSON

_MAX_DEPTH = 24

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


class NoInput(Exception):
    """No valid input can be built; the message says why (it becomes a skip reason)."""


def validator(schema: Any) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (Draft 2020-12 unless ``$schema`` says otherwise); raises ``SchemaError``."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def schema_problems(schema: Any) -> list[str]:
    """Why ``schema`` is not a usable tool input schema (empty when it is)."""
    if schema is None:
        return []
    if not isinstance(schema, dict):
        return [f"input_schema is a JSON {type(schema).__name__}, not an object or null"]
    problems: list[str] = []
    try:
        validator(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        problems.append(f"not a valid JSON Schema at {where}: {exc.message}")
        return problems
    except Exception as exc:  # noqa: BLE001 - e.g. an unknown $schema dialect
        problems.append(f"cannot be loaded as a JSON Schema: {type(exc).__name__}: {exc}")
        return problems
    kind = schema.get("type")
    if kind is not None and kind != "object" and not (isinstance(kind, list) and "object" in kind):
        problems.append(f"type is {kind!r}; a tool input must be a JSON object")
    for ref in _refs(schema):
        if not ref.startswith("#"):
            problems.append(f"$ref {ref!r} is not local; clients cannot resolve it offline")
            continue
        try:
            _resolve(ref, schema)
        except NoInput as exc:
            problems.append(str(exc))
    return problems


def errors(value: Any, schema: Any) -> list[str]:
    """Validation errors of ``value`` against ``schema`` (``["schema: ..."]`` when the schema is broken)."""
    if schema is None:
        return [] if isinstance(value, dict) else ["input must be an object"]
    try:
        return [e.message for e in validator(schema).iter_errors(value)]
    except SchemaError as exc:
        return [f"schema: {exc.message}"]
    except Exception as exc:  # noqa: BLE001 - unresolvable $ref and the like
        return [f"schema: {type(exc).__name__}: {exc}"]


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


def properties(schema: Any) -> JSON:
    """The properties of an object schema, ``$ref``/``allOf`` resolved (``{}`` for anything else)."""
    if not isinstance(schema, dict):
        return {}
    props = _object_view(schema, schema).get("properties")
    return props if isinstance(props, dict) else {}


def variants(schema: Any, base: JSON, seeds: Iterable[Any]) -> list[JSON]:
    """Valid inputs that put each seed value (e.g. a string from the task) into each property ``base`` fills.

    Only the properties the minimal input had to fill (the required ones) are
    varied: an optional knob such as ``seconds`` is left at its default, so a
    task's numbers cannot turn into a six-second sleep.
    """
    if not isinstance(schema, dict):
        return []
    props = [name for name in _object_view(schema, schema).get("properties") or {} if name in base]
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
    view = _object_view(schema, schema)
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


# -- building ---------------------------------------------------------------------
def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(ref: str, root: JSON) -> Any:
    if not ref.startswith("#"):
        raise NoInput(f"$ref {ref!r} is not local")
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise NoInput(f"$ref {ref!r} does not resolve")
    return node


def _merge(a: JSON, b: JSON) -> JSON:
    """A shallow merge good enough for ``allOf`` of object schemas (properties and required are unioned)."""
    out = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        elif key == "required" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties") and key in out:
            out[key] = max(out[key], value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties") and key in out:
            out[key] = min(out[key], value)
        else:
            out[key] = value
    return out


def _expand(schema: Any, root: JSON, depth: int) -> Any:
    """Inline ``$ref`` and ``allOf`` at the top of ``schema``."""
    if depth > _MAX_DEPTH:
        raise NoInput("the schema nests too deeply (a recursive $ref?)")
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        base = _expand(target, root, depth + 1)
        if base is False:
            raise NoInput(f"{schema['$ref']} is the false schema")
        schema = _merge(base if isinstance(base, dict) else {}, rest)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _expand(part, root, depth + 1)
            if part is False:
                raise NoInput("allOf contains the false schema")
            if isinstance(part, dict):
                merged = _merge(merged, part)
        schema = merged
    return schema


def _object_view(schema: Any, root: JSON) -> JSON:
    try:
        expanded = _expand(schema, root, 0)
    except NoInput:
        return {}
    return expanded if isinstance(expanded, dict) else {}


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
    if depth > _MAX_DEPTH:
        raise NoInput("the schema nests too deeply (a recursive $ref?)")
    if schema is True or schema is None:
        return None
    if schema is False:
        raise NoInput("a required part of the schema is `false` (accepts nothing)")
    schema = _expand(schema, root, depth)
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
        merged = _merge(rest, branch) if isinstance(branch, dict) else branch
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
    if _is_num(schema.get("minimum")):
        lo = schema["minimum"]
    if _is_num(schema.get("exclusiveMinimum")) and schema["exclusiveMinimum"] >= lo:
        lo, lo_open = schema["exclusiveMinimum"], True
    if _is_num(schema.get("maximum")):
        hi = schema["maximum"]
    if _is_num(schema.get("exclusiveMaximum")) and schema["exclusiveMaximum"] <= hi:
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
    if _is_num(step) and step > 0:
        value = math.ceil(value / step) * step if value >= 0 else math.floor(value / step) * step
        if value > hi or value < lo or (hi_open and value == hi) or (lo_open and value == lo):
            raise NoInput(f"no multiple of {step} lies inside the bounds of {schema!r}")
    if integer or float(value).is_integer():
        return int(value)
    return value


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    if isinstance(prefix, list):
        items = [_build(p, root, depth + 1) for p in prefix]
    low = int(schema.get("minItems") or 0)
    extra = schema.get("items", True)
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


# -- boundaries and fuzzing -------------------------------------------------------------
#: A long string: longer than any prompt field a tool is likely to expect, short enough for one request.
LONG_STRING_LENGTH = 10_000
#: Strings on the edges real tools mishandle: empty, whitespace, non-ASCII (accents, CJK, emoji,
#: right-to-left), control-ish characters, and very long.
BOUNDARY_STRINGS: tuple[str, ...] = ("", " ", "é漢字🙂", "مرحبا", "\t\n", "0", "-1", "x" * LONG_STRING_LENGTH)
#: Numbers on the edges: zero, negatives, one, large, fractional.
BOUNDARY_NUMBERS: tuple[float, ...] = (0, -1, 1, -(2**31), 2**31, 0.5, -0.5, 1e12)


def _leaf_boundaries(node: Any, root: JSON) -> list[Any]:
    """Edge values for one property, before validation: bounds, zero, negatives, empty/long/non-ASCII, null."""
    node = _expand(node, root, 0) if isinstance(node, dict) else node
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
            if _is_num(bound):
                out += [bound, bound + 1, bound - 1]
        out += [v for v in BOUNDARY_NUMBERS if "number" in kinds or float(v).is_integer()]
        out = [int(v) if "number" not in kinds and _is_num(v) and float(v).is_integer() else v for v in out]
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
    view = _object_view(schema, schema)
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
    expanded = _expand(node, root, 0) if isinstance(node, dict) else node
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
