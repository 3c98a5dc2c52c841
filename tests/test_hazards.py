"""The hazard cases (docs/protocol.md §13): each is served, is really on the wire, and a correct raw client survives it.

Every test talks raw HTTP through :class:`~orsbench.wire.WireClient` (httpx,
no retries, no SDK), so what it asserts is what any client meets. The
scenarios are played on the mock engine and on both SDK twins where the twin
can serve them; the two fault profiles change the mock engine only.
"""

from __future__ import annotations

import base64
import json

import pytest

from orsbench import protocol
from orsbench.scenarios import get_scenario
from orsbench.scenarios import hazards as H
from orsbench.servers.faults import FAULTS
from orsbench.servers.faults.profiles import INSUFFICIENT_CREDITS
from orsbench.wire import WireClient

IMPLS = ["mock", "sdk", "ors-sdk"]


def _twin_available(impl: str) -> None:
    if impl == "sdk":
        pytest.importorskip("openreward")
    elif impl == "ors-sdk":
        pytest.importorskip("ors")


@pytest.fixture
def serve(ors_server_factory):
    def get(scenario: str, impl: str = "mock", **kwargs):
        _twin_available(impl)
        return ors_server_factory(scenario, impl=impl, **kwargs)

    return get


def _open(client: WireClient, env: str | None, *, secrets: dict[str, str] | None = None, index: int = 0) -> str:
    sid = client.new_session()
    created = client.create(sid, env_name=env, split="train", index=index, secrets=secrets)
    assert created.status == 200, created.summary()
    return sid


def _ok_output(exchange) -> dict:
    result = exchange.result()
    assert result is not None and result["ok"] is True, exchange.summary()
    return result["output"]


class Delta:
    """What a block of requests changed in a (possibly shared) server's ``/_orsbench/stats`` counters."""

    def __init__(self, server, key: str = "calls") -> None:
        self.server, self.key = server, key
        self.before = dict(server.stats()[key])

    def __call__(self) -> dict[str, int]:
        after = self.server.stats()[self.key]
        return {k: v - self.before.get(k, 0) for k, v in after.items() if v != self.before.get(k, 0)}


