"""User mistakes are usage errors: exit 2, one line that names what exists or the fix, no traceback.

Every command runs as a real subprocess (``python -m orsbench``), as a user would
run it, so what is asserted is what a terminal shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1"}


def orsbench(*argv: str, prelude: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the CLI; ``prelude`` is Python run first in the same process (to simulate a missing package)."""
    code = f"{prelude}\nimport sys\nfrom orsbench.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT
    )


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, no traceback, and the last stderr line says it all."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


# -- what to check: names the server does not have ---------------------------------------------------------------
def test_unknown_env_lists_the_environments():
    line = assert_usage_error(orsbench("check", "--scenario", "echo", "--env", "nosuchenv", "-q"), "'nosuchenv'", "echo", "--env echo")
    assert line.startswith("orsbench check: error:")


def test_unknown_split_lists_the_splits():
    assert_usage_error(orsbench("check", "--scenario", "echo", "--split", "nosuchsplit", "-q"), "'nosuchsplit'", "train, test")


def test_an_empty_train_split_is_reported_as_empty_with_the_splits_that_have_tasks():
    result = orsbench("check", "--scenario", "echo", "--param", "train_size=0", "-q")
    line = assert_usage_error(result, "'train'", "has no tasks", "--split", "test (16 tasks)")
    assert "session.create" not in result.stdout + result.stderr, line


def test_the_json_report_of_a_usage_error_says_why(tmp_path):
    path = tmp_path / "report.json"
    assert_usage_error(orsbench("check", "--scenario", "echo", "--env", "nope", "--json", str(path), "-q"))
    import json

    report = json.loads(path.read_text())
    assert report["verdict"] == "usage" and report["exit_code"] == 2 and "nope" in report["reason"]


# -- URLs ---------------------------------------------------------------------------------------------------------
def test_a_url_without_scheme_suggests_http():
    assert_usage_error(orsbench("check", "127.0.0.1:9"), "no scheme", "did you mean http://127.0.0.1:9?")


def test_env_name_in_the_url_path_suggests_env(ors_server_factory):
    server = ors_server_factory("echo")
    line = assert_usage_error(orsbench("check", server.url + "/echo", "-q"), "--env echo")
    assert f"use {server.url} --env echo" in line


# -- numbers out of range -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-5", "0"])
def test_check_timeout_must_be_positive(value):
    assert_usage_error(orsbench("check", "--scenario", "echo", "--timeout", value), "--timeout", "greater than 0")


def test_serve_rejects_an_invalid_port():
    assert_usage_error(orsbench("serve", "echo", "--port", "99999"), "--port", "not a TCP port")


@pytest.mark.parametrize(
    "flag,value", [("--ttl", "-1"), ("--ping-interval", "0"), ("--latency", "-0.5"), ("--chunk-size", "0"), ("--max-body", "-3")]
)
def test_serve_rejects_negative_knobs(flag, value):
    assert_usage_error(orsbench("serve", "echo", flag, value), flag)


def test_bench_rejects_zero_concurrency():
    assert_usage_error(orsbench("bench", "--concurrency", "0"), "--concurrency", "greater than 0")


# -- --param and --fault: one parser, exit 2 everywhere --------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (("proxy", "http://127.0.0.1:9", "--port", "99999"), "not a TCP port"),
        (("proxy", "http://127.0.0.1:9", "--fault", "nosuch"), "unknown fault 'nosuch'"),
        (("proxy", "http://127.0.0.1:9", "--evidence-limit", "-1"), "must be 0 or more"),
        (("record", "http://127.0.0.1:9", "--out", "x.json", "--timeout", "-5"), "must be greater than 0"),
    ],
)
def test_the_later_commands_parse_numbers_and_names_with_the_same_types(argv, fragment):
    """proxy and record use the shared argparse types (a bad port or timeout was a traceback): exit 2."""
    assert_usage_error(orsbench(*argv), fragment)


@pytest.mark.parametrize("command", [("check", "--scenario", "echo"), ("serve", "echo"), ("bench",)])
def test_param_without_equals_is_a_usage_error_in_every_command(command):
    assert_usage_error(orsbench(*command, "--param", "train_size"), "--param", "KEY=VALUE")


