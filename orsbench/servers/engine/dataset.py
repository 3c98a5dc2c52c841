"""The engine's dataset room: tools, splits and tasks (``docs/protocol.md`` §4).

Task lists and tool payloads are computed once per environment and split and
served from cache; an index-only scenario (no ``list_tasks``) is served one
task at a time.
"""

from __future__ import annotations

from typing import Any

import orjson

from orsbench import protocol
from orsbench.scenarios.base import Scenario
from orsbench.servers import models
from orsbench.servers.engine.base import MESSAGE_BLOCK_TYPES, EngineState, overrides
from orsbench.servers.http import HTTPError, RawJSON, Request


class DatasetRoutes(EngineState):
    """``/{env}/tools``, ``/splits``, ``/tasks``, ``/num_tasks``, ``/task``, ``/task_range``, ``/task_tools``."""

    def split_names(self, env: str) -> tuple[str, ...] | None:
        """The split names of environment ``env`` (any case), or ``None`` for an unknown environment."""
        splits = self._splits.get(env.lower())
        return None if splits is None else tuple(splits)

    def task_list(self, scenario: Scenario, split: Any) -> list[dict[str, Any]] | None:
        """A split's task list as served, or ``None`` (unknown split, or an index-API-only scenario)."""
        if not isinstance(split, str) or split not in self._splits[scenario.name.lower()]:
            return None
        return self._task_list(scenario, split)


    def _tools_payload(self, scenario: Scenario, specs: list[dict[str, Any]]) -> bytes:
        return orjson.dumps(
            {
                "tools": sorted(specs, key=lambda s: s["name"]),
                "terminal_tool": None,
                "supports_score_group": overrides(scenario, "score_group"),
                "message_block_types": MESSAGE_BLOCK_TYPES,
            }
        )

    async def tools(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        return RawJSON(self._tools_json[scenario.name.lower()])

    async def splits(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        return [s.to_wire() for s in self._splits[scenario.name.lower()].values()]

    def _check_split(self, scenario: Scenario, split: str) -> None:
        if split not in self._splits[scenario.name.lower()]:
            raise HTTPError(400, protocol.DETAIL_INVALID_SPLIT)

    def _task_list(self, scenario: Scenario, split: str) -> list[dict[str, Any]] | None:
        """The cached task list of a split, or ``None`` for an index-API-only scenario."""
        key = (scenario.name, split)
        if key not in self._task_lists:
            try:
                self._task_lists[key] = scenario.list_tasks(split)
            except NotImplementedError:
                self._task_lists[key] = None
        return self._task_lists[key]

    def _get_task(self, scenario: Scenario, split: str, index: int) -> dict[str, Any]:
        self._check_split(scenario, split)
        tasks = self._task_list(scenario, split)
        try:
            if tasks is not None:
                return tasks[index]
            return scenario.get_task(split, index)
        except IndexError:
            raise HTTPError(400, protocol.DETAIL_INVALID_INDEX) from None
        except NotImplementedError:
            raise HTTPError(400, "This environment cannot serve tasks by index.") from None

    async def list_tasks(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.SplitBody = await request.parse(models.SplitBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        if tasks is None:
            raise HTTPError(
                400,
                "list_tasks is not supported for this environment. Use the index-based API (num_tasks + get_task) instead.",
            )
        return {"tasks": tasks, "env_name": raw_env}

    async def num_tasks(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.SplitBody = await request.parse(models.SplitBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        try:
            count = len(tasks) if tasks is not None else scenario.num_tasks(body.split)
        except NotImplementedError:
            raise HTTPError(400, "This environment cannot count its tasks.") from None
        return {"num_tasks": count}

    async def task(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.TaskBody = await request.parse(models.TaskBody)
        return {"task": self._get_task(scenario, body.split, body.index), "env_name": raw_env}

    async def task_range(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        body: models.TaskRangeBody = await request.parse(models.TaskRangeBody)
        self._check_split(scenario, body.split)
        tasks = self._task_list(scenario, body.split)
        if tasks is None:
            count = scenario.num_tasks(body.split)
            indices = range(count)[body.start : body.stop]
            return {"tasks": [self._get_task(scenario, body.split, i) for i in indices], "env_name": raw_env}
        return {"tasks": tasks[body.start : body.stop], "env_name": raw_env}

    async def task_tools(self, request: Request, scenario: Scenario, raw_env: str) -> Any:
        session = self._existing(request)
        self._raise_setup_error(session)
        # Keyed by what the specs are made of, so per-task variants of a tool never share a payload.
        key = (
            session.scenario.name,
            tuple((t.name, t.description, t.params, orjson.dumps(t.schema_override)) for t in session.tools.values()),
        )
        payload = self._task_tools_json.get(key)
        if payload is None:
            specs = [t.spec() for t in session.tools.values()]
            shared = {t.name for t in session.scenario.shared_tools()}
            ordered = sorted((s for s in specs if s["name"] in shared), key=lambda s: s["name"])
            ordered += [s for s in specs if s["name"] not in shared]
            payload = orjson.dumps(
                {
                    "tools": ordered,
                    "terminal_tool": None,
                    "supports_score_group": overrides(session.scenario, "score_group"),
                    "message_block_types": MESSAGE_BLOCK_TYPES,
                }
            )
            self._task_tools_json[key] = payload
        return RawJSON(payload)
