"""Sessions: each rollout has its own ORS session, kept alive while used, closed when done (P2, P10, P13).

Server-side effects are read from ``GET /_orsbench/stats`` (``active_sessions``,
``sessions_created``, ``pings``), before and after.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from orsbench.upstream import defects
from conformance.params import targets
from conformance.targets import SuiteTarget, group
from orsbench import protocol
from orsbench.scenarios.schema_zoo import REQUIRED_SECRET

BROKEN = ["broken-session"]


def _active(target: SuiteTarget) -> int:
    return int(target.stats()["active_sessions"])


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_each_rollout_gets_its_own_session(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    spec = new_spec(target, discover_task_tools=False)
    first, second = make_adapter(spec, target), make_adapter(spec, target)
    last = len(target.served.tasks()) - 1
    prompts = target.served.prompt_text(0), target.served.prompt_text(last)
    before = target.stats()
    assert (first.reset(task_index=0), second.reset(task_index=last)) == prompts
    after = target.stats()
    assert first._session.sid != second._session.sid
    assert after["sessions_created"] - before["sessions_created"] == 2
    assert after["active_sessions"] - before["active_sessions"] == 2


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_reset_closes_the_previous_session(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    before = _active(target)
    adapter.reset(task_index=0)
    first_sid = adapter._session.sid
    adapter.reset(task_index=0)
    assert adapter._session.sid != first_sid
    assert _active(target) == before + 1
    assert target.served.wire.ping(first_sid).status == 404, "the previous session is still alive"


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_close_leaves_no_session_behind(target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]) -> None:
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    before = _active(target)
    adapter.reset(task_index=0)
    sid = adapter._session.sid
    adapter._close()
    adapter._close()  # twice is harmless
    assert _active(target) == before
    assert target.served.wire.ping(sid).status == 404
    with pytest.raises(RuntimeError, match="before reset"):
        adapter._call_ors_tool(next(iter(target.tools)), {})


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_tool_discovery_leaves_no_session_behind(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    before = target.stats()
    make_adapter(new_spec(target, indices=target.declared.distinct_tasks), target)
    after = target.stats()
    assert after["active_sessions"] == before["active_sessions"]


# -- P2: keep-alive ---------------------------------------------------------------------------
#: A TTL short enough to outlast in a test, a tool call longer than it.
TTL_S, LONG_CALL_S, FAST_PING_S = 0.5, 0.9, 0.15


def _short_ttl(serve: Callable[..., SuiteTarget], impl: str) -> SuiteTarget:
    return serve("slow", impl, ttl=TTL_S, reaper_interval=0.05, params={"long_call": LONG_CALL_S})


@pytest.mark.parametrize("target", targets(["slow"]), indirect=True)
def test_sdk_pings_keep_a_long_call_alive(
    target: SuiteTarget,
    serve: Callable[..., SuiteTarget],
    new_spec: Callable[..., Any],
    make_adapter: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P2: the adapter relies on the SDK's ping thread; pings (here every 0.15 s against a 0.5 s TTL) keep the session through a call longer than the TTL."""
    from openreward.api._session import ping as ping_module

    original = ping_module.ping

    async def fast_ping(url: str, sid: str, api_key: Any, sleep_time: float, client: Any, *args: Any, **kwargs: Any) -> None:
        await original(url, sid, api_key, FAST_PING_S, client, *args, **kwargs)

    monkeypatch.setattr(ping_module, "ping", fast_ping)
    short = _short_ttl(serve, target.impl)
    adapter = make_adapter(new_spec(short, discover_task_tools=False), short)
    adapter.reset(task_index=0)
    pings = short.stats()["pings"]
    assert adapter.wait() == f"waited {LONG_CALL_S:g}s"
    assert adapter.step() == "step 1", "the session did not survive the long call"
    assert short.stats()["pings"] - pings >= 3


