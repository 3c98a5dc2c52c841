"""Security model of orsbench's servers: loopback by default, optional API key, secrets kept out of sight.

* Servers bind 127.0.0.1 unless told otherwise, and print a WARNING when told
  to bind an address reachable from elsewhere. The warning is tested without
  binding wide: the bind itself is replaced by a stub that stops the server.
* ``--api-key`` (or ``$ORSBENCH_API_KEY``) makes every route but ``/health``
  answer 401 unless the key comes as ``X-API-Key`` (what the openreward SDK
  sends) or ``Authorization: Bearer``; the comparison is ``hmac.compare_digest``.
* Secrets sent in ``X-Secrets`` never appear in the server's log (run with
  ``--access-log``) or in any error detail, whatever shape the header has.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from orsbench import protocol
from orsbench.cli import build_parser, main
from orsbench.cli.serve import API_KEY_ENV, config_from_args
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.servers import app as app_module
from orsbench.servers.app import build_app, is_loopback
from orsbench.servers.launch import RunningServer, command
from orsbench.servers.user_app import AppTarget
from orsbench.wire import WireClient, encode_secrets
from tests.needs import needs

ENV = "sparse-reward"
KEY = "orsbench-test-key-7f3a"
ServerFactory = Callable[..., RunningServer]


# -- binding ----------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost"])
def test_loopback_addresses_are_recognised(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.org", ""])
def test_other_addresses_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


class _Stop(Exception):
    """Raised by the stub bind: the server stops before it touches the network."""


def _serve_with_stub_bind(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str) -> str:
    bound: list[str] = []

    def stub_bind(h: str, port: int) -> Any:
        bound.append(h)
        raise _Stop

    monkeypatch.setattr(app_module, "bind", stub_bind)
    with pytest.raises(_Stop):
        main(["serve", "echo", "--host", host])
    assert bound == [host]
    return capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_serve_warns_before_binding_beyond_loopback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    err = _serve_with_stub_bind(monkeypatch, capsys, host)
    warnings = [line for line in err.splitlines() if "WARNING" in line]
    assert warnings and host in warnings[0], err


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_serve_is_quiet_on_loopback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str) -> None:
    assert "WARNING" not in _serve_with_stub_bind(monkeypatch, capsys, host)


def test_loopback_is_the_default_everywhere(ors_server_factory: ServerFactory) -> None:
    assert build_parser().parse_args(["serve", "echo"]).host == "127.0.0.1"
    cmd = command("echo")
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert ors_server_factory("echo").url.startswith("http://127.0.0.1:")


# -- API key ------------------------------------------------------------------------------
def all_routes() -> list[tuple[str, str]]:
    """Every route the engine serves, from its own route tables."""
    from orsbench.servers.engine import Engine

    engine = Engine([get_scenario(ENV)], ServerConfig())
    return [(method, path.replace("{env}", ENV)) for method, path in engine.routes()]


def test_without_the_key_every_route_but_health_is_401(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, api_key=KEY)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for method, path in all_routes():
            response = client.request(method, path, headers={protocol.SESSION_HEADER: "s"}, json={})
            if path == protocol.HEALTH:
                assert response.status_code == 200
                continue
            assert response.status_code == 401, f"{method} {path}: {response.status_code} {response.text[:200]}"
            assert "API key" in response.json()["detail"]
            assert KEY not in response.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({protocol.API_KEY_HEADER: KEY}, 200),
        ({"Authorization": f"Bearer {KEY}"}, 200),
        ({"Authorization": f"bearer {KEY}"}, 200),
        ({protocol.API_KEY_HEADER: "", "Authorization": f"Bearer {KEY}"}, 200),  # the SDK's empty X-API-Key
        ({}, 401),
        ({protocol.API_KEY_HEADER: ""}, 401),
        ({protocol.API_KEY_HEADER: KEY[:-1]}, 401),
        ({protocol.API_KEY_HEADER: KEY + "x"}, 401),
        ({protocol.API_KEY_HEADER: KEY.upper()}, 401),
        ({"Authorization": f"Bearer {KEY[:-1]}"}, 401),
        ({"Authorization": f"Basic {base64.b64encode(KEY.encode()).decode()}"}, 401),
        ({"Authorization": KEY}, 401),
        ({protocol.API_KEY_HEADER: "wrong", "Authorization": f"Bearer {KEY}"}, 401),
    ],
)
def test_the_key_is_accepted_as_x_api_key_or_bearer(
    ors_server_factory: ServerFactory, headers: dict[str, str], status: int
) -> None:
    server = ors_server_factory(ENV, api_key=KEY)
    response = httpx.get(f"{server.url}/{ENV}/tools", headers=headers, timeout=10)
    assert response.status_code == status, response.text[:200]


def test_the_key_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check goes through hmac.compare_digest, also for keys of another length."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    app = build_app([get_scenario(ENV)], ServerConfig(api_key=KEY))

    async def probe() -> list[int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://orsbench") as client:
            out = []
            for given in (KEY, "x", KEY * 3, ""):
                out.append((await client.get(protocol.LIST_ENVIRONMENTS, headers={protocol.API_KEY_HEADER: given})).status_code)
            return out

    import asyncio

    assert asyncio.run(probe()) == [200, 401, 401, 401]
    assert calls == [(g.encode(), KEY.encode()) for g in (KEY, "x", KEY * 3, "")]


def test_the_key_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = build_parser().parse_args
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert config_from_args(parse(["serve", "echo"]))[0].api_key == "from-env"
    assert config_from_args(parse(["serve", "echo", "--api-key", "from-flag"]))[0].api_key == "from-flag"
    # A launcher passes its whole config; its (absent) key is the truth, not the caller's environment.
    assert config_from_args(parse(["serve", "echo", "--config-json", ServerConfig().to_json()]))[0].api_key is None
    monkeypatch.delenv(API_KEY_ENV)
    assert config_from_args(parse(["serve", "echo"]))[0].api_key is None


def test_orsbench_serve_enforces_the_key_from_the_environment(tmp_path: Path) -> None:
    ready = tmp_path / "url"
    env = {**os.environ, API_KEY_ENV: KEY, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "orsbench", "serve", "echo", "--ready-file", str(ready)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline, "orsbench serve did not start"
            time.sleep(0.05)
        url = ready.read_text().strip()
        assert httpx.get(url + protocol.HEALTH, timeout=5).status_code == 200
        assert httpx.get(url + protocol.LIST_ENVIRONMENTS, timeout=5).status_code == 401
        assert httpx.get(url + protocol.LIST_ENVIRONMENTS, headers={protocol.API_KEY_HEADER: KEY}, timeout=5).status_code == 200
    finally:
        process.terminate()
        process.wait(10)


SDK_EPISODES = textwrap.dedent(
    """
    import json, sys
    import openreward
    from openreward.api._session.http import AuthenticationError
    url, key = sys.argv[1], sys.argv[2]
    results = []
    for api_key in (key, None):
        try:
            env = openreward.OpenReward(api_key=api_key).environments.get("sparse-reward", base_url=url)
            with env.session(split="train", index=0) as session:
                session.get_prompt()
                results.append({"output": session.call_tool("reveal", {"position": 0}).blocks[0].text})
        except AuthenticationError:
            results.append({"error": "AuthenticationError"})
    print(json.dumps(results))
    """
)


@needs("sdk")
def test_the_openreward_sdk_works_with_the_key_and_is_refused_without(ors_server_factory: ServerFactory) -> None:
    """The SDK sends its API key as X-API-Key on every request, pings included; without it: AuthenticationError."""
    server = ors_server_factory(ENV, api_key=KEY)
    env = {**os.environ, protocol.ENV_DISABLE_UPDATE_CHECK: "1", "OPENREWARD_API_KEY": ""}
    pings = server.stats()["pings"]
    done = subprocess.run(
        [sys.executable, "-c", SDK_EPISODES, server.url, KEY], check=False, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [{"output": "1"}, {"error": "AuthenticationError"}]
    assert server.stats()["pings"] > pings, "the SDK's pings carried the key"


# -- secrets ----------------------------------------------------------------------------------
SECRET = "sk-orsbench-SECRET-9d41c0"


def secret_headers() -> list[str]:
    """X-Secrets values carrying SECRET: one well-formed, the rest malformed in the usual ways."""
    b64 = lambda value: base64.b64encode(json.dumps(value).encode()).decode()
    return [
        encode_secrets({"OPENAI_API_KEY": SECRET}),  # well-formed
        SECRET,  # not base64
        b64({"OPENAI_API_KEY": SECRET}),  # value not wrapped in {"value": ...}
        b64({"OPENAI_API_KEY": {"value": 7, "note": SECRET}}),  # value not a string
        b64([SECRET]),  # not an object
        base64.b64encode(SECRET.encode()).decode(),  # base64, not JSON
        encode_secrets({"OPENAI_API_KEY": SECRET})[:-3],  # truncated
    ]


def test_secrets_never_reach_the_log_or_an_error_detail(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, access_log=True)
    forms = {SECRET, base64.b64encode(SECRET.encode()).decode()} | set(secret_headers())
    answers: list[str] = []
    with WireClient(server.url) as client:
        for header in secret_headers():
            for body in (
                {"split": "train", "index": 0},
                {"split": "nope", "index": 0},
                {"split": "train"},
                {"task_spec": {}, "index": 1},
            ):
                sid = client.new_session()
                exchange = client.request(
                    "POST", protocol.CREATE, sid=sid, json_body=body, headers={protocol.SECRETS_HEADER: header}
                )
                answers.append(exchange.body.decode("latin-1"))
                for follow in (client.prompt(ENV, sid), client.call(ENV, sid, "reveal", {"position": 0}), client.delete(sid)):
                    answers.append(follow.body.decode("latin-1"))
        answers.append(client.stats().body.decode())
    log = server.log()
    assert "POST /create [" in log, "the access log is on"
    for form in forms:
        assert form not in log, f"the server log contains a secret form {form[:20]!r}..."
        for answer in answers:
            assert form not in answer, f"an answer contains a secret form {form[:20]!r}...: {answer[:300]}"


def test_the_stats_never_show_the_api_key(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, api_key=KEY)
    stats = server.stats()  # the launcher sends the key it started the server with
    assert stats["config"]["api_key"] is None
    assert KEY not in json.dumps(stats)


# -- secrets for environments that need them (docs/protocol.md §14) ----------------------------
GATED = "tests.envs.secret_gated:SecretGated"


def _gated_secret() -> tuple[str, str]:
    from tests.envs.secret_gated import SECRET_NAME, SECRET_VALUE

    return SECRET_NAME, SECRET_VALUE


@needs("sdk")
def test_a_secret_gated_env_passes_check_with_its_secret(
    ors_server_factory: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, value = _gated_secret()
    server = ors_server_factory(app=GATED)
    report, junit, html, md = tmp_path / "report.json", tmp_path / "report.xml", tmp_path / "report.html", tmp_path / "report.md"
    code = main(
        ["check", server.url, "--no-fuzz", "--secret", f"{name}={value}", "--json", str(report), "--junit", str(junit)]
        + ["--html", str(html), "--markdown", str(md), "-v"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    data = json.loads(report.read_text())
    assert data["options"]["secrets"] == [name]  # by name only
    assert data["summary"]["fail"] == 0 and data["summary"]["pass"] > 40
    written = {"json": report.read_text(), "junit": junit.read_text(), "html": html.read_text(), "markdown": md.read_text()}
    assert "X-Secrets" in written["html"]  # the header is shown, its value masked
    for where, text in {"stdout": out.out, "stderr": out.err, **written, "server log": server.log()}.items():
        assert value not in text, f"the secret value is in the {where}"


@needs("sdk")
def test_without_its_secret_the_check_is_a_usage_error_naming_it(
    ors_server_factory: ServerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    name, _value = _gated_secret()
    server = ors_server_factory(app=GATED)
    assert main(["check", server.url, "--no-fuzz"]) == 2
    err = capsys.readouterr().err
    assert f"secret {name} is missing" in err, err  # the env's own message
    assert "--secret NAME=VALUE" in err and "§14" in err
    assert "answer /create with 200" not in err  # not graded as a protocol failure
    wrong = "wrong-key-0d9e8f7a"
    assert main(["check", server.url, "--no-fuzz", "--secret", f"{name}={wrong}"]) == 2
    err = capsys.readouterr().err
    assert f"the secrets sent ({name}) were not the ones it needs" in err, err
    assert wrong not in err


def test_secrets_come_from_flags_files_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orsbench.cli.types import secrets_of

    dotenv = tmp_path / "env.secrets"
    dotenv.write_text('# the weather service\nA=1\n\nexport B="two words"\nC=c=d\n')
    as_json = tmp_path / "secrets.json"
    as_json.write_text(json.dumps({"D": "dee"}))
    monkeypatch.setenv("FROM_ENV_KEY", "env-value")
    parse = build_parser().parse_args
    for command_line in (["check", "http://127.0.0.1:1"], ["record", "http://127.0.0.1:1", "--out", "x"], ["proxy", "http://127.0.0.1:1"], ["bench"]):
        args = parse(
            [*command_line, "--secrets-file", str(dotenv), "--secrets-file", str(as_json), "--secret", "FROM_ENV_KEY", "--secret", "A=9"]
        )
        assert secrets_of(args) == {"A": "9", "B": "two words", "C": "c=d", "D": "dee", "FROM_ENV_KEY": "env-value"}, command_line


@pytest.mark.parametrize(
    ("flag", "text"),
    [
        ("--secret", "=hunter2-value"),
        ("--secret", "my key=hunter2-value"),
        ("--secret", "EMPTY="),
        ("--secret", "NO_SUCH_VARIABLE_ORSBENCH"),
        ("--secret", "API_KEY:hunter2-value"),  # the first-hour typo: ':' for '='
        ("--secret", "API_KEY: hunter2-value"),
        ("--secret", "hunter2value"),  # a value alone, that could be a variable's name
        ("--secret", "A:B=hunter2-value"),
        ("--secrets-file", "colon"),
        ("--secrets-file", "line"),
        ("--secrets-file", "json"),
        ("--secrets-file", "/no/such/file"),
    ],
)
def test_a_bad_secret_is_a_usage_error_that_never_shows_a_value(
    flag: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    colon = text == "colon" or text.startswith("API_KEY:")
    if text == "colon":
        (tmp_path / "s").write_text("OK=fine\nAPI_KEY: hunter2-value\n")
        text = str(tmp_path / "s")
    elif text == "line":
        (tmp_path / "s").write_text("OK=fine\nhunter2-value\n")
        text = str(tmp_path / "s")
    elif text == "json":
        (tmp_path / "s").write_text(json.dumps({"K": ["hunter2-value"]}))
        text = str(tmp_path / "s")
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["check", "http://127.0.0.1:1", flag, text])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err
    assert "hunter2" not in err
    if colon:  # the typo names the fix
        assert "use '=' between the name and the value, not ':'" in err, err


def test_a_secret_typed_with_a_colon_is_never_echoed_by_any_command(tmp_path: Path) -> None:
    """``--secret API_KEY:value`` printed the value back on stderr (issue 27); every command shares the parser."""
    value = "sk-live-TYPO-0123456789"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    for argv in (["check", "http://127.0.0.1:9"], ["record", "http://127.0.0.1:9", "--out", str(tmp_path / "c.json")],
                 ["proxy", "http://127.0.0.1:9"], ["bench", "--url", "http://127.0.0.1:9"], ["matrix", "--url", "http://127.0.0.1:9"],
                 ["clients", "http://127.0.0.1:9"]):
        done = subprocess.run([sys.executable, "-m", "orsbench", *argv, "--secret", f"API_KEY:{value}"],
                              capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
        assert done.returncode == 2, (argv, done.stderr)
        assert value not in done.stderr + done.stdout, argv
        assert "use '='" in done.stderr.strip().splitlines()[-1], (argv, done.stderr)


def _command_lines() -> dict[int, str]:
    """Every readable ``/proc/*/cmdline`` on this machine: what `ps` shows to every user."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
    return out


@needs("sdk")
@pytest.mark.parametrize("zygote", [True, False], ids=["forked", "spawned"])
def test_no_secret_or_api_key_on_any_command_line(zygote: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orsbench.servers import launch

    name, value = _gated_secret()
    key = f"orsbench-cmdline-key-{os.getpid()}-{zygote}"
    monkeypatch.setattr(launch, "_ZYGOTE_WANTED", zygote)
    started = [launch.start(ENV, config=ServerConfig(api_key=key)), launch.start(AppTarget.parse(GATED))]
    try:
        started.append(launch.start_proxy(started[1].url, secrets={name: value}, record=tmp_path / "c.json"))
        lines = _command_lines()
        for server in started:
            assert server.pid in lines or zygote, f"{server.scenario} is not running"
            assert key not in lines.get(server.pid, "") and value not in lines.get(server.pid, "")
        leaks = [f"{pid}: {line[:200]}" for pid, line in lines.items() if key in line or value in line]
        assert not leaks, leaks
        # ... and yet the key and the secret did reach them.
        assert started[0].stats()["active_sessions"] == 0  # the launcher's key is accepted
        with WireClient(started[2].url) as client:
            sid = client.new_session()
            assert client.create(sid, env_name=started[1].env_name, split="train", index=0).status == 200
            client.delete(sid)
        leftovers = [p.name for s in started for p in s.log_path.parent.iterdir() if p.name in ("config.json", "secrets.json")]
        assert not leftovers, f"private files left behind after start: {leftovers}"
    finally:
        for server in reversed(started):
            server.stop()
    assert value not in (tmp_path / "c.json").read_text()


@needs("sdk")
def test_the_proxy_adds_its_secrets_to_the_clients_own(ors_server_factory: ServerFactory, tmp_path: Path) -> None:
    """The client's other X-Secrets entries reach the env; the proxy's win where both name one; none is recorded."""
    from orsbench.servers.launch import start_proxy

    name, value = _gated_secret()
    server = ors_server_factory(app=GATED)
    cassette, report = tmp_path / "c.json", tmp_path / "report.json"
    proxy = start_proxy(server.url, secrets={name: value}, record=cassette, json_report=report)
    try:
        with WireClient(proxy.url) as client:
            for secrets in (None, {"api_key": "client-side-key-1", name: "client-wrong-value"}):
                sid = client.new_session()
                created = client.create(sid, env_name=server.env_name, split="train", index=0, secrets=secrets)
                assert created.status == 200, created.body[:300]
                assert client.call(server.env_name, sid, "submit", {"answer": "4"}).sse is not None
                client.delete(sid)
        with WireClient(server.url) as direct:  # straight to the env, no secret: refused (the proxy did add it)
            assert direct.create(direct.new_session(), env_name=server.env_name, split="train", index=0).status == 500
    finally:
        proxy.stop()
    for path in (cassette, report):
        assert value not in path.read_text(), path.name
    assert json.loads(cassette.read_text())["environments"], "the traffic was recorded"


def test_record_and_bench_url_send_the_secret_and_keep_it_out_of_their_output(
    ors_server_factory: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("aiohttp")
    name, value = _gated_secret()
    server = ors_server_factory(app=GATED)
    cassette = tmp_path / "gated.cassette.json"
    assert main(["record", server.url, "--out", str(cassette), "--secret", f"{name}={value}"]) == 0, capsys.readouterr().err[-2000:]
    recorded = cassette.read_text()
    assert value not in recorded and json.loads(recorded)["environments"]
    assert main(["record", server.url, "--out", str(tmp_path / "no.json")]) == 2
    assert f"secret {name} is missing" in capsys.readouterr().err
    bench = ["bench", "--url", server.url, "--window", "1", "--rounds", "1", "--warmup", "0", "--concurrency", "2", "--max-episodes", "4", "--quiet"]
    report = tmp_path / "bench.json"
    assert main([*bench, "--secret", f"{name}={value}", "--json", str(report)]) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr()
    assert value not in out.out + out.err + report.read_text()
    # Without it the player cannot open a session to learn the episode: a usage error naming the fix, as record's.
    assert main(bench) == 2
    err = capsys.readouterr().err
    assert "missing --secret?" in err and value not in err
    assert main([*bench, "--tool", "submit"]) == 1  # the one-tool episode: every /create refused
    assert value not in capsys.readouterr().err


# -- the reports people read: HTML, Markdown, reproducers ----------------------------------------
def _keyed_broken_run(ors_server_factory: ServerFactory) -> Any:
    """A check run with an API key against a server that needs it and has a defect (so reproducers exist)."""
    from orsbench.checks import Options, run_checks

    server = ors_server_factory("echo", api_key=KEY, faults=("reward-bool",))
    report = run_checks(server.url, Options(api_key=KEY, fuzz=0, timeout=10))
    assert report.exit_code == 1 and report.result("reward.well_formed").reproduce
    return server, report


def _key_forms() -> set[str]:
    return {KEY, base64.b64encode(KEY.encode()).decode(), json.dumps(KEY)[1:-1]}


def test_no_api_key_in_the_html_markdown_json_or_reproducers(ors_server_factory: ServerFactory) -> None:
    from orsbench.reports import render_check, render_markdown
    from orsbench.reports.json_report import dumps

    _, report = _keyed_broken_run(ors_server_factory)
    texts = {
        "html": render_check(report),
        "markdown": render_markdown(report),
        "json": dumps(report),
        **{f"reproduce {r.id}": r.reproduce or "" for r in report.results},
    }
    assert "X-Secrets" in texts["html"] and "X-API-Key" in texts["html"]  # the headers are shown...
    for name, text in texts.items():
        for form in _key_forms():
            assert form not in text, f"{name} shows the API key ({form[:6]}...)"  # ...their values never


def test_a_reproducer_sends_the_key_from_the_environment_not_the_script(ors_server_factory: ServerFactory) -> None:
    """The script names ``$ORS_API_KEY``; with it set, the server answers (no 401), so the script still works."""
    server, report = _keyed_broken_run(ors_server_factory)
    script = report.result("reward.well_formed").reproduce
    assert script is not None and '"X-API-Key: $ORS_API_KEY"' in script and KEY not in script
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env={**os.environ, "ORS_API_KEY": KEY})
    assert "HTTP/1.1 200" in done.stdout and "HTTP/1.1 401" not in done.stdout, done.stdout[:500]
    assert '"reward":true' in done.stdout.replace(" ", "") or '"reward":false' in done.stdout.replace(" ", "")
    refused = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env={**os.environ, "ORS_API_KEY": ""})
    assert "HTTP/1.1 401" in refused.stdout


def test_a_key_echoed_by_the_server_is_scrubbed_from_the_html_and_markdown(ors_server_factory: ServerFactory) -> None:
    """Defence in depth: a server that puts the key in an answer body does not get it into a report."""
    from orsbench.reports import render_check, render_markdown

    _, report = _keyed_broken_run(ors_server_factory)
    failing = report.result("reward.well_formed")
    failing.evidence[0]["body"] += f' {{"echoed": "{KEY}", "b64": "{base64.b64encode(KEY.encode()).decode()}"}}'
    failing.message += f" (server said {KEY})"
    for text in (render_check(report), render_markdown(report)):
        for form in _key_forms():
            assert form not in text
    data = report.to_json()  # a JSON document has no options.api_key: the caller names the secrets
    assert KEY not in render_check(data, secrets=[KEY]) and KEY in render_check(data)


def test_the_proxys_html_report_never_shows_the_key(tmp_path: Path) -> None:
    from orsbench.checks import Options, run_checks
    from orsbench.servers.launch import serve, start_proxy

    with serve("echo", config=ServerConfig(api_key=KEY)) as upstream:
        proxy = start_proxy(upstream.url, html_report=tmp_path / "r.html")
        try:
            assert run_checks(proxy.url, Options(timeout=10, api_key=KEY, fuzz=0)).exit_code == 0
        finally:
            proxy.stop()
    page = (tmp_path / "r.html").read_text()
    assert "orsbench proxy" in page and "X-API-Key" in page
    for form in _key_forms():
        assert form not in page


def test_a_key_in_a_failing_exchange_or_message_never_reaches_its_reproducer() -> None:
    """A request body or a check message that quotes the key (a server echoing it) is scrubbed from ``reproduce``."""
    import dataclasses

    from orsbench.checks import Options, load_checks
    from orsbench.checks.evidence import Evidence
    from orsbench.checks.model import failed
    from orsbench.checks.runner import grade
    from orsbench.wire.evidence import Exchange

    exchange = Exchange("POST", "http://127.0.0.1:9/echo/call", {protocol.API_KEY_HEADER: KEY}, json.dumps({"input": KEY}).encode())
    exchange.status, exchange.body = 500, json.dumps({"detail": f"bad key {KEY}"}).encode()
    ev = Evidence("http://127.0.0.1:9", Options(api_key=KEY, secrets={"TOKEN": SECRET}))
    ev.history = [exchange]
    check = dataclasses.replace(load_checks()["reward.well_formed"], fn=lambda _ev: failed(f"server said {KEY} and {SECRET}", None, exchange))
    result = grade(check, ev, {})
    assert result.reproduce and "curl " in result.reproduce
    for form in {*_key_forms(), SECRET}:
        assert form not in result.reproduce
    assert '"X-API-Key: $ORS_API_KEY"' in result.reproduce
