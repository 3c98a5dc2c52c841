"""schema-zoo: one tool per hazard a JSON-Schema-to-Python tool binder meets.

Clients such as TRL's ``OpenRewardSpec`` turn each ORS tool into a Python
method whose signature is generated from the tool's ``input_schema``; the
model then sees ``transformers.utils.get_json_schema(method)``. Everything a
pydantic environment can legitimately declare must survive that round trip.
Each tool here exercises one hazard (``HAZARDS`` names it), so a failure
points at exactly one binder rule:

* names: Python keywords as tool and parameter names (``class``, ``from``,
  ``lambda``, from pydantic aliases), names that are not identifiers
  (``file-path``, MCP-style ``a.b/c``), names that collide with the adapter
  (``reset``, ``get_reward``, ``reward``, ``finished``, ``close``, ``_private``);
* types: nested models (``$ref``/``$defs``), ``list[Model]``, tuples
  (``prefixItems``), ``enum``/``Literal``, ``minimum``/``maximum``,
  ``anyOf[int, str]``, discriminated unions (``oneOf``), ``type: [..]`` lists,
  ``dict[str, float]``, ``Optional[list]``, optional parameters with and
  without a JSON ``default`` (pydantic ``default_factory`` writes none),
  ``input_schema: null``;
* text: descriptions with quotes, triple quotes, newlines, a ``Returns:``
  line and non-ASCII characters.

Plus tools for the client's result handling: ``score`` (scripted rewards,
including a boolean reward), ``explode`` (raises → SSE ``error``),
``long_text`` (a result whose second SSE chunk starts with spaces) and a
task-scoped ``inspect_task`` only odd tasks expose (a client that probes task
0 alone never binds it).

Three small variants cover dataset derivation and session failures:
``schema-zoo-index`` (``list_tasks`` unsupported: index API only),
``schema-zoo-prompt`` (task specs carrying ``prompt``, ``task_index`` and
``task_spec`` keys — the adapter's own column and ``reset()`` names — and an
object whose keys differ from task to task),
``broken-session`` (a task whose construction fails → ``/create`` 500, a task
whose ``setup()`` fails without the ``API_TOKEN`` secret) and
``schema-conflict`` (one task-scoped tool name with two schemas across tasks;
the mock engine serves it, the SDK twin cannot — see its docstring).

Every tool echoes the argument names it received (``sent``) so a test can
see what a client forwarded, including ``null`` for omitted optionals.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, Tool, ToolResult, text, tool

# -- models ------------------------------------------------------------------------


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Point(BaseModel):
    x: int = Field(description="Horizontal coordinate.")
    y: int = Field(description="Vertical coordinate.")


class Style(BaseModel):
    color: Color = Field(description="Stroke colour.")
    width: float = Field(default=1.0, description="Stroke width.")


class Circle(BaseModel):
    kind: Literal["circle"] = "circle"
    radius: float = Field(description="Radius.")


class Square(BaseModel):
    kind: Literal["square"] = "square"
    side: float = Field(description="Side length.")


class LabelParams(BaseModel):
    label: str = Field(description="A label.")


class RouteParams(BaseModel):
    from_: str = Field(alias="from", description="Where the route starts.")
    lambda_: int = Field(default=0, alias="lambda", description="Decay rate.")


class PathParams(BaseModel):
    path: str = Field(description="A file path.")


class QueryParams(BaseModel):
    query: str = Field(description="A search query.")


class DashedParams(BaseModel):
    file_path: str = Field(alias="file-path", description="Path of the file to open.")


class RestartParams(BaseModel):
    hard: bool = Field(default=False, description="Restart from scratch.")


class ValueParams(BaseModel):
    value: float = Field(description="A value.")


class NoteParams(BaseModel):
    note: str = Field(description="A note.")


class NestedParams(BaseModel):
    origin: Point = Field(description="Where to start.")
    style: Style | None = Field(default=None, description="Optional stroke style.")


class ModelListParams(BaseModel):
    points: list[Point] = Field(description="Points of the polyline.")


class UnionModelParams(BaseModel):
    shape: Circle | Square = Field(discriminator="kind", description="The shape to draw.")


class TupleParams(BaseModel):
    pair: tuple[str, int] = Field(description="A name and a count.")
    view_range: tuple[int, int] | None = Field(default=None, description="First and last line to show.")


class EnumParams(BaseModel):
    mode: Literal["fast", "slow"] = Field(description="Speed mode.")
    color: Color = Field(description="A colour.")
    level: Literal[1, 2, 3] = Field(default=2, description="Verbosity level.")


class BoundedParams(BaseModel):
    count: int = Field(ge=1, le=10, description="How many, 1 to 10.")
    name: str = Field(min_length=1, max_length=8, description="A short name.")
    ratio: float = Field(default=0.5, gt=0, lt=1, description="A ratio strictly between 0 and 1.")


class UnionParams(BaseModel):
    key: int | str = Field(description="A numeric or textual key.")
    fallback: int | str | None = Field(default=None, description="Used when the key is missing.")


class TypeListParams(BaseModel):
    value: int | str
    flag: bool | None = None


#: Served instead of ``TypeListParams``'s own schema: JSON Schema ``type`` lists,
#: which pydantic never writes but hand-written or MCP schemas do.
TYPE_LIST_SCHEMA: JSON = {
    "type": "object",
    "properties": {
        "value": {"type": ["integer", "string"], "description": "An integer or a string."},
        "flag": {"type": ["boolean", "null"], "default": None, "description": "An optional flag."},
    },
    "required": ["value"],
}


class OptionalParams(BaseModel):
    query: str = Field(description="What to search for.")
    limit: int = Field(default=10, description="Most results to return.")
    tags: list[str] = Field(default_factory=list, description="Tags to filter by.")
    plots: list[int] = Field(default_factory=list, description="Plot numbers to include.")
    weights: dict[str, float] = Field(default_factory=dict, description="Per-field weights.")
    note: str | None = Field(default=None, description="Free text.")


class DictParams(BaseModel):
    weights: dict[str, float] = Field(description="Weight per feature.")
    labels: dict[str, list[int]] | None = Field(default=None, description="Label ids per group.")


class OptionalListParams(BaseModel):
    ids: list[int] | None = Field(default=None, description="Record ids.")
    names: list[str] | None = Field(default=None, description="Record names.")


class QuotedParams(BaseModel):
    text: str = Field(
        description='The text to quote: may contain "double", \'single\' and """triple""" quotes.\n'
        "Note: a second line that starts like a docstring field, ünïcödé ✓ 日本語."
    )


class EchoTwiceParams(BaseModel):
    text: str = Field(description="The string to echo back.")
    times: int = Field(default=1, ge=1, description="How many times to repeat it.")


class ScoreParams(BaseModel):
    value: float | None = Field(default=None, description="Reward to return (null: no reward).")
    finish: bool = Field(default=False, description="End the episode.")
    as_bool: bool = Field(default=False, description="Return the reward as a JSON boolean (value > 0).")


class ExplodeParams(BaseModel):
    message: str = Field(description="Message of the exception the tool raises.")


class LongTextParams(BaseModel):
    size: int = Field(default=6000, ge=2, le=100_000, description="Length of the text to return.")


class InspectParams(BaseModel):
    field: Literal["id", "level"] = Field(description="Which task field to show.")


# -- helpers -----------------------------------------------------------------------


def received(args: BaseModel | None) -> ToolResult:
    """Echo what arrived: the wire names of the fields the client sent, and their values."""
    if args is None:
        return ToolResult([text("sent: []")], metadata={"sent": []})
    fields = type(args).model_fields
    sent = sorted(fields[name].alias or name for name in args.model_fields_set)
    values = args.model_dump(mode="json", by_alias=True, include=args.model_fields_set)
    return ToolResult([text(f"sent: {json.dumps(values, sort_keys=True, ensure_ascii=False)}")], metadata={"sent": sent})


def zoo_task(split: str, i: int) -> JSON:
    task: JSON = {
        "id": f"zoo-{split}-{i}",
        "level": i % 3,
        "tags": ["zoo", split] + (["odd"] if i % 2 else []),
        "meta": {"rank": i, "source": "schema-zoo"},
        "file-path": f"/data/{split}/{i}.txt",
        "note": "ünïcödé ✓",
    }
    if i % 2 == 0:
        task["hint"] = f"even task {i}"  # present on some tasks only: other rows get null
    return task


#: Tool name → the hazard it exercises (documentation and test ids).
HAZARDS: dict[str, str] = {
    "class": "tool name is a Python keyword",
    "route": "parameter names are Python keywords (pydantic aliases 'from', 'lambda')",
    "file-path": "tool name is not a Python identifier",
    "a.b/c": "MCP-style tool name (dots and slashes)",
    "open_file": "parameter name is not a Python identifier ('file-path')",
    "reset": "tool name collides with the adapter's reset()",
    "get_reward": "tool name collides with GRPO's reserved get_reward()",
    "reward": "tool name collides with an adapter instance attribute",
    "finished": "tool name collides with an adapter instance attribute",
    "close": "public name a framework might also use",
    "_private": "leading underscore: hidden from GRPO's tool collection",
    "nested_model": "nested model ($ref/$defs) and optional nested model (anyOf[$ref, null])",
    "model_list": "list[Model] (items: $ref)",
    "union_model": "discriminated union of models (oneOf + discriminator)",
    "tuple_arg": "tuples (prefixItems), optional tuple",
    "enum_arg": "Literal enums, Enum via $ref, integer Literal with default",
    "bounded": "minimum/maximum/exclusive bounds and string length limits",
    "union_arg": "anyOf[int, str], optional anyOf",
    "type_list": "JSON Schema type lists (type: [integer, string])",
    "optional_args": "optional parameters with and without a JSON default (default_factory)",
    "dict_arg": "dict[str, float] (additionalProperties), optional dict of lists",
    "optional_list": "Optional[list[int]] parameters, no required ones",
    "no_input": "input_schema: null",
    "quoted_docs": "descriptions with quotes, triple quotes, newlines, a Returns: line, non-ASCII",
    "echo": "same name as the echo scenario's tool, different schema",
    "score": "scripted rewards (null, floats, a boolean) and finishing",
    "explode": "tool raises: SSE error event",
    "long_text": "result longer than one SSE chunk; the second chunk starts with spaces",
    "inspect_task": "task-scoped tool exposed by odd tasks only",
}


@register
class SchemaZoo(Scenario):
    """Every binder hazard, one tool each (see the module docstring)."""

    name = "schema-zoo"
    summary = "one tool per JSON-Schema binder hazard: keyword/non-identifier/colliding names, $ref, tuples, enums, ..."
    params_help = {"train_size": (6, "tasks in the train split"), "test_size": (2, "tasks in the test split")}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = self.params["train_size"] if split == "train" else self.params["test_size"]
        return [zoo_task(split, i) for i in range(size)]

    def task_tool_names(self, task: JSON) -> list[str]:
        return ["inspect_task"] if task.get("meta", {}).get("rank", 0) % 2 else []

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Zoo task {episode.task.get('id')}: call any tool.")]

    # -- names ----------------------------------------------------------------
    @tool(LabelParams, name="class")
    def class_(self, episode: Episode, args: LabelParams) -> ToolResult:
        """Classify something under a label."""
        return received(args)

    @tool(RouteParams)
    def route(self, episode: Episode, args: RouteParams) -> ToolResult:
        """Plan a route from a place."""
        return received(args)

    @tool(PathParams, name="file-path")
    def file_path(self, episode: Episode, args: PathParams) -> ToolResult:
        """Resolve a file path."""
        return received(args)

    @tool(QueryParams, name="a.b/c")
    def mcp_style(self, episode: Episode, args: QueryParams) -> ToolResult:
        """Search, as an MCP server named 'a.b' would expose its tool 'c'."""
        return received(args)

    @tool(DashedParams)
    def open_file(self, episode: Episode, args: DashedParams) -> ToolResult:
        """Open a file."""
        return received(args)

    @tool(RestartParams, name="reset")
    def reset_tool(self, episode: Episode, args: RestartParams) -> ToolResult:
        """Reset the board (an environment action, not the episode)."""
        return received(args)

    @tool(None, name="get_reward")
    def get_reward_tool(self, episode: Episode, args: None) -> ToolResult:
        """Report the reward so far (an environment action)."""
        return received(None)

    @tool(ValueParams, name="reward")
    def reward_tool(self, episode: Episode, args: ValueParams) -> ToolResult:
        """Propose a reward value (an environment action)."""
        return received(args)

    @tool(None, name="finished")
    def finished_tool(self, episode: Episode, args: None) -> ToolResult:
        """Ask whether the puzzle is finished (an environment action)."""
        return received(None)

    @tool(None, name="close")
    def close_tool(self, episode: Episode, args: None) -> ToolResult:
        """Close the open file (an environment action)."""
        return received(None)

    @tool(NoteParams, name="_private")
    def private_tool(self, episode: Episode, args: NoteParams) -> ToolResult:
        """Leave a note (a public tool whose name starts with an underscore)."""
        return received(args)

    # -- types ----------------------------------------------------------------
    @tool(NestedParams)
    def nested_model(self, episode: Episode, args: NestedParams) -> ToolResult:
        """Draw from an origin with an optional style."""
        return received(args)

    @tool(ModelListParams)
    def model_list(self, episode: Episode, args: ModelListParams) -> ToolResult:
        """Draw a polyline through points."""
        return received(args)

    @tool(UnionModelParams)
    def union_model(self, episode: Episode, args: UnionModelParams) -> ToolResult:
        """Draw a circle or a square."""
        return received(args)

    @tool(TupleParams)
    def tuple_arg(self, episode: Episode, args: TupleParams) -> ToolResult:
        """Show a pair and an optional line range."""
        return received(args)

    @tool(EnumParams)
    def enum_arg(self, episode: Episode, args: EnumParams) -> ToolResult:
        """Pick a mode, a colour and a level."""
        return received(args)

    @tool(BoundedParams)
    def bounded(self, episode: Episode, args: BoundedParams) -> ToolResult:
        """Take bounded numbers and a short name."""
        return received(args)

    @tool(UnionParams)
    def union_arg(self, episode: Episode, args: UnionParams) -> ToolResult:
        """Look a key up, numeric or textual."""
        return received(args)

    @tool(TypeListParams, schema=TYPE_LIST_SCHEMA)
    def type_list(self, episode: Episode, args: TypeListParams) -> ToolResult:
        """Store a value that is an integer or a string."""
        return received(args)

    @tool(OptionalParams)
    def optional_args(self, episode: Episode, args: OptionalParams) -> ToolResult:
        """Search with optional filters; only the query is required."""
        return received(args)

    @tool(DictParams)
    def dict_arg(self, episode: Episode, args: DictParams) -> ToolResult:
        """Weigh features."""
        return received(args)

    @tool(OptionalListParams)
    def optional_list(self, episode: Episode, args: OptionalListParams) -> ToolResult:
        """Fetch records by id or by name; both optional."""
        return received(args)

    @tool(None)
    def no_input(self, episode: Episode, args: None) -> ToolResult:
        """Take no input at all."""
        return received(None)

    @tool(QuotedParams)
    def quoted_docs(self, episode: Episode, args: QuotedParams) -> ToolResult:
        """Quote text: "double", 'single' and \"\"\"triple\"\"\" quotes survive.
        A second line, with ünïcödé ✓ and 日本語.
        Returns: this line is part of the description, not a section.
        Last line."""
        return received(args)

    @tool(EchoTwiceParams)
    def echo(self, episode: Episode, args: EchoTwiceParams) -> ToolResult:
        """Echo text, possibly several times (not the echo scenario's schema)."""
        return ToolResult([text(args.text * args.times)], metadata={"sent": sorted(args.model_fields_set)})

    # -- results --------------------------------------------------------------
    @tool(ScoreParams)
    def score(self, episode: Episode, args: ScoreParams) -> ToolResult:
        """Return a scripted reward, optionally finishing the episode."""
        reward: Any = args.value
        if args.as_bool and args.value is not None:
            reward = args.value > 0
        return ToolResult([text(f"reward {reward!r}")], reward=reward, finished=args.finish, metadata={"value": args.value})

    @tool(ExplodeParams)
    def explode(self, episode: Episode, args: ExplodeParams) -> ToolResult:
        """Raise an exception with the given message."""
        raise RuntimeError(args.message)

    @tool(LongTextParams)
    def long_text(self, episode: Episode, args: LongTextParams) -> ToolResult:
        """Return 'a', size-2 spaces, then 'b'."""
        return ToolResult([text(long_text_value(args.size))])

    @tool(InspectParams, shared=False)
    def inspect_task(self, episode: Episode, args: InspectParams) -> ToolResult:
        """Show one field of the current task (odd tasks only)."""
        return ToolResult([text(str(episode.task.get(args.field)))])


def long_text_value(size: int) -> str:
    """The ``long_text`` result: the second SSE chunk of the reply starts inside the spaces."""
    return "a" + " " * (size - 2) + "b"


class AnswerParams(BaseModel):
    value: str = Field(description="Your answer.")


class WordParams(BaseModel):
    word: str = Field(description="The word.")


@register
class SchemaZooIndexOnly(Scenario):
    """Tasks are available by index only: ``/tasks`` answers 400, ``/num_tasks`` and ``/task`` work."""

    name = "schema-zoo-index"
    summary = "index API only: list_tasks is not supported; num_tasks + task serve the dataset"
    params_help = {"train_size": (5, "tasks in the train split"), "test_size": (3, "tasks in the test split")}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        raise NotImplementedError("schema-zoo-index serves tasks by index only")

    def num_tasks(self, split: str) -> int:
        return int(self.params["train_size"] if split == "train" else self.params["test_size"])

    def get_task(self, split: str, index: int) -> JSON:
        count = self.num_tasks(split)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(index)
        return {"id": f"idx-{split}-{index}", "word": ("alpha", "beta", "gamma", "delta", "omega")[index % 5]}

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Task {episode.task['id']}: answer with the word {episode.task['word']!r}.")]

    @tool(WordParams)
    def answer(self, episode: Episode, args: WordParams) -> ToolResult:
        """Submit the word. Reward 1.0 if right, else 0.0; ends the episode."""
        right = args.word == episode.task["word"]
        return ToolResult([text("right" if right else "wrong")], reward=1.0 if right else 0.0, finished=True)


@register
class SchemaZooPromptKey(Scenario):
    """Task specs carry keys named like the adapter's dataset columns and ``reset()`` parameters.

    Also a ``limits`` object whose keys differ between even and odd tasks.
    """

    name = "schema-zoo-prompt"
    summary = "task specs with 'prompt', 'task_index' and 'task_spec' keys (the TRL adapter's names), and ragged objects"
    params_help = {"train_size": (4, "tasks in the train split"), "test_size": (2, "tasks in the test split")}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        size = self.params["train_size"] if split == "train" else self.params["test_size"]
        return [
            {
                "id": f"pk-{split}-{i}",
                "prompt": f"Say the number {i * 7}.",
                "task_index": 100 + i,
                "task_spec": {"id": "not-this-task", "prompt": "decoy"},
                "answer": str(i * 7),
                # An object whose keys differ between tasks (a dataset column must not invent keys).
                "limits": {"max_steps": 3} if i % 2 == 0 else {"timeout_s": 1.5},
            }
            for i in range(size)
        ]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"[{episode.task.get('id')}] {episode.task.get('prompt')}")]

    @tool(AnswerParams)
    def answer(self, episode: Episode, args: AnswerParams) -> ToolResult:
        """Submit the number. Reward 1.0 if right, else 0.0; ends the episode."""
        right = args.value.strip() == str(episode.task.get("answer"))
        return ToolResult([text("right" if right else "wrong")], reward=1.0 if right else 0.0, finished=True)


