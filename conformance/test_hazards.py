"""Each client against the hazards of docs/protocol.md §13 that the scripted matrix cannot play.

``test_clients.py`` plays ``images``, ``schema-keywords``, ``dense-reward``,
``two-envs`` and the ``credits-402`` / ``cut-before-task-id`` profiles as
matrix cells. What needs a client's own API lives here: a secret passed the
way each client documents it (``secrets``), an ``ok:false`` answer followed by
a good call (``recover``), and the tool schema the openreward client hands a
model (``schema-keywords``). Each test asserts the right behaviour; an
upstream client that does otherwise carries ``xfail(strict=True)`` naming the
defect (:mod:`orsbench.upstream.defects`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

from conformance.targets import SuiteTarget, group
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.upstream import defects as D
from orsbench.scenarios import get_scenario
from orsbench.scenarios import hazards as H

pytest.importorskip("openreward")
pytest.importorskip("ors")

SECRET_VALUE = "conformance-hazard-token"
PROVIDERS = ("openai", "openrouter", "anthropic", "google")


def _stats_delta(target: SuiteTarget, key: str, before: dict[str, Any]) -> dict[str, int]:
    after = target.stats()[key]
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _openreward_env(target: SuiteTarget, env: str) -> Any:
    import openreward

    with mock.patch.dict(os.environ, target.server.env()):
        return openreward.OpenReward().environments.get(env)


# -- schema-keywords: what the openreward client hands a model -----------------------------------
def _provider_params() -> list[Any]:
    spec = get_scenario("schema-keywords").shared_tools()[0].spec()
    out = []
    for provider in PROVIDERS:
        marks = [pytest.mark.xdist_group(group("schema-keywords", "mock"))]
        if D.sanitized_params(spec, provider):
            marks.append(D.DEFECTS["sanitizer-drops-keyword-params"].mark())
        out.append(pytest.param(provider, id=provider, marks=marks))
    return out


@pytest.mark.parametrize("provider", _provider_params())
def test_list_tools_for_a_provider_keeps_every_required_parameter(provider: str, serve: Callable[..., SuiteTarget]) -> None:
    """``session.list_tools(format=provider)``: every required parameter is still a property (§13.2)."""
    target = serve("schema-keywords", "mock")
    environment = _openreward_env(target, "schema-keywords")
    with environment.session(split="train", index=0) as session:
        [tool] = session.list_tools(format=provider)
    schema = tool.get("parameters") or tool.get("input_schema") or {}
    missing = sorted(set(schema.get("required") or []) - set(schema.get("properties") or {}))
    assert missing == [], f"required but not shown to the model: {missing}; shown: {sorted(schema.get('properties') or {})}"


# -- an environment that outlives its client (garbage collected while the environment is in use) ------------------
@pytest.mark.xdist_group(group("echo", "mock"))
def test_openreward_environment_outlives_its_client(serve: Callable[..., SuiteTarget]) -> None:
    """``OpenReward().environments.get(name)`` in one line: the client is collected, the environment plays on."""
    import gc

    target = serve("echo", "mock")
    environment = _openreward_env(target, "echo")  # its OpenReward() client is referenced nowhere else
    gc.collect()
    with environment.session(split="train", index=0) as session:
        gc.collect()
        assert session.call_tool("echo", {"text": "x"}).blocks[0].text == "no match"


@pytest.mark.xdist_group(group("echo", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[ors-gc-closes-loop] {D.DEFECTS['ors-gc-closes-loop'].summary}")
def test_ors_environment_outlives_its_client(serve: Callable[..., SuiteTarget]) -> None:
    """``ORS(base_url=URL).environments.get(name)`` in one line: the client is collected, the environment plays on."""
    import gc

    from ors.client import ORS

    target = serve("echo", "mock")
    environment = ORS(base_url=target.url).environments.get("echo")
    gc.collect()
    with environment.session(split="train", index=0) as session:
        gc.collect()
        assert session.call_tool("echo", {"text": "x"}).blocks[0].text == "no match"


# -- recover: ok:false, then a good call in the same session --------------------------------------
def _number() -> int:
    return int(get_scenario("recover").list_tasks("train")[0]["number"])


@pytest.mark.xdist_group(group("recover", "mock"))
def test_openreward_client_raises_ok_false_and_keeps_the_session(serve: Callable[..., SuiteTarget]) -> None:
    from openreward.api.environments.types import ToolCallError

    target = serve("recover", "mock")
    calls = target.stats()["calls"]
    with _openreward_env(target, "recover").session(split="train", index=0) as session:
        with pytest.raises(ToolCallError) as refused:
            session.call_tool("guess", H.BAD_GUESS)
        assert getattr(refused.value, "reason", None) == "input_validation"
        won = session.call_tool("guess", {"number": _number()})
    assert (won.blocks[0].text, won.reward, won.finished) == ("right", 1.0, True)
    assert _stats_delta(target, "calls", calls) == {"guess": 1}


@pytest.mark.xdist_group(group("recover", "mock"))
def test_ors_client_raises_ok_false_and_keeps_the_session(serve: Callable[..., SuiteTarget]) -> None:
    from ors.client import ORS

    target = serve("recover", "mock")
    calls = target.stats()["calls"]
    client = ORS(base_url=target.url)
    try:
        with client.environments.get("recover").session(split="train", index=0) as session:
            with pytest.raises(Exception, match="validation"):
                session.call_tool("guess", H.BAD_GUESS)
            won = session.call_tool("guess", {"number": _number()})
    finally:
        client.close()
    assert (won.blocks[0].text, won.reward, won.finished) == ("right", 1.0, True)
    assert _stats_delta(target, "calls", calls) == {"guess": 1}


@pytest.mark.xdist_group(group("recover", "mock"))
def test_trl_shows_ok_false_to_the_model_and_plays_on(
    serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """TRL hands an ok:false to the model as text (P8): no reward, not finished, and the next call wins."""
    target = serve("recover", "mock")
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    adapter.reset(task_index=0)
    shown = adapter.guess(**H.BAD_GUESS)
    assert "validation" in shown.lower() and adapter.finished is False and adapter.reward is None
    assert adapter.guess(number=_number()) == "right"
    assert (adapter.reward, adapter.finished) == (1.0, True)


# -- secrets: the secret arrives as X-Secrets, the environment proves it by fingerprint ----------
def _proves_receipt(text: str) -> None:
    assert text == H.secret_text(SECRET_VALUE) and SECRET_VALUE not in text


@pytest.mark.xdist_group(group("secrets", "mock"))
def test_openreward_client_sends_the_secret_as_x_secrets(serve: Callable[..., SuiteTarget]) -> None:
    target = serve("secrets", "mock")
    secrets = {H.SECRET_NAME: (SECRET_VALUE, ["127.0.0.1"])}  # a name that is not well known needs its domains
    with _openreward_env(target, "secrets").session(split="train", index=0, secrets=secrets) as session:
        _proves_receipt(session.call_tool("whoami", {}).blocks[0].text)


@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[secret-names] {D.DEFECTS['secret-names'].summary}")
def test_openreward_client_sends_a_plain_secret(serve: Callable[..., SuiteTarget]) -> None:
    """``session(secrets={NAME: value})``, the plain form, for a name of the environment's own (not a well-known API key)."""
    target = serve("secrets", "mock")
    with _openreward_env(target, "secrets").session(split="train", index=0, secrets={H.SECRET_NAME: SECRET_VALUE}) as session:
        _proves_receipt(session.call_tool("whoami", {}).blocks[0].text)


