"""The evidence collector: drives the wire client through the probes, once.

Each probe is a script of requests (``discovery``, ``dataset``,
``session``, ``call``, then ``play``, ``fuzz`` and ``quality`` from
:mod:`orsbench.checks.explore`, and ``timing``) that records every
:class:`~orsbench.wire.evidence.Exchange` under a stable name in the
:class:`~orsbench.checks.evidence.Evidence`. Probes adapt only where the
protocol forces them to — which environment, which split, which tool and with
what input — and never judge: judging is the checks' job.

Sessions the collector opens are deleted when it closes, so a check run leaves
nothing behind on the target.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench import schema_examples as schema_input
from orsbench.checks.evidence import (
    NO_SUCH_ENV,
    NO_SUCH_SPLIT,
    NO_SUCH_TASK_ID,
    NO_SUCH_TOOL,
    Evidence,
    json_of,
    result_of,
    stream_of,
    task_id_of,
)
from orsbench.checks.explore import Explorer
from orsbench.checks.needs_secrets import missing_secrets
from orsbench.wire import url
from orsbench.wire.client import WireClient
from orsbench.wire.evidence import Exchange

#: The payload the chunking probe smuggles into an invalid tool input. Servers
#: echo invalid input in their validation error, so the answer outgrows one
#: SSE chunk (4096 characters) and its content is known. The unit is 7
#: characters long — coprime with 4096 — so consecutive chunk boundaries fall
#: on different positions of it and at least one of any two falls on a space
#: (the reference client drops such a space); the multibyte ``é`` catches
#: servers that cut by bytes instead of characters.
PADDING_UNIT = "      é"
PADDING = PADDING_UNIT * 1800

_JSON_HEADERS = {"Content-Type": protocol.JSON_CONTENT_TYPE}
_BAD_JSON = b'{"split": '


def unknown_name(kind: str, given: str, known: list[str], flag: str, where: str = "") -> str:
    """The usage error for an ``--env``/``--split`` the server does not have: what it has instead."""
    return f"no {kind} {given!r}{where} on this server; it has: {', '.join(known)} (use {flag} {known[0]})"


def _is_empty_split(num: Exchange, listing: Exchange) -> bool:
    """Both ``/num_tasks`` and ``/tasks`` (when it answers) agree that the split holds no task."""
    ok, body = json_of(num)
    if not (num.status == 200 and ok and isinstance(body, dict) and body.get("num_tasks") == 0):
        return False
    ok, body = json_of(listing)
    return listing.status != 200 or (ok and isinstance(body, dict) and body.get("tasks") == [])


class Collector(Explorer):
    """Runs probes against one target and records what came back (play, fuzz, quality: :class:`Explorer`)."""

    def __init__(self, client: WireClient, evidence: Evidence) -> None:
        self.client = client
        self.ev = evidence
        self.options = evidence.options
        self._open_sids: list[str] = []
        self._used_sids: set[str] = set()

    # -- plumbing ---------------------------------------------------------------
    def run(self, probe: str) -> None:
        getattr(self, f"probe_{probe}")()
        self.ev.probes_run.append(probe)

    def close(self) -> None:
        """Delete every session this collector opened (best effort)."""
        for sid in self._open_sids:
            self.client.delete(sid)
        self._open_sids.clear()

    def rec(self, name: str, exchange: Exchange) -> Exchange:
        return self.ev.record(name, exchange)

    def fresh(self, name: str, exchange: Exchange) -> Exchange:
        """Record a ``/call`` that started a new tool call (what the per-call checks grade)."""
        self.ev.facts.fresh_calls.append(name)
        return self.rec(name, exchange)

    def ready(self, send: Callable[[], Exchange]) -> Exchange:
        """Repeat ``send`` while the server answers 503 (setup still running), within ``--timeout``.

        The first 503 is kept as evidence for ``session.starting_503``.
        """
        exchange = send()
        deadline = time.monotonic() + self.options.timeout
        while exchange.status == 503 and time.monotonic() < deadline:
            self.ev.exchanges.setdefault("starting", exchange)
            time.sleep(0.05)
            exchange = send()
        return exchange

    def new_sid(self) -> str:
        """A fresh session id: from ``/create_session`` when the server gives new ones, else a local uuid4."""
        if self.ev.facts.create_session_works:
            sid = task_id_of(self.client.create_session())
            if sid and sid not in self._used_sids:
                self._used_sids.add(sid)
                return sid
        return f"orsbench-{uuid.uuid4()}"

    def task_source(self) -> dict[str, Any]:
        """The body fields of ``/create`` for the task under test."""
        if self.ev.split is not None and self.ev.index is not None:
            return {"split": self.ev.split, "index": self.ev.index}
        return {"task_spec": self.ev.facts.task0 or {}}

    def open_session(self, name: str | None = None) -> str | None:
        """``/create`` a session on the task under test; ``None`` when the server refuses."""
        sid = self.new_sid()
        exchange = self.client.create(sid, env_name=self.ev.env, **self.task_source())
        if name:
            self.rec(name, exchange)
        if exchange.status != 200:
            return None
        self._open_sids.append(sid)
        return sid

    def end_session(self, sid: str) -> None:
        self.client.delete(sid)
        if sid in self._open_sids:
            self._open_sids.remove(sid)

    def call(
        self, sid: str, name: str, tool_input: Any, *, task_id: str | None = None, max_stream_seconds: float | None = None
    ) -> Exchange:
        """A ``/call``, bounded by ``--timeout``, retried while the session is still starting."""
        env = self.ev.env or ""
        bound = self.options.timeout if max_stream_seconds is None else max_stream_seconds
        return self.ready(
            lambda: self.client.call(
                env, sid, name, tool_input, task_id=task_id, read_timeout=self.options.timeout, max_stream_seconds=bound
            )
        )

    # -- discovery --------------------------------------------------------------------
    def probe_discovery(self) -> None:
        c, ev = self.client, self.ev
        health = self.rec("health", c.health())
        if health.status is None:
            ev.unreachable = health.error or "no answer"
            return
        self.rec("version", c.version())
        envs = self.rec("list_environments", c.list_environments())
        ok, names = json_of(envs)
        listed = [n for n in names if isinstance(n, str) and n] if ok and envs.status == 200 and isinstance(names, list) else []
        env = self.options.env or (listed[0] if listed else None)
        if self.options.env and listed and env.lower() not in {n.lower() for n in listed}:
            ev.usage_error = unknown_name("environment", env, listed, "--env")
            return
        if env is None:
            # No usable listing: the default-environment redirect names the first env.
            bare = c.request("GET", "/" + protocol.TOOLS)
            location = urlsplit(bare.headers.get("location", "")).path
            if bare.status in (307, 308) and location.count("/") >= 2:
                env = location.strip("/").split("/")[0] or None
        stats = c.stats()
        ok_stats, stats_body = json_of(stats)
        if ok_stats and stats.status == 200 and isinstance(stats_body, dict):
            ev.facts.orsbench_stats = stats_body
        looks_ors = health.status == 200 or bool(listed)
        if not looks_ors and self._env_in_path():
            return
        if env is None or not looks_ors:
            ev.not_ors = (
                f"GET /health answered {health.status} and GET /list_environments gave no environment names"
                if not looks_ors
                else "no environment name could be found (pass --env NAME)"
            )
            return
        ev.env = env
        tools = self.rec("tools", c.tools(env))
        ok, body = json_of(tools)
        if tools.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tools"), list):
            ev.facts.tools = [t for t in body["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if tools.status != 200 and not listed and health.status != 200:
            ev.not_ors = f"GET /{env}/tools answered {tools.status}"
            return
        self.rec("splits", c.splits(env))
        self.rec("redirect.tools", c.request("GET", "/" + protocol.TOOLS))
        self.rec("redirect.query", c.request("GET", f"/{protocol.SPLITS}?orsbench=1"))
        swapped = env.swapcase()
        if swapped != env:
            self.rec("routing.case", c.tools(swapped))
        self.rec("routing.unknown_env", c.tools(NO_SUCH_ENV))
        self.rec("http.wrong_method", c.request("GET", protocol.CREATE))

    # -- dataset ------------------------------------------------------------------------
    def probe_dataset(self) -> None:
        c, ev = self.client, self.ev
        env = ev.env
        if env is None:
            return
        ok, splits = json_of(ev.get("splits"))
        names: list[str] = []
        train: list[str] = []
        if ok and isinstance(splits, list):
            for item in splits:
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    names.append(item["name"])
                    if item.get("type") == "train":
                        train.append(item["name"])
                elif isinstance(item, str):
                    names.append(item)
        split = self.options.split or (train[0] if train else names[0] if names else None)
        if self.options.split and names and split not in names:
            ev.usage_error = unknown_name("split", split, names, "--split", where=f" of environment {env!r}")
            return
        ev.split = split
        if split is None:
            return
        count: int | None = None
        num = self.rec("dataset.num_tasks", c.num_tasks(env, split))
        ok, body = json_of(num)
        if num.status == 200 and ok and isinstance(body, dict) and type(body.get("num_tasks")) is int:
            count = body["num_tasks"]
        listing = self.rec("dataset.tasks", c.tasks(env, split))
        ok, body = json_of(listing)
        if listing.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tasks"), list):
            count = len(body["tasks"])
            if all(isinstance(t, dict) for t in body["tasks"]):
                ev.facts.tasks = body["tasks"]
        if count:
            first = self.rec("dataset.task.first", c.task(env, split, 0))
            self.rec("dataset.task.last", c.task(env, split, count - 1))
            self.rec("dataset.task.negative", c.task(env, split, -1))
            ok, body = json_of(first)
            if ev.facts.tasks:
                ev.facts.task0 = ev.facts.tasks[0]
            elif first.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("task"), dict):
                ev.facts.task0 = body["task"]
            ev.index = 0
        if count == 0 and _is_empty_split(num, listing):
            ev.usage_error = self._empty_split(env, split, names)
            return
        if count is not None:
            ev.facts.count = count
            self.rec("dataset.task.past_end", c.task(env, split, count))
            self.rec("dataset.range.slice", c.task_range(env, split, 1, 3))
            self.rec("dataset.range.all", c.task_range(env, split))
            self.rec("dataset.range.past_end", c.task_range(env, split, count + 5, count + 9))
        self.rec("dataset.invalid_split.tasks", c.tasks(env, NO_SUCH_SPLIT))
        self.rec("dataset.invalid_split.num_tasks", c.num_tasks(env, NO_SUCH_SPLIT))
        self.rec("dataset.invalid_split.task", c.task(env, NO_SUCH_SPLIT, 0))
        self.rec("dataset.invalid_split.task_range", c.task_range(env, NO_SUCH_SPLIT))
        self.rec(
            "http.malformed.tasks",
            c.request("POST", protocol.env_path(env, protocol.TASKS), content=_BAD_JSON, headers=_JSON_HEADERS),
        )

    def _env_in_path(self) -> bool:
        """``http://host:port/echo`` where ``echo`` is an environment of the server at the root: a usage error."""
        split = url.split_env_path(self.ev.target)
        if split is None:
            return False
        root, segment = split
        with WireClient(root, timeout=self.options.timeout, api_key=self.options.api_key, secrets=self.options.secrets) as at_root:
            ok, names = json_of(at_root.list_environments())
        if ok and isinstance(names, list) and segment.lower() in {n.lower() for n in names if isinstance(n, str)}:
            self.ev.usage_error = url.env_in_path_hint(self.ev.target, root, segment)
            return True
        return False

    def _empty_split(self, env: str, split: str, names: list[str]) -> str:
        """The usage error for a split with no tasks, naming the splits that have some."""
        others = []
        for name in names:
            if name == split:
                continue
            ok, body = json_of(self.client.num_tasks(env, name))
            if ok and isinstance(body, dict) and type(body.get("num_tasks")) is int and body["num_tasks"] > 0:
                others.append(f"{name} ({body['num_tasks']} tasks)")
        where = f"choose one with --split: {', '.join(others)}" if others else "no split of it has any task"
        return f"split {split!r} of environment {env!r} has no tasks, so no session can be opened to check; {where}"

    # -- sessions -----------------------------------------------------------------------
    def probe_session(self) -> None:
        c, ev = self.client, self.ev
        env = ev.env
        if env is None:
            return
        first = self.rec("session.create_session", c.create_session())
        self.rec("session.create_session.second", c.create_session())
        ev.facts.create_session_works = bool(task_id_of(first))
        self._used_sids.add(task_id_of(first) or "")
        sid = self.new_sid()
        source = self.task_source()
        create = self.rec("session.create", c.create(sid, env_name=env, **source))
        if create.status == 200:
            self._open_sids.append(sid)
        elif self._needs_secrets(create, "POST /create"):
            return
        ev.facts.sid = sid
        # At once, while a slow setup() would still run: the one moment a 503 "starting" can be seen.
        early = self.rec("session.prompt.early", c.prompt(env, sid))
        if early.status == 503:
            ev.exchanges.setdefault("starting", early)
        # Sessions for the call and play probes, opened now so that a slow setup() runs while this probe does.
        ev.facts.spare_sids = [s for s in (self.open_session(), self.open_session()) if s]
        self.rec("session.create.duplicate", c.create(sid, env_name=env, **source))
        self.rec("session.no_sid.create", c.request("POST", protocol.CREATE, json_body={"env_name": env, **source}))
        self._refused_create(
            "session.create.both",
            {**source, "task_spec": ev.facts.task0 or {}, "split": ev.split or "train", "index": ev.index or 0},
        )
        self._refused_create("session.create.neither", {})
        spec_sid = self.new_sid()
        self.rec("session.create.task_spec", c.create(spec_sid, env_name=env, task_spec=ev.facts.task0 or {}))
        c.delete(spec_sid)
        self._refused_create("session.create.invalid_split", {"split": NO_SUCH_SPLIT, "index": 0})
        if ev.split is not None and ev.facts.count is not None:
            self._refused_create("session.create.invalid_index", {"split": ev.split, "index": ev.facts.count})
        self._refused_create("session.create.unknown_env", source, env_name=NO_SUCH_ENV)
        self._sdk_headers(source)
        malformed_sid = self.new_sid()
        self.rec(
            "http.malformed.create",
            c.request("POST", protocol.CREATE, sid=malformed_sid, content=_BAD_JSON, headers=_JSON_HEADERS),
        )
        c.delete(malformed_sid)

        self.rec("session.task_tools", c.task_tools(env, sid))
        if self._needs_secrets(self.rec("session.prompt", self.ready(lambda: c.prompt(env, sid))), f"GET /{env}/prompt"):
            return
        self.rec("session.messages", self.ready(lambda: c.messages(env, sid)))
        self.rec("session.ping", c.ping(sid))
        candidates = [
            {"messages": [{"role": "assistant", "blocks": [{"type": "text", "text": f"orsbench {i}"}]}], "metadata": None}
            for i in range(2)
        ]
        self.rec("session.score_group", self.ready(lambda: c.score_group(env, sid, candidates)))

        unknown = f"orsbench-unknown-{uuid.uuid4()}"
        self.rec("session.unknown.ping", c.ping(unknown))
        self.rec("session.unknown.prompt", c.prompt(env, unknown))
        self.rec("session.unknown.call", c.call(env, unknown, NO_SUCH_TOOL, {}, max_stream_seconds=self.options.timeout))
        self.rec("session.no_sid.ping", c.request("POST", protocol.PING))
        self.rec("session.no_sid.prompt", c.request("GET", protocol.env_path(env, protocol.PROMPT)))
        self.rec(
            "session.no_sid.call",
            c.request(
                "POST",
                protocol.env_path(env, protocol.CALL),
                json_body={"name": NO_SUCH_TOOL, "input": {}},
                stream=True,
                max_stream_seconds=self.options.timeout,
            ),
        )
        self.rec("session.no_sid.delete", c.request("POST", protocol.DELETE))

        # Lifecycle of a second session: delete, use after delete, delete again, re-create.
        life = self.new_sid()
        self.rec("session.life.create", c.create(life, env_name=env, **source))
        self.rec("session.delete", c.delete(life))
        self.rec("session.after_delete.ping", c.ping(life))
        self.rec("session.after_delete.prompt", c.prompt(env, life))
        self.rec("session.delete.again", c.delete(life))
        self.rec("session.delete.unknown", c.delete(f"orsbench-never-{uuid.uuid4()}"))
        self.rec("session.delete_session", c.delete_session(life))
        self.rec("session.recreate", c.create(life, env_name=env, **source))
        self.rec("session.recreate.ping", c.ping(life))
        c.delete(life)

    def _needs_secrets(self, exchange: Exchange, what: str) -> bool:
        """A session that failed for want of a secret: a usage error naming it, not a protocol failure (§14)."""
        self.ev.usage_error = missing_secrets(exchange, what, self.options.secrets)
        return self.ev.usage_error is not None

    def _sdk_headers(self, source: dict[str, Any]) -> None:
        """``/create`` and a plain GET with the headers the openreward SDK always sends (§6.3).

        The SDK sends ``X-API-Key`` even when the key is empty, and ``X-Secrets``
        on every ``/create`` (with ``api_key`` entries it adds itself).
        """
        env = self.ev.env or ""
        key = self.options.api_key or ""
        secrets = {name: {"value": key, "allowed_domains": ["127.0.0.1"]} for name in ("api_key", "OPENREWARD_API_KEY")}
        secrets |= {name: {"value": value} for name, value in self.options.secrets.items()}
        headers = {
            protocol.API_KEY_HEADER: key,
            protocol.SECRETS_HEADER: base64.b64encode(json.dumps(secrets).encode()).decode(),
            protocol.DEPLOYMENT_HEADER: env,
            "User-Agent": f"openreward-sdk/{protocol.REFERENCE_VERSION}",
        }
        sid = self.new_sid()
        self.rec(
            "session.sdk_headers.create",
            self.client.request("POST", protocol.CREATE, sid=sid, json_body={"env_name": env, **source}, headers=headers),
        )
        self.client.delete(sid)
        self.rec(
            "session.sdk_headers.tools",
            self.client.request("GET", protocol.env_path(env, protocol.TOOLS), headers={protocol.API_KEY_HEADER: key}),
        )

    def _refused_create(self, name: str, body: dict[str, Any], env_name: str | None = None) -> None:
        """A ``/create`` the server should refuse, then ``task_tools`` to see whether a session was left behind."""
        sid = self.new_sid()
        exchange = self.client.request("POST", protocol.CREATE, sid=sid, json_body={"env_name": env_name or self.ev.env, **body})
        self.rec(name, exchange)
        # Was a session left behind? task_tools answers 404 for no session and does not wait for setup.
        self.rec(name + ".left", self.client.task_tools(self.ev.env or "", sid))
        if exchange.status == 200:
            self.client.delete(sid)

    # -- tool calls -------------------------------------------------------------------------
    def _session_tools(self, sid: str) -> list[dict[str, Any]]:
        """Tools callable in ``sid``: the shared listing merged with ``task_tools`` (task_tools wins)."""
        merged: dict[str, dict[str, Any]] = {t["name"]: t for t in self.ev.facts.tools}
        exchange = self.client.task_tools(self.ev.env or "", sid)
        ok, body = json_of(exchange)
        if exchange.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tools"), list):
            for spec in body["tools"]:
                if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                    merged[spec["name"]] = spec
        return list(merged.values())

    def _plan(self, tools: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], dict[str, str]]:
        """(tool, minimal input) for every tool an input can be built for, and why not for the rest."""
        callable_: list[tuple[dict[str, Any], dict[str, Any]]] = []
        unbuildable: dict[str, str] = {}
        for spec in tools:
            try:
                callable_.append((spec, schema_input.minimal_input(spec.get("input_schema"))))
            except schema_input.NoInput as exc:
                unbuildable[spec["name"]] = str(exc)
        return callable_, unbuildable

    def probe_call(self) -> None:
        c, ev = self.client, self.ev
        if ev.env is None:
            return
        spares = ev.facts.spare_sids
        sid = spares.pop(0) if spares else self.open_session()
        if sid is None:
            ev.facts.call_blocked = "/create refused the session the call probe needed"
            return
        ev.facts.call_sid = sid
        # The play probe's session, opened early so that a slow setup() runs alongside this one's.
        ev.facts.play_sid = spares.pop(0) if spares else self.open_session()
        tools = self._session_tools(sid)
        plan, unbuildable = self._plan(tools)
        ev.facts.call_plan = [(spec["name"], value) for spec, value in plan]
        ev.facts.unbuildable = unbuildable
        if not plan:
            return
        self.fresh("call.unknown_tool", self.call(sid, NO_SUCH_TOOL, {}))
        invalid = next(
            (
                (spec, bad)
                for spec, value in plan
                if (bad := schema_input.invalid_input(spec.get("input_schema"), value)) is not None
            ),
            None,
        )
        if invalid is not None:
            spec, bad = invalid
            ev.facts.invalid_input = (spec["name"], bad)
            self.fresh("call.invalid_input", self.call(sid, spec["name"], bad))
            base = next(value for s, value in plan if s is spec)
            large = schema_input.invalid_input(spec.get("input_schema"), base, PADDING)
            if large is not None:
                ev.facts.padding = PADDING
                ev.facts.padding_unit = PADDING_UNIT
                self.fresh("call.large", self.call(sid, spec["name"], large))
        tool, value = plan[0]
        self.rec(
            "http.malformed.call",
            self.ready(
                lambda: c.request(
                    "POST",
                    protocol.env_path(ev.env or "", protocol.CALL),
                    sid=sid,
                    json_body={"name": tool["name"]},
                    stream=True,
                    max_stream_seconds=self.options.timeout,
                )
            ),
        )
        primary = self.fresh("call.primary", self.call(sid, tool["name"], value))
        if task_id_of(primary):
            self.rec("call.resume", self.call(sid, tool["name"], value, task_id=task_id_of(primary)))
        self.rec("call.unknown_task_id", self.call(sid, tool["name"], value, task_id=NO_SUCH_TASK_ID))
        kind, body = result_of(primary)
        ev.facts.call_session_finished = (
            kind == "result" and isinstance(body.get("output"), dict) and body["output"].get("finished") is True
        )

    # -- timing: resume while running, keep-alives, TTL -------------------------------------
    def probe_timing(self) -> None:
        ev = self.ev
        if ev.env is None:
            return
        self._resume_running()
        self._ttl()

    def _resume_running(self) -> None:
        """Cut a slow call's stream after its ``task_id`` and resume it, as the SDK does after a drop."""
        ev = self.ev
        slow = [(name, t) for name, t in ev.facts.durations.items() if t >= 0.5]
        plan = dict(ev.facts.call_plan)
        if not slow:
            return
        name, duration = max(slow, key=lambda item: item[1])
        if duration > self.options.timeout:
            return
        reuse = ev.facts.call_sid if not ev.facts.call_session_finished else None
        sid = reuse or self.open_session()
        if sid is None:
            return
        cut = self.call(sid, name, plan.get(name, {}), max_stream_seconds=min(duration / 4, 2.0))
        self.rec("timing.cut", cut)
        events = stream_of(cut).events if stream_of(cut) is not None else []
        if task_id_of(cut) and not any(e.event in (protocol.EVENT_END, protocol.EVENT_ERROR) for e in events):
            self.rec("timing.resume", self.call(sid, name, plan.get(name, {}), task_id=task_id_of(cut)))
        if sid != reuse:
            self.end_session(sid)

    def _ttl(self) -> None:
        """Idle one session past the TTL while pinging another; only when that fits in ``--timeout``."""
        ev = self.ev
        ttl, reaper = self.ttl()
        if ttl is None:
            ev.facts.ttl_skip = "the server's session TTL is unknown (pass --ttl SECONDS)"
            return
        wait = ttl + reaper + 0.5
        if wait > self.options.timeout:
            ev.facts.ttl_skip = (
                f"waiting out the TTL ({ttl:g} s + {reaper:g} s reaper) would exceed --timeout {self.options.timeout:g} s; "
                "serve with a short TTL (orsbench serve --ttl 2) or raise --timeout"
            )
            return
        idle = self.open_session("timing.ttl.idle.create")
        kept = self.open_session("timing.ttl.kept.create")
        if idle is None or kept is None:
            return
        start = time.monotonic()
        while time.monotonic() - start < wait:
            self.client.ping(kept)
            time.sleep(min(ttl / 3, 1.0))
        ev.facts.ttl_waited = round(time.monotonic() - start, 3)
        self.rec("timing.ttl.idle.ping", self.client.ping(idle))
        self.rec("timing.ttl.kept.ping", self.client.ping(kept))

    def ttl(self) -> tuple[float | None, float]:
        """The TTL and reaper interval: from ``--ttl``, else as an orsbench server reports them."""
        config = (self.ev.facts.orsbench_stats or {}).get("config") or {}
        ttl = self.options.ttl if self.options.ttl is not None else config.get("ttl")
        if not isinstance(ttl, (int, float)):
            return None, 0.0
        reaper = config.get("reaper_interval")
        if not isinstance(reaper, (int, float)):
            reaper = max(0.05, min(protocol.REAPER_INTERVAL_S, ttl / 4))
        return float(ttl), float(reaper)

