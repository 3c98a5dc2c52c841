"""schema-edges: one tool per JSON-Schema shape a client's tool binder crashes on or lies about (docs/protocol.md §13.9).

``schema-zoo`` covers what pydantic writes for ordinary Python types; these are
the shapes that are just as valid but rarer — hand-written and MCP schemas, a
draft-07 document, a pydantic ``RootModel`` — and that a binder written against
the common case reads wrongly: it raises while listing the tools (so the whole
episode is lost), or it shows the model a schema the server does not have (so
the model's calls are refused, or sent without what it meant to send).

Every tool is correct for ``orsbench check`` (a valid JSON Schema of an object,
its draft named where it is not 2020-12) and echoes what it received, so a
client that drops, renames or coerces an argument is seen on the wire. The
scripted episode calls each tool once with an input its schema accepts, then
``done()`` wins (reward 1, finished). :data:`EDGES` names the hazard of each tool.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool
from orsbench.scenarios.schema_zoo import received

#: Tasks per split (every task plays the same episode: the hazards are in the tool listing).
TASKS = 2

# -- the params models (what the server validates with) and the schemas it serves -----------------


class PairParams(BaseModel):
    pair: tuple[str, int]


#: ``items`` as a list: the draft-07 (and earlier) spelling of a tuple, which 2020-12 writes as ``prefixItems``.
PAIR_SCHEMA: JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "pair": {
            "type": "array",
            "items": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
            "description": "A name and a count, in that order.",
        }
    },
    "required": ["pair"],
    "additionalProperties": False,
}


class AnyValueParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: Any


#: Boolean schemas as property schemas: ``true`` (any value) and ``false`` (the property must be absent).
ANY_VALUE_SCHEMA: JSON = {
    "type": "object",
    "properties": {"value": True, "never": False},
    "required": ["value"],
}


class EitherParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    id: int | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EitherParams:
        if (self.name is None) == (self.id is None):
            raise ValueError("give exactly one of name or id")
        return self


#: The top level is not an object schema but a union of two (what a pydantic ``RootModel`` of a union writes):
#: no ``type`` and no ``properties`` up there for a binder that reads only those.
EITHER_SCHEMA: JSON = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Look the record up by name."}},
            "required": ["name"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"id": {"type": "integer", "description": "Look the record up by id."}},
            "required": ["id"],
            "additionalProperties": False,
        },
    ]
}


class QuietParams(BaseModel):
    word: str = Field(description="")


class FreeFormParams(BaseModel):
    """Any keys at all: ``additionalProperties: true`` and no ``properties``."""

    model_config = ConfigDict(extra="allow")


#: No properties, any keys (what a ``dict[str, Any]`` of options, or an MCP tool taking free-form JSON, serves).
FREE_FORM_SCHEMA: JSON = {"type": "object", "additionalProperties": True}


class NullableParams(BaseModel):
    value: str | None = Field(description="A string, or null to clear it; required either way.")


class ExclusiveParams(BaseModel):
    ratio: float = Field(gt=0, lt=1, description="Strictly between 0 and 1.")


class CountedParams(BaseModel):
    tags: list[str] = Field(min_length=2, max_length=3, description="Two or three tags.")


class ConstParams(BaseModel):
    version: Literal["v1"] = Field(description="The protocol version; only v1 exists.")


#: Tool name → the hazard it carries (docs/protocol.md §13.9; test ids).
EDGES: dict[str, str] = {
    "pair": "items as a list (draft-07 tuple), the schema naming its draft",
    "any_value": "boolean property schemas: value is true (anything), never is false (must be absent)",
    "either": "the top level is an anyOf of two object schemas, not an object schema",
    "quiet": "an empty description, on the tool and on its parameter",
    "free_form": "additionalProperties: true with no properties",
    "nullable": "a required parameter whose anyOf includes null, called with null",
    "exclusive": "exclusiveMinimum / exclusiveMaximum (numbers, as 2020-12 writes them)",
    "counted": "minItems / maxItems on an array",
    "const": "const: the one value the parameter may take",
}


def _answer(args: BaseModel | None) -> ToolResult:
    """What each edge tool answers: the arguments that arrived (``received``); a free-form tool's extras too."""
    if isinstance(args, FreeFormParams):
        extra = dict(args.model_extra or {})
        shown = json.dumps(extra, sort_keys=True, ensure_ascii=False)
        return ToolResult([text(f"sent: {shown}")], metadata={"sent": sorted(extra)})
    return received(args)


