"""Locust: whole ORS episodes per second, the way a trainer's rollouts drive a server.

    locust -f orsbench/load.py --headless -u 20 -r 10 -t 20s           # embedded echo mock
    locust -f orsbench/load.py --host http://127.0.0.1:8000 --ors-calls 4

Each simulated user runs episodes back to back, as one rollout worker does:
``create_session`` (SSE) → ``create`` → ``prompt`` → ``task_tools`` → N × ``call``
(SSE, read to ``end``) → ``delete`` → ``delete_session``. Every answer is judged
by :mod:`orsbench.bench.episode` (shared with ``orsbench bench``); a failed or
truncated stage is a Locust failure saying what came, and fails its episode.

Locust stops its clock for a streamed request when the headers arrive, so the
user fires its own events as well: ``SSE <stage> task_id`` and ``SSE <stage> end``
(time from sending the request to that event) and ``ORS episode`` (the whole
episode). Streams are parsed by the project's one SSE parser.

Without ``--host`` the locustfile starts an embedded server (``--ors-scenario``,
default ``echo``, on 127.0.0.1 through :mod:`orsbench.servers.launch`) and stops
it when Locust quits. It never sends a request anywhere but the host. See
``docs/load.md`` for distributed runs and the custom arguments.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import select
import sys
import time
from typing import Any

# httpx 0.29 imports httpcore — and with it trio, where trio is installed — at the first Client, no longer at
# import as 0.28 did; here that is after Locust's gevent monkey-patching, which removes ``select.epoll``, so
# trio's import raises AttributeError (httpcore catches only ImportError) and every discovery failed. This
# process runs no trio: make its import an ImportError, and httpcore goes on without it.
if "trio" not in sys.modules and "httpcore" not in sys.modules and not hasattr(select, "epoll") and sys.platform == "linux":
    sys.modules["trio"] = None  # type: ignore[assignment]

import gevent
import gevent.event
import orjson
from gevent.lock import Semaphore
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser
from locust.user.users import LOCUST_STATE_STOPPING
from locust import argument_parser as locust_argument_parser
from locust import runners as locust_runners
from locust.runners import WorkerRunner

from orsbench import protocol
from orsbench.config import API_KEY_ENV
from orsbench.bench import plan as model
from orsbench.bench.episode import (
    REPLICA_HEADER,
    EpisodeFailure,
    check_list,
    check_sid_echo,
    check_stream_status,
    check_tools,
    json_answer,
    session_id,
    tool_output,
)
from orsbench.bench.plan import EpisodePlan, PlanError, resolve_plan, scripted_plan
from orsbench.servers.implementations import ors_servers
from orsbench.wire.sse import SSEParser, SSEStream

#: Heartbeats a distributed master may miss before it drops a worker (Locust's default, 3, drops workers of a busy
#: machine: a worker opening thousands of sessions, or one that shares its cores, can be late by seconds).
HEARTBEAT_LIVENESS = int(os.environ.get("ORSBENCH_LOCUST_HEARTBEAT_LIVENESS", "30"))
locust_runners.HEARTBEAT_LIVENESS = max(locust_runners.HEARTBEAT_LIVENESS, HEARTBEAT_LIVENESS)
# ... and a worker as patient with its master (the same seconds, at least Locust's own 60).
locust_runners.MASTER_HEARTBEAT_TIMEOUT = max(locust_runners.MASTER_HEARTBEAT_TIMEOUT, HEARTBEAT_LIVENESS)
# A Locust 2.47 worker rebuilds its whole argument parser once per option of every spawn message it gets
# (runners.py: `k not in argument_parser.default_args_dict()` inside a comprehension): ~100 parsers a message,
# seconds of CPU, so a worker of a slow ramp (a message a second) falls behind for good. The defaults never
# change within a process: build them once.
locust_argument_parser.default_args_dict = functools.cache(locust_argument_parser.default_args_dict)

log = logging.getLogger("orsbench.load")
logging.getLogger("httpx").setLevel(logging.WARNING)  # discovery requests are not worth a log line each

_JSON = {"Content-Type": protocol.JSON_CONTENT_TYPE}
#: SSE bodies are read event by event as they arrive; compression would hide the events.
_SSE = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
_EVENT_END = b"\r\n\r\n"
_TERMINAL = (protocol.EVENT_END, protocol.EVENT_ERROR)


# ---------------------------------------------------------------- arguments
@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    # parser.add_argument (not a group's): only Locust's own add_argument marks an option for the web UI.
    parser.add_argument(
        "--ors-env", default="", help="ORS environment name (default: the server's first, from /list_environments)"
    )
    parser.add_argument("--ors-split", default="", help="split to draw tasks from, round-robin (default: the first train split)")
    parser.add_argument(
        "--ors-calls",
        type=int,
        default=0,
        help="tool calls per episode of one tool (--ors-tool, default its first); fewer if a call returns finished "
        "(default: none — the learned episode)",
    )
    parser.add_argument(
        "--ors-think-time", type=float, default=0.0, help="seconds to wait before create, prompt and each call (default 0)"
    )
    parser.add_argument(
        "--ors-tool",
        default="",
        help="call this one tool --ors-calls times per episode, tasks round-robin (default: none — play the episode the "
        "checker's player learns on the server, reward path included, as orsbench bench does)",
    )
    parser.add_argument(
        "--ors-args",
        default="",
        help='tool input as a JSON object (default: built from the tool\'s input schema), e.g. \'{"text": "hi"}\'',
    )
    parser.add_argument(
        "--ors-script",
        default="",
        help='the calls of every episode as JSON [[tool, input], ...] with --ors-task (what orsbench bench hands on: '
        "the episode it learned; default: learn it here)",
    )
    parser.add_argument("--ors-task", type=int, default=0, help="the task index --ors-script plays (default 0)")
    parser.add_argument(
        "--ors-scenario", default="echo", help="scenario of the embedded server, used only without --host (default echo)"
    )
    parser.add_argument(
        "--ors-shape",
        default="episode",
        choices=("episode", "grpo", "held"),
        help="episode: each user runs episodes alone; grpo: groups of --ors-group users start the same task together, "
        "interleave their calls and delete together, as a GRPO trainer's rollouts do; held: each user opens "
        "--ors-sessions-per-user sessions and keeps them open, pinging each every --ors-ping-interval s as the "
        "reference client does, until the run ends (any environment) (default episode)",
    )
    parser.add_argument("--ors-group", type=int, default=4, help="users per group with --ors-shape grpo (default 4)")
    parser.add_argument(
        "--ors-sessions-per-user", type=int, default=1,
        help="sessions each user holds with --ors-shape held, pinged over its one connection (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--ors-ping-interval", type=float, default=protocol.PING_INTERVAL_S,
        help=f"seconds between pings of one held session (default {protocol.PING_INTERVAL_S:g}, the reference client's)",
    )  # fmt: skip
    parser.add_argument(
        "--ors-impl",
        default="mock",
        choices=ors_servers(),
        help=f"embedded server implementation ({', '.join(ors_servers())}), without --host (default mock)",
    )


def _api_key() -> str | None:
    """The server's key, from ``$ORSBENCH_API_KEY`` as every orsbench front end reads it (never a Locust flag: ``ps``)."""
    return os.environ.get(API_KEY_ENV) or None


