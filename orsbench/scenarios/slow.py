"""slow: a long episode with per-call latency, a long tool call and a slow setup.

Defaults keep one whole episode under about 15 s while still exercising every
timing path: ``setup()`` outlasts the readiness wait (so the first ``/prompt``
answers 503 ``X-Backend-State: starting`` with ``Retry-After``), ``wait()``
outlasts the keep-alive interval (so ``: ping`` comments are sent), and the
episode needs ``steps`` calls of ``step()``. Raise the knobs to reproduce
real-world timings, e.g. ``--param long_call=1200 --ping-interval 10``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, Split, ToolResult, text, tool


class SlowTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    steps: int = Field(ge=1, le=1_000_000)


class StepParams(BaseModel):
    note: str = Field(default="", description="Free text recorded with the step.")


class WaitParams(BaseModel):
    seconds: float | None = Field(default=None, ge=0, description="How long to work; default: the scenario's long_call.")


@register
class Slow(Scenario):
    name = "slow"
    task_model = SlowTask
    summary = "slow setup (503 starting), per-call latency, a long call with keep-alives, a many-step episode"
    params_help = {
        "latency": (0.05, "seconds every tool call takes"),
        "long_call": (1.5, "seconds wait() takes by default (longer than the ping interval)"),
        "setup": (1.0, "seconds setup() takes"),
        "steps": (6, "step() calls needed to finish the episode"),
        "size": (8, "tasks per split"),
    }
    #: Scaled-down timings: keep-alives every 0.25 s, readiness wait 0.5 s.
    config_defaults = {"ping_interval": 0.25, "setup_wait_timeout": 0.5}
    #: The parameters a suite that plays every scenario generically serves this one with: its defaults make
    #: every reset() ride out a 2 s '503 starting' (Retry-After), which the dedicated slow tests and the
    #: slow-setup fault profile cover on purpose.
    suite_params: ClassVar[Mapping[str, Any]] = {"setup": 0.0, "long_call": 0.05, "latency": 0.0}

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]

    def list_tasks(self, split: str) -> list[JSON]:
        return [{"id": f"slow-{split}-{i}", "steps": self.params["steps"]} for i in range(self.params["size"])]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Call step() {episode.task['steps']} times. wait() takes a while.")]

    async def setup(self, episode: Episode) -> None:
        await episode.sleep(self.params["setup"])

    @tool(StepParams)
    async def step(self, episode: Episode, args: StepParams) -> ToolResult:
        """Advance the episode by one step; the last step is rewarded 1.0 and finishes."""
        await episode.sleep(self.params["latency"])
        done = episode.state.get("steps", 0) + 1
        episode.state["steps"] = done
        last = done >= int(episode.task["steps"])
        return ToolResult([text(f"step {done}")], reward=1.0 if last else None, finished=last, metadata={"step": done})

    @tool(WaitParams)
    async def wait(self, episode: Episode, args: WaitParams) -> ToolResult:
        """Work for a long time (longer than the keep-alive interval)."""
        seconds = self.params["long_call"] if args.seconds is None else args.seconds
        await episode.sleep(seconds)
        return ToolResult([text(f"waited {seconds:g}s")])