# -- images ------------------------------------------------------------------------------
def test_png_is_a_valid_image() -> None:
    data = H.png((1, 2, 3))
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IHDR" in data and data.endswith(b"IEND\xaeB`\x82")


@pytest.mark.parametrize("impl", IMPLS)
def test_images_are_on_the_wire_and_a_raw_client_wins(serve, impl: str) -> None:
    server = serve("images", impl)
    task = get_scenario("images").list_tasks("train")[0]
    with WireClient(server.url) as c:
        sid = _open(c, server.env_name)
        prompt = c.prompt(server.env_name, sid).json()
        assert [b["type"] for b in prompt] == ["text", "image"]
        assert prompt[1]["mimeType"] == "image/png" and base64.b64decode(prompt[1]["data"]) == H.png(H.COLOURS[task["colour"]])
        look = _ok_output(c.call(server.env_name, sid, "look", {}))
        assert [b["type"] for b in look["blocks"]] == ["image", "text"]
        assert look["blocks"][0]["data"] == H.png_b64(task["colour"]) and look["blocks"][1]["text"] == H.look_text()
        won = _ok_output(c.call(server.env_name, sid, "answer", {"colour": task["colour"]}))
        assert (won["reward"], won["finished"]) == (1.0, True)
        c.delete(sid)


# -- schema-keywords ---------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_schema_keywords_are_required_parameters(serve, impl: str) -> None:
    server = serve("schema-keywords", impl)
    with WireClient(server.url) as c:
        schema = c.tools(server.env_name).json()["tools"][0]["input_schema"]
        assert set(schema["properties"]) == {"title", "default", "examples"}
        assert sorted(schema["required"]) == ["default", "examples", "title"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_call_without_the_keyword_parameters_fails_validation(serve, impl: str) -> None:
    """What a client whose schema sanitiser dropped the three properties sends: refused, never run."""
    server = serve("schema-keywords", impl)
    task = get_scenario("schema-keywords").list_tasks("train")[0]
    with WireClient(server.url) as c:
        sid = _open(c, server.env_name)
        refused = c.call(server.env_name, sid, "record", {}).result()
        assert refused["ok"] is False and "title" in refused["error"]
        if impl != "ors-sdk":  # ors-sdk's RunToolError has no reason field (docs/protocol.md §9)
            assert refused["reason"] == protocol.REASON_INPUT_VALIDATION
        args = {k: task[k] for k in ("title", "default", "examples")}
        won = _ok_output(c.call(server.env_name, sid, "record", args))
        assert won["blocks"][0]["text"] == H.record_text(**args) and won["reward"] == 1.0
        c.delete(sid)


# -- dense-reward ------------------------------------------------------------------------
def test_dense_reward_conventions_differ_on_every_task() -> None:
    for split in ("train", "test"):
        for task in get_scenario("dense-reward").list_tasks(split):
            conventions = H.reward_conventions(task["rewards"])
            assert conventions["sum"] != conventions["last"]
            assert None in task["rewards"]


@pytest.mark.parametrize("impl", IMPLS)
def test_dense_rewards_arrive_per_call_with_both_conventions(serve, impl: str) -> None:
    server = serve("dense-reward", impl)
    rewards = get_scenario("dense-reward").list_tasks("train")[0]["rewards"]
    with WireClient(server.url) as c:
        sid = _open(c, server.env_name)
        outputs = [_ok_output(c.call(server.env_name, sid, "step", {})) for _ in rewards]
        c.delete(sid)
    assert [o["reward"] for o in outputs] == rewards
    assert [o["finished"] for o in outputs] == [False] * (len(rewards) - 1) + [True]
    assert outputs[-1]["metadata"]["conventions"] == H.reward_conventions(rewards)
    received = [o["reward"] for o in outputs if o["reward"] is not None]
    assert sum(received) == H.reward_conventions(rewards)["sum"] != received[-1] == H.reward_conventions(rewards)["last"]


# -- two-envs ----------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_two_envs_serve_a_decoy_as_the_default(serve, impl: str) -> None:
    server = serve("two-envs", impl)
    assert server.env_name == "two-envs"
    word = get_scenario("two-envs").list_tasks("train")[0]["word"]
    by_env = Delta(server, "sessions_by_env")
    with WireClient(server.url) as c:
        assert [n.lower() for n in c.list_environments().json()] == ["two-envs-decoy", "two-envs"]
        named = _open(c, "two-envs")
        right = _ok_output(c.call("two-envs", named, "sign", {"word": word}))
        assert right["blocks"][0]["text"] == H.sign_text("two-envs", True) and right["reward"] == 1.0
        # A client that drops env_name lands in the decoy, and every answer says so.
        dropped = _open(c, None)
        wrong = _ok_output(c.call("two-envs", dropped, "sign", {"word": word}))
        assert wrong["blocks"][0]["text"] == H.wrong_env_text("two-envs-decoy") and wrong["reward"] == 0.0
        for sid in (named, dropped):
            c.delete(sid)
    assert by_env() == {"two-envs": 1, "two-envs-decoy": 1}


# -- secrets -----------------------------------------------------------------------------
SECRET = {H.SECRET_NAME: "s3cr3t-value-for-tests"}


def test_secrets_missing_is_a_clear_4xx_naming_the_secret(serve) -> None:
    server = serve("secrets")
    created = server.stats()["sessions_created"]
    with WireClient(server.url) as c:
        sid = c.new_session()
        refused = c.create(sid, env_name="secrets", split="train", index=0)
        assert refused.status == 400 and refused.detail == H.missing_secret_detail()
        other = c.create(sid, env_name="secrets", split="train", index=0, secrets={"SOMETHING_ELSE": "x-value-never-echoed"})
        assert other.status == 400 and H.SECRET_NAME in other.detail and b"x-value-never-echoed" not in other.body
        in_body = c.create(sid, env_name="secrets", split="train", index=0, extra={"secrets": SECRET})
        assert in_body.status == 422 and SECRET[H.SECRET_NAME].encode() not in in_body.body
    assert server.stats()["sessions_created"] == created


@pytest.mark.parametrize("impl", ["mock", "sdk"])
def test_secrets_received_in_the_header_are_proven_by_fingerprint_only(serve, impl: str) -> None:
    server = serve("secrets", impl)
    value = SECRET[H.SECRET_NAME]
    with WireClient(server.url) as c:
        sid = _open(c, "secrets", secrets=SECRET)
        prompt = c.prompt("secrets", sid)
        out = c.call("secrets", sid, "whoami", {})
        output = _ok_output(out)
        c.delete(sid)
    assert output["blocks"][0]["text"] == H.secret_text(value) and output["reward"] == 1.0
    assert output["metadata"]["sha256_prefix"] == H.fingerprint(value)
    for exchange in (prompt, out):
        assert value.encode() not in exchange.body


def test_the_reference_twin_answers_500_for_the_missing_secret(serve) -> None:
    """The reference cannot answer 4xx from a constructor: a listed difference, not hidden."""
    server = serve("secrets", "sdk")
    with WireClient(server.url) as c:
        refused = c.create(c.new_session(), env_name="secrets", split="train", index=0)
    assert refused.status == 500 and H.SECRET_NAME in refused.detail


# -- recover -----------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_recover_session_stays_usable_after_ok_false(serve, impl: str) -> None:
    server = serve("recover", impl)
    number = get_scenario("recover").list_tasks("train")[0]["number"]
    calls = Delta(server)
    with WireClient(server.url) as c:
        sid = _open(c, server.env_name)
        bad = c.call(server.env_name, sid, "guess", H.BAD_GUESS)
        assert bad.status == 200 and bad.error_event is None
        assert bad.result()["ok"] is False
        good = _ok_output(c.call(server.env_name, sid, "guess", {"number": number}))
        assert (good["blocks"][0]["text"], good["reward"], good["finished"]) == ("right", 1.0, True)
        c.delete(sid)
    assert calls() == {"guess": 1}


# -- fault profiles ----------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_schema_edges_are_served_as_written_and_take_their_scripted_inputs(serve, impl: str) -> None:
    """docs/protocol.md §13.9: each edge shape reaches the wire unchanged, and its scripted input is accepted as sent."""
    from orsbench.scenarios import schema_edges as E

    server = serve("schema-edges", impl)
    client = WireClient(server.url)
    listed = {t["name"]: t for t in client.tools(server.env_name).json()["tools"]}
    for name, tool in get_scenario("schema-edges").all_tools.items():
        assert listed[name]["input_schema"] == tool.input_schema and listed[name]["description"] == tool.description, name
    assert listed["any_value"]["input_schema"]["properties"] == {"value": True, "never": False}
    assert listed["quiet"]["description"] == "" and isinstance(listed["pair"]["input_schema"]["properties"]["pair"]["items"], list)
    sid = _open(client, server.env_name)
    try:
        for name, args in E.INPUTS.items():
            output = _ok_output(client.call(server.env_name, sid, name, args))
            assert output["blocks"][0]["text"] == E.answer_text(name), name
        refused = client.call(server.env_name, sid, "either", {"name": "x", "id": 1}).result()
        assert refused is not None and refused["ok"] is False  # ors-sdk's server leaves "reason" out
        assert _ok_output(client.call(server.env_name, sid, "done", {}))["finished"] is True
    finally:
        client.delete(sid)


@pytest.mark.parametrize("impl", IMPLS)
def test_reward_range_sends_rewards_outside_0_1_and_finishes_with_null(serve, impl: str) -> None:
    """docs/protocol.md §13.10: 2.5, then -1, then a finishing call whose reward is null, on every server."""
    server = serve("reward-range", impl)
    client = WireClient(server.url)
    sid = _open(client, server.env_name)
    try:
        outputs = [_ok_output(client.call(server.env_name, sid, "step", {})) for _ in range(3)]
    finally:
        client.delete(sid)
    assert [o["reward"] for o in outputs] == H.range_rewards(0) == [2.5, -1.0, None]
    assert [o["finished"] for o in outputs] == [False, False, True]


def test_reward_nan_sends_the_bare_token_and_the_checker_fails_it(serve) -> None:
    """docs/protocol.md §13.11: the reward is the token NaN (not JSON), counted in the stats; reward.well_formed fails."""
    from orsbench.checks import Options, Status, run_checks

    server = serve("sparse-reward", faults=("reward-nan",))
    client = WireClient(server.url)
    sid = _open(client, server.env_name)
    try:
        task = get_scenario("sparse-reward").list_tasks("train")[0]
        from orsbench.scenarios.sparse_reward import digits

        for position in range(len(digits(task))):
            client.call(server.env_name, sid, "reveal", {"position": position})
        answer = client.call(server.env_name, sid, "submit", {"total": sum(digits(task))})
    finally:
        client.delete(sid)
    assert '"reward":NaN' in answer.body.decode() and server.stats()["requests"].get("fault reward-nan", 0) >= 1
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0))
    assert report.result("reward.well_formed").status is Status.FAIL and "not finite" in report.result("reward.well_formed").message


def test_hazard_profiles_are_registered_http_faults() -> None:
    for name in ("credits-402", "cut-before-task-id", "reward-nan"):
        fault = FAULTS.load().get(name)
        assert fault.kind == "profile" and fault.wrap is not None


def test_credits_402_refuses_create_session_with_the_platform_detail(serve) -> None:
    server = serve("echo", faults=("credits-402",))
    faulted = Delta(server, "requests")
    with WireClient(server.url) as c:
        refused = c.create_session()
        assert refused.status == 402 and refused.detail == INSUFFICIENT_CREDITS and refused.task_id is None
        # The rest of the server is untouched: a client that has a session id of its own still plays.
        sid = "orsbench-own-sid"
        assert c.create(sid, env_name="echo", split="train", index=0).status == 200
        c.delete(sid)
    assert faulted()["fault credits-402"] == 1


def test_cut_before_task_id_runs_the_tool_once_and_a_correct_client_does_not_rerun_it(serve) -> None:
    server = serve("sparse-reward", faults=("cut-before-task-id",))
    calls, faulted = Delta(server), Delta(server, "requests")
    with WireClient(server.url) as c:
        sid = _open(c, "sparse-reward")
        cut = c.call("sparse-reward", sid, "reveal", {"position": 0})
        assert cut.status == 200 and cut.is_sse and cut.task_id is None and cut.error is not None
        assert calls() == {"reveal": 1}  # it ran although the client never heard of it
        # A correct client reports the failure and does not re-send it blind; the session stays usable.
        nxt = _ok_output(c.call("sparse-reward", sid, "reveal", {"position": 1}))
        assert nxt["blocks"][0]["type"] == "text"
        c.delete(sid)
    assert calls() == {"reveal": 2}
    assert faulted()["fault cut-before-task-id"] == 1


def test_a_client_that_resends_the_cut_call_is_visible_in_stats(serve) -> None:
    server = serve("sparse-reward", faults=("cut-before-task-id",))
    calls = Delta(server)
    with WireClient(server.url) as c:
        sid = _open(c, "sparse-reward")
        args = {"position": 0}
        assert c.call("sparse-reward", sid, "reveal", args).task_id is None
        _ok_output(c.call("sparse-reward", sid, "reveal", args))  # the naive retry
        c.delete(sid)
    assert calls() == {"reveal": 2}  # one call in the script, two runs on the server


HAZARDS = ("images", "schema-keywords", "dense-reward", "two-envs", "secrets", "recover", "schema-edges", "reward-range")


@pytest.mark.parametrize("scenario", HAZARDS)
def test_check_fails_only_what_the_scenario_fails_by_design(ors_server_factory, scenario: str) -> None:
    """``orsbench check --scenario X`` on the mock (``--secret`` for ``secrets``): every required check passes but
    the ones the scenario names."""
    from orsbench.checks import Options, Severity, Status, run_checks

    server = ors_server_factory(scenario)
    secrets = SECRET if scenario == "secrets" else {}
    report = run_checks(server.url, Options(env=server.env_name, fuzz=3, secrets=secrets))
    assert report.usage_error is None, report.usage_error
    failed = set(report.ids(Status.FAIL, Severity.REQUIRED)) | set(report.ids(Status.ERROR))
    assert failed == set(get_scenario(scenario).fails_by_design), [(r.id, r.message) for r in report.results if r.id in failed]


def test_check_without_the_secret_is_a_usage_error_naming_it(ors_server_factory) -> None:
    """Not a protocol failure: the checker says which secret to pass (docs/protocol.md §13.7, §14)."""
    from orsbench.checks import Options, run_checks

    server = ors_server_factory("secrets")
    report = run_checks(server.url, Options(env=server.env_name, fuzz=0))
    assert report.exit_code == 2 and H.SECRET_NAME in (report.usage_error or "")


def test_scenarios_listing_shows_every_hazard(capsys) -> None:
    from orsbench.cli import main

    assert main(["scenarios", "-v"]) == 0
    shown = capsys.readouterr().out
    for name in HAZARDS:
        assert name in shown
    assert json.dumps(H.SECRET_NAME)[1:-1] in shown