def _key_headers() -> dict[str, str] | None:
    key = _api_key()
    return {protocol.API_KEY_HEADER: key} if key else None


def _options(environment: Any) -> dict[str, Any]:
    """The custom options, typed (web-UI values may arrive as strings)."""
    opts = environment.parsed_options
    get = (lambda name, default: getattr(opts, name, default)) if opts is not None else (lambda name, default: default)
    raw_args = str(get("ors_args", "") or "").strip()
    try:
        tool_input = orjson.loads(raw_args) if raw_args else None
    except orjson.JSONDecodeError as exc:
        raise PlanError(f"--ors-args is not JSON: {exc}") from None
    if tool_input is not None and not isinstance(tool_input, dict):
        raise PlanError(f"--ors-args must be a JSON object, got {raw_args!r}")
    raw_script = str(get("ors_script", "") or "").strip()
    try:
        script = orjson.loads(raw_script) if raw_script else None
    except orjson.JSONDecodeError as exc:
        raise PlanError(f"--ors-script is not JSON: {exc}") from None
    if script is not None and not (
        isinstance(script, list) and script and all(isinstance(s, list) and len(s) == 2 and isinstance(s[1], dict) for s in script)
    ):
        raise PlanError(f"--ors-script must be a JSON list of [tool, input] pairs, got {raw_script[:200]!r}")
    return {
        "env": str(get("ors_env", "") or "") or None,
        "split": str(get("ors_split", "") or "") or None,
        "calls": int(get("ors_calls", 0) or 0) or None,
        "think_time": float(get("ors_think_time", 0.0) or 0.0),
        "tool": str(get("ors_tool", "") or "") or None,
        "tool_input": tool_input,
        "script": tuple((str(t), v) for t, v in script) if script else None,
        "task": int(get("ors_task", 0) or 0),
    }


