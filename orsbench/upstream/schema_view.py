"""What a JSON Schema tells a model, reduced to comparable facts.

A server's ``input_schema`` (pydantic output: ``$ref``/``$defs``, ``anyOf``,
``prefixItems``, ...) and ``transformers.utils.get_json_schema(bound_method)``
(``nullable``, type lists, ``anyOf``) spell the same facts differently. Both
are reduced here to one canonical tree, and each binder check compares one
*aspect* of it, so a failing check names exactly what the model lost:

* ``names`` and ``required``: the parameter names, and which are required (a top level that
  takes any other key as well — ``additionalProperties`` not ``false`` — adds :data:`ANY_KEY`;
  a top level that is a union of objects has the names of every member, required where every
  member requires them);
* ``types``: each parameter's set of JSON types (``null`` left out:
  optionality is the ``required`` aspect's business);
* ``enums``: each parameter's allowed values;
* ``items``: element types of containers (array ``items``, tuple
  ``prefixItems``, dict values via ``additionalProperties``);
* ``nesting``: properties and required sets of nested objects, at any depth;
* ``constraints``: ``minimum``/``maximum``/length/item-count bounds.

Any node may be a boolean schema (``true``: any value, ``false``: none), read
here as a schema that says nothing; ``items`` given as a list (draft-07's tuple)
is read as ``prefixItems``.

The module also writes example values that satisfy a schema (for calling a
tool with only its required arguments).
"""

from __future__ import annotations

from typing import Any

from orsbench.protocol import JSON


ASPECTS = ("names", "required", "types", "enums", "items", "nesting", "constraints")
CONSTRAINT_KEYWORDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "multipleOf",
)
#: In the ``names`` aspect: the top level accepts keys beyond its properties (``additionalProperties`` not ``false``).
ANY_KEY = "*any other key*"
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


def resolve(node: Any, defs: JSON, seen: frozenset[str] = frozenset()) -> Any:
    """Inline local ``$ref``s (``#/$defs/X`` or ``#/definitions/X``) and merge ``allOf``; cycles stop at the ref."""
    if isinstance(node, list):
        return [resolve(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: resolve(v, defs, seen) for k, v in node.items() if k not in ("$ref", "$defs", "definitions", "allOf")}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict):
            out = {**resolve(target, defs, seen | {ref}), **out}
    for part in node.get("allOf") or []:
        if isinstance(part, dict):
            out = {**resolve(part, defs, seen), **out}
    return out


def parameters(schema: JSON | None) -> JSON:
    """An object schema with every ``$ref`` inlined; ``None`` (no input) is an empty object.

    A top level that is a union of object schemas (``anyOf``/``oneOf``, no ``properties`` of its own) is read
    as one object: every member's properties, required where every member requires them.
    """
    schema = schema or {}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    resolved = resolve(schema, defs)
    if not resolved.get("properties"):
        objects = [m for m in members(resolved) if m is not resolved and isinstance(m.get("properties"), dict)]
        if objects:
            merged: JSON = {}
            for member in objects:
                for name, prop in member["properties"].items():
                    merged.setdefault(name, prop)
            required = set.intersection(*(set(m.get("required") or []) for m in objects))
            resolved = {**resolved, "properties": merged, **({"required": sorted(required)} if required else {})}
    resolved.setdefault("properties", {})
    return resolved


def as_node(node: Any) -> JSON:
    """A schema node as an object: a boolean schema (``true``/``false``) or anything else says nothing (``{}``)."""
    return node if isinstance(node, dict) else {}


def tuple_items(array: JSON) -> list[Any] | None:
    """A tuple's member schemas: ``prefixItems`` (2020-12), or ``items`` given as a list (draft-07 and earlier)."""
    for key in ("prefixItems", "items"):
        if isinstance(array.get(key), list):
            return list(array[key])
    return None


def members(node: Any) -> list[JSON]:
    """The alternatives of a node: its ``anyOf``/``oneOf`` members, else the node itself (a boolean schema: ``{}``)."""
    node = as_node(node)
    alternatives = [m for key in ("anyOf", "oneOf") for m in node.get(key) or [] if isinstance(m, dict)]
    return alternatives or [node]


def types_of(node: Any) -> list[str]:
    node = as_node(node)
    found: set[str] = set()
    for member in members(node):
        kind = member.get("type")
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        elif "enum" in member or "const" in member:
            values = member.get("enum", [member.get("const")])
            found.update(value_type(v) for v in values)
        elif member is not node:
            found.update(types_of(member))
    found.discard("null")
    return sorted(found)


def value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def enum_of(node: Any) -> list[Any] | None:
    values: list[Any] = []
    found = False
    for member in members(node):
        if "enum" in member:
            found = True
            values += [v for v in member["enum"] if v is not None]
        elif "const" in member:
            found = True
            values.append(member["const"])
    return sorted(values, key=repr) if found else None