@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[secret-names] {D.DEFECTS['secret-names'].summary}")
def test_firehorse_passes_its_secret(serve: Callable[..., SuiteTarget]) -> None:
    """firehorse's own CLI given ``--secret NAME=VALUE`` (in its argument list, never on a command line): the environment receives it."""
    from orsbench.clientcheck.episodes import Script, Step
    from orsbench.clients.run import play

    pytest.importorskip("firehorse")
    whoami = Script("secrets", (Step("whoami", {}, H.secret_text(SECRET_VALUE)),))
    outcome = play("firehorse", serve("secrets", "mock", request_log=True).server, whoami, 60, secrets={H.SECRET_NAME: SECRET_VALUE})
    assert outcome.error is None and outcome.outputs == [H.secret_text(SECRET_VALUE)], outcome.describe()
    assert SECRET_VALUE not in outcome.output, "firehorse printed the secret"


@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[inspect-no-secrets] {D.DEFECTS['inspect-no-secrets'].summary}")
def test_inspect_passes_its_secret(serve: Callable[..., SuiteTarget]) -> None:
    """``inspect eval`` of inspect-openreward's task given the case's secret: the environment receives it."""
    from orsbench.clientcheck.episodes import Script, Step
    from orsbench.clients.run import play

    pytest.importorskip("inspect_openreward")
    whoami = Script("secrets", (Step("whoami", {}, H.secret_text(SECRET_VALUE)),), reward=None)
    outcome = play("inspect", serve("secrets", "mock", request_log=True).server, whoami, 90, secrets={H.SECRET_NAME: SECRET_VALUE})
    assert outcome.error is None and outcome.outputs == [H.secret_text(SECRET_VALUE)], outcome.describe()


