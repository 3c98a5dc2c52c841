"""Rewards and results: the adapter's episode state and ``reward_funcs`` follow the server (P7, P8).

For every scenario the same calls are made twice — through the adapter, and
over the raw wire on a twin session — and each step the model sees, plus
``rewards``, ``metadata``, ``finished``, ``last_output`` and ``reward``,
must follow from what the server answered. Then the reward rules on scripted
rewards (``schema-zoo``'s ``score`` tool), and every error path with what the
model sees for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from orsbench.upstream import defects, schema_view
from conformance.adapter import grpo_tool_surface
from conformance.params import targets
from conformance.targets import SPLIT, SuiteTarget
from orsbench import protocol
from orsbench.scenarios.schema_zoo import long_text_value

ZOO = ["schema-zoo"]


def joined_text(blocks: list[dict[str, Any]]) -> str:
    """What the model should read for a result: its text blocks, one per line."""
    return "\n".join(b["text"] for b in blocks if b.get("type") == "text" and b.get("text")) or "(no output)"


@dataclass
class Expected:
    """The adapter state a sequence of wire answers implies."""

    shown: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (reason, error) per failed step, by index
    rewards: list[float | None] = field(default_factory=list)
    metadata: list[dict[str, Any] | None] = field(default_factory=list)
    finished: bool = False

    @property
    def reward(self) -> float | None:
        return next((r for r in reversed(self.rewards) if r is not None), None)

    def add(self, answer: dict[str, Any]) -> None:
        if answer.get("ok"):
            out = answer["output"]
            self.shown.append(joined_text(out["blocks"]))
            self.rewards.append(None if out["reward"] is None else float(out["reward"]))
            self.metadata.append(out["metadata"] if isinstance(out["metadata"], dict) else None)
            self.finished = bool(out["finished"])
        else:
            self.shown.append("")
            self.failures.append((str(answer.get("reason")), str(answer["error"])))
            self.rewards.append(None)
            self.metadata.append(None)


def explicit_args(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Required arguments plus every optional one spelled out at its JSON default.

    The bound method sends its defaults along; spelling them out on the wire
    too makes both sides send the same request.
    """
    props = schema_view.parameters(schema)["properties"]
    defaults = {n: p["default"] for n, p in props.items() if "default" in p}
    return {**defaults, **schema_view.required_example(schema)}


def calls_for(target: SuiteTarget, index: int) -> list[tuple[str, dict[str, Any]]]:
    """Every tool the task can call whose binding and required-args call work, with explicit arguments."""
    tools = target.declared.tools
    names = sorted(n for n in target.declared.task_tools[index] if defects.exposure_defect(tools[n]) is None)
    names = [n for n in names if defects.call_defect(tools[n]) is None]
    return [(n, explicit_args(tools[n].get("input_schema"))) for n in names]


def replay(target: SuiteTarget, index: int, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The calls over the raw wire on a fresh session; each step's exchange."""
    wire, env, sid = target.served.wire, target.served.env, f"orsbench-conformance-{uuid.uuid4()}"
    assert wire.create(sid, split=SPLIT, index=index).status == 200
    try:
        return [wire.call(env, sid, name, args) for name, args in calls]
    finally:
        wire.delete(sid)


def _tasks_to_play(target: SuiteTarget) -> list[int]:
    return target.declared.distinct_tasks[:3]


@pytest.mark.parametrize("target", targets(), indirect=True)
def test_adapter_state_follows_the_server(target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]) -> None:
    """rewards / metadata / finished / last_output / reward and what the model reads, step by step.

    Tools that raise (SSE ``error``) or answer in several SSE chunks are left
    out here; ``test_tool_exception_*`` and ``test_long_result_*`` cover them.
    """
    spec = new_spec(target, indices=target.declared.distinct_tasks)  # binds every task-scoped tool (P1)
    adapter = make_adapter(spec, target)
    for index in _tasks_to_play(target):
        calls = calls_for(target, index)
        first = replay(target, index, calls)
        calls = [c for c, ex in zip(calls, first) if ex.error_event is None and not ex.sse.first(protocol.EVENT_CHUNK)]
        expected = Expected()
        for exchange in replay(target, index, calls):
            expected.add(exchange.result())
        adapter.reset(task_index=index)
        surface = grpo_tool_surface(adapter)
        shown = [surface[name](**args) for name, args in calls]
        for step, (text, want) in enumerate(zip(shown, expected.shown)):
            if want:
                assert text == want, f"task {index}, step {step} ({calls[step][0]})"
        failed = [text for text, want in zip(shown, expected.shown) if not want]
        for text, (reason, error) in zip(failed, expected.failures):
            assert text.startswith("Error:") and reason in text and error in text, text
        assert adapter.rewards == expected.rewards
        assert adapter.metadata == expected.metadata
        assert adapter.finished is expected.finished
        assert adapter.last_output == (shown[-1] if shown else "")
        assert adapter.reward == expected.reward
        assert spec.reward_funcs(environments=[adapter], prompts=[""], completions=[""]) == [expected.reward]


