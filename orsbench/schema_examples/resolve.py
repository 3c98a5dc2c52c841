"""Resolving a schema: local ``$ref``, ``allOf`` merged, an object schema's properties.

Schemas are untrusted input: recursion is bounded (:data:`MAX_DEPTH`) and only
local ``$ref`` (``#/...``) is followed — a client cannot fetch a remote one
offline either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orsbench.protocol import JSON

MAX_DEPTH = 24


class NoInput(Exception):
    """No valid input can be built; the message says why (it becomes a skip reason)."""


def local_refs(node: Any) -> Iterable[str]:
    """Every ``$ref`` string anywhere in ``node`` (local or not: the caller judges)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from local_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from local_refs(value)


def resolve_ref(ref: str, root: JSON) -> Any:
    """The node a local JSON-pointer ``$ref`` names inside ``root``; :class:`NoInput` when it does not resolve."""
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


def merge(a: JSON, b: JSON) -> JSON:
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


def expand(schema: Any, root: JSON, depth: int) -> Any:
    """Inline ``$ref`` and ``allOf`` at the top of ``schema``."""
    if depth > MAX_DEPTH:
        raise NoInput("the schema nests too deeply (a recursive $ref?)")
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = resolve_ref(schema["$ref"], root)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        base = expand(target, root, depth + 1)
        if base is False:
            raise NoInput(f"{schema['$ref']} is the false schema")
        schema = merge(base if isinstance(base, dict) else {}, rest)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = expand(part, root, depth + 1)
            if part is False:
                raise NoInput("allOf contains the false schema")
            if isinstance(part, dict):
                merged = merge(merged, part)
        schema = merged
    return schema


def object_view(schema: Any, root: JSON) -> JSON:
    """``schema`` with its top-level ``$ref``/``allOf`` inlined (``{}`` when that fails or it is not an object)."""
    try:
        expanded = expand(schema, root, 0)
    except NoInput:
        return {}
    return expanded if isinstance(expanded, dict) else {}


def properties(schema: Any) -> JSON:
    """The properties of an object schema, ``$ref``/``allOf`` resolved (``{}`` for anything else)."""
    if not isinstance(schema, dict):
        return {}
    props = object_view(schema, schema).get("properties")
    return props if isinstance(props, dict) else {}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