@register
class SchemaEdges(Scenario):
    """One tool per schema edge (:data:`EDGES`), then ``done()`` wins."""

    name = "schema-edges"
    summary = (
        "one tool per schema shape binders crash on or lie about: list-form items, boolean property schemas, a union at "
        "the top level, an empty description, free-form objects, a nullable required parameter, exclusive bounds, "
        "minItems/maxItems, const; done() wins"
    )

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        return [{"id": f"edges-{split}-{i}"} for i in range(TASKS)]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Task {episode.task['id']}: call each tool once with a valid input, then done().")]

    @tool(PairParams, schema=PAIR_SCHEMA)
    def pair(self, episode: Episode, args: PairParams) -> ToolResult:
        """Record a name and a count."""
        return _answer(args)

    @tool(AnyValueParams, schema=ANY_VALUE_SCHEMA)
    def any_value(self, episode: Episode, args: AnyValueParams) -> ToolResult:
        """Store any JSON value."""
        return _answer(args)

    @tool(EitherParams, schema=EITHER_SCHEMA)
    def either(self, episode: Episode, args: EitherParams) -> ToolResult:
        """Look a record up by name or by id (exactly one of them)."""
        return _answer(args)

    @tool(QuietParams)
    def quiet(self, episode: Episode, args: QuietParams) -> ToolResult:
        return _answer(args)

    @tool(FreeFormParams, schema=FREE_FORM_SCHEMA)
    def free_form(self, episode: Episode, args: FreeFormParams) -> ToolResult:
        """Set options: any keys, any values."""
        return _answer(args)

    @tool(NullableParams)
    def nullable(self, episode: Episode, args: NullableParams) -> ToolResult:
        """Set a value, or clear it with null."""
        return _answer(args)

    @tool(ExclusiveParams)
    def exclusive(self, episode: Episode, args: ExclusiveParams) -> ToolResult:
        """Set a ratio strictly between 0 and 1."""
        return _answer(args)

    @tool(CountedParams)
    def counted(self, episode: Episode, args: CountedParams) -> ToolResult:
        """Label with two or three tags."""
        return _answer(args)

    @tool(ConstParams)
    def const(self, episode: Episode, args: ConstParams) -> ToolResult:
        """Declare the protocol version."""
        return _answer(args)

    @tool()
    def done(self, episode: Episode, args: None) -> ToolResult:
        """Finish the episode. Reward 1 and finished."""
        return ToolResult([text("done")], reward=1.0, finished=True)


#: The scripted episode's inputs, tool by tool: each one its schema accepts (the last call, done(), takes none).
INPUTS: dict[str, JSON] = {
    "pair": {"pair": ["apples", 3]},
    "any_value": {"value": {"nested": [1, "two", None]}},
    "either": {"id": 7},
    "quiet": {"word": "hush"},
    "free_form": {"colour": "red", "size": 3},
    "nullable": {"value": None},
    "exclusive": {"ratio": 0.5},
    "counted": {"tags": ["a", "b"]},
    "const": {"version": "v1"},
}


def answer_text(tool_name: str) -> str:
    """What ``tool_name`` answers for its scripted input (the text a client must hand on verbatim)."""
    scenario = SchemaEdges()
    spec = scenario.all_tools[tool_name]
    assert spec.params is not None
    result = _answer(spec.params.model_validate(INPUTS[tool_name]))
    return "".join(block["text"] for block in result.blocks)
