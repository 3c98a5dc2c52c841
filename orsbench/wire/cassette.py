"""Cassettes: an ORS environment's observed behaviour, written down to be served offline.

A cassette is one JSON file (format ``orsbench-cassette``, :data:`VERSION`;
``docs/cassettes.md`` is its reference). It holds, per environment, what
discovery and the dataset answered (tools, splits, the tasks of each split),
what sessions saw (task tools and the prompt per task) and every recorded
episode: the task it ran on and each tool call in order — its input and the
exact events it answered (``chunk``/``end`` data, or the ``error`` event),
with the reward and finished flag read from the result for people to scan.

:class:`CassetteRecorder` builds one from :class:`~orsbench.wire.evidence.Exchange`
objects, whoever produced them: the proxy hands it live traffic, ``orsbench
record`` the exchanges of its own client. It judges nothing and keeps no
header: secrets (``X-Secrets`` values, ``X-API-Key``, bearer tokens) are
collected only to be scrubbed from every string before the file is written.
Replay lives in :mod:`orsbench.scenarios.cassette`.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench.wire.evidence import Exchange
from orsbench.wire.observe import Observing
from orsbench.wire.redact import MIN_SECRET, scrub
from orsbench.wire.sse import reassemble

#: A replay's answer to a request its recording lacks starts with this text, and (an HTTP answer) carries
#: :data:`MISS_HEADER`: the checker skips a check whose evidence is a miss instead of failing it.
MISS_PREFIX = "orsbench cassette miss"
MISS_HEADER = "X-ORSBench-Cassette-Miss"

FORMAT = "orsbench-cassette"
VERSION = 1

JSON = dict[str, Any]


class CassetteError(ValueError):
    """The file is not a cassette this orsbench can read; the message says why."""


def canonical(value: Any) -> str:
    """A stable text key for a JSON value (tasks and tool inputs are matched by it)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load(path: str | os.PathLike[str]) -> JSON:
    """Read and validate a cassette file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CassetteError(f"cannot read cassette {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CassetteError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CassetteError(f"{path} is not an orsbench cassette (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise CassetteError(f"{path} is cassette version {data.get('version')!r}; this orsbench reads version {VERSION}")
    envs = data.get("environments")
    if not isinstance(envs, dict) or not envs:
        raise CassetteError(f"{path} records no environment")
    return data


def _strip_url(url: str) -> str:
    """A URL without credentials, query or fragment (where the recording came from, nothing more)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


@dataclass
class _Call:
    tool: str
    input: Any
    task_id: str | None = None
    events: list[list[str]] | None = None  # [[event, data], ...] without task_id

    def to_json(self) -> JSON:
        out: JSON = {"tool": self.tool, "input": self.input, "events": self.events}
        outcome = outcome_of(self.events or [])
        out["outcome"] = outcome
        return out


@dataclass
class _Episode:
    env: str
    sid: str
    source: JSON  # {"split", "index"} or {"task_spec"}
    calls: list[_Call] = field(default_factory=list)
    prompt: Any = None


def outcome_of(events: list[list[str]]) -> JSON:
    """What a call answered, read from its events: ``end`` data (reassembled) or the ``error`` text.

    ``reward``/``finished`` are copied from an ``ok:true`` result for readers;
    replay serves ``data`` byte for byte.
    """
    terminal = next(((name, data) for name, data in events if name in (protocol.EVENT_END, protocol.EVENT_ERROR)), None)
    if terminal is None:
        return {"kind": "none", "data": None}
    if terminal[0] == protocol.EVENT_ERROR:
        return {"kind": "error", "data": terminal[1]}
    text = reassemble(((name, data) for name, data in events), protocol.EVENT_CHUNK, protocol.EVENT_END)
    out: JSON = {"kind": "end", "data": text}
    try:
        body = json.loads(text or "")
    except ValueError:
        return out
    output = body.get("output") if isinstance(body, dict) else None
    if isinstance(body, dict) and body.get("ok") is True and isinstance(output, dict):
        out["reward"] = output.get("reward")
        out["finished"] = output.get("finished") is True
    return out


