"""A deployment on this machine: N replicas of a scenario behind a balancer (``orsbench serve --replicas N``).

Trainers use deployments, not processes: several replicas behind nginx (or ingress-nginx, Envoy, a
cloud balancer) that must route every request of a session to the replica holding it, pass event
streams through unbuffered, keep idle timeouts above the keep-alive interval and let large bodies in
(docs/deployments.md). This module builds one on 127.0.0.1:

* each replica is an ordinary served scenario, started through :mod:`orsbench.servers.launch` (the one
  way to start a server) with ``ServerConfig.replica`` set, so every answer names its replica
  (``X-ORSBench-Replica: r0``);
* in front, a real nginx (the Debian package, run as our own process with our own config in a temporary
  folder, stopped by its PID) with ``hash $http_x_session_id consistent`` — or, where nginx is absent,
  the built-in hashing router of :mod:`orsbench.servers.balancer` (said at start);
* a *balancer fault* plants one of the mistakes real deployments make (:data:`orsbench.servers.fronts.BALANCER_FAULTS`), in
  nginx's config or in the router alike;
* ``restart_every``: one replica at a time is stopped (SIGTERM: its sessions are lost) and started
  again on its port, as a rolling deploy does.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.servers import launch
from orsbench.servers.fronts import BODY_LIMIT, ERROR_PAGE, FAULT_IDLE_TIMEOUT_S, HTML_ERROR_STATUSES, check_faults
from orsbench.servers.launch import RunningServer, ServerStartError

def nginx_path() -> str | None:
    """The nginx binary, if installed (``apt-get install nginx-light``; also looked for in /usr/sbin)."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)


#: Set in each replica's environment: the deployment's PID, which the replica leaves with (:func:`exit_with_parent`).
EXIT_WITH_PARENT = "ORSBENCH_EXIT_WITH_PARENT"


def exit_with_parent() -> None:
    """In a replica: SIGTERM itself once the deployment that started it is gone (killed before it could stop it).

    A thread polls the parent PID (``PR_SET_PDEATHSIG`` would fire when the *thread* that started the replica
    ends, and replicas are started from short-lived threads).
    """
    parent = os.environ.get(EXIT_WITH_PARENT)
    if not parent or not parent.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(parent):
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="orsbench-exit-with-parent", daemon=True).start()


# -- nginx ---------------------------------------------------------------------------------------------------
#: The header a front that names the replica itself sets (``name_upstream``): the upstream's address, for replicas
#: started without a name of their own (the benchmarks' plain servers).
UPSTREAM_NAME = "$upstream_addr"