def _held_options(environment: Any) -> tuple[int, float]:
    """``(--ors-sessions-per-user, --ors-ping-interval)``, typed."""
    opts = environment.parsed_options
    per_user = int(getattr(opts, "ors_sessions_per_user", 1) or 1) if opts is not None else 1
    interval = float(getattr(opts, "ors_ping_interval", protocol.PING_INTERVAL_S) or protocol.PING_INTERVAL_S) if opts is not None else protocol.PING_INTERVAL_S
    return max(1, per_user), max(0.01, interval)


def _shape(environment: Any) -> tuple[str, int]:
    """``(--ors-shape, --ors-group)``, typed."""
    opts = environment.parsed_options
    shape = str(getattr(opts, "ors_shape", "episode") or "episode") if opts is not None else "episode"
    group = int(getattr(opts, "ors_group", 4) or 4) if opts is not None else 4
    return shape, max(1, group)


# ------------------------------------------------------ the embedded server
_embedded: list[Any] = []


@events.init.add_listener
def _refresh_event_loop_clock(**_kwargs: Any) -> None:
    """Bring gevent's cached clock up to date before Locust arms its ``--run-time`` timer.

    Locust arms that timer right after this event with no event-loop turn in
    between, and libev measures timers from the time it cached at its last
    turn — before the imports. On a busy machine the imports take seconds, so
    ``-t 2s`` could end the run before the first episode finished.
    """
    gevent.get_hub().loop.update_now()


@events.init.add_listener
def _start_embedded_server(environment: Any, runner: Any = None, **_kwargs: Any) -> None:
    """No ``--host``: serve the scenario on 127.0.0.1 ourselves (master or standalone only)."""
    if environment.host or isinstance(runner, WorkerRunner):
        return
    from orsbench.servers.launch import start

    opts = environment.parsed_options
    scenario = getattr(opts, "ors_scenario", "echo") or "echo"
    impl = getattr(opts, "ors_impl", "mock") or "mock"
    server = start(scenario, impl=impl)
    _embedded.append(server)
    environment.host = server.url
    log.info("orsbench: no --host given; embedded %s server for %r at %s (pid %d)", impl, scenario, server.url, server.pid)


@events.quit.add_listener
def _stop_embedded_server(**_kwargs: Any) -> None:
    while _embedded:
        _embedded.pop().stop()


@events.init.add_listener
def _stop_early_on_bad_host(environment: Any, runner: Any = None, **_kwargs: Any) -> None:
    """Headless: discover once before any user starts, so a host that is unreachable or not an
    ORS server ends the run at once with one line (exit 2), instead of a traceback per user
    and a wait until ``--run-time`` is up. The plan found is the one every user then shares."""
    opts = environment.parsed_options
    if environment.host and isinstance(runner, WorkerRunner):
        # A worker given --host finds its plan now, before the master spawns users: discovery (and learning) is
        # blocking work, and on a loaded machine a worker busy with it for seconds misses its heartbeats and is
        # dropped as missing. Any failure is left to the users, who report it in the master's table.
        try:
            _plan_for(environment.host, environment)
        except (PlanError, OSError) as exc:
            log.warning("orsbench: worker could not discover %s yet: %s", environment.host, exc)
        return
    if not environment.host or isinstance(runner, WorkerRunner) or not getattr(opts, "headless", False):
        return
    try:
        _plan_for(environment.host, environment)
    except (PlanError, OSError) as exc:
        log.error("orsbench: cannot load-test %s: %s", environment.host, exc)
        raise SystemExit(2) from None


