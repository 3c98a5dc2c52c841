"""The wire probes: ``discovery``, ``dataset``, ``session`` and ``call``.

Each is a function over the :class:`~orsbench.checks.collector.Collector`,
registered with :func:`~orsbench.checks.collector.probe`, that records what the
server answered to the requests the protocol defines (``docs/protocol.md``
§1–§5, §8); the checks judge it. Play, fuzz and quality are in
:mod:`orsbench.checks.explore`, timing in :mod:`orsbench.checks.timing`.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench import schema_examples as schema_input
from orsbench.checks import deployment_probe
from orsbench.checks.collector import Collector, probe
from orsbench.checks.evidence import (
    NO_SUCH_ENV,
    NO_SUCH_SPLIT,
    NO_SUCH_TASK_ID,
    NO_SUCH_TOOL,
    json_of,
    result_of,
    task_id_of,
)
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


# -- discovery --------------------------------------------------------------------
@probe("discovery")
def probe_discovery(col: Collector) -> None:
    c, ev = col.client, col.ev
    health = col.rec("health", c.health())
    if health.status is None:
        ev.unreachable = health.error or "no answer"
        return
    col.rec("version", c.version())
    envs = col.rec("list_environments", c.list_environments())
    if envs.status in (401, 403):  # an ORS server behind a key: not "not ORS", a key to give
        given = "the API key sent was refused" if col.options.api_key else "give it in $ORSBENCH_API_KEY (or --api-key KEY)"
        ev.usage_error = f"GET /list_environments answered {envs.status}: the server wants an API key; {given}"
        return
    ok, names = json_of(envs)
    listed = [n for n in names if isinstance(n, str) and n] if ok and envs.status == 200 and isinstance(names, list) else []
    env = col.options.env or (listed[0] if listed else None)
    if col.options.env and listed and env.lower() not in {n.lower() for n in listed}:
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
    if not looks_ors and _env_in_path(col):
        return
    if env is None or not looks_ors:
        ev.not_ors = (
            f"GET /health answered {health.status} and GET /list_environments gave no environment names"
            if not looks_ors
            else "no environment name could be found (pass --env NAME)"
        )
        return
    ev.env = env
    tools = col.rec("tools", c.tools(env))
    ok, body = json_of(tools)
    if tools.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tools"), list):
        ev.facts.tools = [t for t in body["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    if tools.status != 200 and not listed and health.status != 200:
        ev.not_ors = f"GET /{env}/tools answered {tools.status}"
        return
    col.rec("splits", c.splits(env))
    col.rec("redirect.tools", c.request("GET", "/" + protocol.TOOLS))
    col.rec("redirect.query", c.request("GET", f"/{protocol.SPLITS}?orsbench=1"))
    swapped = env.swapcase()
    if swapped != env:
        col.rec("routing.case", c.tools(swapped))
    col.rec("routing.unknown_env", c.tools(NO_SUCH_ENV))
    col.rec("http.wrong_method", c.request("GET", protocol.CREATE))


# -- dataset ------------------------------------------------------------------------
@probe("dataset")
def probe_dataset(col: Collector) -> None:
    c, ev = col.client, col.ev
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
    split = col.options.split or (train[0] if train else names[0] if names else None)
    if col.options.split and names and split not in names:
        ev.usage_error = unknown_name("split", split, names, "--split", where=f" of environment {env!r}")
        return
    ev.split = split
    if split is None:
        return
    count: int | None = None
    num = col.rec("dataset.num_tasks", c.num_tasks(env, split))
    ok, body = json_of(num)
    if num.status == 200 and ok and isinstance(body, dict) and type(body.get("num_tasks")) is int:
        count = body["num_tasks"]
    listing = col.rec("dataset.tasks", c.tasks(env, split))
    ok, body = json_of(listing)
    if listing.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tasks"), list):
        count = len(body["tasks"])
        if all(isinstance(t, dict) for t in body["tasks"]):
            ev.facts.tasks = body["tasks"]
    if count:
        first = col.rec("dataset.task.first", c.task(env, split, 0))
        col.rec("dataset.task.last", c.task(env, split, count - 1))
        col.rec("dataset.task.negative", c.task(env, split, -1))
        ok, body = json_of(first)
        if ev.facts.tasks:
            ev.facts.task0 = ev.facts.tasks[0]
        elif first.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("task"), dict):
            ev.facts.task0 = body["task"]
        ev.index = 0
    if count == 0 and _is_empty_split(num, listing):
        ev.usage_error = _empty_split(col, env, split, names)
        return
    if count is not None:
        ev.facts.count = count
        col.rec("dataset.task.past_end", c.task(env, split, count))
        col.rec("dataset.range.slice", c.task_range(env, split, 1, 3))
        col.rec("dataset.range.all", c.task_range(env, split))
        col.rec("dataset.range.past_end", c.task_range(env, split, count + 5, count + 9))
    col.rec("dataset.invalid_split.tasks", c.tasks(env, NO_SUCH_SPLIT))
    col.rec("dataset.invalid_split.num_tasks", c.num_tasks(env, NO_SUCH_SPLIT))
    col.rec("dataset.invalid_split.task", c.task(env, NO_SUCH_SPLIT, 0))
    col.rec("dataset.invalid_split.task_range", c.task_range(env, NO_SUCH_SPLIT))
    col.rec(
        "http.malformed.tasks",
        c.request("POST", protocol.env_path(env, protocol.TASKS), content=_BAD_JSON, headers=_JSON_HEADERS),
    )


def _env_in_path(col: Collector) -> bool:
    """``http://host:port/echo`` where ``echo`` is an environment of the server at the root: a usage error."""
    split = url.split_env_path(col.ev.target)
    if split is None:
        return False
    root, segment = split
    with WireClient(root, timeout=col.options.timeout, api_key=col.options.api_key, secrets=col.options.secrets) as at_root:
        ok, names = json_of(at_root.list_environments())
    if ok and isinstance(names, list) and segment.lower() in {n.lower() for n in names if isinstance(n, str)}:
        col.ev.usage_error = url.env_in_path_hint(col.ev.target, root, segment)
        return True
    return False


