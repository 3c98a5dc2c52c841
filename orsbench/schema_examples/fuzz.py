"""Boundary inputs and the seeded hypothesis search the checker's fuzz uses.

:func:`boundary_inputs` changes one property of a valid input at a time to an
edge value, class by class (control characters, non-ASCII, JSON written in a
string, numbers as strings, very long, whitespace, empty; numeric bounds);
:func:`input_strategy` draws valid inputs with hypothesis-jsonschema;
:func:`search` finds the smallest one a tool fails on, and
:func:`simpler_inputs` is what a failing boundary input is shrunk through.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from orsbench.protocol import JSON
from orsbench.schema_examples.resolve import NoInput, expand, is_number, object_view, properties
from orsbench.schema_examples.validate import errors

#: A long string: longer than any prompt field a tool is likely to expect, short enough for one request.
LONG_STRING_LENGTH = 10_000
#: A numeric string longer than Python's ``int()`` accepts (4,300 digits since 3.11): a scorer that
#: parses an answer as a number raises ``ValueError`` on it instead of grading it.
LONG_NUMERIC_LENGTH = 5_000
#: Strings on the edges real tools mishandle, by class. Every class is tried on every string
#: property in every fuzz run, before any class's second value (:func:`boundary_inputs`): a class
#: that found a real bug is never left to chance (issue 24: a command tool that hung on control
#: characters was found, then missed once the list grew and the run's budget cut it off). Each
#: class's first value is the one that found a bug.
BOUNDARY_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # a terminal-like tool waits for the rest of an escape sequence; Ctrl-C, DEL, a bare carriage return
    ("control", ("\x03", "\x1b[0m", "\x7f", "\r")),
    # accents, CJK, emoji, right-to-left: an ASCII-only encode raises
    ("non-ascii", ("é漢字🙂", "مرحبا")),
    # a scorer that json.loads an answer and indexes the result
    ("json", ('{"a": 1}', "{}", "[1]", "null")),
    # a scorer that takes "12" for an option number
    ("number", ("12", "0", "-1", "3.5")),
    # longer than an int64, and than Python's int() accepts
    ("long-number", ("9" * 40, "1" * LONG_NUMERIC_LENGTH)),
    ("long", ("x" * LONG_STRING_LENGTH,)),
    ("whitespace", (" ", "\t\n", "   ")),
    ("empty", ("",)),
)
#: Every boundary string, class by class.
BOUNDARY_STRINGS: tuple[str, ...] = tuple(value for _, values in BOUNDARY_CLASSES for value in values)
#: Numbers on the edges: zero, negatives, one, large, fractional.
BOUNDARY_NUMBERS: tuple[float, ...] = (0, -1, 1, -(2**31), 2**31, 0.5, -0.5, 1e12)


def _leaf_boundaries(node: Any, root: JSON) -> list[tuple[str, Any]]:
    """Edge values for one property, each with its class, before validation.

    Strings by :data:`BOUNDARY_CLASSES`, then the length bounds; numeric bounds and edges; both
    booleans; an empty array; null; the enum's members.
    """
    node = expand(node, root, 0) if isinstance(node, dict) else node
    if not isinstance(node, dict):
        return []
    out: list[tuple[str, Any]] = []
    if node.get("enum"):
        out += [("enum", v) for v in node["enum"]]
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    for key in ("anyOf", "oneOf"):
        for member in node.get(key) or []:
            out += _leaf_boundaries(member, root)
    if "string" in kinds:
        low, high = node.get("minLength"), node.get("maxLength")
        out += [(name, v) for name, values in BOUNDARY_CLASSES for v in values]
        if isinstance(low, int):
            out += [("length", "x" * low), ("length", "é" * low)]
        if isinstance(high, int):
            out += [("length", "x" * high), ("length", "é" * high), ("length", "x" * (high + 1))]
    if "integer" in kinds or "number" in kinds:
        numbers: list[Any] = []
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = node.get(key)
            if is_number(bound):
                numbers += [bound, bound + 1, bound - 1]
        numbers += [v for v in BOUNDARY_NUMBERS if "number" in kinds or float(v).is_integer()]
        out += [("numeric", int(v) if "number" not in kinds and is_number(v) and float(v).is_integer() else v) for v in numbers]
    if "boolean" in kinds:
        out += [("boolean", True), ("boolean", False)]
    if "array" in kinds:
        out.append(("array", []))
    if "null" in kinds:
        out.append(("null", None))
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
    """Valid inputs that each change one property of ``base`` to an edge value, round by round.

    The first round holds each class's first value (:data:`BOUNDARY_CLASSES` order, then each
    property's own: length bounds, numbers, ...) for every property, the second round each class's
    second value, and so on: a fuzz budget that cuts the list keeps every class and drops only
    later values of each. Every input returned validates against ``schema``; optional properties
    are tried too (a tool that raises when an optional field is ``null`` still raises on valid
    input). Duration-like properties keep their value (:func:`duration_fields`).
    """
    return [candidate for _, candidate in boundary_rounds(schema, base)]


def boundary_rounds(schema: Any, base: JSON) -> list[tuple[int, JSON]]:
    """:func:`boundary_inputs`, each with its round (0: the first value of its class)."""
    if not isinstance(schema, dict):
        return []
    view = object_view(schema, schema)
    seen = {json.dumps(base, sort_keys=True)}
    held = duration_fields(schema)
    class_rank = {name: i for i, (name, _) in enumerate(BOUNDARY_CLASSES)}
    ranked: list[tuple[tuple[int, int, int], JSON]] = []  # (round, class, property) → input
    for prop_rank, (name, node) in enumerate((view.get("properties") or {}).items()):
        if name in held:
            continue
        rounds: dict[str, int] = {}
        for kind, value in _leaf_boundaries(node, schema):
            candidate = {**base, name: value}
            key = json.dumps(candidate, sort_keys=True, default=repr)
            if key in seen or errors(candidate, schema):
                continue
            seen.add(key)
            rounds[kind] = rounds.get(kind, -1) + 1
            ranked.append(((rounds[kind], class_rank.get(kind, len(class_rank)), prop_rank), candidate))
    return [(rank[0], candidate) for rank, candidate in sorted(ranked, key=lambda item: item[0])]


def size(value: Any) -> int:
    """How big an input reads: the length of its JSON (what "simplest" means when a failure is shrunk)."""
    return len(json.dumps(value, ensure_ascii=False, default=repr))


def simpler_inputs(schema: Any, value: JSON, base: JSON) -> list[JSON]:
    """Valid inputs smaller than ``value`` that differ from it in one property, simplest first.

    What a failing input is shrunk through: for each property where ``value`` differs from
    ``base``, that property set to each smaller edge value (the values :func:`boundary_inputs`
    draws from), then — for a string — with a half, a quarter, ... of it cut out (delta
    debugging: a crash on 10,000 characters usually needs far fewer). Only inputs the schema accepts.
    """
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return []
    props = object_view(schema, schema).get("properties") or {}
    current = size(value)
    out: list[JSON] = []
    seen = {json.dumps(value, sort_keys=True, default=repr)}
    for name, node in props.items():
        if name not in value or value.get(name) == base.get(name):
            continue
        tries = [v for _, v in _leaf_boundaries(node, schema)]
        text = value[name]
        if isinstance(text, str):
            step = len(text) // 2
            while step >= 1:
                tries += [text[:i] + text[i + step :] for i in range(0, len(text), step)][:8]
                step //= 2
        for candidate_value in tries:
            candidate = {**value, name: candidate_value}
            key = json.dumps(candidate, sort_keys=True, default=repr)
            if key in seen or size(candidate) >= current or errors(candidate, schema):
                continue
            seen.add(key)
            out.append(candidate)
    return sorted(out, key=lambda c: (size(c), json.dumps(c, sort_keys=True, default=repr)))


_PRELOAD: threading.Thread | None = None


def preload() -> None:
    """Import hypothesis and hypothesis-jsonschema on a background thread, once (no-op without them).

    The imports cost about half a second of CPU; started while the play probe waits on the server,
    they are done by the time the fuzz needs them. :func:`input_strategy` waits for it.
    """
    global _PRELOAD
    if _PRELOAD is None and can_fuzz():
        _PRELOAD = threading.Thread(target=_import_fuzz_libraries, name="orsbench-fuzz-import", daemon=True)
        _PRELOAD.start()


def _import_fuzz_libraries() -> None:
    try:
        import hypothesis_jsonschema  # noqa: F401 - imports hypothesis too
    except Exception:  # noqa: BLE001 - input_strategy imports again and says why
        pass


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
    if _PRELOAD is not None:
        _PRELOAD.join()
    try:
        held = duration_fields(schema)
        strategy = _strategy(schema, schema, 0, held={k: v for k, v in (base or {}).items() if k in held}, drop=held)
        return strategy.filter(lambda value: _encodable(value) and not errors(value, schema))
    except Exception:  # noqa: BLE001 - any schema hypothesis-jsonschema refuses: no fuzz, boundaries still run
        return None


def _encodable(value: Any) -> bool:
    """Whether ``value`` can be sent as UTF-8 JSON (no lone surrogate in any string)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError):
        return False
    return True


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
    # codec=None: with codec="utf-8" hypothesis first derives every encodable code point (3-9 s
    # on a cold cache, kept in ./.hypothesis); only lone surrogates do not encode, and
    # input_strategy filters those out.
    return from_schema({**defs, **leaf}, allow_x00=False, codec=None)


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