def nginx_config(
    prefix: Path,
    listen: tuple[str, int],
    ports: Sequence[int],
    faults: Sequence[str] = (),
    dead_port: int | None = None,
    *,
    workers: int = 1,
    connections: int = 8192,
    keepalive: int = 64,
    timeout_s: float = 3600.0,
    request_buffering: bool = True,
    name_upstream: bool = False,
) -> str:
    """nginx.conf for a deployment: sessions hashed by ``X-Session-ID`` onto ``ports``, sessionless requests spread
    round-robin, streams unbuffered, timeouts far above the keep-alive interval — less what ``faults`` plant.

    The one nginx configuration of orsbench: ``serve --replicas``, the held-sessions and proxy benchmarks read it.
    Their tuning: ``workers`` processes of ``connections`` connections each (file limit twice that: a client's and an
    upstream's), ``keepalive`` idle upstream connections kept per worker, read/send ``timeout_s`` (the
    ``idle-timeout`` fault's 4 s replaces it), ``request_buffering`` off to pass bodies on as they arrive, and
    ``name_upstream`` to name the replica that answered in ``X-ORSBench-Replica`` from its address (for replicas that
    do not name themselves).
    """
    fault = set(faults)
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=0;\n" for p in ports)
    dead = f"        server 127.0.0.1:{dead_port} max_fails=0;\n" if dead_port and "dead-replica" in fault else ""
    hashing = "" if "round-robin" in fault else "        hash $http_x_session_id consistent;\n"
    timeout = f"{FAULT_IDLE_TIMEOUT_S:g}s" if "idle-timeout" in fault else f"{timeout_s:g}s"
    body = "1m" if "body-limit" in fault else f"{BODY_LIMIT >> 20}m"
    location = [
        "proxy_pass http://$ors_pool;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_set_header Host $http_host;",
        f"proxy_read_timeout {timeout};",
        f"proxy_send_timeout {timeout};",
        "proxy_pass_header X-Accel-Buffering;",  # the server's own header reaches the client (call.sse_no_buffering)
    ]
    if not request_buffering:
        location += ["proxy_request_buffering off;"]
    if name_upstream:
        location += [f"add_header {protocol.REPLICA_HEADER} {UPSTREAM_NAME} always;"]
    if "buffering" in fault:
        # Buffered, and (as a CDN or a compressing front does) nothing sent on before a full buffer or the end.
        location += ["proxy_buffering on;", "proxy_ignore_headers X-Accel-Buffering;", "gzip on;", "gzip_proxied any;", "gzip_min_length 0;", "gzip_types text/event-stream;"]
    else:
        location += ["proxy_buffering off;"]
    if "dead-replica" in fault:
        location += ["proxy_next_upstream off;"]
    extra_locations = ""
    if "html-errors" in fault:
        location += ["proxy_intercept_errors on;", f"error_page {' '.join(map(str, HTML_ERROR_STATUSES))} /orsbench-error.html;"]
        extra_locations = f"        location = /orsbench-error.html {{ internal; root {prefix / 'html'}; }}\n"
    gzip = (
        "    gzip on;\n    gzip_proxied any;\n    gzip_min_length 0;\n    gzip_types text/event-stream application/json;\n"
        if "gzip-stream" in fault
        else "    gzip off;\n"
    )
    temp = "".join(f"    {kind}_temp_path {prefix / 'tmp' / kind};\n" for kind in TEMP_KINDS)
    inner = "".join(f"            {line}\n" for line in location)
    # Run as root (a container), nginx would hand its worker to "nobody", who cannot write our 0700 folder.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    return (
        f"{user}worker_processes {workers};\n"
        f"worker_rlimit_nofile {2 * connections};\n"
        f"pid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\n"
        f"events {{ worker_connections {connections}; }}\n"
        "http {\n"
        "    access_log off;\n"
        f"{temp}{gzip}"
        f"    client_max_body_size {body};\n"
        "    map $http_x_session_id $ors_pool { \"\" ors_any; default ors_sessions; }\n"
        f"    upstream ors_sessions {{\n{hashing}{servers}{dead}        keepalive {keepalive};\n    }}\n"
        f"    upstream ors_any {{\n{servers}        keepalive {keepalive};\n    }}\n"
        "    server {\n"
        f"        listen {listen[0]}:{listen[1]};\n"
        f"        location / {{\n{inner}        }}\n"
        f"{extra_locations}"
        "    }\n"
        "}\n"
    )