# ------------------------------------------------------------------- plans
_plans: dict[tuple[str, str], EpisodePlan] = {}
_plan_lock = Semaphore()
_episode_numbers = itertools.count()


def _plan_for(host: str, environment: Any) -> EpisodePlan:
    """One discovery per process and host, shared by every user."""
    options = _options(environment)
    if _shape(environment)[0] == "held" and options["tool_input"] is None and not options["script"]:
        options["tool_input"] = {}  # a held session calls no tool: discovery only (no episode to learn)
    key = (host, repr(sorted(options.items())))
    with _plan_lock:
        plan = _plans.get(key)
        if plan is None:
            plan = _plans[key] = _resolve(host, options)
            log.info("orsbench: episode plan: %s", plan.describe())
    return plan


def _resolve(host: str, options: dict[str, Any]) -> EpisodePlan:
    """A named tool: that tool's episode; a script handed on: it; else the episode the checker's player learns."""
    o, key = options, _api_key()
    if o["script"] and o["tool"] is None and o["tool_input"] is None and o["calls"] is None:
        if not o["env"] or not o["split"]:
            raise PlanError("--ors-script needs --ors-env and --ors-split")
        return scripted_plan(host, o["env"], o["split"], o["task"], o["script"], think_time=o["think_time"], api_key=key)
    return resolve_plan(
        host, env=o["env"], split=o["split"], tool=o["tool"], tool_input=o["tool_input"], calls=o["calls"],
        think_time=o["think_time"], api_key=key,
    )  # fmt: skip


# -------------------------------------------------------------- GRPO groups
class _Barrier:
    """A reusable gevent barrier for ``size`` users; :meth:`wait` is ``True`` for the last to arrive."""

    def __init__(self, size: int) -> None:
        self.size, self.count = size, 0
        self.event = gevent.event.Event()

    def wait(self, timeout: float) -> bool:
        self.count += 1
        if self.count >= self.size:
            event, self.event, self.count = self.event, gevent.event.Event(), 0
            event.set()
            return True
        event = self.event
        if not event.wait(timeout):
            self.count -= 1
            raise EpisodeFailure("group", f"only {self.count + 1} of {self.size} group members arrived within {timeout:g}s")
        return False


class _Group:
    """G rollouts of one prompt: they start one task together and delete together (one per process and group)."""

    def __init__(self, number: int, size: int) -> None:
        self.number, self.size = number, size
        self.start, self.end = _Barrier(size), _Barrier(size)
        self.rounds = 0
        #: When the last member arrived at the start barrier (the group's clock starts).
        self.started = 0.0
        #: Episodes of this group that ended, successful or not.
        self.finished = 0


_groups: dict[int, _Group] = {}
_user_numbers = itertools.count()


# -------------------------------------------------------------------- user
def _raise_transport_error(stage: str, response: Any) -> None:
    """FastHttpSession turns connection errors into a status-0 response; say what happened."""
    if not response.status_code:
        error = getattr(response, "error", None)
        raise EpisodeFailure(stage, f"transport error: {type(error).__name__}: {error}" if error else "no response")