def _member_of_type(node: Any, kind: str) -> JSON | None:
    for member in members(node):
        declared = member.get("type")
        if declared == kind or (isinstance(declared, list) and kind in declared):
            return member
        if kind == "object" and declared is None and "properties" in member:
            return member
    return None


def items_of(node: Any) -> JSON | None:
    """Element types: ``{"items": [...]}``, ``{"prefixItems": [[...], ...]}``, ``{"values": [...]}``."""
    out: JSON = {}
    array = _member_of_type(node, "array")
    if array is not None:
        if (parts := tuple_items(array)) is not None:
            out["prefixItems"] = [types_of(p) for p in parts]
        elif isinstance(array.get("items"), dict):
            out["items"] = types_of(array["items"])
    obj = _member_of_type(node, "object")
    if obj is not None and isinstance(obj.get("additionalProperties"), dict):
        out["values"] = types_of(obj["additionalProperties"])
    return out or None


def shape_of(node: Any) -> JSON | None:
    """Nested object structure below a node: properties (recursively) and required sets."""
    out: JSON = {}
    obj = _member_of_type(node, "object")
    if obj is not None and obj.get("properties"):
        out["properties"] = {
            name: {"types": types_of(child), **({"shape": s} if (s := shape_of(child)) else {})}
            for name, child in sorted(obj["properties"].items())
        }
        out["required"] = sorted(obj.get("required") or [])
    array = _member_of_type(node, "array")
    if array is not None:
        if isinstance(array.get("items"), dict) and (inner := shape_of(array["items"])):
            out["items"] = inner
        for i, part in enumerate(tuple_items(array) or []):
            if isinstance(part, dict) and (inner := shape_of(part)):
                out.setdefault("prefixItems", {})[str(i)] = inner
    return out or None


def constraints_of(node: Any) -> JSON | None:
    out = {k: m[k] for m in members(node) for k in CONSTRAINT_KEYWORDS if k in m}
    return out or None


def view(schema: JSON | None) -> JSON:
    """Every aspect of a tool's parameter schema (see the module docstring)."""
    params = parameters(schema)
    props: JSON = params["properties"]
    names = list(props)
    open_ = params.get("additionalProperties") not in (None, False)
    return {
        "names": sorted(names) + ([ANY_KEY] if open_ else []),
        "required": sorted(params.get("required") or []),
        "types": {n: types_of(props[n]) for n in names},
        "enums": {n: e for n in names if (e := enum_of(props[n])) is not None},
        "items": {n: i for n in names if (i := items_of(props[n])) is not None},
        "nesting": {n: s for n in names if (s := shape_of(props[n])) is not None},
        "constraints": {n: c for n in names if (c := constraints_of(props[n])) is not None},
    }


def descriptions(schema: JSON | None) -> JSON:
    """Parameter descriptions, as the server wrote them (parameters without one are left out)."""
    props = parameters(schema)["properties"]
    return {n: p["description"] for n, p in props.items() if isinstance(as_node(p).get("description"), str)}


# -- example values ---------------------------------------------------------------------
def required_example(schema: JSON | None, *, nested: bool = False) -> JSON:
    """Values for the required parameters only, from the one example builder.

    :func:`orsbench.schema_examples.minimal_input` (strings ``"x"``): required
    properties, defaults and enum/const values where given, the lowest number
    the bounds allow, validated against the full schema. Inside nested objects,
    single-valued properties (a discriminator such as ``kind: "circle"``) are
    filled in too: a tagged union needs its tag to pick a member even where the
    tag has a default.
    """
    from orsbench import schema_examples

    value = schema_examples.minimal_input(schema, text="x")
    return _tags(value, parameters(schema), top=not nested)


def _tags(value: Any, node: JSON, *, top: bool = False) -> Any:
    """``value`` with the single-valued properties of its nested objects spelled out."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name, prop in (node.get("properties") or {}).items():
        prop = as_node(prop)
        tag = "const" in prop or (isinstance(prop.get("enum"), list) and len(prop["enum"]) == 1)
        if tag and not top:
            out.setdefault(name, prop["const"] if "const" in prop else prop["enum"][0])
        elif name in out and isinstance(out[name], dict):
            branch = next(
                (m for m in members(prop) if isinstance(m.get("properties"), dict) and _fits(out[name], m)), prop
            )
            out[name] = _tags(out[name], branch)
    return out


def _fits(value: JSON, member: JSON) -> bool:
    """Whether ``value``'s single-valued properties agree with this union member's."""
    for name, prop in member["properties"].items():
        if name in value and isinstance(prop, dict) and "const" in prop and value[name] != prop["const"]:
            return False
    return True