def _empty_split(col: Collector, env: str, split: str, names: list[str]) -> str:
    """The usage error for a split with no tasks, naming the splits that have some."""
    others = []
    for name in names:
        if name == split:
            continue
        ok, body = json_of(col.client.num_tasks(env, name))
        if ok and isinstance(body, dict) and type(body.get("num_tasks")) is int and body["num_tasks"] > 0:
            others.append(f"{name} ({body['num_tasks']} tasks)")
    where = f"choose one with --split: {', '.join(others)}" if others else "no split of it has any task"
    return f"split {split!r} of environment {env!r} has no tasks, so no session can be opened to check; {where}"


# -- affinity: routing is judged before the probes whose requests it would scatter ----------------------
@probe("affinity", leaf=True)
def probe_affinity(col: Collector) -> None:
    """Sessions used over time, each request on a new connection: does every request of a session reach the process
    that holds it? Run before the session probe, so that ``deployment.affinity`` is listed (and judged) before the
    session and call checks a balancer without affinity makes fail (:mod:`orsbench.checks.deployment_probe`)."""
    plan, _ = _plan(col.ev.facts.tools)
    deployment_probe.affinity(col, [(spec["name"], value) for spec, value in plan])


# -- sessions -----------------------------------------------------------------------
@probe("session")
def probe_session(col: Collector) -> None:
    c, ev = col.client, col.ev
    env = ev.env
    if env is None:
        return
    first = col.rec("session.create_session", c.create_session())
    col.rec("session.create_session.second", c.create_session())
    ev.facts.create_session_works = bool(task_id_of(first))
    col.seen_sid(task_id_of(first) or "")
    sid = col.new_sid()
    source = col.task_source()
    create = col.rec("session.create", c.create(sid, env_name=env, **source))
    if create.status == 200:
        col.adopt(sid)
    elif _needs_secrets(col, create, "POST /create"):
        return
    ev.facts.sid = sid
    # At once, while a slow setup() would still run: the one moment a 503 "starting" can be seen.
    early = col.rec("session.prompt.early", c.prompt(env, sid))
    if early.status == 503:
        ev.exchanges.setdefault("starting", early)
    # Sessions for the call and play probes, opened now so that a slow setup() runs while this probe does.
    ev.facts.spare_sids = [s for s in (col.open_session(), col.open_session()) if s]
    col.rec("session.create.duplicate", c.create(sid, env_name=env, **source))
    col.rec("session.no_sid.create", c.request("POST", protocol.CREATE, json_body={"env_name": env, **source}))
    _refused_create(col, 
        "session.create.both",
        {**source, "task_spec": ev.facts.task0 or {}, "split": ev.split or "train", "index": ev.index or 0},
    )
    _refused_create(col, "session.create.neither", {})
    spec_sid = col.new_sid()
    col.rec("session.create.task_spec", c.create(spec_sid, env_name=env, task_spec=ev.facts.task0 or {}))
    c.delete(spec_sid)
    _refused_create(col, "session.create.invalid_split", {"split": NO_SUCH_SPLIT, "index": 0})
    if ev.split is not None and ev.facts.count is not None:
        _refused_create(col, "session.create.invalid_index", {"split": ev.split, "index": ev.facts.count})
    _refused_create(col, "session.create.unknown_env", source, env_name=NO_SUCH_ENV)
    _sdk_headers(col, source)
    malformed_sid = col.new_sid()
    col.rec(
        "http.malformed.create",
        c.request("POST", protocol.CREATE, sid=malformed_sid, content=_BAD_JSON, headers=_JSON_HEADERS),
    )
    c.delete(malformed_sid)

    col.rec("session.task_tools", c.task_tools(env, sid))
    if _needs_secrets(col, col.rec("session.prompt", col.ready(lambda: c.prompt(env, sid))), f"GET /{env}/prompt"):
        return
    col.rec("session.messages", col.ready(lambda: c.messages(env, sid)))
    col.rec("session.ping", c.ping(sid))
    candidates = [
        {"messages": [{"role": "assistant", "blocks": [{"type": "text", "text": f"orsbench {i}"}]}], "metadata": None}
        for i in range(2)
    ]
    col.rec("session.score_group", col.ready(lambda: c.score_group(env, sid, candidates)))

    unknown = f"orsbench-unknown-{uuid.uuid4()}"
    col.rec("session.unknown.ping", c.ping(unknown))
    col.rec("session.unknown.prompt", c.prompt(env, unknown))
    col.rec("session.unknown.call", c.call(env, unknown, NO_SUCH_TOOL, {}, max_stream_seconds=col.options.timeout))
    col.rec("session.no_sid.ping", c.request("POST", protocol.PING))
    col.rec("session.no_sid.prompt", c.request("GET", protocol.env_path(env, protocol.PROMPT)))
    col.rec(
        "session.no_sid.call",
        c.request(
            "POST",
            protocol.env_path(env, protocol.CALL),
            json_body={"name": NO_SUCH_TOOL, "input": {}},
            stream=True,
            max_stream_seconds=col.options.timeout,
        ),
    )
    col.rec("session.no_sid.delete", c.request("POST", protocol.DELETE))

    # Lifecycle of a second session: delete, use after delete, delete again, re-create.
    life = col.new_sid()
    col.rec("session.life.create", c.create(life, env_name=env, **source))
    col.rec("session.delete", c.delete(life))
    col.rec("session.after_delete.ping", c.ping(life))
    col.rec("session.after_delete.prompt", c.prompt(env, life))
    col.rec("session.delete.again", c.delete(life))
    col.rec("session.delete.unknown", c.delete(f"orsbench-never-{uuid.uuid4()}"))
    col.rec("session.delete_session", c.delete_session(life))
    col.rec("session.recreate", c.create(life, env_name=env, **source))
    col.rec("session.recreate.ping", c.ping(life))
    c.delete(life)


