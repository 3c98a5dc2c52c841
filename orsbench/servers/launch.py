"""Start a served scenario, or a user's own Environment class, in a subprocess; stop it by its PID.

Tests, the checker, the load tools and training all start servers here, so
every server orsbench starts binds 127.0.0.1 on a free port, reports its URL
through a ready file, is waited for on ``/health``, and is stopped by its own
PID (SIGTERM, then SIGKILL) — also at interpreter exit if a caller forgot, and by the kernel
when the process that started it dies without exiting cleanly (:func:`popen`: ``PR_SET_PDEATHSIG``).

A target is a scenario name (``echo``, served by ``orsbench serve``) or an
:class:`~orsbench.servers.user_app.AppTarget` (``FILE.py:Class[,Class2]`` /
``module:Class``) — an environment author's own openreward ``Environment``
classes, served unchanged by the SDK ``Server`` (:mod:`orsbench.servers.user_app`).
Both speak the same ready-file protocol.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Iterator, TypedDict, Unpack

import httpx

from orsbench import protocol
from orsbench.config import ServerConfig, write_private
from orsbench.servers import stats as server_stats
from orsbench.servers.stats import StatsSnapshot
from orsbench.servers.user_app import APP_PATH_ENV, AppTarget
from orsbench.servers.user_app import PREFIX as APP_PREFIX

_RUNNING: dict[int, "RunningServer"] = {}
_LOCAL_HTTP: httpx.Client | None = None


def local_http() -> httpx.Client:
    """The one HTTP client for the launcher's own requests to the servers it starts (thread-safe).

    Why shared: every new httpx client loads the CA bundle (~0.1 s of CPU), and the wait for
    ``/health`` asks up to 50 times a second — a fresh client per probe made a server start CPU-bound.
    ``trust_env=False``: a proxy set in the environment must never sit between us and 127.0.0.1.
    """
    global _LOCAL_HTTP
    if _LOCAL_HTTP is None:
        _LOCAL_HTTP = httpx.Client(trust_env=False, timeout=10)
    return _LOCAL_HTTP


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send the child SIGTERM when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    Why: a test run or a training smoke killed with SIGKILL runs no ``atexit``, and the servers it
    started as plain subprocesses lived on under init (orphans with parent 1, a port and memory each).
    None where there is no ``prctl`` (not Linux): the ``atexit`` handler is then the only net. The
    signal follows the *thread* that forked, not the process: :func:`popen` forks from one thread
    that lives as long as the process.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died between fork and prctl: the signal will never come
            os._exit(1)

    return preexec


class _Spawner:
    """One daemon thread that forks every server, so that ``PR_SET_PDEATHSIG`` fires when the process ends.

    The kernel sends the signal when the forking *thread* exits. A server started from a worker thread
    (a thread pool starting servers side by side) would be killed when that worker ends; forked from here,
    it lives until the process that started it does.
    """

    def __init__(self) -> None:
        import queue

        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="orsbench-launcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job, result, done = self._jobs.get()
            try:
                result.append((True, job()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
                result.append((False, exc))
            done.set()

    def call(self, job: Callable[[], Any]) -> Any:
        result: list[Any] = []
        done = threading.Event()
        self._jobs.put((job, result, done))
        done.wait()
        ok, value = result[0]
        if not ok:
            raise value
        return value


_SPAWNER: _Spawner | None = None
_SPAWNER_LOCK = threading.Lock()


def popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)`` for a server: it ends with this process, even one killed by SIGKILL.

    The one way orsbench starts a server process (its own servers, a user's command, the zygote).
    """
    global _SPAWNER
    preexec = _parent_death_signal()
    if preexec is None:
        return subprocess.Popen(argv, **kwargs)
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(argv, preexec_fn=preexec, **kwargs)
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = _Spawner()
    return _SPAWNER.call(lambda: subprocess.Popen(argv, preexec_fn=preexec, **kwargs))


class ServerStartError(RuntimeError):
    """The server process did not come up; the message carries its log."""