@pytest.mark.xdist_group(group("secrets", "mock"))
def test_openreward_client_without_the_secret_fails_with_the_servers_detail(serve: Callable[..., SuiteTarget]) -> None:
    target = serve("secrets", "mock")
    with pytest.raises(Exception, match=H.SECRET_NAME):
        with _openreward_env(target, "secrets").session(split="train", index=0) as session:
            session.get_prompt()


@pytest.mark.xdist_group(group("secrets", "mock"))
def test_ors_client_sends_the_secret_as_x_secrets(serve: Callable[..., SuiteTarget]) -> None:
    from ors.client import ORS

    target = serve("secrets", "mock")
    client = ORS(base_url=target.url)
    try:
        with client.environments.get("secrets").session(split="train", index=0, secrets={H.SECRET_NAME: SECRET_VALUE}) as session:
            _proves_receipt(session.call_tool("whoami", {}).blocks[0].text)
    finally:
        client.close()


@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[secret-names] {D.DEFECTS['secret-names'].summary}")
def test_trl_passes_its_documented_secrets_dict(
    serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """``OpenRewardSpec(secrets={NAME: value})`` as documented: the environment must receive it."""
    target = serve("secrets", "mock")
    adapter = make_adapter(new_spec(target, discover_task_tools=False, secrets={H.SECRET_NAME: SECRET_VALUE}), target)
    adapter.reset(task_index=0)
    _proves_receipt(adapter.whoami())


# -- images: a tool result's image must reach the model ------------------------------------------
def _colour() -> str:
    return str(get_scenario("images").list_tasks("train")[0]["colour"])


def _carries_image(value: Any) -> bool:
    """Whether what a client hands the model carries the image (its base64, raw or in a data URI)."""
    return H.png_b64(_colour()) in repr(value)


@pytest.mark.xdist_group(group("images", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[images-dropped] {D.DEFECTS['images-dropped'].summary}")
def test_trl_shows_the_prompt_image(
    serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    target = serve("images", "mock")
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    assert _carries_image(adapter.reset(task_index=0))


@pytest.mark.xdist_group(group("images", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[images-dropped] {D.DEFECTS['images-dropped'].summary}")
def test_trl_shows_a_result_image(
    serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    target = serve("images", "mock")
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    adapter.reset(task_index=0)
    shown = adapter.look()
    assert H.look_text() in str(shown) and _carries_image(shown)


def _inspect_view(target: SuiteTarget, what: str) -> Any:
    """What inspect-openreward's solver gives the model: the prompt's content, or what tool ``look`` returns."""
    import asyncio
    from types import SimpleNamespace

    from inspect_openreward import _solver
    from openreward import AsyncOpenReward

    async def view() -> Any:
        with mock.patch.dict(os.environ, target.server.env()):
            environment = AsyncOpenReward().environments.get("images", variant="images")
        async with environment.session(split="train", index=0) as session:
            if what == "prompt":
                return _solver._blocks_to_content(await session.get_prompt())
            [spec] = [s for s in await session.list_tools() if s.name == "look"]
            return await _solver._wrap_tool(spec, session, "openai", SimpleNamespace(metadata={}))()

    return asyncio.run(view())


@pytest.mark.xdist_group(group("images", "mock"))
def test_inspect_shows_the_prompt_image(serve: Callable[..., SuiteTarget]) -> None:
    pytest.importorskip("inspect_openreward")
    assert _carries_image(_inspect_view(serve("images", "mock"), "prompt"))


@pytest.mark.xdist_group(group("images", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[inspect-result-images-dropped] {D.DEFECTS['inspect-result-images-dropped'].summary}")
def test_inspect_shows_a_result_image(serve: Callable[..., SuiteTarget]) -> None:
    pytest.importorskip("inspect_openreward")
    shown = _inspect_view(serve("images", "mock"), "look")
    assert H.look_text() in str(shown) and _carries_image(shown)


# -- secrets never on a command line: the client's process tree is read while it plays (§14.4) ---------
def _argv_check(checks: list[Any]) -> Any:
    return next((r for r in checks if r.id == "client.secret_not_on_cmdline"), None)


#: Targets whose episode here starts a fresh interpreter or eval (12-22 s each, measured): their process trees are
#: the fork server's fixed command line or an in-process eval; `pytest -m slow` plays them.
_SLOW_STARTS = ("inspect", "platoon", "benchflow")


@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.parametrize(
    "client", [pytest.param(c, marks=[pytest.mark.slow] if c in _SLOW_STARTS else []) for c in CLIENT_TARGETS.names()]
)
def test_no_client_target_puts_the_secret_on_a_command_line(client: str, serve: Callable[..., SuiteTarget]) -> None:
    """Each built-in target plays the secrets case as the matrix runs it; no process of its tree carries the secret.

    Predicted for all seven: a target in this Python is a fork of this process (its command line is this one's), a
    target in another Python a child of the fork server with a fixed command line; none is handed the secret as an
    argument. Its own CLI is another matter (firehorse's, below).
    """
    from orsbench.checks.model import Status
    from orsbench.clientcheck.episodes import Script, Step
    from orsbench.clients.run import play

    target = CLIENT_TARGETS[client]
    why = target.command.venv.ensure() if target.command is not None else (None if target.installed else target.install_hint)
    if why is not None:
        pytest.skip(f"{client} is not played here: {why}")
    whoami = Script("secrets", (Step("whoami", {}, H.secret_text(SECRET_VALUE)),))
    outcome = play(client, serve("secrets", "mock", request_log=True).server, whoami, 60, secrets={H.SECRET_NAME: SECRET_VALUE})
    found = _argv_check(outcome.checks)
    assert found is not None and found.status is Status.PASS and found.measured["samples"] >= 1, outcome.describe()
    assert SECRET_VALUE not in repr(found), "a report carried the secret"


def _firehorse_cli(*extra: str) -> str:
    """firehorse's own console script as its user runs it on the case's server, on the scripted model (the platform's
    required-secrets asked of the scripted model's root, as the firehorse target does)."""
    firehorse = os.path.join(os.path.dirname(sys.executable), "firehorse")
    return (
        f'OPENREWARD_API_URL="${{ANTHROPIC_BASE_URL%/s/*}}" exec {firehorse} --env "orsbench/$ORSBENCH_ENV" --agent react '
        f'--model anthropic/scripted --provider-url "$ANTHROPIC_BASE_URL" --split "$ORSBENCH_SPLIT" --skip-tasks "$ORSBENCH_INDEX" '
        f'--max-tasks 1 --run-name orsbench --no-logging --output-dir "$ORSBENCH_OUT.d" ' + " ".join(extra)
    )


@functools.cache
def _firehorse_cli_run() -> Any:
    """firehorse's own console script on the ``secrets`` case, its secret given the one way its CLI takes one."""
    from orsbench.clientcheck import get_case, grade, run_case

    case = get_case("secrets")
    [(name, value)] = case.secrets
    # As a user writes it: the value from a variable, expanded onto the command line.
    run = run_case(_firehorse_cli(f'--secret "{name}=$HAZARD_TOKEN"'), case, timeout=60, extra_env={"HAZARD_TOKEN": value})
    return run, grade(run), value


@pytest.mark.slow  # a fresh firehorse process: 15-40 s here; `pytest -m slow` checks the pin
@pytest.mark.xdist_group(group("secrets", "mock"))
def test_firehorse_cli_shows_its_secret_on_its_command_line() -> None:
    """The pinned defect as described: the firehorse process's arguments carry the secret (masked in the finding)."""
    pytest.importorskip("firehorse")
    run, results, value = _firehorse_cli_run()
    found = _argv_check(results)
    assert found is not None and found.measured["leaks"], [(r.id, r.status.value, r.message) for r in results]
    argv = found.measured["leaks"][0]["argv"]
    assert any(part.endswith("firehorse") for part in argv) and "--secret" in argv and f"{H.SECRET_NAME}=[redacted]" in argv, argv
    assert value not in repr(results)


@pytest.mark.slow  # a fresh firehorse process: 15-40 s here; `pytest -m slow` checks the pin
@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[firehorse-secret-on-command-line] {D.DEFECTS['firehorse-secret-on-command-line'].summary}")
def test_firehorse_cli_keeps_its_secret_off_its_command_line() -> None:
    from orsbench.checks.model import Status

    pytest.importorskip("firehorse")
    _, results, _ = _firehorse_cli_run()
    found = _argv_check(results)
    assert found is not None and found.status is Status.PASS


# -- the client ended mid-call (SIGTERM, then SIGKILL): firehorse's own CLI process (§13.17) ---------------------
@functools.cache
def _firehorse_cli_terminated() -> Any:
    from orsbench.clientcheck import get_case, grade, run_case

    run = run_case(_firehorse_cli(), get_case("sparse-reward+sigterm-mid-call"), timeout=60)
    return run, grade(run)


@pytest.mark.slow  # a fresh firehorse process: 15-40 s here; `pytest -m slow` checks the pin
@pytest.mark.xdist_group(group("secrets", "mock"))
def test_firehorse_cli_ended_by_sigterm_dies_with_its_session_open() -> None:
    """The pinned defect as described: SIGTERM while the held call is in flight; firehorse's process ends at once
    (no SIGKILL needed) and the one session it opened is left for the TTL."""
    pytest.importorskip("firehorse")
    run, results = _firehorse_cli_terminated()
    found = next((r for r in results if r.id == "client.deletes_on_sigterm"), None)
    assert run.terminated is not None and found is not None, [(r.id, r.status.value, r.message) for r in results]
    assert found.measured["left_open"] == found.measured["sessions"] == 1 and not found.measured["killed"], found.message
    assert found.measured["exited_after_s"] < 1.0 and "turn 2" in run.stderr, (found.message, run.stderr[-500:])


@pytest.mark.slow  # a fresh firehorse process: 15-40 s here; `pytest -m slow` checks the pin
@pytest.mark.xdist_group(group("secrets", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[firehorse-sigterm-leaks-session] {D.DEFECTS['firehorse-sigterm-leaks-session'].summary}")
def test_firehorse_cli_ended_by_sigterm_deletes_its_session() -> None:
    from orsbench.checks.model import Status

    pytest.importorskip("firehorse")
    _, results = _firehorse_cli_terminated()
    found = next((r for r in results if r.id == "client.deletes_on_sigterm"), None)
    assert found is not None and found.status is Status.PASS