class CassetteRecorder(Observing):
    """Turns a sequence of exchanges into a cassette: call it with each exchange, or plug it in as an observer."""

    def __init__(self, source: str, recorder: str, *, secrets: Mapping[str, str] | None = None) -> None:
        self.source = _strip_url(source)
        self.recorder = recorder
        self.envs: dict[str, JSON] = {}
        self.default_env: str | None = None
        self.episodes: list[_Episode] = []
        self._by_sid: dict[str, _Episode] = {}
        self._by_task_id: dict[str, _Call] = {}
        self._task_tools: dict[str, Any] = {}  # sid -> tools listing
        self._refusals: dict[str, dict[str, JSON]] = {}  # env (lower case) -> request key -> recorded 4xx
        self._secrets: set[str] = set()
        for value in (secrets or {}).values():  # sent upstream by the proxy itself: scrubbed as well
            self._secret(value)
        self.chunk_size: int | None = None

    # -- observing ---------------------------------------------------------------
    def ended(self, exchange: Exchange, path: str) -> None:
        """As an observer (:mod:`orsbench.wire.observe`): each finished exchange, recorded."""
        self(exchange)

    def __call__(self, exchange: Exchange) -> None:
        self._collect_secrets(exchange)
        if exchange.status is None:
            return
        path = urlsplit(exchange.url).path
        where = protocol.route_of(path)
        body = _json(exchange.request_body)
        sid = _header(exchange, protocol.SESSION_HEADER)
        if path == protocol.LIST_ENVIRONMENTS and exchange.status == 200:
            names = exchange.json_or_none()
            if isinstance(names, list) and names and isinstance(names[0], str):
                self.default_env = names[0]
                for name in names:
                    if isinstance(name, str):
                        self._env(name)
            return
        if path == protocol.CREATE:
            if _is_refusal(exchange) and isinstance(body, dict):
                env = str(body.get("env_name") or self.default_env or "")
                if env:
                    self._refusal(env, protocol.CREATE, body, exchange)
                return
            if exchange.status == 200 and sid and isinstance(body, dict):
                env = body.get("env_name") or self.default_env or ""
                source = {"task_spec": body["task_spec"]} if body.get("task_spec") is not None else {
                    "split": body.get("split"), "index": body.get("index")
                }
                if isinstance(body.get("split"), str) and str(env):
                    self._env(str(env))["seen_splits"].setdefault(body["split"], None)
                episode = _Episode(str(env), sid, source)
                self.episodes.append(episode)
                self._by_sid[sid] = episode
            return
        if where.env is None:
            return
        env, route = where
        if _is_refusal(exchange) and route in REFUSALS_KEPT:
            self._refusal(env, route, body, exchange)
            return
        if exchange.status != 200 or route not in (protocol.CALL, protocol.SCORE_GROUP) and exchange.json_or_none() is None:
            return
        record = self._env(env)
        answer = exchange.json_or_none()
        if isinstance(body, dict) and isinstance(body.get("split"), str) and route in _SPLIT_ROUTES:
            record["seen_splits"].setdefault(body["split"], None)  # a split the env answered for, in order
        if route == protocol.TOOLS and isinstance(answer, dict):
            record["tools"] = answer.get("tools")
        elif route == protocol.SPLITS:
            record["splits"] = answer
        elif route == protocol.TASKS and isinstance(body, dict) and isinstance(answer, dict):
            record["tasks"][str(body.get("split"))] = answer.get("tasks")
        elif route == protocol.NUM_TASKS and isinstance(body, dict) and isinstance(answer, dict):
            record["num_tasks"][str(body.get("split"))] = answer.get("num_tasks")
        elif route == protocol.TASK and isinstance(body, dict) and isinstance(answer, dict):
            record["task_answers"][f"{body.get('split')}/{body.get('index')}"] = answer.get("task")
        elif route == protocol.TASK_RANGE and isinstance(body, dict) and isinstance(answer, dict):
            start = body.get("start") or 0
            if isinstance(start, int) and start >= 0 and isinstance(answer.get("tasks"), list):
                for offset, task in enumerate(answer["tasks"]):  # an index-only environment's tasks, by index
                    record["task_answers"][f"{body.get('split')}/{start + offset}"] = task
        elif route == protocol.TASK_TOOLS and sid:
            self._task_tools[sid] = answer
        elif route == protocol.PROMPT and sid in self._by_sid:
            self._by_sid[sid].prompt = answer
        elif route == protocol.CALL and isinstance(body, dict):
            self._call(exchange, env, sid, body)

    def _call(self, exchange: Exchange, env: str, sid: str | None, body: JSON) -> None:
        if exchange.sse is None:
            return
        events = [[e.event, e.data] for e in exchange.sse.events if e.event != protocol.EVENT_TASK_ID]
        for event in exchange.sse.events:
            if event.event == protocol.EVENT_CHUNK:
                self.chunk_size = max(self.chunk_size or 0, len(event.data))
        complete = outcome_of(events)["kind"] != "none"
        if body.get("task_id") is not None:
            # A resume completes the call it resumes (after a dropped or stalled stream).
            call = self._by_task_id.get(str(body["task_id"]))
            if call is not None and call.events is None and complete:
                call.events = events
            return
        episode = self._by_sid.get(sid or "")
        if episode is None or not isinstance(body.get("name"), str):
            return
        episode.env = episode.env or env  # /create named no env and none was listed: the call's path says
        call = _Call(body["name"], body.get("input"), exchange.task_id, events if complete else None)
        episode.calls.append(call)
        if call.task_id:
            self._by_task_id[call.task_id] = call

    def _env(self, name: str) -> JSON:
        # Environment names route case-insensitively (§6.2): "Echo" and "echo" are one environment's answers.
        name = next((known for known in self.envs if known.lower() == name.lower()), name)
        if name not in self.envs:
            self.envs[name] = {
                "tools": None,
                "splits": None,
                "tasks": {},
                "num_tasks": {},
                "task_answers": {},
                "seen_splits": {},
            }
        return self.envs[name]

    def _refusal(self, env: str, route: str, body: Any, exchange: Exchange) -> None:
        """A 4xx answer to a request replay can match exactly (same route, same body): kept to be served as it was.

        Kept per environment name and written only for environments the recording has (a refusal
        for an unknown environment makes none up).
        """
        key = f"{route} {canonical(body)}"
        self._refusals.setdefault(env.lower(), {}).setdefault(
            key,
            {
                "route": route,
                "request": body,
                "status": exchange.status,
                "content_type": exchange.headers.get("content-type", protocol.JSON_CONTENT_TYPE),
                "body": exchange.body.decode("utf-8", "replace"),
            },
        )

    def _collect_secrets(self, exchange: Exchange) -> None:
        for name, value in exchange.request_headers.items():
            lower = name.lower()
            if lower == protocol.API_KEY_HEADER.lower():
                self._secret(value)
            elif lower == "authorization":
                self._secret(value)
                self._secret(value.partition(" ")[2])
            elif lower == protocol.SECRETS_HEADER.lower():
                self._secret(value)
                try:
                    decoded = json.loads(base64.b64decode(value))
                except ValueError:
                    continue
                if isinstance(decoded, dict):
                    for entry in decoded.values():
                        self._secret(entry.get("value") if isinstance(entry, dict) else entry)

    def _secret(self, value: Any) -> None:
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET:
            self._secrets.add(value.strip())

    # -- writing ------------------------------------------------------------------
    def cassette(self) -> JSON:
        """The cassette as JSON data, secrets scrubbed."""
        envs: JSON = {}
        for name, record in self.envs.items():
            default = (self.default_env or next(iter(self.envs))).lower()
            episodes = [e for e in self.episodes if (e.env or default).lower() == name.lower()]
            tasks = record["tasks"]
            prompts: dict[str, JSON] = {}
            task_tools: dict[str, JSON] = {}
            out_episodes = []
            for episode in episodes:
                task = self._task_of(record, episode.source)
                key = canonical(task)
                if episode.prompt is not None:
                    prompts.setdefault(key, {"task": task, "prompt": episode.prompt})
                listing = self._task_tools.get(episode.sid)
                if isinstance(listing, dict) and isinstance(listing.get("tools"), list):
                    task_tools.setdefault(key, {"task": task, "tools": listing["tools"]})
                calls = [c.to_json() for c in episode.calls if c.events is not None]
                if calls:
                    out_episodes.append({**episode.source, "task": task, "calls": calls})
            for split, listing in tasks.items():
                if isinstance(listing, list) and split not in record["num_tasks"]:
                    record["num_tasks"][split] = len(listing)
            splits, tools = record["splits"], record["tools"]
            inferred = []
            if splits is None and record["seen_splits"]:
                # /list_splits was never asked (TRL's OpenRewardSpec does not): the splits the env answered for.
                splits = [{"name": s, "type": s if s in protocol.SPLIT_TYPES else "train"} for s in record["seen_splits"]]
                inferred.append("splits")
            if tools is None and task_tools:
                # GET /tools was never asked: the tools every recorded session had (the shared ones).
                tools = _common_tools([entry["tools"] for entry in task_tools.values()])
                inferred.append("tools")
            envs[name] = {
                "tools": tools,
                "splits": splits,
                "inferred": inferred,
                "tasks": tasks,
                "num_tasks": record["num_tasks"],
                "task_answers": {k: v for k, v in record["task_answers"].items() if k.split("/")[0] not in tasks},
                "task_tools": list(task_tools.values()),
                "prompts": list(prompts.values()),
                "episodes": out_episodes,
                "refusals": list(self._refusals.get(name.lower(), {}).values()),
            }
        data = {
            "format": FORMAT,
            "version": VERSION,
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "recorder": self.recorder,
            "source": self.source,
            "default_env": self.default_env or next(iter(envs), None),
            "chunk_size": self.chunk_size,
            "environments": envs,
        }
        return self._scrub(data)

    def _task_of(self, record: JSON, source: JSON) -> Any:
        if "task_spec" in source:
            return source["task_spec"]
        split, index = source.get("split"), source.get("index")
        listing = record["tasks"].get(str(split))
        if isinstance(listing, list) and isinstance(index, int) and -len(listing) <= index < len(listing):
            return listing[index]
        return record["task_answers"].get(f"{split}/{index}")

    def _scrub(self, data: JSON) -> JSON:
        if not self._secrets:
            return data
        # ASCII JSON: every secret appears in one of redact.forms (JSON-escaped or as written), never across quotes.
        return json.loads(scrub(json.dumps(data), self._secrets))

    def save(self, path: str | os.PathLike[str]) -> JSON:
        """Write the cassette; returns what was written."""
        data = self.cassette()
        write(data, path)
        return data