def _needs_secrets(col: Collector, exchange: Exchange, what: str) -> bool:
    """A session that failed for want of a secret: a usage error naming it, not a protocol failure (§14)."""
    col.ev.usage_error = missing_secrets(exchange, what, col.options.secrets)
    return col.ev.usage_error is not None


def _sdk_headers(col: Collector, source: dict[str, Any]) -> None:
    """``/create`` and a plain GET with the headers the openreward SDK always sends (§6.3).

    The SDK sends ``X-API-Key`` even when the key is empty, and ``X-Secrets``
    on every ``/create`` (with ``api_key`` entries it adds itself).
    """
    env = col.ev.env or ""
    key = col.options.api_key or ""
    secrets = {name: {"value": key, "allowed_domains": ["127.0.0.1"]} for name in ("api_key", "OPENREWARD_API_KEY")}
    secrets |= {name: {"value": value} for name, value in col.options.secrets.items()}
    headers = {
        protocol.API_KEY_HEADER: key,
        protocol.SECRETS_HEADER: base64.b64encode(json.dumps(secrets).encode()).decode(),
        protocol.DEPLOYMENT_HEADER: env,
        "User-Agent": f"openreward-sdk/{protocol.REFERENCE_VERSION}",
    }
    sid = col.new_sid()
    col.rec(
        "session.sdk_headers.create",
        col.client.request("POST", protocol.CREATE, sid=sid, json_body={"env_name": env, **source}, headers=headers),
    )
    col.client.delete(sid)
    col.rec(
        "session.sdk_headers.tools",
        col.client.request("GET", protocol.env_path(env, protocol.TOOLS), headers={protocol.API_KEY_HEADER: key}),
    )


