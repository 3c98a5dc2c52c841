"""What an environment does, independent of how it is served.

A :class:`Scenario` declares splits, tasks, tools (with pydantic input models,
hence JSON Schemas), the prompt, and what each tool call returns. The mock
engine (``orsbench.servers.engine``) and the SDK twin
(``orsbench.servers.sdk_twin``) both serve the *same* scenario object, so any
difference between their wire transcripts is a difference of serving, never
of environment logic.

Scenarios are deterministic given the task: no wall-clock or global randomness
feeds a tool's result.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Iterable, Mapping

from pydantic import BaseModel

from orsbench.protocol import JSON



# -- content blocks ----------------------------------------------------------
def text(value: str) -> JSON:
    """A ``TextBlock`` as it appears on the wire (fields in the reference's order)."""
    return {"text": value, "detail": None, "type": "text"}


def image(data_b64: str, mime_type: str = "image/png") -> JSON:
    """An ``ImageBlock`` as it appears on the wire."""
    return {"data": data_b64, "mimeType": mime_type, "detail": None, "type": "image"}


@dataclass
class ToolResult:
    """What one tool call returns: the ORS ``ToolOutput``."""

    blocks: list[JSON]
    reward: float | None = None
    finished: bool = False
    metadata: JSON | None = None

    def to_wire(self) -> JSON:
        return {
            "blocks": self.blocks,
            "metadata": self.metadata,
            "reward": self.reward,
            "finished": self.finished,
        }


@dataclass(frozen=True)
class RecordedAnswer:
    """A tool answer served exactly as recorded (cassette replay), not rebuilt from a ToolResult.

    ``kind`` is the SSE outcome (``"end"`` or ``"error"``) and ``data`` its
    payload, byte for byte; ``finished`` closes the episode like a
    ``ToolResult(finished=True)`` does.
    """

    kind: str
    data: str
    finished: bool = False


@dataclass
class Episode:
    """Per-session state a scenario's tools read and mutate."""

    scenario: "Scenario"
    task: JSON
    split: str | None = None
    index: int | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            await asyncio.sleep(seconds)


ToolFn = Callable[[Any, Episode, Any], "ToolResult | Awaitable[ToolResult]"]


@dataclass(frozen=True)
class Tool:
    """One tool: its name, docstring, input model and implementation.

    ``shared`` tools are listed by ``GET /{env}/tools``; task-scoped ones only by
    ``GET /{env}/task_tools`` for the tasks whose :meth:`Scenario.task_tool_names`
    includes them. ``input_schema`` may be given explicitly for hazards a
    pydantic model cannot express; otherwise it is the model's JSON Schema.
    """

    name: str
    description: str
    params: type[BaseModel] | None
    fn: ToolFn
    shared: bool = True
    schema_override: JSON | None = None

    @property
    def input_schema(self) -> JSON | None:
        if self.schema_override is not None:
            return self.schema_override
        if self.params is None:
            return None
        return self.params.model_json_schema()

    def spec(self) -> JSON:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def tool(
    params: type[BaseModel] | None = None,
    *,
    name: str | None = None,
    shared: bool = True,
    schema: JSON | None = None,
) -> Callable[[ToolFn], "_ToolMarker"]:
    """Declare a scenario method as a tool.

    The method is called as ``method(self, episode, args)`` where ``args`` is an
    instance of ``params`` (or ``None`` for a no-argument tool) and returns a
    :class:`ToolResult`, directly or awaited. Its docstring is the description.
    """

    def decorate(fn: ToolFn) -> _ToolMarker:
        return _ToolMarker(fn, params, name or fn.__name__, shared, schema)

    return decorate


class _ToolMarker:
    """Placeholder left on the class by :func:`tool`; collected by ``__init_subclass__``."""

    def __init__(self, fn: ToolFn, params: type[BaseModel] | None, name: str, shared: bool, schema: JSON | None):
        self.fn, self.params, self.name, self.shared, self.schema = fn, params, name, shared, schema

    def build(self) -> Tool:
        doc = inspect.cleandoc(self.fn.__doc__ or "")
        return Tool(self.name, doc, self.params, self.fn, self.shared, self.schema)


def _from_text(text: str, kind: type) -> Any:
    """A ``--param key=VALUE`` string as the parameter's type (``bool("false")`` would be True)."""
    if kind is bool:
        lowered = text.strip().lower()
        if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(f"expected a boolean, got {text!r}")
        return lowered in ("1", "true", "yes", "on")
    return kind(text)


@dataclass(frozen=True)
class Split:
    name: str
    type: str  # "train" | "validation" | "test"

    def to_wire(self) -> JSON:
        return {"name": self.name, "type": self.type}


class Scenario:
    """Base class of every scenario. Subclasses declare tools with :func:`tool`.

    ``name`` doubles as the environment name served in URLs (``/{name}/tools``).
    Parameters come as keyword arguments (from ``--param key=value`` or code);
    each subclass documents its own in ``params_help``.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    #: ``{param: (default, help)}``: the knobs this scenario accepts.
    params_help: ClassVar[Mapping[str, tuple[Any, str]]] = {}
    #: What a playable task looks like; ``/create`` with a ``task_spec`` it rejects answers 422.
    task_model: ClassVar[type[BaseModel] | None] = None
    #: ServerConfig fields this scenario changes by default (e.g. a short ping interval).
    config_defaults: ClassVar[Mapping[str, Any]] = {}
    #: False for a scenario that serves nothing without a file of the user's (the cassette replay): it is
    #: left out wherever "every scenario" is played with its defaults (see :func:`playable_scenarios`).
    standalone: ClassVar[bool] = True
    #: Why a suite that plays every scenario generically (the conformance checks, the client episodes)
    #: leaves this one out, and where it is covered instead; empty: it is played generically.
    dedicated: ClassVar[str] = ""
    #: The parameters such a suite serves this scenario with (its defaults may be slow on purpose).
    suite_params: ClassVar[Mapping[str, Any]] = {}
    _tool_markers: ClassVar[dict[str, _ToolMarker]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        markers: dict[str, _ToolMarker] = {}
        for base in reversed(cls.__mro__[1:]):
            markers.update(getattr(base, "_tool_markers", {}))
        for value in list(vars(cls).values()):
            if isinstance(value, _ToolMarker):
                markers[value.name] = value
        cls._tool_markers = markers

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.params_help)
        if unknown:
            known = ", ".join(sorted(self.params_help)) or "none"
            raise ValueError(f"scenario {self.name!r} has no parameter(s) {sorted(unknown)}; known: {known}")
        self.params: dict[str, Any] = {}
        for key, (default, _help) in self.params_help.items():
            value = params.get(key, default)
            if key in params and isinstance(value, str) and default is not None and not isinstance(default, str):
                try:
                    value = _from_text(value, type(default))  # CLI values arrive as strings
                except ValueError:
                    raise ValueError(
                        f"scenario {self.name!r}: --param {key} takes a {type(default).__name__} (default {default!r}), got {value!r}"
                    ) from None
            self.params[key] = value
        self.all_tools: dict[str, Tool] = {m.name: m.build() for m in self._tool_markers.values()}

    # -- discovery ------------------------------------------------------------
    def splits(self) -> list[Split]:
        raise NotImplementedError

    def list_tasks(self, split: str) -> list[JSON]:
        """All tasks of ``split``. May raise ``NotImplementedError`` (index API only)."""
        raise NotImplementedError

    def validate_task(self, task: JSON) -> None:
        """Raise pydantic's ``ValidationError`` when ``task`` is not one this scenario can play."""
        if self.task_model is not None:
            self.task_model.model_validate(task)

    def num_tasks(self, split: str) -> int:
        return len(self.list_tasks(split))

    def get_task(self, split: str, index: int) -> JSON:
        """Task ``index`` of ``split``; negative indices count from the end, as the reference does."""
        return self.list_tasks(split)[index]

    def shared_tools(self) -> list[Tool]:
        return [t for t in self.all_tools.values() if t.shared]

    def task_tool_names(self, task: JSON) -> Iterable[str]:
        """Names of the task-scoped tools this task exposes (default: none)."""
        return ()

    def session_tools(self, task: JSON) -> dict[str, Tool]:
        """Every tool callable in a session on ``task``: shared first, then task-scoped."""
        tools = {t.name: t for t in self.shared_tools()}
        for name in self.task_tool_names(task):
            tools[name] = self.all_tools[name]
        return tools

    # -- episode ----------------------------------------------------------------
    def prompt(self, episode: Episode) -> list[JSON]:
        raise NotImplementedError

    async def setup(self, episode: Episode) -> None:
        """Runs in the background after ``/create``; ``/prompt`` and ``/call`` wait for it."""

    async def teardown(self, episode: Episode) -> None:
        """Runs on ``/delete``, on reaping, and at server shutdown."""

    def score_group(self, episode: Episode, candidates: list[JSON]) -> list[float] | None:
        """Score a group of candidate transcripts; ``None`` means unsupported (404)."""
        return None

    def describe(self) -> str:
        return f"{self.name}: {self.summary}"
