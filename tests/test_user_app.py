"""Serving a user's own openreward Environment class: ``launch.start(AppTarget.parse("FILE.py:Class"))``."""

from __future__ import annotations

import httpx
import pytest

from orsbench.servers.launch import ServerStartError, command, serve, start
from orsbench.servers.user_app import AppTarget, AppTargetError


def test_target_parse_file_and_module() -> None:
    assert AppTarget.parse("app:tests/envs/long_game.py:LongGame") == AppTarget("tests/envs/long_game.py", ("LongGame",))
    target = AppTarget.parse("tests.envs.leaked_answer:LeakedAnswer, LongGame")
    assert target.classes == ("LeakedAnswer", "LongGame") and not target.is_file
    with pytest.raises(AppTargetError, match="FILE.py:Class"):
        AppTarget.parse("no_class_here")


def test_command_runs_the_user_app_server() -> None:
    assert command(AppTarget.parse("app:x.py:X"), ready_file="r")[2:4] == ["orsbench.servers.user_app", "x.py:X"]
    assert command("echo", ready_file="r")[2:4] == ["orsbench", "serve"]
    with pytest.raises(ValueError, match=r"pass AppTarget.parse"):
        start("app:x.py:X")  # a string is a scenario's name: an app is typed


def test_serves_a_file_target_on_loopback_and_stops_by_pid() -> None:
    with serve(AppTarget.parse("tests/envs/long_game.py:LongGame")) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.env_name == "longgame" and server.impl == "app"
        tools = httpx.get(f"{server.url}/longgame/tools", timeout=10).json()["tools"]
        assert [t["name"] for t in tools] == ["say"]
        pid = server.pid
    assert not server.alive(), f"server {pid} still running after stop"


def test_serves_several_classes_from_a_module_first_is_default() -> None:
    with serve(AppTarget.parse("tests.envs.two_envs:LongGame,ValidatorGated")) as server:
        assert httpx.get(server.url + "/list_environments", timeout=10).json() == ["longgame", "validatorgated"]
        assert server.env_name == "longgame"


def test_a_class_without_tools_is_refused_with_the_sdks_reason() -> None:
    with pytest.raises(ServerStartError, match="has no tools defined"):
        start(AppTarget.parse("tests.envs._base:ThreeTasks"), timeout=60)



def test_bad_target_is_a_start_error_naming_the_classes_there() -> None:
    with pytest.raises(ServerStartError, match="Environment classes there: .*LongGame"):
        start(AppTarget.parse("tests/envs/long_game.py:Nope"), timeout=60)