@pytest.mark.parametrize("target", targets(["slow"], defect=lambda d: defects.DEFECTS["errors-as-text"]), indirect=True)
def test_reaped_session_fails_the_rollout(
    target: SuiteTarget, serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """P2: without a ping during a call longer than the TTL the server reaps the session (SSE keep-alives do not count);
    the next call gets 404, which must fail the rollout rather than read to the model like an answer."""
    short = _short_ttl(serve, target.impl)
    adapter = make_adapter(new_spec(short, discover_task_tools=False), short)
    adapter.reset(task_index=0)  # the SDK pings now, then every 10 s: not again before the reaper runs
    sid = adapter._session.sid
    adapter.wait()
    assert short.served.wire.ping(sid).status == 404, "the session was not reaped"
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own error type
        shown = adapter.step()
        pytest.fail(f"the model was shown {shown!r}")


# -- P10: one host for everything --------------------------------------------------------------
@pytest.mark.ors_server("echo")
@pytest.mark.xdist_group(group("echo", "mock"))
def test_ors_server_fixture_points_the_sdk_at_the_server(ors_server: Any, ors_openreward_spec: Callable[..., Any]) -> None:
    """P10: the plugin's ``ors_server`` sets both SDK URLs to the server, so ``OpenRewardSpec(url)`` just works."""
    assert os.environ[protocol.ENV_API_URL] == os.environ[protocol.ENV_SESSION_URL] == ors_server.url
    assert ors_openreward_spec(num_tasks=1).train_dataset.num_rows == 1


@pytest.mark.parametrize(
    "target", targets(["echo"], impls=("mock",), defect=lambda d: defects.DEFECTS["session-url"]), indirect=True
)
def test_url_alone_reaches_the_server(target: SuiteTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """P10: ``OpenRewardSpec(url)`` without ``OPENREWARD_SESSION_URL`` sends its session traffic to ``url``.

    Client-side only: one implementation suffices.
    """
    from trl.experimental.openreward import OpenRewardSpec

    for name in (protocol.ENV_API_URL, protocol.ENV_SESSION_URL):
        monkeypatch.delenv(name, raising=False)
    spec = OpenRewardSpec(target.url)
    assert spec._sdk_client.session_base_url == target.url


# -- P13: sessions that cannot start --------------------------------------------------------------
@pytest.mark.parametrize("target", targets(BROKEN, impls=("mock",)), indirect=True)
def test_constructor_failure_fails_reset_and_leaves_nothing(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """P13: ``/create`` answers 500 when the environment cannot be constructed: ``reset`` raises, no session remains.

    Mock only: the SDK twin constructs sessions without calling the scenario, so construction cannot fail there.
    """
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    before = _active(target)
    with pytest.raises(Exception, match="constructor failed"):
        adapter.reset(task_index=0)
    assert _active(target) == before


@pytest.mark.parametrize("target", targets(BROKEN, defect=lambda d: defects.DEFECTS["reset-leaks-session"]), indirect=True)
def test_setup_failure_fails_reset_and_leaves_nothing(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """P13: a failed ``setup()`` (sticky 500) makes ``reset`` raise, and the session it opened is closed."""
    adapter = make_adapter(new_spec(target, discover_task_tools=False), target)
    before = _active(target)
    with pytest.raises(Exception, match=f"secret {REQUIRED_SECRET} is missing"):
        adapter.reset(task_index=1)
    assert _active(target) == before, "reset() left its failed session open"


@pytest.mark.parametrize("target", targets(BROKEN), indirect=True)
def test_secret_with_domains_reaches_setup(
    target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """P13: ``secrets={"API_TOKEN": (value, [domains])}`` reaches the environment; its setup passes."""
    spec = new_spec(target, discover_task_tools=False, secrets={REQUIRED_SECRET: ("token", ["127.0.0.1"])})
    adapter = make_adapter(spec, target)
    assert adapter.reset(task_index=1) == target.served.prompt_text(1, secrets={REQUIRED_SECRET: "token"})
    assert adapter.ping() == "pong" and adapter.reward == 1.0


@pytest.mark.parametrize("target", targets(BROKEN, defect=lambda d: defects.DEFECTS["secret-names"]), indirect=True)
def test_plain_secret_reaches_setup(target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]) -> None:
    """P13: ``secrets={"API_TOKEN": "value"}``, as ``OpenRewardSpec`` documents it (``dict[str, str]``), reaches the environment."""
    spec = new_spec(target, discover_task_tools=False, secrets={REQUIRED_SECRET: "token"})
    adapter = make_adapter(spec, target)
    assert adapter.reset(task_index=1) == target.served.prompt_text(1, secrets={REQUIRED_SECRET: "token"})