# -- the reward rules, on scripted rewards --------------------------------------------------------
@pytest.fixture
def zoo_adapter(target: SuiteTarget, new_spec: Callable[..., Any], make_adapter: Callable[..., Any]) -> Callable[[], Any]:
    """Fresh adapters on ``schema-zoo`` task 0 (reset done)."""
    spec = new_spec(target, discover_task_tools=False)

    def make() -> Any:
        adapter = make_adapter(spec, target)
        adapter.reset(task_index=0)
        return adapter

    make.spec = spec  # type: ignore[attr-defined]
    return make


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_last_non_null_reward_wins(zoo_adapter: Callable[[], Any]) -> None:
    adapter = zoo_adapter()
    for value in (None, 0.5, None, -1.0, None):
        adapter.score(value=value)
    assert adapter.rewards == [None, 0.5, None, -1.0, None]
    assert adapter.reward == -1.0
    assert [m["value"] for m in adapter.metadata] == [None, 0.5, None, -1.0, None]


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_zero_is_a_reward_and_none_is_not(zoo_adapter: Callable[[], Any]) -> None:
    """P7: a rollout that never earned a reward yields ``None`` (GRPO ignores it); a 0.0 is a reward."""
    silent, unrewarded, zero = zoo_adapter(), zoo_adapter(), zoo_adapter()
    unrewarded.score(value=None)
    zero.score(value=0.0)
    rewards = zoo_adapter.spec.reward_funcs(environments=[silent, unrewarded, zero], prompts=[""] * 3, completions=[""] * 3)  # type: ignore[attr-defined]
    assert rewards == [None, None, 0.0]


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_calls_after_finish_are_refused_and_keep_the_reward(zoo_adapter: Callable[[], Any]) -> None:
    adapter = zoo_adapter()
    adapter.score(value=1.0, finish=True)
    shown = adapter.score(value=-1.0)
    assert protocol.REASON_EPISODE_FINISHED in shown
    assert adapter.finished is True
    assert adapter.rewards == [1.0, None]
    assert adapter.reward == 1.0


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_reset_clears_the_episode(zoo_adapter: Callable[[], Any]) -> None:
    adapter = zoo_adapter()
    adapter.score(value=1.0, finish=True)
    adapter.reset(task_index=1)
    assert (adapter.reward, adapter.rewards, adapter.metadata, adapter.finished, adapter.last_output) == (None, [], [], False, "")


@pytest.mark.parametrize("target", targets(ZOO, impls=("mock",), defect=lambda d: defects.DEFECTS["bool-reward"]), indirect=True)
def test_boolean_reward_is_not_a_reward(zoo_adapter: Callable[[], Any]) -> None:
    """P7: ``"reward": true`` on the wire is flagged, never counted as 1.0.

    Mock only: the reference server coerces a boolean reward to 1.0 before it reaches the wire.
    """
    adapter = zoo_adapter()
    adapter.score(value=1.0, as_bool=True)
    assert adapter.rewards[-1] is None and adapter.reward is None


