"""Every server orsbench starts ends with the process that started it, even one killed by SIGKILL.

Seen before (issue 37): servers started as plain subprocesses outlived a killed test run, orphans with
parent 1. ``launch.popen`` asks the kernel for a SIGTERM when the parent dies (``PR_SET_PDEATHSIG``),
and forks from one long-lived thread, so a server started from a worker thread does not die with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def _gone(pid: int) -> bool:
    """Exited (no such process, or a zombie nobody reaped yet)."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


LAUNCHER = """
import sys, threading, time
from orsbench.servers import launch
if sys.argv[1] == "zygote":
    launch.use_zygote(True)
servers = []
if sys.argv[2] == "thread":  # started from a worker thread that has ended by the time the parent is killed
    worker = threading.Thread(target=lambda: servers.append(launch.start("echo")))
    worker.start()
    worker.join()
else:
    servers.append(launch.start("echo"))
print(servers[0].pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(
    ("how", "where"), [("plain", "main"), ("plain", "thread"), ("zygote", "main")], ids=["subprocess", "from-a-thread", "zygote"]
)
def test_a_server_dies_when_the_process_that_started_it_is_sigkilled(how: str, where: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    parent = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, how, where], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    server: int | None = None
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline().strip()
        assert line.isdigit(), f"the launcher printed no server PID: {line!r}; {parent.stderr.read() if parent.poll() is not None else ''}"
        server = int(line)
        time.sleep(0.5)
        assert not _gone(server), "the server was not running before its parent was killed (a thread's end killed it?)"
        parent.send_signal(signal.SIGKILL)  # no atexit, no finally: only the kernel can stop the server now
        parent.wait(10)
        assert _wait_gone(server, 20), f"server {server} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if server is not None and not _gone(server):
            os.kill(server, signal.SIGKILL)


def test_a_server_started_from_a_thread_outlives_the_thread() -> None:
    """PR_SET_PDEATHSIG follows the forking thread: the launcher forks from a thread of its own that never ends."""
    from orsbench.servers import launch

    servers: list[launch.RunningServer] = []
    worker = threading.Thread(target=lambda: servers.append(launch.start("echo")))
    worker.start()
    worker.join(120)
    (server,) = servers
    try:
        time.sleep(0.5)
        assert server.alive() and launch.local_http().get(server.url + "/health").status_code == 200
    finally:
        server.stop()
    assert _wait_gone(server.pid, 10)