class ForkedProcess:
    """A server forked by the zygote: not our child, so it is watched and stopped through a pidfd.

    Why not by PID: the zygote's children are reaped by the kernel the moment they exit, and on a busy
    machine (``pid_max`` 32768, many engineers forking) their PID is soon another process's. ``kill(pid)``
    on a server that already died then signals whoever holds the number now — seen as a client forked
    for the matrix dying of a SIGTERM nobody meant for it. A pidfd (Linux 5.3+) names this process only;
    where there is none, the PID is the fallback.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd: int | None = None
        self._gone = False
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._gone = True  # it already exited (and its number is not ours to signal)
        except (OSError, AttributeError):
            pass  # no pidfd here: the PID is all there is

    def poll(self) -> int | None:
        if self._gone:
            return 0
        if self._fd is not None:
            readable, _, _ = select.select([self._fd], [], [], 0)
            if readable:
                self._close()
                return 0  # exited (reaped by the kernel: its exit status is not ours to read)
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0
        return None

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._fd is not None:
                signal.pidfd_send_signal(self._fd, sig)
            else:
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.02)
        return 0

    def _close(self) -> None:
        self._gone = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self._close()


#: What the zygote imports beyond the servers' own modules: the ``orsbench serve`` command it forks into.
ZYGOTE_PRELOAD = ("orsbench.cli", "orsbench.cli.serve")


class Zygote:
    """The launcher's side of :mod:`orsbench.servers.zygote`: one preloaded spawner per process."""

    def __init__(self) -> None:
        env = {**os.environ, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
        self._lock = threading.Lock()
        self.process = popen(
            [sys.executable, "-m", "orsbench.servers.zygote", *ZYGOTE_PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        assert self.process.stdout is not None
        hello = json.loads(self.process.stdout.readline() or "{}")
        if "ready" not in hello:
            self.close()
            raise ServerStartError(f"the server zygote did not start: {hello.get('error', 'no answer')}")

    def spawn(self, argv: list[str], env: dict[str, str], log_path: Path, module: str = "orsbench") -> ForkedProcess:
        """Fork ``python -m MODULE ARGV`` (``orsbench``: ``orsbench serve ...``) with output to ``log_path``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"module": module, "argv": argv, "env": env, "log": str(log_path)}
        with self._lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline() or "{}")
        if "pid" not in answer:
            raise ServerStartError("the server zygote stopped answering")
        return ForkedProcess(answer["pid"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(Exception):
            self.process.wait(5)
        if self.process.poll() is None:
            self.process.kill()


_ZYGOTE: Zygote | None = None
_ZYGOTE_WANTED = False
_ZYGOTE_LOCK = threading.Lock()


def use_zygote(enabled: bool = True) -> None:
    """Start later servers by forking a preloaded process (much faster for SDK twins).

    Falls back to a fresh interpreter per server if the zygote cannot start.
    """
    global _ZYGOTE_WANTED
    _ZYGOTE_WANTED = enabled


def _zygote() -> Zygote | None:
    global _ZYGOTE, _ZYGOTE_WANTED
    if not _ZYGOTE_WANTED:
        return None
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or _ZYGOTE.process.poll() is not None:
            try:
                _ZYGOTE = Zygote()
            except (ServerStartError, OSError, ValueError):
                _ZYGOTE_WANTED = False
                return None
        return _ZYGOTE


@dataclass
class RunningServer:
    """A server process started by :func:`start`."""

    url: str
    env_name: str
    impl: str
    scenario: str
    process: "subprocess.Popen[bytes] | ForkedProcess"
    log_path: Path
    config: ServerConfig = field(default_factory=ServerConfig)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self) -> StatsSnapshot:
        """``GET /_orsbench/stats``: server-side counters (sessions, calls, pings, requests; :class:`StatsSnapshot`)."""
        return server_stats.read(self.url, api_key=self.config.api_key, client=local_http())

    def env(self) -> dict[str, str]:
        """Environment variables that point the openreward SDK (and TRL) at this server."""
        return {
            protocol.ENV_API_URL: self.url,
            protocol.ENV_SESSION_URL: self.url,
            protocol.ENV_DISABLE_UPDATE_CHECK: "1",
        }

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (graceful: sessions are torn down), then SIGKILL after ``timeout``."""
        stop_all([self], timeout)


def stop_all(servers: Iterable[RunningServer], timeout: float = 10.0) -> None:
    """Stop ``servers`` together: SIGTERM to each by its own PID, one shared wait, then SIGKILL for any left.

    Why together: a server takes ~0.2 s to wind down after SIGTERM (its sessions, then its interpreter), so
    the thirty-odd servers a pytest worker holds at the end of a run kept it waiting ~6 s when stopped one
    after another; signalled at once, they wind down side by side.
    """
    signalled: list[RunningServer] = []
    for server in servers:
        _RUNNING.pop(server.pid, None)
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
            signalled.append(server)
    deadline = time.monotonic() + timeout
    stuck: list[subprocess.TimeoutExpired] = []  # not gone 5 s after SIGKILL: the others are still stopped
    for server in signalled:
        try:
            server.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            server.process.kill()
            try:
                server.process.wait(5)
            except subprocess.TimeoutExpired as exc:
                stuck.append(exc)
    if stuck:
        raise stuck[0]


#: What :func:`start` serves: a scenario's name, or a user's Environment class(es).
ServeTarget = str | AppTarget


def command(
    scenario: ServeTarget,
    *,
    impl: str = "mock",
    config: ServerConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    ready_file: str | None = None,
    config_file: str | None = None,
    deployment: Deployment | None = None,
) -> list[str]:
    """The command line serving ``scenario`` (``orsbench serve``, or the user-app server for an :class:`AppTarget`).

    The config travels in ``config_file`` (written by :func:`write_private`) when given; inline JSON
    is for a config without an API key only — no secret goes on a command line (docs/protocol.md §14).
    """
    if isinstance(scenario, AppTarget):
        cmd = [sys.executable, "-m", "orsbench.servers.user_app", str(scenario), "--host", host, "--port", str(port)]
    else:
        cmd = [sys.executable, "-m", "orsbench", "serve", scenario, "--impl", impl, "--host", host, "--port", str(port)]
        if deployment is not None:
            cmd += deployment.flags()
    if config_file is not None:
        cmd += ["--config-file", config_file]
    elif config is not None:
        if config.api_key:
            raise ValueError("an API key never goes on a command line: write the config with write_private, pass config_file")
        cmd += ["--config-json", config.to_json()]
    if ready_file is not None:
        cmd += ["--ready-file", ready_file]
    return cmd


@dataclass(frozen=True)
class Deployment:
    """A scenario served as ``replicas`` replicas behind a balancer (``orsbench serve --replicas N``,
    :mod:`orsbench.servers.replicas`): the front (``auto``: nginx where installed, else the built-in router),
    the balancer mistakes planted, and a rolling restart every ``restart_every`` seconds."""

    replicas: int
    faults: tuple[str, ...] = ()
    restart_every: float | None = None
    front: str = "auto"

    def flags(self) -> list[str]:
        out = ["--replicas", str(self.replicas), "--balancer", self.front]
        for fault in self.faults:
            out += ["--balancer-fault", fault]
        if self.restart_every:
            out += ["--restart-every", repr(self.restart_every)]
        return out


def start(
    scenario: ServeTarget,
    *,
    impl: str = "mock",
    config: ServerConfig | None = None,
    params: dict[str, Any] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    port: int = 0,
    deployment: Deployment | None = None,
) -> RunningServer:
    """Start a server for ``scenario`` (a name or an :class:`AppTarget`); wait until ``/health`` answers 200.

    For an app, ``impl`` is ``"app"`` and ``env_name`` is the first environment the server
    lists. ``env``: extra environment variables for the server. ``port``: a fixed port (0: a free
    one; a replica restarted keeps its own). ``deployment``: serve the scenario as several replicas
    behind a balancer; the process started is the deployment's, and stopping it stops them all.
    """
    if isinstance(scenario, str) and scenario.startswith(APP_PREFIX):
        raise ValueError(f"{scenario!r} names an app, not a scenario: pass AppTarget.parse({scenario!r})")
    config = config or ServerConfig()
    if params:
        config = config.replace(params={**config.params, **params})

    def argv(ready_file: str) -> list[str]:
        config_file = write_private(Path(ready_file).with_name("config.json"), config.to_json())
        return command(scenario, impl=impl, host=host, port=port, ready_file=ready_file, config_file=config_file, deployment=deployment)

    if isinstance(scenario, AppTarget):
        if scenario.path:
            env = {**(env or {}), APP_PATH_ENV: os.pathsep.join(scenario.path)}
        server = _launch(argv, f"serving {scenario} (app)", str(scenario), "app", config, timeout, env)
        _forget_private_files(server)
        server.env_name = _listed_env(server) or server.scenario  # the default environment, served at / too
        return server
    server = _launch(argv, f"serving {scenario} ({impl})", scenario, impl, config, timeout, env)
    _forget_private_files(server)
    if scenario == "cassette":  # a replay serves the recorded environment's name
        names = httpx.get(server.url + protocol.LIST_ENVIRONMENTS, timeout=10).json()
        server.env_name = names[0] if isinstance(names, list) and names else server.env_name
    return server


def proxy_command(
    upstream: str,
    *,
    faults: tuple[str, ...] = (),
    seed: int = 0,
    ping_interval: float = protocol.PING_INTERVAL_S,
    record: str | os.PathLike[str] | None = None,
    json_report: str | os.PathLike[str] | None = None,
    junit_report: str | os.PathLike[str] | None = None,
    html_report: str | os.PathLike[str] | None = None,
    secrets_file: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    ready_file: str | None = None,
    evidence_limit: int | None = None,
    request_log: bool = False,
    grade_sample: float | None = None,
) -> list[str]:
    """The ``orsbench proxy`` command line for these arguments (secrets by file only: docs/protocol.md §14)."""
    cmd = [sys.executable, "-m", "orsbench", "proxy", upstream, "--host", host, "--port", str(port), "--seed", str(seed)]
    cmd += ["--ping-interval", repr(ping_interval)]
    if faults:
        cmd += ["--fault", ",".join(faults)]
    if evidence_limit is not None:
        cmd += ["--evidence-limit", str(evidence_limit)]
    if request_log:
        cmd.append("--request-log")
    if grade_sample is not None:
        cmd += ["--grade-sample", repr(grade_sample)]
    for flag, value in (("--record", record), ("--json", json_report), ("--junit", junit_report), ("--html", html_report), ("--secrets-file", secrets_file)):
        if value is not None:
            cmd += [flag, str(value)]
    if ready_file is not None:
        cmd += ["--ready-file", ready_file]
    return cmd


class ProxyOptions(TypedDict, total=False):
    """What ``start_proxy`` passes through to :func:`proxy_command` (its keyword arguments, same defaults)."""

    faults: tuple[str, ...]
    seed: int
    ping_interval: float
    record: str | os.PathLike[str] | None
    json_report: str | os.PathLike[str] | None
    junit_report: str | os.PathLike[str] | None
    html_report: str | os.PathLike[str] | None
    evidence_limit: int | None
    request_log: bool
    grade_sample: float | None


def start_proxy(
    upstream: str,
    *,
    host: str = "127.0.0.1",
    timeout: float = 60.0,
    secrets: Mapping[str, str] | None = None,
    **options: Unpack[ProxyOptions],
) -> RunningServer:
    """Start ``orsbench proxy UPSTREAM`` and wait until ``/health`` answers through it.

    ``options`` are :func:`proxy_command`'s (faults, seed, ping interval, reports). ``secrets`` are added
    to every ``/create`` sent upstream; they reach the proxy in a 0600 file. Stopping the proxy
    (SIGTERM) is what writes ``--record``, ``--json`` and ``--junit``.
    """

    def argv(ready_file: str) -> list[str]:
        secrets_file = write_private(Path(ready_file).with_name("secrets.json"), json.dumps(dict(secrets))) if secrets else None
        return proxy_command(upstream, host=host, ready_file=ready_file, secrets_file=secrets_file, **options)

    config = ServerConfig(faults=options.get("faults", ()), seed=options.get("seed", 0), request_log=options.get("request_log", False))
    server = _launch(argv, f"orsbench proxy {upstream}", upstream, "proxy", config, timeout)
    _forget_private_files(server)
    return server


def start_hosted(
    cases: Sequence[str] = (),
    *,
    duration: float | None = None,
    deadline: float | None = None,
    json_report: str | os.PathLike[str] | None = None,
    strict: bool = False,
    host: str = "127.0.0.1",
    timeout: float = 60.0,
) -> RunningServer:
    """Start ``orsbench check-client --hosted`` (``cases``: all when empty) and wait until ``/health`` answers.

    ``deadline``: each case's deadline (``--timeout``). The run ends by itself once every case was played
    (wait on ``process``), at ``duration``, or on :meth:`RunningServer.stop`; its exit code is check-client's.
    """

    def argv(ready_file: str) -> list[str]:
        cmd = [sys.executable, "-m", "orsbench", "check-client", "--hosted", "--host", host, "--ready-file", ready_file]
        if cases:
            cmd += ["--cases", ",".join(cases)]
        for flag, value in (("--duration", duration), ("--timeout", deadline), ("--json", json_report)):
            if value is not None:
                cmd += [flag, str(value)]
        return cmd + (["--strict"] if strict else [])

    # A child of ours, never the zygote's: the caller reads the run's exit status, which a forked server's is not.
    return _launch(argv, "orsbench check-client --hosted", "hosted", "hosted", ServerConfig(), timeout, fork=False)


def start_scripted_model(*, host: str = "127.0.0.1", timeout: float = 60.0) -> RunningServer:
    """Start the scripted model (:mod:`orsbench.servers.scripted_model`) and wait until ``/health`` answers.

    One serves any number of scripts at once (each registered under its own base URL), so a run
    starts one and registers a script per episode.
    """

    def argv(ready_file: str) -> list[str]:
        return [sys.executable, "-m", "orsbench.servers.scripted_model", "--host", host, "--port", "0", "--ready-file", ready_file]

    return _launch(argv, "the scripted model", "scripted-model", "scripted-model", ServerConfig(), timeout)


def _forget_private_files(server: RunningServer) -> None:
    """Delete the 0600 config/secrets files once the server answers: it read them at startup."""
    for name in ("config.json", "secrets.json"):
        with contextlib.suppress(OSError):
            (server.log_path.parent / name).unlink()


def _launch(
    argv_for: "Callable[[str], list[str]]",
    label: str,
    name: str,
    impl: str,
    config: ServerConfig,
    timeout: float,
    env: Mapping[str, str] | None = None,
    *,
    fork: bool = True,
) -> RunningServer:
    """Run an ``orsbench`` server command, learn its URL from the ready file, wait for ``/health``.

    ``fork``: let the zygote fork it when one runs (a forked server's exit status cannot be read).
    """
    workdir = Path(tempfile.mkdtemp(prefix="orsbench-"))
    ready = workdir / "url"
    log_path = workdir / "server.log"
    env = {**os.environ, **(env or {}), protocol.ENV_DISABLE_UPDATE_CHECK: "1", "PYTHONUNBUFFERED": "1"}
    argv = argv_for(str(ready))
    process: subprocess.Popen[bytes] | ForkedProcess
    zygote = _zygote() if fork else None
    if zygote is not None:
        process = zygote.spawn(argv[3:], env, log_path, module=argv[2])  # argv is "python -m MODULE ..."
    else:
        with open(log_path, "wb") as log:
            process = popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + timeout
    try:
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                text = log_path.read_text(errors="replace")
                raise ServerStartError(f"{label} did not start:\n{text[-4000:]}")
            time.sleep(0.02)
    except BaseException:  # also SIGTERM/Ctrl-C while it starts: a server nobody knows of must not outlive us
        if process.poll() is None:
            process.kill()
            process.wait(5)
        raise
    url = ready.read_text().strip()
    server = RunningServer(url, name, impl, name, process, log_path, config)
    _RUNNING[process.pid] = server
    _wait_healthy(server, deadline)
    return server


def healthy(url: str) -> bool:
    """Whether ``GET /health`` answers 200 now; a refused or timed-out connection is "not yet", not an error.

    The standard library's ``http.client``, not httpx: the probe runs up to 50 times a second
    while a server starts, and it also runs inside Locust's gevent-patched processes, where an
    httpx client imports httpcore, which imports trio where trio is installed — and trio needs
    the ``select.epoll`` that gevent removes.
    """
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=2)
    try:
        connection.request("GET", parts.path.rstrip("/") + protocol.HEALTH)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _wait_healthy(server: RunningServer, deadline: float) -> None:
    while True:
        if healthy(server.url):
            return
        if not server.alive() or time.monotonic() > deadline:
            server.stop()
            raise ServerStartError(f"{server.url} never answered /health:\n{server.log()[-4000:]}")
        time.sleep(0.02)


class ServeOptions(TypedDict, total=False):
    """The keyword arguments of :func:`start` that :func:`serve` passes through."""

    impl: str
    config: ServerConfig | None
    params: dict[str, Any] | None
    host: str


@contextlib.contextmanager
def serve(scenario: ServeTarget, **options: Unpack[ServeOptions]) -> Iterator[RunningServer]:
    """``with serve("echo") as srv: ...`` — a server for the duration of the block (``options``: :func:`start`'s)."""
    server = start(scenario, **options)
    try:
        yield server
    finally:
        server.stop()


# -- any server command ---------------------------------------------------------------------------
#: The placeholders a server command may contain (``check --server-cmd "python my_env.py --port {port}"``).
PORT_PLACEHOLDER, HOST_PLACEHOLDER = "{port}", "{host}"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the command binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def command_argv(cmd: str | Sequence[str], port: int, host: str = "127.0.0.1") -> list[str]:
    """``cmd`` split like a shell would (no shell runs it), with ``{port}`` and ``{host}`` filled in."""
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    if not argv:
        raise ValueError("the server command is empty")
    if not any(PORT_PLACEHOLDER in a for a in argv):
        raise ValueError(
            f"the server command must contain {PORT_PLACEHOLDER} where the port goes, "
            f'e.g. "python my_env.py --port {PORT_PLACEHOLDER}"'
        )
    return [a.replace(PORT_PLACEHOLDER, str(port)).replace(HOST_PLACEHOLDER, host) for a in argv]


def start_command(
    cmd: str | Sequence[str],
    *,
    wait: float = 60.0,
    host: str = "127.0.0.1",
    env: Mapping[str, str] | None = None,
) -> RunningServer:
    """Start any ORS server command on a free port of 127.0.0.1 and wait (``wait`` s) for ``/health``.

    The command runs without a shell, so its PID is the server's own and
    stopping it stops the server (a wrapper script should ``exec`` the server).
    Its output goes to a log that a :class:`ServerStartError` quotes when it
    exits early or never answers.
    """
    port = free_port(host)
    argv = command_argv(cmd, port, host)
    log_path = Path(tempfile.mkdtemp(prefix="orsbench-cmd-")) / "server.log"
    variables = {**os.environ, **(env or {}), protocol.ENV_DISABLE_UPDATE_CHECK: "1", "PYTHONUNBUFFERED": "1"}
    shown = shlex.join(argv)
    with open(log_path, "wb") as log:
        try:
            process = popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=variables)
        except OSError as exc:
            raise ServerStartError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    server = RunningServer(f"http://{host}:{port}", "", "cmd", shown, process, log_path)
    _RUNNING[process.pid] = server
    deadline = time.monotonic() + wait
    while True:
        if healthy(server.url):
            break
        code = process.poll()
        if code is not None or time.monotonic() > deadline:
            server.stop()
            why = (
                f"exited with status {code} before answering GET /health"
                if code is not None
                else f"did not answer GET {server.url}/health within {wait:g} s (a slow start? raise --wait)"
            )
            output = server.log().strip()
            raise ServerStartError(f"{shown} {why}" + (f"; its output:\n{output[-4000:]}" if output else " (no output)"))
        time.sleep(0.05)
    server.env_name = _listed_env(server) or ""
    return server


def _listed_env(server: RunningServer) -> str | None:
    """The first name ``/list_environments`` gives (a served app's default, served at ``/`` too), if it gives one."""
    try:
        names = httpx.get(server.url + protocol.LIST_ENVIRONMENTS, timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return None
    return str(names[0]) if isinstance(names, list) and names else None


@atexit.register
def _stop_leftovers() -> None:
    with contextlib.suppress(Exception):
        stop_all(list(_RUNNING.values()), timeout=3)
    if _ZYGOTE is not None:
        _ZYGOTE.close()
    if _LOCAL_HTTP is not None:  # its kept-alive sockets would be reported unclosed at exit
        _LOCAL_HTTP.close()
