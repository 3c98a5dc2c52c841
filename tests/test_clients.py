"""Real clients run whole episodes against the mock engine.

* the openreward SDK client (``environments.get(..., base_url=...)``) plays a full
  episode of every scenario, including a slow call that needs keep-alives;
* TRL's ``OpenRewardSpec`` builds its dataset and runs one rollout on echo.
"""

from __future__ import annotations

import functools

import pytest

from orsbench.config import ServerConfig

openreward = pytest.importorskip("openreward")
from openreward import OpenReward  # noqa: E402
from openreward.api.environments import client as sdk_env_client  # noqa: E402


def sdk_env(server):
    return OpenReward(api_key="test").environments.get(server.env_name, variant=server.env_name, base_url=server.url)


def text_of(output) -> str:
    return "".join(getattr(b, "text", "") for b in output.blocks)


@pytest.mark.parametrize("impl", ["mock"])
def test_sdk_client_plays_echo(ors_server_factory, impl):
    server = ors_server_factory("echo", impl=impl)
    env = sdk_env(server)
    task = env.get_task("train", 2)
    with env.session(split="train", index=2) as session:
        assert task.task_spec["target"] in text_of(type("P", (), {"blocks": session.get_prompt()})())
        assert [t.name for t in session.list_tools()] == ["echo"]
        miss = session.call_tool("echo", {"text": "nope"})
        assert (miss.reward, miss.finished) == (0.0, False)
        hit = session.call_tool("echo", {"text": task.task_spec["target"]})
        assert (hit.reward, hit.finished, text_of(hit)) == (1.0, True, "match")
    assert server.stats()["active_sessions"] == 0


def test_sdk_client_plays_task_tool_with_task_scoped_tools(ors_server_factory):
    server = ors_server_factory("task-tool")
    env = sdk_env(server)
    assert [t.name for t in env.list_tools()] == ["answer"]
    with env.session(split="train", index=0) as session:  # kind "add"
        assert sorted(t.name for t in session.list_tools()) == ["add", "answer"]
        spec = env.get_task("train", 0).task_spec
        a, b = (int(x) for x in spec["question"].removeprefix("What is ").removesuffix("?").split(" + "))
        total = session.call_tool("add", {"a": a, "b": b})
        final = session.call_tool("answer", {"value": text_of(total)})
        assert (final.reward, final.finished) == (1.0, True)


def test_sdk_client_plays_sparse_reward(ors_server_factory):
    server = ors_server_factory("sparse-reward")
    env = sdk_env(server)
    spec = env.get_task("train", 4).task_spec
    with env.session(split="train", index=4) as session:
        digits = [int(text_of(session.call_tool("reveal", {"position": i}))) for i in range(spec["length"])]
        out = session.call_tool("submit", {"total": sum(digits)})
        assert (out.reward, out.finished) == (1.0, True)


def test_sdk_client_plays_slow_episode_through_503_starting_and_keepalives(ors_server_factory):
    server = ors_server_factory("slow", params={"setup": 1.0, "steps": 3, "long_call": 1.0})
    env = sdk_env(server)
    with env.session(split="train", index=0) as session:
        assert "step()" in text_of(type("P", (), {"blocks": session.get_prompt()})())  # rode out 503 starting
        assert text_of(session.call_tool("wait", {})) == "waited 1s"
        rewards = [session.call_tool("step", {}).reward for _ in range(3)]
        assert rewards == [None, None, 1.0]
    assert server.stats()["statuses"].get("503", 0) >= 1


@pytest.mark.parametrize(("ping_interval", "posts"), [(0.25, 1), (30.0, 2)])
def test_a_call_longer_than_the_client_read_timeout_needs_keepalives(ors_server_factory, monkeypatch, ping_interval, posts):
    """With the SDK's read timeout cut to 1 s, a 2.5 s call survives on one POST only if
    the server sends keep-alives; without them the client times out and resumes by task_id."""
    monkeypatch.setattr(sdk_env_client, "resumable_sse", functools.partial(sdk_env_client.resumable_sse, heartbeat_timeout=1))
    server = ors_server_factory("slow", config=ServerConfig(ping_interval=ping_interval), params={"setup": 0.0})
    env = sdk_env(server)
    before = server.stats()["requests"].get("POST /{env}/call", 0)
    with env.session(split="train", index=0) as session:
        assert text_of(session.call_tool("wait", {"seconds": 2.5})) == "waited 2.5s"
    made = server.stats()["requests"]["POST /{env}/call"] - before
    assert (made == posts) if posts == 1 else (made >= posts), made


def test_trl_openrewardspec_builds_dataset_and_runs_a_rollout(ors_server_factory, monkeypatch):
    from trl.experimental.openreward import OpenRewardSpec

    server = ors_server_factory("echo")
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    spec = OpenRewardSpec(server.url, env_name=server.env_name, num_tasks=4)
    dataset = spec.train_dataset
    assert len(dataset) == 4 and {"prompt", "task_index", "target"} <= set(dataset.column_names)
    env = spec.environment_factory()
    env.reset(**dataset[1])
    assert "no match" in env.echo(text="wrong")
    assert "match" in env.echo(text=dataset[1]["target"])
    assert spec.reward_funcs(environments=[env], completions=[""], prompts=[""]) == [1.0]
    env._close()
    assert server.stats()["active_sessions"] == 0
