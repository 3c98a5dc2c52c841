"""Drive TRL's ``OpenRewardSpec`` adapter the way ``GRPOTrainer`` does, and record what the model sees.

Two pieces of TRL are reproduced here on purpose, each small and pinned to the
installed release so the suite notices when TRL changes them:

* :func:`grpo_tool_surface` is how ``GRPOTrainer`` (trl 1.16.0) turns an
  environment instance into tools. Its one copy lives in
  :mod:`orsbench.clients.grpo_tools` (the training smoke uses the same rule) and
  is re-exported here; ``test_grpo_mirror`` checks that TRL's source still says so.
* :func:`bind_one` binds a single ORS tool exactly as
  ``environment_factory()`` does (a fresh ``_RolloutEnvironment`` subclass,
  constructed with ``_tool_specs=[spec]``), so each tool's hazard is seen in
  isolation: one keyword-named tool would otherwise crash the whole factory
  and hide every other finding.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trl.experimental.openreward import OpenRewardSpec
from trl.experimental.openreward.environment import _RolloutEnvironment

from orsbench.upstream.defects import ADAPTER_STATE, GRPO_RESERVED
from orsbench.upstream.schema_view import JSON
from orsbench.clients.grpo_tools import grpo_tool_surface

TRL_LOGGER = "trl.experimental.openreward"
_CLASS_ID = re.compile(r"_RolloutEnvironment_[0-9a-f]+")


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())


@contextlib.contextmanager
def trl_warnings() -> Iterator[list[str]]:
    """Collect the warnings TRL's openreward integration logs while the block runs."""
    logger = logging.getLogger(TRL_LOGGER)
    handler = _ListHandler()
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def rollout_factory(spec: OpenRewardSpec, tool_specs: list[Any]) -> Callable[[], _RolloutEnvironment]:
    """An ``environment_factory`` equivalent to ``spec.environment_factory`` but binding ``tool_specs``.

    Mirrors ``OpenRewardSpec.environment_factory`` (trl 1.16.0, ``_spec.py``):
    one fresh ``_RolloutEnvironment`` subclass per call, sharing the spec's
    SDK client and environment handle.
    """
    cls = type(f"_RolloutEnvironment_{id(tool_specs):x}", (_RolloutEnvironment,), {})
    kwargs: dict[str, Any] = {
        "base_url": spec._target,
        "split": spec._split,
        "secrets": spec._effective_secrets(),
        "_client": spec._sdk_client,
        "_env": spec._sdk_env,
        "_tool_specs": tool_specs,
    }
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return lambda: cls(**kwargs)


@dataclass
class Binding:
    """One ORS tool bound alone on a fresh adapter class: what TRL made of it."""

    tool: str
    spec: JSON
    instance: _RolloutEnvironment | None = None
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def bound(self) -> bool:
        return self.instance is not None and self.tool in type(self.instance).__dict__

    @property
    def outcome(self) -> str:
        if self.error is not None:
            return "error"
        return "bound" if self.bound else "skipped"

    @property
    def function(self) -> Any:
        """The generated function on the class (``None`` unless bound)."""
        return type(self.instance).__dict__.get(self.tool) if self.bound else None

    @property
    def surface(self) -> dict[str, Any]:
        return grpo_tool_surface(self.instance) if self.instance is not None else {}

    @property
    def exposed(self) -> Any:
        """What GRPO hands the model under this tool's name (``None`` if nothing)."""
        return self.surface.get(self.tool)

    def require_exposed(self) -> Callable[..., Any]:
        """The callable the model would use; a failure that says why there is none."""
        if self.error is not None:
            raise AssertionError(f"binding tool {self.tool!r} raised {type(self.error).__name__}: {self.error}")
        if not self.bound:
            raise AssertionError(f"tool {self.tool!r} was not bound; TRL warned: {self.warnings}")
        method = self.exposed
        collected = type(method).__name__ if self.tool in self.surface else "nothing"
        assert callable(method), f"GRPO's tool collection does not expose a callable for {self.tool!r}: it collects {collected}"
        return method


def bind_one(spec: OpenRewardSpec, tool_spec: JSON) -> Binding:
    """Bind ``tool_spec`` alone, as ``environment_factory()`` would; never raises."""
    binding = Binding(tool=tool_spec["name"], spec=tool_spec)
    with trl_warnings() as warnings:
        try:
            binding.instance = rollout_factory(spec, [tool_spec])()
        except Exception as exc:  # noqa: BLE001 - the exception is the finding
            binding.error = exc
    binding.warnings = list(warnings)
    return binding


def normalise(text: str) -> str:
    """Strip the per-spec class id (``_RolloutEnvironment_7f3a...``) so snapshots are deterministic."""
    return _CLASS_ID.sub("_RolloutEnvironment_<spec>", text)


def _type_name(value: Any) -> str:
    return value.__name__ if isinstance(value, type) else normalise(repr(value))


def model_schema(method: Any) -> JSON:
    """``transformers.utils.get_json_schema(method)`` — the tool schema the chat template renders."""
    from transformers.utils import get_json_schema

    return get_json_schema(method)


def document(binding: Binding) -> JSON:
    """The snapshot of one tool: what the server declared, what TRL generated, what the model sees."""
    doc: JSON = {
        "server": {"description": binding.spec.get("description"), "input_schema": binding.spec.get("input_schema")},
        "binding": {"outcome": binding.outcome, "warnings": [normalise(w) for w in binding.warnings]},
    }
    if binding.error is not None:
        doc["binding"]["error"] = normalise(f"{type(binding.error).__name__}: {binding.error}")
    fn = binding.function
    if fn is not None:
        doc["python"] = {
            "signature": normalise(str(inspect.signature(fn))),
            "annotations": {k: _type_name(v) for k, v in fn.__annotations__.items()},
            "docstring": fn.__doc__,
            "qualname": normalise(fn.__qualname__),
        }
    surface = binding.surface
    doc["grpo"] = {
        "collected": binding.tool in surface,
        "collected_as": _type_name(type(surface[binding.tool])) if binding.tool in surface else None,
    }
    exposed = surface.get(binding.tool)
    if callable(exposed):
        try:
            doc["get_json_schema"] = model_schema(exposed)
        except Exception as exc:  # noqa: BLE001 - recorded: the model would get no schema
            doc["get_json_schema"] = {"error": f"{type(exc).__name__}: {exc}"}
    return doc