def _refused_create(col: Collector, name: str, body: dict[str, Any], env_name: str | None = None) -> None:
    """A ``/create`` the server should refuse, then ``task_tools`` to see whether a session was left behind."""
    sid = col.new_sid()
    exchange = col.client.request("POST", protocol.CREATE, sid=sid, json_body={"env_name": env_name or col.ev.env, **body})
    col.rec(name, exchange)
    # Was a session left behind? task_tools answers 404 for no session and does not wait for setup.
    col.rec(name + ".left", col.client.task_tools(col.ev.env or "", sid))
    if exchange.status == 200:
        col.client.delete(sid)


# -- tool calls -------------------------------------------------------------------------
def _plan(tools: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], dict[str, str]]:
    """(tool, minimal input) for every tool an input can be built for, and why not for the rest."""
    callable_: list[tuple[dict[str, Any], dict[str, Any]]] = []
    unbuildable: dict[str, str] = {}
    for spec in tools:
        try:
            callable_.append((spec, schema_input.minimal_input(spec.get("input_schema"))))
        except schema_input.NoInput as exc:
            unbuildable[spec["name"]] = str(exc)
    return callable_, unbuildable


@probe("call")
def probe_call(col: Collector) -> None:
    c, ev = col.client, col.ev
    if ev.env is None:
        return
    spares = ev.facts.spare_sids
    sid = col.still_open(spares.pop(0)) if spares else col.open_session()
    if sid is None:
        ev.facts.call_blocked = "/create refused the session the call probe needed"
        return
    ev.facts.call_sid = sid
    # The play probe's session, opened early so that a slow setup() runs alongside this one's.
    ev.facts.play_sid = spares.pop(0) if spares else col.open_session()
    tools = col.session_tools(sid)
    plan, unbuildable = _plan(tools)
    ev.facts.call_plan = [(spec["name"], value) for spec, value in plan]
    ev.facts.unbuildable = unbuildable
    if not plan:
        return
    col.fresh("call.unknown_tool", col.call(sid, NO_SUCH_TOOL, {}))
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
        col.fresh("call.invalid_input", col.call(sid, spec["name"], bad))
        base = next(value for s, value in plan if s is spec)
        large = schema_input.invalid_input(spec.get("input_schema"), base, PADDING)
        if large is not None:
            ev.facts.padding = PADDING
            ev.facts.padding_unit = PADDING_UNIT
            col.fresh("call.large", col.call(sid, spec["name"], large))
    tool, value = plan[0]
    col.rec(
        "http.malformed.call",
        col.ready(
            lambda: c.request(
                "POST",
                protocol.env_path(ev.env or "", protocol.CALL),
                sid=sid,
                json_body={"name": tool["name"]},
                stream=True,
                max_stream_seconds=col.options.timeout,
            )
        ),
    )
    primary = col.fresh("call.primary", col.call(sid, tool["name"], value))
    if task_id_of(primary):
        col.rec("call.resume", col.call(sid, tool["name"], value, task_id=task_id_of(primary)))
    col.rec("call.unknown_task_id", col.call(sid, tool["name"], value, task_id=NO_SUCH_TASK_ID))
    kind, body = result_of(primary)
    ev.facts.call_session_finished = (
        kind == "result" and isinstance(body.get("output"), dict) and body["output"].get("finished") is True
    )