#: nginx's temporary folders (each under ``prefix/tmp``, made before it starts).
TEMP_KINDS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def _die_with_parent() -> None:
    """In nginx's master, before exec: SIGTERM when the deployment that started it dies (Linux ``PR_SET_PDEATHSIG``;
    nginx is started from the deployment's main thread, so the signal means the process is gone)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Nginx:
    """nginx as our own process (``daemon off``, master and its workers), with its config in ``prefix`` — a folder of
    its own, removed when it stops."""

    prefix: Path
    process: subprocess.Popen[bytes]
    port: int
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """The master's PID (its workers are its children: ``procstat.tree_*`` reads them all)."""
        return self.process.pid

    @classmethod
    def start(cls, binary: str, config_text: str, prefix: Path, port: int, timeout: float = 15.0, *, host: str = "127.0.0.1") -> Nginx:
        for kind in TEMP_KINDS:
            (prefix / "tmp" / kind).mkdir(parents=True, exist_ok=True)
        (prefix / "html").mkdir(exist_ok=True)
        (prefix / "html" / "orsbench-error.html").write_text(ERROR_PAGE)
        conf = prefix / "nginx.conf"
        conf.write_text(config_text)
        log = open(prefix / "nginx.out", "wb")  # noqa: SIM115 - nginx writes here while it runs
        process = subprocess.Popen(
            [binary, "-c", str(conf), "-p", str(prefix), "-g", "daemon off;"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )  # fmt: skip
        log.close()
        nginx = cls(prefix, process, port, host)
        deadline = time.monotonic() + timeout
        while not launch.healthy(nginx.url):
            if process.poll() is not None or time.monotonic() > deadline:
                said = nginx.log()[-2000:]
                nginx.stop()
                raise ServerStartError(f"nginx did not start: {said}")
            time.sleep(0.05)
        return nginx

    def log(self) -> str:
        return "".join(
            (self.prefix / name).read_text(errors="replace") for name in ("nginx.out", "error.log") if (self.prefix / name).exists()
        )

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM to the master by its PID (a fast shutdown: it stops its workers), SIGKILL after ``timeout``; then its
        folder is removed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.prefix, ignore_errors=True)


def start_nginx(
    ports: Sequence[int],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Sequence[str] = (),
    dead_port: int | None = None,
    timeout: float = 15.0,
    **tuning: Any,
) -> Nginx:
    """Our own nginx in front of the servers on ``ports`` of 127.0.0.1, listening on ``host:port`` (0: a free port),
    configured by :func:`nginx_config` (``tuning``: its keyword options) in a temporary folder of its own; ``timeout``
    seconds to answer ``/health``.

    ``ServerStartError`` when nginx is not installed or does not start (its log says why).
    """
    binary = nginx_path()
    if binary is None:
        raise ServerStartError("nginx is not installed (apt-get install nginx-light)")
    listen = port or launch.free_port(host)
    prefix = Path(tempfile.mkdtemp(prefix="orsbench-nginx-"))
    try:
        config = nginx_config(prefix, (host, listen), ports, faults, dead_port, **tuning)
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        raise
    return Nginx.start(binary, config, prefix, listen, timeout, host=host)


