"""The one way to start a server: a fresh interpreter, or a fork of the preloaded zygote."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from orsbench.servers import launch


@pytest.fixture(params=["zygote", "fresh"])
def spawner(request):
    before = launch._ZYGOTE_WANTED
    launch.use_zygote(request.param == "zygote")
    yield request.param
    launch.use_zygote(before)


def test_server_binds_loopback_answers_health_and_stops_by_pid(spawner):
    server = launch.start("echo")
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert httpx.get(server.url + "/health").json() == {"status": "ok"}
        assert isinstance(server.process, launch.ForkedProcess) == (spawner == "zygote")
        assert server.alive()
    finally:
        server.stop()
    assert not server.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)


def test_a_server_that_cannot_start_reports_its_log(spawner):
    with pytest.raises(launch.ServerStartError, match="has no parameter"):
        launch.start("echo", params={"nope": 1})


@pytest.mark.parametrize(("asked", "served"), [(10.0, 10.0), (2.0, 2.0), (None, 0.25)])
def test_a_knob_set_to_its_default_still_reaches_a_started_scenario(asked: float | None, served: float) -> None:
    """``check --scenario slow --ping-interval 10``: 10 equals the protocol default, yet it is what the user asked
    for — slow's own default (0.25 s) applies only when nothing was asked."""
    from orsbench.api import prepare
    from orsbench.servers import targets

    plan = prepare("slow", **({"ping_interval": asked} if asked is not None else {}))
    with targets.running(plan.target, impl=plan.impl, config=plan.config, wait=60) as server:
        assert server is not None
        assert server.stats()["config"]["ping_interval"] == served


def test_servers_forked_by_the_zygote_die_with_it(tmp_path: Path) -> None:
    """A launcher that goes away without stopping its servers (a killed pytest worker) leaves none behind.

    The zygote leaves when its stdin closes; each server it forked asks the kernel for SIGTERM
    when the zygote dies, so nothing is left running under init.
    """
    import json
    import subprocess
    import sys
    import time

    zygote = subprocess.Popen(
        [sys.executable, "-m", "orsbench.servers.zygote", "orsbench.cli"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "ready" in json.loads(zygote.stdout.readline())
        request = {"argv": ["serve", "echo", "--port", "0"], "env": dict(os.environ), "log": str(tmp_path / "server.log")}
        zygote.stdin.write(json.dumps(request) + "\n")
        zygote.stdin.flush()
        pid = json.loads(zygote.stdout.readline())["pid"]
        os.kill(pid, 0)  # forked and running
        zygote.stdin.close()  # the launcher goes away
        zygote.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            raise AssertionError(f"the server {pid} outlived its zygote by 30 s")
    finally:
        if zygote.poll() is None:
            zygote.kill()


def test_a_forked_server_that_died_is_never_signalled_by_its_old_pid(monkeypatch):
    """The zygote's children are reaped by the kernel, so a dead server's PID is soon another process's:
    stopping it must not signal that number (seen as matrix clients dying of a stray SIGTERM)."""
    import os
    import signal
    import subprocess

    child = subprocess.Popen(["sleep", "30"])
    forked = launch.ForkedProcess(child.pid)
    assert forked.poll() is None
    forked.send_signal(signal.SIGTERM)
    child.wait(10)
    assert forked.poll() == 0
    sent: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(pid))
    forked.send_signal(signal.SIGTERM)
    forked.kill()
    assert sent == []  # the number may already name someone else


def test_stop_all_signals_every_server_before_waiting_and_kills_the_ones_that_stay():
    """One shared wait: three servers that ignore SIGTERM cost one timeout, not three, and are then SIGKILLed."""
    import subprocess
    import time

    stubborn = [subprocess.Popen(["sh", "-c", 'trap "" TERM; exec sleep 30']) for _ in range(3)]
    polite = subprocess.Popen(["sleep", "30"])
    servers = [
        launch.RunningServer(f"http://127.0.0.1:{i}", "", "cmd", "sleep", p, Path(os.devnull))
        for i, p in enumerate([*stubborn, polite], start=1)
    ]
    time.sleep(0.2)  # let sh exec sleep with SIGTERM ignored
    started = time.monotonic()
    launch.stop_all(servers, timeout=1.0)
    assert time.monotonic() - started < 2.5  # one after another would take 3 s
    assert [s.alive() for s in servers] == [False] * 4
    assert [p.returncode for p in stubborn] == [-9] * 3 and polite.returncode == -15