def test_param_of_the_wrong_type_names_the_type():
    assert_usage_error(orsbench("check", "--scenario", "echo", "--param", "train_size=many"), "train_size", "int", "'many'")


@pytest.mark.parametrize("command", [("check", "--scenario", "echo"), ("serve", "echo")])
def test_unknown_fault_is_a_usage_error(command):
    assert_usage_error(orsbench(*command, "--fault", "reward-bool,no-such-fault"), "--fault", "'no-such-fault'")


# -- missing extras -----------------------------------------------------------------------------------------------
BLOCK = "import sys\nfor name in {names!r}:\n    sys.modules[name] = None  # import now raises ImportError"


def test_check_impl_sdk_without_the_sdk_extra_names_the_extra():
    result = orsbench("check", "--scenario", "echo", "--impl", "sdk", prelude=BLOCK.format(names=["openreward"]))
    assert_usage_error(result, "openreward", 'pip install "orsbench[sdk]"')


def test_serve_impl_sdk_without_the_sdk_extra_names_the_extra():
    result = orsbench("serve", "echo", "--impl", "sdk", prelude=BLOCK.format(names=["fastapi"]))
    assert_usage_error(result, "fastapi", 'pip install "orsbench[sdk]"')


def test_bench_without_the_load_extra_names_the_extra():
    assert_usage_error(orsbench("bench", prelude=BLOCK.format(names=["locust"])), "locust", '"orsbench[load]"')


def test_require_names_each_extra_and_accepts_installed_ones(monkeypatch):
    from orsbench import extras

    extras.require("sdk", "x")  # installed in this environment
    expected = {"sdk": "openreward", "load": "locust", "training": "trl", "ors-sdk": "ors", "inspect": "inspect_ai"}
    for extra, module in expected.items():
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(extras.MissingExtra, match=rf'pip install "orsbench\[{extra}\]"'):
            extras.require(extra, "a feature")
        monkeypatch.delitem(sys.modules, module)


# -- a closed pipe --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [("check", "--list"), ("scenarios", "-v"), ("--help",)])
def test_no_broken_pipe_traceback_when_the_reader_goes_away(argv):
    """``orsbench check --list | head``: the reader is gone before we write."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orsbench", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(60)
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr, stderr


# -- the locustfile ---------------------------------------------------------------------------------------------------
def test_locust_with_an_unreachable_host_stops_at_once_with_one_message():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "orsbench" / "load.py"), "--headless", "-u", "3", "-r", "3",
         "-t", "60s", "--host", f"http://127.0.0.1:{port}", "--only-summary"],
        capture_output=True, text=True, timeout=50, env=_env(), cwd=ROOT,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    assert output.count("cannot load-test") == 1 and "Connection refused" in output, output[-2000:]


def test_check_app_without_the_sdk_extra_names_the_extra():
    result = orsbench("check", "--app", "tests/envs/long_game.py:LongGame", prelude=BLOCK.format(names=["openreward"]))
    assert_usage_error(result, "openreward", 'pip install "orsbench[sdk]"')


def test_training_smoke_without_the_training_extra_names_the_extra():
    code = BLOCK.format(names=["torch"]) + "\nfrom training_smoke.__main__ import main\nsys.exit(main(['--profile', 'cpu']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert_usage_error(result, "torch", 'pip install "orsbench[training]"')


def test_serve_on_a_port_in_use_says_so():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = orsbench("serve", "echo", "--port", str(port), timeout=60)
    assert_usage_error(result, f"cannot listen on 127.0.0.1:{port}", "--port")


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_report_path_in_a_missing_folder_is_refused_before_the_run(flag, tmp_path):
    missing = tmp_path / "no" / "such" / "report.out"
    assert_usage_error(orsbench("check", "--scenario", "echo", flag, str(missing)), flag, "no folder")


def test_a_missing_baseline_file_is_a_usage_error(tmp_path):
    assert_usage_error(orsbench("check", "--scenario", "echo", "--expected-failures", str(tmp_path / "nope.yaml")), "cannot read")
