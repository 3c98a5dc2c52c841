"""What a JSON Schema tells a model, reduced to comparable facts.

A server's ``input_schema`` (pydantic output: ``$ref``/``$defs``, ``anyOf``,
``prefixItems``, ...) and ``transformers.utils.get_json_schema(bound_method)``
(``nullable``, type lists, ``anyOf``) spell the same facts differently. Both
are reduced here to one canonical tree, and each binder check compares one
*aspect* of it, so a failing check names exactly what the model lost:

* ``names`` and ``required``: the parameter names, and which are required;
* ``types``: each parameter's set of JSON types (``null`` left out:
  optionality is the ``required`` aspect's business);
* ``enums``: each parameter's allowed values;
* ``items``: element types of containers (array ``items``, tuple
  ``prefixItems``, dict values via ``additionalProperties``);
* ``nesting``: properties and required sets of nested objects, at any depth;
* ``constraints``: ``minimum``/``maximum``/length/item-count bounds.

The module also writes example values that satisfy a schema (for calling a
tool with only its required arguments).
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

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
    """An object schema with every ``$ref`` inlined; ``None`` (no input) is an empty object."""
    schema = schema or {}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    resolved = resolve(schema, defs)
    resolved.setdefault("properties", {})
    return resolved


def members(node: JSON) -> list[JSON]:
    """The alternatives of a node: its ``anyOf``/``oneOf`` members, else the node itself."""
    alternatives = [m for key in ("anyOf", "oneOf") for m in node.get(key) or [] if isinstance(m, dict)]
    return alternatives or [node]


def types_of(node: JSON) -> list[str]:
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


def enum_of(node: JSON) -> list[Any] | None:
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


def _member_of_type(node: JSON, kind: str) -> JSON | None:
    for member in members(node):
        declared = member.get("type")
        if declared == kind or (isinstance(declared, list) and kind in declared):
            return member
        if kind == "object" and declared is None and "properties" in member:
            return member
    return None


def items_of(node: JSON) -> JSON | None:
    """Element types: ``{"items": [...]}``, ``{"prefixItems": [[...], ...]}``, ``{"values": [...]}``."""
    out: JSON = {}
    array = _member_of_type(node, "array")
    if array is not None:
        if isinstance(array.get("prefixItems"), list):
            out["prefixItems"] = [types_of(p) for p in array["prefixItems"]]
        elif isinstance(array.get("items"), dict):
            out["items"] = types_of(array["items"])
    obj = _member_of_type(node, "object")
    if obj is not None and isinstance(obj.get("additionalProperties"), dict):
        out["values"] = types_of(obj["additionalProperties"])
    return out or None


def shape_of(node: JSON) -> JSON | None:
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
        for i, part in enumerate(array.get("prefixItems") or []):
            if isinstance(part, dict) and (inner := shape_of(part)):
                out.setdefault("prefixItems", {})[str(i)] = inner
    return out or None


def constraints_of(node: JSON) -> JSON | None:
    out = {k: m[k] for m in members(node) for k in CONSTRAINT_KEYWORDS if k in m}
    return out or None


def view(schema: JSON | None) -> JSON:
    """Every aspect of a tool's parameter schema (see the module docstring)."""
    params = parameters(schema)
    props: JSON = params["properties"]
    names = list(props)
    return {
        "names": sorted(names),
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
    return {n: p["description"] for n, p in props.items() if isinstance(p.get("description"), str)}


# -- example values ---------------------------------------------------------------------
def example(node: JSON) -> Any:
    """A value the schema accepts: the first enum value, the lower bound, the minimal container."""
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return next((v for v in node["enum"] if v is not None), node["enum"][0])
    for key in ("anyOf", "oneOf"):
        members = [m for m in node.get(key) or [] if isinstance(m, dict) and m.get("type") != "null"]
        if members:
            return example(members[0])
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and "properties" in node:
        kind = "object"
    if kind == "string":
        return "x" * max(1, int(node.get("minLength", 1)))
    if kind == "integer":
        low = node.get("minimum", node["exclusiveMinimum"] + 1 if "exclusiveMinimum" in node else 0)
        high = node.get("maximum", node["exclusiveMaximum"] - 1 if "exclusiveMaximum" in node else low)
        return int(min(max(low, 0), high)) if low <= 0 <= high else int(low)
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        if low is not None and high is not None:
            return (low + high) / 2
        if low is not None:
            return float(low) + (1.0 if "exclusiveMinimum" in node else 0.0)
        if high is not None:
            return float(high) - (1.0 if "exclusiveMaximum" in node else 0.0)
        return 0.0
    if kind == "boolean":
        return False
    if kind == "array":
        if isinstance(node.get("prefixItems"), list):
            return [example(p) for p in node["prefixItems"]]
        count = int(node.get("minItems", 0))
        return [example(node.get("items") or {})] * count
    if kind == "object":
        return required_example(node, nested=True)
    return None


def required_example(schema: JSON | None, *, nested: bool = False) -> JSON:
    """Values for the required parameters only.

    Inside nested objects, single-valued properties (a discriminator such as
    ``kind: "circle"``) are filled in too: a tagged union needs its tag to
    pick a member even where the tag has a default.
    """
    params = parameters(schema)
    required = set(params.get("required") or [])
    out: JSON = {}
    for name, prop in params["properties"].items():
        tag = "const" in prop or (isinstance(prop.get("enum"), list) and len(prop["enum"]) == 1)
        if name in required or (nested and tag):
            out[name] = example(prop)
    return out