class ORSEpisodeUser(FastHttpUser):
    """A rollout worker: one ORS episode after another, no pause between them."""

    wait_time = constant(0)
    # Keep-alive on one connection per user, as a trainer's HTTP client would.
    concurrency = 1
    # The SDK client's read timeout: a stream silent for longer (no data, no keep-alive) has failed.
    network_timeout = protocol.CLIENT_READ_TIMEOUT_S
    connection_timeout = 10.0
    # Every request carries the server's key when $ORSBENCH_API_KEY gives one (read when Locust loads this file).
    default_headers = _key_headers()

    def on_start(self) -> None:
        started = time.perf_counter()
        try:
            self.plan = _plan_for(self.host, self.environment)
        except (PlanError, OSError) as exc:
            self._fire("ORS", "discover", started, exception=exc)
            raise StopUser() from exc
        # ORS carries its state in headers, never cookies; a cookie jar costs two Python walks per request.
        self.client.client.cookiejar = None
        self.call_bodies = [orjson.dumps({"name": tool, "input": value}) for tool, value in self.plan.steps()]
        self.actions = self.plan.actions()
        self.tools = self.plan.tools()
        self.replicas = []
        self.paths = {route: self.plan.path(route) for route in (protocol.PROMPT, protocol.TASK_TOOLS, protocol.CALL)}
        shape, size = _shape(self.environment)
        self.held_shape = shape == "held"
        self.held: list[str] = []
        self.rollout_group: _Group | None = None
        if shape == "grpo":
            number = next(_user_numbers) // size
            self.rollout_group = _groups.setdefault(number, _Group(number, size))

    @task
    def episode(self) -> None:
        if self.held_shape:
            self._hold()
            return
        if self.rollout_group is not None:
            self._group_episode(self.rollout_group)
            return
        started = time.perf_counter()
        try:
            self._episode(next(_episode_numbers))
        except EpisodeFailure as exc:
            self._fire("ORS", "episode", started, exception=exc)
        else:
            self._fire("ORS", "episode", started)

    # -- held sessions -----------------------------------------------------------
    def _hold(self) -> None:
        """Open this user's sessions, then ping each at the cadence until the run ends (``ORS ping late``: the lag)."""
        per_user, interval = _held_options(self.environment)
        number = next(_user_numbers)
        while len(self.held) < per_user:
            sid = self._open_held(number * per_user + len(self.held))
            if sid is None:
                gevent.sleep(1.0)  # a refused open is a failure in the table; try again, not in a tight loop
                continue
            self.held.append(sid)
        # Clients started apart: this user's sessions are spread over one interval, offset by the user's number.
        now = time.monotonic()
        due = [now + interval * ((j + (number % 97) / 97) / per_user) for j in range(per_user)]
        while self._state != LOCUST_STATE_STOPPING:  # a stopping run lets on_stop close the sessions
            j = min(range(per_user), key=due.__getitem__)
            wait = due[j] - time.monotonic()
            if wait > 0:
                gevent.sleep(min(wait, 1.0))
                continue
            lateness = max(0.0, time.monotonic() - due[j])
            self._fire_ms("ORS", "ping late", lateness * 1000)
            sid = self.held[j]
            try:
                self._json("POST", protocol.PING, "ping", {protocol.SESSION_HEADER: sid}, None, lambda s, b: json_answer("ping", s, b))
            except EpisodeFailure:
                pass  # counted by Locust as a ping failure
            due[j] += interval

    def _open_held(self, n: int) -> str | None:
        """``create_session``, ``create``, ``prompt``: one session open and set up (``ORS open held`` times it)."""
        started = time.perf_counter()
        plan = self.plan
        self.replicas = []
        try:
            sid = session_id(self._stream(protocol.CREATE_SESSION, None, "create_session"))
            headers = {protocol.SESSION_HEADER: sid}
            body = orjson.dumps({"env_name": plan.env, "split": plan.split, "index": plan.index(n)})
            self._json("POST", protocol.CREATE, "create", {**headers, **plan.create_headers}, body, lambda s, b: check_sid_echo("create", s, b, sid))
            self._json("GET", self.paths[protocol.PROMPT], "prompt", headers, None, lambda s, b: check_list("prompt", s, b))
        except EpisodeFailure as exc:
            self._fire("ORS", "open held", started, exception=exc)
            return None
        self._fire("ORS", "open held", started)
        if self.replicas:
            self._fire("ORS", f"replica {self.replicas[0]}", time.perf_counter())
        return sid

    def on_stop(self) -> None:
        """Close every held session (a stopped run leaves none behind)."""
        for sid in self.held:
            headers = {protocol.SESSION_HEADER: sid}
            try:
                self._json("POST", protocol.DELETE, "delete", headers, None, lambda s, b: check_sid_echo("delete", s, b, sid))
                self._json("POST", protocol.DELETE_SESSION, "delete_session", headers, None, lambda s, b: None)
            except EpisodeFailure:
                pass
        self.held.clear()

    def _fire_ms(self, kind: str, name: str, ms: float) -> None:
        self.environment.events.request.fire(
            request_type=kind, name=name, response_time=ms, response_length=0, exception=None, context={}
        )

    def _group_episode(self, group: _Group) -> None:
        """One GRPO step: start together on the group's task, interleave calls, delete together; time the group."""
        started = time.perf_counter()
        try:
            if group.start.wait(self.network_timeout):
                group.started = time.perf_counter()
                group.rounds += 1
            # Same task for the whole group: the group's number and round pick it.
            n = group.number + 7919 * group.rounds
            self._episode(n, before_delete=lambda: group.end.wait(self.network_timeout))
        except EpisodeFailure as exc:
            self._fire("ORS", "episode", started, exception=exc)
        else:
            self._fire("ORS", "episode", started)
        finally:
            group.finished += 1
            if group.finished % group.size == 0 and group.started:
                # The last member to finish (its delete answered) reports the group's makespan: start → last delete.
                self._fire("ORS", "grpo group makespan", group.started)
                self._fire("ORS", f"grpo group {group.number} makespan", group.started)

    def _episode(self, n: int, before_delete: Any = None) -> None:
        """Walk the one episode model (:meth:`EpisodePlan.actions`), as the bench's driver does."""
        plan = self.plan
        sid = ""
        sid_header: dict[str, str] = {}
        created = finished = False
        reward: Any = None
        self.replicas: list[str] = []
        try:
            for stage, arg in self.actions:
                if stage == model.THINK:
                    if not finished:
                        gevent.sleep(arg)
                elif stage == model.CREATE_SESSION:
                    sid = session_id(self._stream(protocol.CREATE_SESSION, None, "create_session"))
                    sid_header = {protocol.SESSION_HEADER: sid}
                elif stage == model.CREATE:
                    body = orjson.dumps({"env_name": plan.env, "split": plan.split, "index": plan.index(n)})
                    headers = {**sid_header, **plan.create_headers}
                    self._json("POST", protocol.CREATE, "create", headers, body, lambda s, b: check_sid_echo("create", s, b, sid))
                    created = True
                elif stage == model.PROMPT:
                    self._json("GET", self.paths[protocol.PROMPT], "prompt", sid_header, None, lambda s, b: check_list("prompt", s, b))
                elif stage == model.TASK_TOOLS:
                    tools = self.tools
                    self._json(
                        "GET", self.paths[protocol.TASK_TOOLS], "task_tools", sid_header, None,
                        lambda s, b: check_tools("task_tools", s, b, tools),
                    )  # fmt: skip
                elif stage == model.CALL:
                    if finished:
                        continue
                    output = tool_output(self._stream(self.paths[protocol.CALL], sid, "call", self.call_bodies[int(arg)]))
                    finished, reward = bool(output.get("finished")), output.get("reward")
                elif stage == model.DELETE:
                    if before_delete is not None:
                        before_delete()
                    created = False
                    self._json("POST", protocol.DELETE, "delete", sid_header, None, lambda s, b: check_sid_echo("delete", s, b, sid))
                elif stage == model.DELETE_SESSION:
                    self._json(
                        "POST", protocol.DELETE_SESSION, "delete_session", sid_header, None,
                        lambda s, b: check_sid_echo("delete_session", s, b, sid),
                    )  # fmt: skip
        except Exception:
            # A failed episode still frees its server-side session. Not on GreenletExit: a user that
            # Locust kills mid-request may still hold its only connection, so a request now could hang.
            if created:
                self.client.request("POST", protocol.DELETE, name="delete (cleanup)", headers=sid_header, allow_redirects=False)
            raise
        self._ended(finished, reward)

    def _ended(self, finished: bool, reward: Any) -> None:
        """The reward path and the replica, as Locust entries: ``ORS finished``, ``ORS replica <name>``, ``ORS split session``."""
        now = time.perf_counter()
        if finished:
            self._fire("ORS", "finished", now)
        if self.replicas:
            self._fire("ORS", f"replica {self.replicas[0]}", now)
            if len(set(self.replicas)) > 1:
                self._fire("ORS", "split session", now)

    # -- one request each ------------------------------------------------------
    def _json(self, method: str, path: str, stage: str, headers: dict[str, str], body: bytes | None, check: Any) -> None:
        if body is not None:
            headers = {**headers, **_JSON}
        with self.client.request(
            method, path, name=stage, data=body, headers=headers, catch_response=True, allow_redirects=False
        ) as response:
            try:
                _raise_transport_error(stage, response)
                self._replica(stage, response)
                check(response.status_code, response.content or b"")
            except EpisodeFailure as exc:
                response.failure(exc.message)
                raise
            response.success()

    def _stream(self, path: str, sid: str | None, stage: str, body: bytes | None = None) -> SSEStream:
        """POST, then read the event stream line by line through the one SSE parser."""
        headers = dict(_SSE)
        if sid is not None:
            headers[protocol.SESSION_HEADER] = sid
        if body is not None:
            headers.update(_JSON)
        started = time.perf_counter()
        with self.client.request(
            "POST", path, name=stage, data=body, headers=headers, catch_response=True, stream=True, allow_redirects=False
        ) as response:
            try:
                _raise_transport_error(stage, response)
                self._replica(stage, response)
                status = response.status_code
                content_type = response.headers.get("content-type", "") if response.headers else ""
                check_stream_status(stage, status, content_type, b"" if status == 200 else (response.content or b""))
            except EpisodeFailure as exc:
                response.failure(exc.message)
                raise
            response.success()
            stream = self._read_events(response, stage, started)
        return stream

    def _read_events(self, response: Any, stage: str, started: float) -> SSEStream:
        """Feed the stream to the parser one event block at a time, firing task_id and end as they come.

        geventhttpclient reads up to a separator; with the blank line that ends an
        event under the reference's CRLF framing, one read is one event. A stream
        framed otherwise is read whole at its end — parsed the same, timed late.
        """
        raw = response._response  # geventhttpclient's response: readline(sep) is only offered there
        parser = SSEParser()
        seen_task_id = seen_end = False
        size = 0
        try:
            while True:
                block = raw.readline(_EVENT_END)
                if not block:
                    block = raw.read()  # what is left after the last blank line (normally nothing)
                    if block:
                        size += len(block)
                        parser.feed(block)
                    break
                size += len(block)
                for item in parser.feed(block):
                    name = getattr(item, "event", None)
                    if name == protocol.EVENT_TASK_ID and not seen_task_id:
                        seen_task_id = True
                        self._fire("SSE", f"{stage} task_id", started, size)
                    elif name in _TERMINAL and not seen_end:
                        seen_end = True
                        failure = (
                            EpisodeFailure(stage, f"error event: {item.data[:200]}") if name == protocol.EVENT_ERROR else None
                        )
                        self._fire("SSE", f"{stage} end", started, size, exception=failure)
        except Exception as exc:  # noqa: BLE001 - geventhttpclient raises several types on a broken stream
            failure = EpisodeFailure(stage, f"stream broke after {size} bytes: {type(exc).__name__}: {exc}")
            self._fire("SSE", f"{stage} end", started, size, exception=failure)
            raise failure from None
        stream = parser.close()
        if not seen_end:
            failure = EpisodeFailure(
                stage, f"truncated stream: closed after {size} bytes without an end event (events: {stream.names()})"
            )
            self._fire("SSE", f"{stage} end", started, size, exception=failure)
            raise failure
        return stream

    def _fire(self, kind: str, name: str, started: float, length: int = 0, exception: BaseException | None = None) -> None:
        self.environment.events.request.fire(
            request_type=kind,
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=length,
            exception=exception,
            context={},
        )

    def _replica(self, stage: str, response: Any) -> None:
        """Note the replica that answered a session's request (``X-ORSBench-Replica``), from ``/create`` on."""
        if stage in ("create_session", "delete_session") or not response.headers:
            return
        name = response.headers.get(REPLICA_HEADER)
        if name:
            self.replicas.append(name)


if __name__ == "__main__":
    # `python -m orsbench.load --help`: Locust's help including the arguments above. (`locust -f ... --help`
    # prints its help before it imports the locustfile, so it never shows custom arguments: locust#2917.)
    from locust.argument_parser import get_parser

    get_parser().parse_args(sys.argv[1:] or ["--help"])
