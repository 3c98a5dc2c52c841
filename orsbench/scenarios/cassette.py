"""cassette: replay a recorded environment offline, served by the mock engine.

``orsbench serve --cassette FILE`` (or ``orsbench serve cassette --param
path=FILE``, or the ``ors_server`` fixture with ``params={"path": FILE}``)
serves a cassette written by ``orsbench record`` or ``orsbench proxy
--record`` (format: ``docs/cassettes.md``). It is an ordinary scenario, so
every engine feature — sessions, TTL, resume by ``task_id``, keep-alives,
fault profiles — applies to a replay as to any mock.

What is replayed exactly: the environment name, tools (with their recorded
schemas), splits and tasks, task tools and prompts per task, and each tool
call whose *(tool, input) sequence* in its session matches a recorded
episode on the same task: its answer is the recorded ``end`` or ``error``
data, byte for byte (a :class:`~orsbench.scenarios.base.RecordedAnswer`).
Unknown tools and calls after ``finished: true`` are answered by the engine
itself, as any ORS server must. A call no recording matches (a *miss*)
answers ``ok: false`` naming the miss, or with ``on_miss=nearest`` the
recorded answer of the closest recorded call of that tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import RootModel

from orsbench import protocol
from orsbench.scenarios import register
from orsbench import schema_examples
from orsbench.scenarios.base import JSON, Episode, HTTPAnswer, RecordedAnswer, Scenario, Split, Tool, text
from orsbench.wire.cassette import MISS_HEADER, MISS_PREFIX, CassetteError, canonical, load

ON_MISS = ("error", "nearest")


class AnyInput(RootModel[Any]):
    """Accepts any tool input: a replay answers what was recorded, validation errors included."""


@dataclass(frozen=True)
class RecordedTool(Tool):
    """A tool whose listed schema is exactly the recorded one (``None`` included)."""

    @property
    def input_schema(self) -> JSON | None:
        return self.schema_override


@dataclass(frozen=True)
class _Recorded:
    tool: str
    input_key: str
    input: Any
    answer: RecordedAnswer


@register
class Cassette(Scenario):
    """Serve a cassette: the recorded environment, offline."""

    name: ClassVar[str] = "cassette"
    standalone: ClassVar[bool] = False  # nothing to serve without --param path=FILE
    summary = "replay a cassette recorded by `orsbench record` or `orsbench proxy --record` (serve --cassette FILE)"
    params_help = {
        "path": ("", "the cassette file (required)"),
        "env": ("", "which recorded environment to serve (default: the cassette's first)"),
        "on_miss": ("error", "a call no recording matches: 'error' answers ok:false; 'nearest' replays the closest recorded call"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        path = self.params["path"]
        if not path:
            raise ValueError("the cassette scenario needs a file: orsbench serve --cassette FILE (or --param path=FILE)")
        if self.params["on_miss"] not in ON_MISS:
            raise ValueError(f"on_miss must be one of {', '.join(ON_MISS)}, got {self.params['on_miss']!r}")
        try:
            data = load(path)
        except CassetteError as exc:
            raise ValueError(str(exc)) from None
        envs: dict[str, JSON] = data["environments"]
        wanted = self.params["env"] or data.get("default_env") or next(iter(envs))
        if wanted not in envs:
            raise ValueError(f"cassette {path} has no environment {wanted!r}; it has: {', '.join(envs)}")
        self.name = wanted  # type: ignore[misc]  # the served environment is the recorded one
        self.record = envs[wanted]
        self._source = str(data.get("source") or "URL")
        self._refusals = {f"{r['route']} {canonical(r.get('request'))}": r for r in self.record.get("refusals") or []}
        if isinstance(data.get("chunk_size"), int) and data["chunk_size"] > 0:
            self.config_defaults = {"chunk_size": data["chunk_size"]}  # type: ignore[misc]
        self._splits = [
            Split(s["name"], s.get("type", "train")) if isinstance(s, dict) else Split(str(s), "train")
            for s in (self.record.get("splits") or [])
        ]
        shared = [t for t in (self.record.get("tools") or []) if isinstance(t, dict) and isinstance(t.get("name"), str)]
        self.all_tools = {t["name"]: self._tool(t, shared=True) for t in shared}
        self._task_tools: dict[str, list[str]] = {}
        for entry in self.record.get("task_tools") or []:
            names = []
            for spec in entry.get("tools") or []:
                if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                    names.append(spec["name"])
                    if spec["name"] not in self.all_tools:
                        self.all_tools[spec["name"]] = self._tool(spec, shared=False)
            self._task_tools[canonical(entry.get("task"))] = names
        self._prompts = {canonical(p.get("task")): p.get("prompt") for p in self.record.get("prompts") or []}
        self._episodes: dict[str, list[list[_Recorded]]] = {}
        for episode in self.record.get("episodes") or []:
            calls = [
                _Recorded(c["tool"], canonical(c.get("input")), c.get("input"), _answer(c))
                for c in episode.get("calls") or []
                if (c.get("outcome") or {}).get("kind") in ("end", "error")
            ]
            self._episodes.setdefault(canonical(episode.get("task")), []).append(calls)

    def _tool(self, spec: JSON, *, shared: bool) -> Tool:
        name = spec["name"]

        def replay(scenario: Scenario, episode: Episode, args: AnyInput) -> RecordedAnswer:
            return self._replay(episode, name, args.root)

        return RecordedTool(name, spec.get("description") or "", AnyInput, replay, shared, spec.get("input_schema"))

    # -- discovery and dataset: as recorded ------------------------------------------
    def splits(self) -> list[Split]:
        return list(self._splits)

    def list_tasks(self, split: str) -> list[JSON]:
        tasks = (self.record.get("tasks") or {}).get(split)
        if not isinstance(tasks, list):
            raise NotImplementedError  # only single tasks were recorded: the index API serves them
        return tasks

    def num_tasks(self, split: str) -> int:
        count = (self.record.get("num_tasks") or {}).get(split)
        if not isinstance(count, int):
            raise NotImplementedError
        return count

    def get_task(self, split: str, index: int) -> JSON:
        answers = self.record.get("task_answers") or {}
        count = (self.record.get("num_tasks") or {}).get(split)
        for key in (f"{split}/{index}", f"{split}/{index + count}" if isinstance(count, int) and index < 0 else None):
            if key in answers:
                return answers[key]
        raise IndexError(index)  # out of range (a request in range that was not recorded is a miss, answered before)

    # -- what the recording refused, and what it lacks ----------------------------------
    def recorded_answer(self, route: str, body: Any) -> HTTPAnswer | None:
        """A recorded refusal, verbatim; a miss naming what was not recorded; else ``None`` (served as recorded)."""
        refusal = self._refusals.get(f"{route} {canonical(body)}")
        if refusal is not None:
            content_type = refusal.get("content_type") or protocol.JSON_CONTENT_TYPE
            return HTTPAnswer(int(refusal["status"]), str(refusal.get("body", "")).encode(), content_type)
        if not isinstance(body, dict) or not isinstance(body.get("split"), str):
            return None
        split = body["split"]
        if split not in {s.name for s in self._splits}:
            return None  # the engine answers "Invalid split", as the reference does
        env = f"/{self.name}/{route}"
        count = (self.record.get("num_tasks") or {}).get(split)
        listed = isinstance((self.record.get("tasks") or {}).get(split), list)
        if route == protocol.TASKS and not listed:
            return self._miss(f"POST {env} (the task list of split {split!r})", f"{split}:0-{count - 1}" if count else f"{split}:0")
        if route == protocol.NUM_TASKS and not isinstance(count, int) and not listed:
            return self._miss(f"POST {env} (the size of split {split!r})", f"{split}:0")
        if route in (protocol.TASK, "create") and isinstance(body.get("index"), int) and body.get("task_spec") is None:
            return self._task_miss("POST /create" if route == "create" else f"POST {env}", split, body["index"], count, listed)
        if route == protocol.TASK_RANGE and not listed:
            if not isinstance(count, int):
                return self._miss(f"POST {env} (split {split!r}, whose size was not recorded)", f"{split}:0")
            start, stop = body.get("start"), body.get("stop")
            for index in range(count)[slice(start if isinstance(start, int) else None, stop if isinstance(stop, int) else None)]:
                answer = self._task_miss(f"POST {env}", split, index, count, listed)
                if answer is not None:
                    return answer
        return None

    def _task_miss(self, what: str, split: str, index: int, count: Any, listed: bool) -> HTTPAnswer | None:
        if listed or (isinstance(count, int) and not -count <= index < count):
            return None  # served from the recorded list, or out of range: the engine answers
        try:
            self.get_task(split, index)
        except IndexError:
            return self._miss(f"{what} for task {split}/{index}", f"{split}:{index}")
        return None

    def _miss(self, what: str, tasks: str) -> HTTPAnswer:
        detail = (
            f"{MISS_PREFIX}: {what} was not recorded; record it by letting a client make this request through "
            f"`orsbench proxy {self._source} --record FILE`, or with `orsbench record {self._source} --tasks {tasks}`"
        )
        return HTTPAnswer(404, canonical({"detail": detail}).encode(), protocol.JSON_CONTENT_TYPE, ((MISS_HEADER, "1"),))

    def validate_task(self, task: JSON) -> None:
        """Any task_spec is accepted, as recorded sessions may have used one."""

    def task_tool_names(self, task: JSON) -> list[str]:
        shared = {t.name for t in self.shared_tools()}
        return [n for n in self._task_tools.get(canonical(task), []) if n not in shared]

    def prompt(self, episode: Episode) -> list[JSON]:
        prompt = self._prompts.get(canonical(episode.task))
        if isinstance(prompt, list):
            return prompt
        return [text("(orsbench cassette: no prompt was recorded for this task)")]

    # -- tool calls: the recorded answers --------------------------------------------
    def _replay(self, episode: Episode, tool: str, tool_input: Any) -> RecordedAnswer:
        history: list[tuple[str, str]] = episode.state.setdefault("cassette_calls", [])
        history.append((tool, canonical(tool_input)))
        position = len(history) - 1
        candidates = self._episodes.get(canonical(episode.task), [])
        for calls in candidates:
            reached = _reaching(calls, set(self.session_tools(episode.task)))
            if len(reached) > position and all(
                (r.tool, r.input_key) == h for r, h in zip(reached[: position + 1], history, strict=True)
            ):
                return reached[position].answer
        if self.params["on_miss"] == "nearest":
            nearest = self._nearest(candidates, tool, tool_input, position)
            if nearest is not None:
                return nearest
        invalid = self._invalid_input(tool, tool_input)
        if invalid is not None:
            return invalid
        recorded = sum(len(c) for c in candidates)
        where = f"{episode.split}:{episode.index}" if episode.split is not None and episode.index is not None else "SPLIT:INDEX"
        message = (
            f"{MISS_PREFIX}: no recording answers call #{position + 1} {tool}({canonical(tool_input)}) "
            f"after this session's earlier calls on this task ({recorded} call(s) recorded for it); "
            f"record this episode by playing it through `orsbench proxy {self._source} --record FILE` "
            f"(or `orsbench record {self._source} --tasks {where}`), or serve with --on-miss nearest"
        )
        return RecordedAnswer("end", canonical({"ok": False, "error": message, "reason": protocol.REASON_NOT_FOUND}))

    def _invalid_input(self, tool: str, tool_input: Any) -> RecordedAnswer | None:
        """An input the recorded JSON Schema rejects: refused as any ORS server must (§7), not a miss."""
        spec = self.all_tools.get(tool)
        schema = spec.input_schema if spec is not None else None
        if schema is None:
            return None
        problems = schema_examples.errors(tool_input, schema)
        if not problems or problems[0].startswith("schema:"):
            return None  # valid, or a schema nothing can validate against: the recording decides
        message = f"invalid input for tool {tool!r} (its recorded input_schema): {'; '.join(problems[:3])}"
        return RecordedAnswer("end", canonical({"ok": False, "error": message, "reason": protocol.REASON_INPUT_VALIDATION}))

    def _nearest(self, candidates: list[list[_Recorded]], tool: str, tool_input: Any, position: int) -> RecordedAnswer | None:
        pool = [(i, r) for calls in candidates for i, r in enumerate(calls) if r.tool == tool]
        if not pool:
            pool = [(i, r) for calls in (c for cs in self._episodes.values() for c in cs) for i, r in enumerate(calls) if r.tool == tool]
        if not pool:
            return None

        def score(item: tuple[int, _Recorded]) -> tuple[int, int]:
            index, recorded = item
            return (_similarity(recorded.input, tool_input), -abs(index - position))

        return max(pool, key=score)[1].answer


def _reaching(calls: list[_Recorded], tools: set[str]) -> list[_Recorded]:
    """The recorded calls a session's tools would have seen: the engine answers unknown tools and the finish latch."""
    out = []
    for call in calls:
        if call.tool not in tools:
            continue
        out.append(call)
        if call.answer.finished:
            break
    return out


def _similarity(a: Any, b: Any) -> int:
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(2 if canonical(a[k]) == canonical(b[k]) else 1 for k in a.keys() & b.keys())
    return 2 if canonical(a) == canonical(b) else 0


def _answer(call: JSON) -> RecordedAnswer:
    outcome = call["outcome"]
    return RecordedAnswer(outcome["kind"], outcome["data"], bool(outcome.get("finished")))
