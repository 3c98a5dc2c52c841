"""Validating against a tool's ``input_schema`` with ``jsonschema``, and telling why a schema is unusable."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from orsbench.schema_examples.resolve import NoInput, local_refs, resolve_ref


#: Validators built, by the schema's JSON: checking a schema against its metaschema costs milliseconds, and the
#: fuzz and the example builders validate every value they make against the same few schemas.
_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}
#: At most this many validators are kept (oldest first out).
VALIDATOR_CACHE = 256


def validator(schema: Any) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (Draft 2020-12 unless ``$schema`` says otherwise); raises ``SchemaError``."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        key = None
    found = _VALIDATORS.get(key) if key is not None else None
    if found is not None:
        return found
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    built = cls(copy.deepcopy(schema))  # its own copy: a caller changing its schema later changes no cached one
    if key is not None:
        if len(_VALIDATORS) >= VALIDATOR_CACHE:
            _VALIDATORS.pop(next(iter(_VALIDATORS)))
        _VALIDATORS[key] = built
    return built


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
    for ref in local_refs(schema):
        if not ref.startswith("#"):
            problems.append(f"$ref {ref!r} is not local; clients cannot resolve it offline")
            continue
        try:
            resolve_ref(ref, schema)
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