#: The secret ``broken-session``'s setup needs.
REQUIRED_SECRET = "API_TOKEN"


@register
class BrokenSession(Scenario):
    """Sessions that fail to start: in construction (``/create`` 500) or in ``setup()`` (sticky 500).

    Task 0 fails while the session is constructed (the mock engine answers
    ``/create`` with 500; the SDK twin constructs sessions without calling the
    scenario, so there it fails on ``/task_tools`` instead). Task 1's
    ``setup()`` fails unless the ``API_TOKEN`` secret is sent. Task 2 works.
    """

    name = "broken-session"
    summary = "task 0 fails in construction (/create 500), task 1's setup() needs secret API_TOKEN, task 2 works"
    dedicated = "its sessions fail on purpose (constructor 500, a missing secret); conformance/test_sessions.py covers it (P13)"

    def splits(self) -> list[Split]:
        return [Split("train", "train")]

    def list_tasks(self, split: str) -> list[JSON]:
        return [
            {"id": "broken-0", "fails_in": "init"},
            {"id": "broken-1", "fails_in": "setup"},
            {"id": "broken-2", "fails_in": "nothing"},
        ]

    def task_tool_names(self, task: JSON) -> list[str]:
        # Called while a session is constructed: the scenario's constructor hook.
        if task.get("fails_in") == "init":
            raise RuntimeError("environment constructor failed: no model weights for task broken-0")
        return []

    async def setup(self, episode: Episode) -> None:
        if episode.task.get("fails_in") == "setup" and REQUIRED_SECRET not in episode.secrets:
            raise RuntimeError(f"setup failed: secret {REQUIRED_SECRET} is missing")

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Task {episode.task['id']}: call ping().")]

    @tool(None, name="ping")
    def ping_tool(self, episode: Episode, args: None) -> ToolResult:
        """Answer pong (reward 1.0, finished)."""
        return ToolResult([text("pong")], reward=1.0, finished=True)


