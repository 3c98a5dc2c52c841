"""The scripted model (orsbench/servers/scripted_model.py): OpenAI and Anthropic SDKs get the script as tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orsbench.clientcheck.episodes import Script, Step
from orsbench.clientcheck.model import ModelScript, register, server, tools_shown
from orsbench.servers.scripted_model import FINAL_TEXT, PLACEHOLDER_KEY, SCRIPTS

SCRIPT = Script("echo", (Step("echo", {"text": "a"}), Step("submit", {"answer": [1, 2]})))
TOOLS = [{"type": "function", "function": {"name": "echo", "description": "Echo.", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]
ANTHROPIC_TOOLS = [{"name": "echo", "description": "Echo.", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]
SECRET_LOOKING_KEY = "sk-not-a-real-key-0123456789"


@pytest.fixture
def model() -> Iterator[ModelScript]:
    script = register(SCRIPT)
    yield script
    script.forget()


def _openai(model: ModelScript) -> Any:
    import openai

    return openai.OpenAI(base_url=model.base_url, api_key=SECRET_LOOKING_KEY, max_retries=0)


def _anthropic(base_url: str) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=base_url, api_key=SECRET_LOOKING_KEY, max_retries=0)


def test_chat_completions_play_the_script_one_call_a_reply_then_a_final_message(model: ModelScript) -> None:
    client = _openai(model)
    messages: list[Any] = [{"role": "user", "content": "go"}]
    made = []
    for _ in range(3):
        reply = client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
        choice = reply.choices[0]
        assert reply.usage is not None and reply.usage.total_tokens > 0  # no harness counts tokens itself
        if not choice.message.tool_calls:
            assert (choice.finish_reason, choice.message.content) == ("stop", FINAL_TEXT)
            break
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
        call = choice.message.tool_calls[0]
        made.append((call.function.name, json.loads(call.function.arguments)))
        messages += [choice.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": f"result {len(made)}"}]
    assert made == [("echo", {"text": "a"}), ("submit", {"answer": [1, 2]})]
    transcript = model.transcript()
    assert transcript is not None and [r["reply"] for r in transcript["requests"]] == [["echo"], ["submit"], None]
    assert [r["text"] for r in transcript["requests"][-1]["results"]] == ["result 1", "result 2"]
    assert tools_shown(transcript) == [{"name": "echo", "description": "Echo.", "parameters": TOOLS[0]["function"]["parameters"]}]
    assert SECRET_LOOKING_KEY not in json.dumps(transcript)


def test_a_retried_request_gets_the_same_answer(model: ModelScript) -> None:
    client = _openai(model)
    first, again = (client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}]) for _ in range(2))
    assert first.choices[0].message.tool_calls[0].function.name == again.choices[0].message.tool_calls[0].function.name == "echo"


def test_several_calls_in_one_reply_streamed_with_usage() -> None:
    script = register(SCRIPT, per_reply=2)
    try:
        stream = _openai(script).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                entry["name"] += (delta.function.name or "") if delta.function else ""
                entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
        assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [("echo", {"text": "a"}), ("submit", {"answer": [1, 2]})]
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
        assert chunks[-1].usage is not None and not chunks[-1].choices
    finally:
        script.forget()


def test_the_finishing_reply_carries_the_call_after_it() -> None:
    """§13.14: a step made ``with_previous`` joins the reply before it — here the finishing call's — the rest one a reply."""
    from orsbench.clientcheck.episodes import going_on_after_finished

    played = going_on_after_finished(SCRIPT, calls=1, same_reply=True)
    assert played.replies() == [1, 2] and played.finishing_reply_goes_on and played.calls == SCRIPT.calls
    script = register(played)
    try:
        client, messages, replies = _openai(script), [{"role": "user", "content": "go"}], []
        for _ in range(3):
            message = client.chat.completions.create(model="m", messages=messages, tools=TOOLS).choices[0].message
            replies.append([c.function.name for c in message.tool_calls or []])
            messages += [message.model_dump(exclude_none=True)] + [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls or []]
        assert replies == [["echo"], ["submit", "echo"], []]
    finally:
        script.forget()


@pytest.mark.parametrize("with_v1", [True, False], ids=["base-url-with-v1", "base-url-without-v1"])
def test_anthropic_messages_plain_and_streamed(model: ModelScript, with_v1: bool) -> None:
    client = _anthropic(model.base_url if with_v1 else model.anthropic_url)
    first = client.messages.create(model="scripted", max_tokens=64, messages=[{"role": "user", "content": "go"}], tools=ANTHROPIC_TOOLS)
    assert first.stop_reason == "tool_use" and [(b.name, b.input) for b in first.content] == [("echo", {"text": "a"})]
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": [{"type": "text", "text": "shown"}]}]},
    ]
    with client.messages.stream(model="scripted", max_tokens=64, messages=history, tools=ANTHROPIC_TOOLS) as stream:
        second = stream.get_final_message()
    assert second.stop_reason == "tool_use" and [(b.name, b.input) for b in second.content] == [("submit", {"answer": [1, 2]})]
    transcript = model.transcript()
    assert transcript is not None and transcript["requests"][-1]["stream"] is True
    assert transcript["requests"][-1]["results"] == [{"id": first.content[0].id, "text": "shown", "error": False}]


def test_responses_api_and_the_final_text(model: ModelScript) -> None:
    client = _openai(model)
    tools = [{"type": "function", "name": "echo", "parameters": {"type": "object"}}]
    first = client.responses.create(model="m", input="go", tools=tools)
    [call] = first.output
    items = [{"role": "user", "content": "go"}, call.model_dump(exclude_none=True), {"type": "function_call_output", "call_id": call.call_id, "output": "x"}]
    items += [{"type": "function_call", "call_id": "c2", "name": "submit", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c2", "output": "y"}]
    last = client.responses.create(model="m", input=items, tools=tools)
    assert (call.name, last.output_text) == ("echo", FINAL_TEXT)


def test_bad_requests_are_4xx_that_say_why(model: ModelScript) -> None:
    http = httpx.Client(trust_env=False, timeout=10)
    root = model.server_url
    bad = http.post(root + SCRIPTS, json={"calls": [{"input": {}}]})
    assert bad.status_code == 400 and "call 0" in bad.text
    assert http.post(model.base_url + "/chat/completions", content=b"{").status_code == 400
    assert http.post(model.base_url + "/chat/completions", json={"messages": "hi"}).status_code == 400
    gone = http.post(f"{root}/s/nope/v1/chat/completions", json={"messages": []})
    assert gone.status_code == 404 and "no script" in gone.text
    streamed = http.post(model.base_url + "/responses", json={"input": "go", "stream": True})
    assert streamed.status_code == 400 and "stream" in streamed.text


def test_the_platform_question_firehorse_asks(model: ModelScript) -> None:
    answer = httpx.get(f"{model.platform_url}/v1/environments/orsbench/echo/required-secrets", trust_env=False, timeout=10)
    assert answer.status_code == 200 and answer.json() == {"secrets": []}


def test_the_environment_points_both_sdks_at_it_with_placeholder_keys(model: ModelScript) -> None:
    env = model.environment()
    assert env["ORSBENCH_MODEL_URL"] == env["OPENAI_BASE_URL"] == model.base_url
    assert env["ANTHROPIC_BASE_URL"] == model.anthropic_url and env["ANTHROPIC_API_KEY"] == env["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert server().url.startswith("http://127.0.0.1:")
