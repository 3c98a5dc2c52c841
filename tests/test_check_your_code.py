"""Check your own code: ``--app``, ``--cmd``, ``orsbench.check(target)`` and the fixture serving your class.

The environments are the SDK test environments under tests/envs/ — written as an
environment author writes theirs, and served unchanged by the openreward Server.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import orsbench
from orsbench.servers import targets
from orsbench.servers.user_app import AppTarget
from orsbench.servers.launch import ServerStartError
from tests.envs.long_game import LongGame

ROOT = Path(__file__).parent.parent
PYTHON = sys.executable
QUICK = "discovery.*,dataset.*"  # enough to show the target was served and checked, in a second


def cli(*argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [PYTHON, "-m", "orsbench", "check", *argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def _checked_url(stdout: str) -> str:
    match = re.search(r"orsbench check (http://127\.0\.0\.1:\d+)", stdout)
    assert match, stdout
    return match.group(1)


def _closed(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) != 0


# -- the command line ----------------------------------------------------------------------------------------
# the module form is resolved by the same loader (tests/test_user_app.py serves both forms): its end-to-end run is slow
@pytest.mark.parametrize("app", ["tests/envs/long_game.py:LongGame", pytest.param("tests.envs.long_game:LongGame", marks=pytest.mark.slow)])
def test_check_app_serves_the_class_checks_it_and_stops_it(app):
    result = cli("--app", app, "--only", QUICK)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "env longgame" in result.stdout and "verdict: PASS" in result.stdout
    assert _closed(_checked_url(result.stdout)), "the served app is still listening"


def test_check_app_with_a_crashing_tool_fails():
    result = cli("--app", "tests.envs.always_raises:AlwaysRaises", "-q")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "grader crashed" in result.stdout


def test_check_cmd_runs_any_server_command_on_a_free_port_and_stops_it_by_pid():
    result = cli("--server-cmd", f"{PYTHON} -m orsbench serve echo --port {{port}}", "--only", QUICK)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "env echo" in result.stdout
    assert _closed(_checked_url(result.stdout)), "the command's server is still listening"


def test_check_cmd_that_exits_shows_its_output_and_exits_2():
    result = cli("--server-cmd", f"{PYTHON} -c \"print('port {{port}} is taken, giving up'); raise SystemExit(3)\"", "--wait", "20")
    assert result.returncode == 2, result.stderr
    assert "exited with status 3" in result.stderr and "giving up" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_cmd_slower_than_wait_is_stopped_with_a_hint():
    slow = f"{PYTHON} -c \"import time; print('warming up', flush=True); time.sleep(30)\" {{port}}"
    result = cli("--server-cmd", slow, "--wait", "1")
    assert result.returncode == 2, result.stderr
    assert "within 1 s" in result.stderr and "--wait" in result.stderr and "warming up" in result.stderr


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (("--app", "tests/envs/long_game.py"), "FILE.py:Class"),
        (("--app", "no_such_file.py:X"), "no such file 'no_such_file.py'"),
        (("--server-cmd", "python my_env.py"), "{port}"),
        (("--app", "x.py:X", "--server-cmd", "y {port}"), "give one target"),
        (("--scenario", "echo", "--wait", "0"), "--wait"),
    ],
)
def test_target_mistakes_are_usage_errors(argv, fragment):
    result = cli(*argv)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr.strip().splitlines()[-1]


def test_an_app_class_that_does_not_exist_names_the_classes_there():
    result = cli("--app", "tests/envs/long_game.py:Nope")
    assert result.returncode == 2 and "Environment classes there: LongGame" in result.stderr


# -- the Python API --------------------------------------------------------------------------------------------
def test_api_checks_an_environment_class():
    report = orsbench.check(LongGame, only=QUICK.split(","))
    assert report.passed and report.env == "longgame" and report.target.startswith("http://127.0.0.1:")
    assert _closed(report.target)


def test_api_checks_an_app_string_and_a_crash_fails():
    report = orsbench.check("tests/envs/always_raises.py:AlwaysRaises", fuzz=0)
    assert report.exit_code == 1 and not report.passed


def test_api_checks_a_scenario_a_url_and_a_command(ors_server_factory):
    only = QUICK.split(",")
    assert orsbench.check("echo", only=only).passed
    server = ors_server_factory("echo")
    by_url = orsbench.check(server.url, only=only)
    assert by_url.passed and by_url.target == server.url
    by_cmd = orsbench.check([PYTHON, "-m", "orsbench", "serve", "sparse-reward", "--port", "{port}"], only=only)
    assert by_cmd.passed and by_cmd.env == "sparse-reward"


def test_api_refuses_what_cannot_work_before_starting_anything():
    with pytest.raises(ValueError, match="did you mean http://127.0.0.1:9"):
        orsbench.check("127.0.0.1:9")
    with pytest.raises(TypeError, match="unknown check option"):
        orsbench.check("echo", colour=True)
    with pytest.raises(ValueError, match="scenario only"):
        orsbench.check(LongGame, params={"x": 1})
    with pytest.raises(ServerStartError, match="exited with status 4"):
        orsbench.check(f"{PYTHON} -c 'raise SystemExit(4)' {{port}}", wait=20)


def test_target_resolution():
    assert targets.resolve("http://h:1").kind == "url"
    assert targets.resolve("echo").kind == "scenario"
    assert targets.resolve("my_env.py:MyEnv") == targets.CheckTarget("app", AppTarget("my_env.py", ("MyEnv",)))
    assert targets.resolve("python s.py --port {port}").kind == "command"
    assert targets.resolve(["python", "s.py", "{port}"]).value == ("python", "s.py", "{port}")
    resolved = targets.resolve(LongGame)
    assert resolved.value == AppTarget("tests.envs.long_game", ("LongGame",), (str(ROOT),))

    def local() -> type:
        class Inner(LongGame):
            pass

        return Inner

    with pytest.raises(TypeError, match="module level"):
        targets.resolve(local())


# -- the pytest fixture -------------------------------------------------------------------------------------------
@pytest.mark.ors_server(app=LongGame)
def test_fixture_serves_an_environment_class(ors_server):
    assert ors_server.env_name == "longgame" and ors_server.url.startswith("http://127.0.0.1:")
    assert os.environ["OPENREWARD_SESSION_URL"] == ors_server.url
    tools = httpx.get(f"{ors_server.url}/longgame/tools", timeout=10).json()["tools"]
    assert [t["name"] for t in tools] == ["say"]


def test_factory_serves_a_module_app_string_and_a_command(ors_server_factory):
    server = ors_server_factory(app="tests.envs.two_envs:LongGame,ValidatorGated")
    assert httpx.get(server.url + "/list_environments", timeout=10).json() == ["longgame", "validatorgated"]
    assert ors_server_factory(app="tests.envs.two_envs:LongGame,ValidatorGated") is server  # shared, like scenarios
    command = ors_server_factory(cmd=f"{PYTHON} -m orsbench serve echo --port {{port}}")
    assert command.env_name == "echo" and command.impl == "cmd"
    with pytest.raises(TypeError, match="not both"):
        ors_server_factory(app=LongGame, cmd="x {port}")


@pytest.mark.parametrize("text", ["127.0.0.1:9", "localhost:8080/echo", "host:8080"])
def test_host_and_port_without_scheme_is_a_url_not_an_app(text):
    assert targets.resolve(text).kind == "url"