#: Routes whose 4xx answers are kept (``/create`` and the dataset: an invalid split, an index out of range).
REFUSALS_KEPT = frozenset(
    {protocol.TASKS, protocol.NUM_TASKS, protocol.TASK, protocol.TASK_RANGE, protocol.CREATE}
)
_SPLIT_ROUTES = frozenset({protocol.TASKS, protocol.NUM_TASKS, protocol.TASK, protocol.TASK_RANGE})


def _is_refusal(exchange: Exchange) -> bool:
    """A complete 4xx answer (not 401/403, which say more about the key than the env; not 408/429: transient)."""
    return exchange.status is not None and 400 <= exchange.status < 500 and exchange.status not in (401, 403, 408, 429)


def _common_tools(listings: list[list[JSON]]) -> list[JSON]:
    """The tool specs present (by name) in every listing, in the first listing's order."""
    names = [{t.get("name") for t in listing if isinstance(t, dict)} for listing in listings]
    shared = set.intersection(*names) if names else set()
    return [t for t in listings[0] if isinstance(t, dict) and t.get("name") in shared] if listings else []


def write(data: JSON, path: str | os.PathLike[str]) -> None:
    """Write cassette data atomically (a reader never sees half a file)."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(target)


def miss_of(exchange: Exchange) -> str | None:
    """What a replay said it did not record, when ``exchange`` is its miss answer (else ``None``)."""
    if exchange.headers.get(MISS_HEADER.lower()) is None and MISS_PREFIX.encode() not in exchange.body:
        return None
    texts = [e.data for e in exchange.sse.events] if exchange.sse is not None else [exchange.body.decode("utf-8", "replace")]
    for text in texts:
        body = _json(text.encode())
        for key in ("detail", "error"):
            value = body.get(key) if isinstance(body, dict) else None
            if isinstance(value, str) and value.startswith(MISS_PREFIX):
                return value
    return MISS_PREFIX


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _header(exchange: Exchange, name: str) -> str | None:
    wanted = name.lower()
    return next((v.strip() for k, v in exchange.request_headers.items() if k.lower() == wanted), None) or None
