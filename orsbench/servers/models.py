"""Request bodies the mock engine accepts, shaped as the reference's pydantic models.

The reference server declares every request model ``extra="forbid"`` and lets
FastAPI answer 422 for bad bodies; we validate with the same pydantic rules so
the 422 details look the same, without paying for FastAPI's routing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitBody(_Body):
    split: str


class TaskBody(_Body):
    split: str
    index: int


class TaskRangeBody(_Body):
    split: str
    start: int | None = None
    stop: int | None = None


class CreateBody(_Body):
    env_name: str | None = None
    task_spec: dict[str, Any] | None = None
    split: str | None = None
    index: int | None = None
    toolset_name: str | None = None

    @model_validator(mode="after")
    def _one_task_source(self) -> "CreateBody":
        by_index = self.split is not None and self.index is not None
        if (self.task_spec is not None) == by_index or (self.task_spec is not None and self.split is not None):
            raise ValueError("Provide either task_spec or both split and index, not both/neither")
        return self


class CallBody(_Body):
    name: str
    input: dict[str, Any]
    task_id: str | None = None


class Block(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class Message(_Body):
    role: Literal["system", "user", "assistant"]
    blocks: list[Block]
    detail: Any = None


class Candidate(_Body):
    messages: list[Message]
    metadata: dict[str, Any] | None = None


class ScoreGroupBody(_Body):
    candidates: list[Candidate]
    task_id: str | None = None