# -- the replicas --------------------------------------------------------------------------------------------
@dataclass
class Replicas:
    """N replicas of one scenario, each on its own fixed port of 127.0.0.1 (so one restarted keeps its place)."""

    scenario: str
    impl: str
    config: ServerConfig
    ports: list[int]
    servers: list[RunningServer | None] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, scenario: str, n: int, *, impl: str = "mock", config: ServerConfig | None = None, timeout: float = 60.0) -> Replicas:
        config = config or ServerConfig()
        ports = [launch.free_port() for _ in range(n)]
        replicas = cls(scenario, impl, config, ports, [None] * n)
        try:
            # Side by side: an SDK twin takes a second or two to import; N of them one after another add up.
            threads = [threading.Thread(target=replicas._start_one, args=(i, timeout)) for i in range(n)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            missing = [i for i, server in enumerate(replicas.servers) if server is None]
            if missing:
                raise ServerStartError(f"replica(s) {', '.join(f'r{i}' for i in missing)} of {scenario} ({impl}) did not start")
        except BaseException:
            replicas.stop()
            raise
        return replicas

    def _start_one(self, i: int, timeout: float) -> None:
        try:
            server = launch.start(
                self.scenario, impl=self.impl, config=self.config.replace(replica=f"r{i}"), port=self.ports[i], timeout=timeout,
                env={EXIT_WITH_PARENT: str(os.getpid())},
            )  # fmt: skip
        except ServerStartError as exc:
            print(f"orsbench: replica r{i} did not start: {exc}", file=sys.stderr, flush=True)
            return
        with self._lock:
            self.servers[i] = server

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """Stop replica ``i`` (SIGTERM: its sessions are lost) and start it again on its port."""
        with self._lock:
            server, self.servers[i] = self.servers[i], None
        if server is not None:
            server.stop()
        self._start_one(i, timeout)

    def stop(self) -> None:
        with self._lock:
            running = [s for s in self.servers if s is not None]
            self.servers = [None] * len(self.servers)
        launch.stop_all(running)


class Roller:
    """Restarts one replica every ``every`` seconds, in turn (a rolling deploy), in a thread until stopped."""

    def __init__(self, replicas: Replicas, every: float, say: Callable[[str], None]) -> None:
        self.replicas, self.every, self.say = replicas, every, say
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orsbench-roller", daemon=True)

    def start(self) -> Roller:
        self._thread.start()
        return self

    def _run(self) -> None:
        turn = 0
        while not self._stop.wait(self.every):
            i = turn % len(self.replicas.ports)
            turn += 1
            self.say(f"orsbench: restarting replica r{i} (SIGTERM: its sessions are lost)")
            self.replicas.restart(i)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# -- the deployment, in the foreground -----------------------------------------------------------------------
def pick_front(front: str) -> tuple[str, str | None]:
    """(``nginx`` or ``builtin``, the nginx binary) for ``front`` (``auto``/``nginx``/``builtin``); ``ValueError`` when
    nginx is asked for and absent."""
    binary = nginx_path()
    if front == "nginx" and binary is None:
        raise ValueError("--balancer nginx: nginx is not installed (apt-get install nginx-light), or use --balancer builtin")
    if front == "builtin" or binary is None:
        return "builtin", None
    return "nginx", binary


def serve_deployment(
    scenario: str,
    replicas: int,
    *,
    impl: str = "mock",
    config: ServerConfig | None = None,
    faults: Sequence[str] = (),
    restart_every: float | None = None,
    front: str = "auto",
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str, str], None] | None = None,
) -> None:
    """Start the replicas and the front; serve until SIGINT/SIGTERM; stop everything by its PID.

    ``on_ready(url, front_description)`` is called once the front answers ``/health``.
    """
    check_faults(faults)
    kind, _ = pick_front(front)
    launch.use_zygote(False)  # replicas are this process's own children, stopped with it
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    group = Replicas.start(scenario, replicas, impl=impl, config=config)
    nginx: Nginx | None = None
    roller: Roller | None = None
    try:
        dead_port = launch.free_port() if "dead-replica" in faults else None
        if kind == "nginx":
            nginx = start_nginx(group.ports, host=host, port=port, faults=faults, dead_port=dead_port)
            url = nginx.url
            routing = "round-robin, no affinity" if "round-robin" in faults else "hash $http_x_session_id consistent"
            described = f"nginx (pid {nginx.process.pid}, {routing})"
            if on_ready is not None:
                on_ready(url, described)
            if restart_every:
                roller = Roller(group, restart_every, lambda text: print(text, file=sys.stderr, flush=True)).start()
            while not stopping.wait(0.5):
                if nginx.process.poll() is not None:
                    print(f"orsbench: nginx exited: {nginx.log()[-2000:]}", file=sys.stderr, flush=True)
                    break
        else:
            # uvicorn handles SIGINT/SIGTERM itself, then restores the handlers it found and raises the signal again:
            # ours (above) stay in place for that, or the default action would end this process before the finally.
            from orsbench.servers.app import serve_forever
            from orsbench.servers.balancer import BalancerApp

            origins = [f"http://127.0.0.1:{p}" for p in group.ports]
            app = BalancerApp(origins, faults=tuple(faults), dead=f"http://127.0.0.1:{dead_port}" if dead_port else None)
            why = "" if front == "builtin" else " — nginx is not installed (apt-get install nginx-light)"

            def ready(url: str) -> None:
                nonlocal roller
                if on_ready is not None:
                    on_ready(url, f"the built-in hashing router{why}")
                if restart_every:
                    roller = Roller(group, restart_every, lambda text: print(text, file=sys.stderr, flush=True)).start()

            serve_forever(app, host=host, port=port, on_ready=ready)
    finally:
        if roller is not None:
            roller.stop()
        if nginx is not None:
            nginx.stop()
        group.stop()