class ConfigureA(BaseModel):
    level: int = Field(description="Level as a number.")


class ConfigureB(BaseModel):
    level: str = Field(description="Level as a word.")
    strict: bool = Field(default=False, description="Fail on unknown words.")


@register
class SchemaConflict(Scenario):
    """Task-scoped ``configure`` has one schema on even tasks and another on odd tasks.

    ORS lets each session list its own task tools, so one name may carry
    different schemas across tasks. The variant is chosen in
    :meth:`session_tools`, which the mock engine honours; the SDK twin builds
    task tools from ``all_tools`` by name, so it serves the even-task schema
    everywhere (this scenario is for the mock engine).
    """

    name = "schema-conflict"
    summary = "task-scoped configure(level) is int on even tasks and str on odd tasks (mock engine only)"
    dedicated = "the SDK twin cannot serve per-task schema variants; conformance/test_tool_binding.py covers it on the mock (P1)"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        base = self.all_tools["configure"]
        self._odd_configure = Tool(base.name, base.description, ConfigureB, base.fn, shared=False)

    def splits(self) -> list[Split]:
        return [Split("train", "train")]

    def list_tasks(self, split: str) -> list[JSON]:
        return [{"id": f"conflict-{i}", "parity": "odd" if i % 2 else "even"} for i in range(4)]

    def task_tool_names(self, task: JSON) -> list[str]:
        # Odd tasks also list `hint`: the mock engine caches /task_tools payloads by the
        # list of names, so the two variants of `configure` need two different lists.
        return ["configure", "hint"] if task.get("parity") == "odd" else ["configure"]

    def session_tools(self, task: JSON) -> dict[str, Tool]:
        tools = super().session_tools(task)
        if task.get("parity") == "odd":
            tools["configure"] = self._odd_configure
        return tools

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Task {episode.task['id']}: configure a level.")]

    @tool(AnswerParams)
    def answer(self, episode: Episode, args: AnswerParams) -> ToolResult:
        """Finish the episode."""
        return ToolResult([text("done")], reward=0.0, finished=True)

    @tool(ConfigureA, shared=False)
    def configure(self, episode: Episode, args: Any) -> ToolResult:
        """Set the level."""
        return received(args)

    @tool(None, shared=False)
    def hint(self, episode: Episode, args: None) -> ToolResult:
        """Show a hint (odd tasks only)."""
        return ToolResult([text("levels are words on odd tasks")])
