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
class HTTPAnswer:
    """A whole HTTP answer served verbatim instead of the engine's (a replay's recorded refusal, or its miss)."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


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


class SessionRefused(Exception):
    """Raised by :meth:`Scenario.admit`: the session cannot start, and the client can fix why.

    The mock engine answers ``/create`` with ``status`` and ``detail`` (a 4xx);
    the SDK twins raise it from the environment's constructor, where the
    reference server answers 500 (a difference ``servers/differences.py`` lists).
    The detail names what is missing and never quotes a secret's value.
    """

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.detail, self.status = detail, status


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
    #: Checks of ``orsbench check`` this scenario fails on every server on purpose (a hostile case),
    #: check id → why; ``docs/protocol.md`` §13 says what each hazard is for.
    fails_by_design: ClassVar[Mapping[str, str]] = {}
    #: Scenarios served on the same server *before* this one (built with their defaults): the first is
    #: then the default environment, where ``/create`` without ``env_name`` and the 308 redirect land.
    companions: ClassVar[tuple[str, ...]] = ()
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

    def served(self) -> list["Scenario"]:
        """Every scenario a server of this one serves, default environment first (see :attr:`companions`)."""
        from orsbench.scenarios import get_scenario  # the registry imports this module

        return [*(get_scenario(name) for name in self.companions), self]

    def admit(self, episode: Episode) -> None:
        """Raise :class:`SessionRefused` when ``/create`` must refuse this session (e.g. a missing secret).

        Runs while ``/create`` builds the session, before ``setup``; the default admits every session.
        """

    async def setup(self, episode: Episode) -> None:
        """Runs in the background after ``/create``; ``/prompt`` and ``/call`` wait for it."""

    def recorded_answer(self, route: str, body: Any) -> HTTPAnswer | None:
        """The answer to a ``POST`` of ``route`` (``create``, ``tasks``, ``num_tasks``, ``task``, ``task_range``)
        with this JSON ``body`` when it is not the engine's to give: a cassette replays a recorded refusal
        verbatim, or names what its recording lacks. ``None`` (the default): the engine answers."""
        return None

    async def teardown(self, episode: Episode) -> None:
        """Runs on ``/delete``, on reaping, and at server shutdown."""

    def score_group(self, episode: Episode, candidates: list[JSON]) -> list[float] | None:
        """Score a group of candidate transcripts; ``None`` means unsupported (404)."""
        return None

    def describe(self) -> str:
        return f"{self.name}: {self.summary}"
