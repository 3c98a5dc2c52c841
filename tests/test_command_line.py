"""One command line: every command spells an idea the same way (issue 27, item 2).

The report flags (``--json/--junit/--html/--markdown``, ``-`` for stdout, paths checked before a run, ``-q/-v``)
on every command that produces a report; one ``--jobs``; ``--server-cmd`` and ``--client-cmd`` for the two
different commands; one ``--tasks`` grammar; ``--scenario``; ``$ORSBENCH_API_KEY`` wherever a command talks to
a server; old spellings working for a release with a note on stderr; usage errors printed by argparse.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from orsbench.cli import build_parser, flags, main, reporting
from tests.needs import needs

ROOT = Path(__file__).parent.parent
KEY = "sk-cli-test-KEY-0042"

#: Every command that produces a report, and the report formats its result has.
REPORTING = {
    "check": ("json", "junit", "html", "markdown"),
    "check-client": ("json", "junit", "html", "markdown"),
    "proxy": ("json", "junit", "html", "markdown"),
    "matrix": ("json", "html", "markdown"),
    "bench": ("json",),
}


def _parser(command: str) -> argparse.ArgumentParser:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[command]


def _options(command: str) -> set[str]:
    return {option for action in _parser(command)._actions for option in action.option_strings}


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main(argv)`` ends in argparse's usage error (exit 2): its last stderr line."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


# -- the report flags --------------------------------------------------------------------------------------
def _reporting_commands() -> dict[str, tuple[str, ...]]:
    """Every subcommand that took its report flags from reporting.add_report_arguments, and its formats."""
    from orsbench.cli import SUBCOMMANDS

    found = {}
    for name in SUBCOMMANDS.names():
        formats = _parser(name).get_default("_formats")
        if formats:
            found[name] = tuple(formats)
    return found


def test_the_commands_that_report_take_their_flags_from_one_place() -> None:
    found = _reporting_commands()
    for command, formats in REPORTING.items():
        assert set(formats) <= set(found.get(command, ())), command


@pytest.mark.parametrize("command", sorted(_reporting_commands()))
def test_every_reporting_command_has_the_same_report_flags(command: str) -> None:
    formats = _reporting_commands()[command]
    options = _options(command)
    assert {f"--{name}" for name in formats} <= options
    assert {"-q", "--quiet", "-v", "--verbose"} <= options
    for name in formats:  # one type, so one meaning: '-' is stdout, the folder is checked at parse time
        action = next(a for a in _parser(command)._actions if f"--{name}" in a.option_strings)
        assert action.type is reporting.types.output_file, (command, name)
    for name in set(reporting.FORMATS) - set(formats):  # a format the result has no writer for is not offered
        assert f"--{name}" not in options, (command, name)


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "http://127.0.0.1:9", "--json", "{missing}/r.json"],
        ["proxy", "http://127.0.0.1:9", "--markdown", "{missing}/r.md"],
        ["proxy", "http://127.0.0.1:9", "--record", "{missing}/c.json"],
        ["matrix", "--json", "{missing}/m.json"],
        ["matrix", "--markdown", "{missing}/m.md"],
        ["record", "http://127.0.0.1:9", "--out", "{missing}/c.json"],
        ["bench", "--json", "{missing}/b.json"],
        ["check-client", "--client-cmd", "true", "--junit", "{missing}/j.xml"],
    ],
    ids=lambda argv: " ".join(argv[:1] + [a for a in argv if a.startswith("--")][:1]),
)
def test_output_paths_are_checked_before_anything_starts(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """proxy and matrix used to find a missing folder only after the run (a proxy session, a 15-minute matrix)."""
    missing = tmp_path / "no" / "such"
    started = time.monotonic()
    line = _usage_error([a.replace("{missing}", str(missing)) for a in argv], capsys)
    assert "no folder" in line and time.monotonic() - started < 5


def test_two_reports_cannot_both_take_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    line = _usage_error(["check", "http://127.0.0.1:9", "--json", "-", "--junit", "-"], capsys)
    assert "--json - and --junit -" in line and "stdout" in line


def test_matrix_json_dash_is_stdout_not_a_file_named_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``matrix --json -`` wrote a file named ``-``; it is stdout, and the summary moves to stderr."""
    monkeypatch.chdir(tmp_path)
    assert main(["matrix", "--predicted", "--clients", "openreward", "--servers", "mock", "--profiles", "no", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert not (tmp_path / "-").exists()
    result = json.loads(captured.out)  # stdout is the JSON alone
    assert result["cells"] and "cells in" in captured.err


def test_check_junit_and_html_dash_go_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    """Every format takes ``-`` (only JSON and Markdown did); the table then goes to stderr."""
    import xml.etree.ElementTree as ET

    with socket_closed() as url:
        assert main(["check", url, "--junit", "-"]) == 2
    captured = capsys.readouterr()
    assert ET.fromstring(captured.out).tag == "testsuites" and "cannot reach" in captured.err


class socket_closed:
    """A URL nothing listens on."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return f"http://127.0.0.1:{sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        return None


# -- one name per idea ------------------------------------------------------------------------------------------
def test_one_parallelism_flag() -> None:
    for command in ("check-client", "matrix"):
        assert "--jobs" in _options(command)
    assert "--parallel" not in _parser("matrix").format_help()  # the old spelling is hidden, not documented
    assert build_parser().parse_args(["matrix", "--jobs", "5"]).jobs == 5


def test_a_server_command_and_a_client_command_have_different_names() -> None:
    check, client, matrix = (_parser(c).format_help() for c in ("check", "check-client", "matrix"))
    assert "--server-cmd" in check and "--client-cmd" not in check and "without a shell" in check
    assert "--client-cmd" in client and "--server-cmd" not in client and "/bin/sh" in client
    assert "--client-cmd" in matrix
    assert "--cmd " not in check + client + matrix


def test_the_scenario_is_given_one_way() -> None:
    parse = build_parser().parse_args
    assert parse(["check", "--scenario", "echo"]).scenario == "echo"
    assert parse(["bench", "--scenario", "slow"]).scenario == "slow"
    serve = parse(["serve", "--scenario", "echo"])
    assert (serve.scenario, serve.scenario_flag) == (None, "echo")  # resolved by serve's run()
    assert not re.search(r"--serve\b", _parser("check").format_help())


@pytest.mark.parametrize(
    ("argv", "attribute", "value"),
    [
        (["check", "--serve", "echo"], "scenario", "echo"),
        (["check", "--cmd", "python env.py --port {port}"], "server_cmd", "python env.py --port {port}"),
        (["check-client", "--cmd", "python a.py"], "client_cmd", "python a.py"),
        (["matrix", "--parallel", "2"], "jobs", 2),
        (["matrix", "--url", "http://127.0.0.1:9", "--cmd", "a", "--cmd", "b"], "client_cmd", ["a", "b"]),
    ],
)
def test_old_spellings_work_for_a_release_with_a_note(argv: list[str], attribute: str, value: object, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(argv)
    assert getattr(args, attribute) == value
    old = next(a for a in argv if a in ("--serve", "--cmd", "--parallel"))
    assert f"{old} is deprecated and goes in the next release" in capsys.readouterr().err


def test_old_and_new_spellings_run_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-client", "--cmd", "true", "--list"]) == main(["check-client", "--client-cmd", "true", "--list"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("--cmd is deprecated") == 1


# -- one --tasks grammar ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "split", "indices"),
    [("0,-1", None, (0, -1)), ("train:0-2,7", "train", (0, 1, 2, 7)), ("test:-3--1", "test", (-3, -2, -1)), ("5", None, (5,))],
)
def test_one_tasks_grammar_for_check_and_record(text: str, split: str | None, indices: tuple[int, ...]) -> None:
    for argv in (["check", "http://127.0.0.1:9"], ["record", "http://127.0.0.1:9", "--out", "x.json"]):
        tasks = build_parser().parse_args([*argv, f"--tasks={text}"]).tasks
        assert (tasks.split, tasks.indices, tasks.text) == (split, indices, text), argv


@pytest.mark.parametrize("text", ["first", ",", "train:", "3-1", "-1-2", "train:a-b"])
def test_a_bad_tasks_spec_is_one_usage_error_everywhere(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["check", "http://127.0.0.1:9"], ["record", "http://127.0.0.1:9", "--out", "x.json"]):
        line = _usage_error([*argv, f"--tasks={text}"], capsys)
        assert "argument --tasks" in line and ("[SPLIT:]I[-J][,K...]" in line or "range" in line), line


def test_check_takes_the_split_from_tasks() -> None:
    from orsbench.cli.check import _options as check_options

    options = check_options(build_parser().parse_args(["check", "http://127.0.0.1:9", "--tasks", "test:0-1"]))
    assert (options.split, options.tasks) == ("test", (0, 1))


# -- $ORSBENCH_API_KEY wherever a command talks to a server -------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["check", "http://127.0.0.1:9"],
        ["record", "http://127.0.0.1:9", "--out", "x.json"],
        ["proxy", "http://127.0.0.1:9"],
        ["bench", "--url", "http://127.0.0.1:9"],
        ["matrix", "--url", "http://127.0.0.1:9"],
        ["clients", "http://127.0.0.1:9"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_that_talks_to_a_server_reads_the_key_from_the_environment(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(flags.API_KEY_ENV, KEY)
    assert flags.api_key_of(build_parser().parse_args(argv)) == KEY
    assert flags.api_key_of(build_parser().parse_args([*argv, "--api-key", "flag-wins"])) == "flag-wins"
    assert KEY not in _parser(argv[0]).format_help()  # the default is named, never shown


def test_check_sends_the_key_from_the_environment(ors_server_factory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    server = ors_server_factory("echo", api_key=KEY)
    argv = ["check", server.url, "--only", "discovery.tools_listing", "--json", "-"]
    assert main(argv) == 2  # refused without it: a usage error that names the variable, not "not an ORS server"
    refused = json.loads(capsys.readouterr().out)
    assert refused["verdict"] == "usage" and "wants an API key" in refused["reason"] and "$ORSBENCH_API_KEY" in refused["reason"]
    monkeypatch.setenv(flags.API_KEY_ENV, KEY)
    assert main(argv) == 0
    assert KEY not in capsys.readouterr().out


def test_the_proxy_adds_the_key_to_requests_that_carry_none(ors_server_factory) -> None:
    from orsbench.servers.proxy import ProxyApp

    upstream = ors_server_factory("echo", api_key=KEY)

    async def get(api_key: str | None, headers: dict[str, str]) -> int:
        app = ProxyApp(upstream.url, api_key=api_key)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
                return (await client.get("/echo/tools", headers=headers)).status_code
        finally:
            await app.aclose()

    assert asyncio.run(get(None, {})) == 401
    assert asyncio.run(get(KEY, {})) == 200
    assert asyncio.run(get(KEY, {"X-API-Key": ""})) == 200  # an empty key is no key
    assert asyncio.run(get(KEY, {"X-API-Key": "the-clients-own"})) == 401  # a client's own key is kept


def test_proxy_writes_markdown_and_is_verbose_or_quiet(ors_server_factory, tmp_path: Path) -> None:
    """proxy had no --markdown, -q or -v: -v prints each exchange, and the Markdown summary is written on exit."""
    upstream = ors_server_factory("echo")
    ready, markdown = tmp_path / "ready", tmp_path / "summary.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "orsbench", "proxy", upstream.url, "--ready-file", str(ready), "--markdown", str(markdown), "-v"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        url = ready.read_text()
        assert httpx.get(f"{url}/echo/tools", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert "GET " in err and "/echo/tools -> 200" in err, err
    assert "orsbench proxy" in markdown.read_text()


def test_bench_args_must_be_a_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert "JSON object" in _usage_error(["bench", "--args", "[1]"], capsys)
    assert "not JSON" in _usage_error(["bench", "--args", "{nope"], capsys)


def test_usage_errors_are_printed_by_argparse_with_the_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Cross-flag mistakes too: ``usage:`` first, ``orsbench COMMAND: error: ...`` last, exit 2."""
    with pytest.raises(SystemExit):
        main(["bench", "--server-pid", "1"])
    err = capsys.readouterr().err
    assert err.startswith("usage: orsbench bench") and "orsbench bench: error: --server-pid needs --url" in err


@needs("sdk")  # conformance/ imports the SDK
def test_the_pytest_wire_checks_read_the_key_from_the_environment(ors_server_factory) -> None:
    """``pytest conformance/test_wire_checks.py --ors-url URL`` against a server that wants a key: $ORSBENCH_API_KEY
    (without it, the run is refused as ``orsbench check`` refuses it: test_check_sends_the_key_from_the_environment)."""
    server = ors_server_factory("echo", api_key=KEY)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist", "conformance/test_wire_checks.py",
            "--ors-url", server.url, "-k", "discovery.tools_listing"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1", flags.API_KEY_ENV: KEY}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:]
    assert KEY not in done.stdout + done.stderr