# -- every error path, and what the model sees -------------------------------------------------
@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_unknown_tool_is_shown_with_its_reason(zoo_adapter: Callable[[], Any]) -> None:
    adapter = zoo_adapter()
    shown = adapter._call_ors_tool("no_such_tool", {})
    assert shown.startswith("Error:") and protocol.REASON_NOT_FOUND in shown and "no_such_tool" in shown
    assert adapter.rewards == [None] and adapter.finished is False


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_invalid_input_is_shown_with_its_reason(target: SuiteTarget, zoo_adapter: Callable[[], Any]) -> None:
    adapter = zoo_adapter()
    before = target.stats()["calls"].get("bounded", 0)
    shown = adapter.bounded(count=0, name="x")
    assert shown.startswith("Error:") and protocol.REASON_INPUT_VALIDATION in shown and "count" in shown
    assert target.stats()["calls"].get("bounded", 0) == before, "the tool must not run on invalid input"
    assert adapter.rewards == [None]


@pytest.mark.parametrize("target", targets(ZOO), indirect=True)
def test_tool_exception_is_shown_with_its_message(zoo_adapter: Callable[[], Any]) -> None:
    """P8: a tool that raises (SSE ``error`` event) shows the model the exception message."""
    adapter = zoo_adapter()
    shown = adapter.explode(message="kaput: the flux capacitor")
    assert shown.startswith("Error:") and "kaput: the flux capacitor" in shown
    assert adapter.rewards == [None]


@pytest.mark.parametrize("target", targets(ZOO, defect=lambda d: defects.DEFECTS["error-event-kills-session"]), indirect=True)
def test_tool_exception_leaves_the_session_usable(target: SuiteTarget, zoo_adapter: Callable[[], Any]) -> None:
    """P8: after a tool raised, the server session is alive, so the next call must reach it."""
    adapter = zoo_adapter()
    adapter.explode(message="boom")
    assert target.served.wire.ping(adapter._session.sid).status == 200, "the server session died"
    assert adapter.score(value=0.5) == "reward 0.5"


@pytest.mark.parametrize("target", targets(ZOO, defect=lambda d: defects.DEFECTS["errors-as-text"]), indirect=True)
def test_http_failure_is_raised_not_shown(target: SuiteTarget, zoo_adapter: Callable[[], Any]) -> None:
    """P8: a call whose session is gone (HTTP 404) fails the rollout instead of reading to the model like an answer."""
    adapter = zoo_adapter()
    target.served.wire.delete(adapter._session.sid)
    with pytest.raises(Exception) as raised:
        shown = adapter.score(value=1.0)
        pytest.fail(f"the model was shown {shown!r}")
    assert "404" in str(raised.value) or "not found" in str(raised.value).lower()


@pytest.mark.parametrize("target", targets(ZOO, impls=("mock",)), indirect=True)
def test_dropped_stream_is_resumed(
    target: SuiteTarget, serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], make_adapter: Callable[..., Any]
) -> None:
    """P8: a ``/call`` stream cut after its ``task_id`` is resumed by the SDK; the model sees the real result.

    Mock only: fault profiles are a mock-engine feature.
    """
    dropping = serve("schema-zoo", "mock", faults=("stream-drop",))
    adapter = make_adapter(new_spec(dropping, discover_task_tools=False), dropping)
    adapter.reset(task_index=0)
    assert adapter.score(value=0.5) == "reward 0.5"
    assert adapter.reward == 0.5
    assert dropping.stats()["requests"].get("fault stream-drop", 0) >= 1, "the fault did not fire"


@pytest.mark.parametrize("target", targets(ZOO, defect=lambda d: defects.DEFECTS["chunk-lstrip"]), indirect=True)
def test_long_result_reaches_the_model_intact(zoo_adapter: Callable[[], Any]) -> None:
    """A result longer than one SSE chunk, whose second chunk starts with spaces, arrives unchanged."""
    adapter = zoo_adapter()
    assert adapter.long_text() == long_text_value(6000)
