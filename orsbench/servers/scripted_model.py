"""The scripted model: OpenAI- and Anthropic-compatible chat endpoints whose policy is a case's script.

Agent harnesses (firehorse, Inspect, a trainer's rollout loop) take a *model*,
not a script. This server is that model, offline: a script is registered
(``POST /_orsbench/scripts`` with the ``ORSBENCH_SCRIPT`` document, ``{"calls":
[{"tool", "input"}, ...]}``), and every chat request under its base URL
(``/s/<id>/v1``) is answered with the script's next call(s) as tool calls —
one call per reply by default, ``per_reply`` calls in one reply where a case
asks for it, or the sizes ``replies`` lists one by one (``[1, 1, 2]``: the
third reply carries the third and fourth calls) — and, once the script is spent, a final text message. The harness
runs its real code path: its provider SDK, its tool-call parsing, its loop.

Which call comes next is read from the conversation the harness sends (the
tool calls already in it), not from state kept between requests, so a harness
that retries a model request gets the same answer again. Spoken:

* ``POST …/v1/chat/completions`` — OpenAI Chat Completions, ``stream: true`` too
  (chunks with ``delta.tool_calls``, a usage chunk when ``stream_options.include_usage``, ``[DONE]``);
* ``POST …/v1/messages`` — Anthropic Messages, ``stream: true`` too (``message_start``,
  ``content_block_*`` with ``input_json_delta``, ``message_delta``, ``message_stop``);
* ``POST …/v1/responses`` — OpenAI Responses (firehorse's ``openai/`` models), not streamed;
* ``GET …/v1/models``.

Beside the model, the one question a harness asks the OpenReward *platform*
rather than the ORS server: ``GET /v1/environments/<owner>/<name>/required-secrets``
(firehorse's orchestrator asks it of ``OPENREWARD_API_URL`` before any trial;
ORS does not define it) is answered ``{"secrets": []}``, as openreward.ai
answers for a registered environment that declares none — the harness is
given the case's secrets itself.

The path under ``/s/<id>/`` is matched by its end, so a base URL given with or
without ``/v1`` works for either SDK (Anthropic's appends ``/v1/messages`` itself).
Every reply carries token usage (1 in, 1 out), so no harness counts tokens with a
tokenizer it would have to download.

What the harness sent is kept per script (``GET /_orsbench/scripts/<id>``): the
tools it offered the model, in the provider's own format, and the tool results
it showed the model — what a model reading that harness sees. API keys and
other headers are never kept. ``python -m orsbench.servers.scripted_model``
serves it; :func:`orsbench.servers.launch.start_scripted_model` is how orsbench starts it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from orsbench import protocol
from orsbench.servers.http import Receive, Scope, Send, read_body, run_lifespan, send_detail, send_json

#: Where scripts are registered, read back and deleted.
SCRIPTS: str = "/_orsbench/scripts"
#: The prefix of each script's model base URL: ``/s/<id>/v1``.
MODEL_PREFIX = "/s/"
#: The one OpenReward *platform* route served (at the root: the SDK joins absolute paths to ``OPENREWARD_API_URL``).
PLATFORM_ENVIRONMENTS = "/v1/environments/"
#: The API key harnesses are given for the scripted model (it checks none): a placeholder, not a secret.
PLACEHOLDER_KEY = "orsbench-scripted-model"
#: What the model says once the script is spent.
FINAL_TEXT = "Done."
#: Bounds: scripts kept (oldest forgotten first), requests kept per script, bytes of one request body.
MAX_SCRIPTS, MAX_REQUESTS, MAX_BODY = 512, 256, 16 * 1024 * 1024

JSON = dict[str, Any]


@dataclass
class Script:
    """One registered script and what the harness sent under it."""

    calls: list[JSON]
    per_reply: int = 1
    final: str = FINAL_TEXT
    #: How many calls each reply carries, in order (after these, ``per_reply`` to a reply); empty: ``per_reply`` throughout.
    replies: list[int] = field(default_factory=list)
    #: One entry per model request: api, stream, model, calls already made, the tools (an index into
    #: :attr:`tools`), the tool results shown, and what the model answered.
    requests: list[JSON] = field(default_factory=list)
    #: The distinct tool lists offered, in order (a harness offers the same list on every request).
    tools: list[list[JSON]] = field(default_factory=list)
    dropped: int = 0

    def reply(self, made: int) -> list[tuple[int, JSON]]:
        """The calls of the next reply, each with its number in the script, after ``made`` calls (empty: the final text)."""
        size, start = self.per_reply, 0
        for listed in self.replies:  # a reply listed by its size, where ``made`` is where it starts
            if start == made:
                size = listed
                break
            start += listed
        return [(n, self.calls[n]) for n in range(made, min(made + size, len(self.calls)))]

    def record(self, entry: JSON, tools: list[JSON]) -> None:
        if tools not in self.tools:
            self.tools.append(tools)
        entry["tools"] = self.tools.index(tools)
        if len(self.requests) >= MAX_REQUESTS:
            self.dropped += 1
            return
        self.requests.append(entry)

    def transcript(self) -> JSON:
        return {"calls": len(self.calls), "per_reply": self.per_reply, "replies": self.replies, "requests": self.requests, "tools": self.tools, "dropped": self.dropped}


class BadRequest(ValueError):
    """The request is not what the API it was sent to expects; the message says what is wrong."""


def _parse_script(body: bytes) -> Script:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise BadRequest("the script is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
        raise BadRequest('a script is {"calls": [{"tool": NAME, "input": {...}}, ...]}')
    calls = []
    for number, call in enumerate(data["calls"]):
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str) or not isinstance(call.get("input", {}), dict):
            raise BadRequest(f'call {number} is not {{"tool": NAME, "input": {{...}}}}')
        pause = call.get("pause_s") or 0
        if not isinstance(pause, (int, float)) or isinstance(pause, bool) or not 0 <= pause <= 600:
            raise BadRequest(f"call {number}: pause_s must be a number of seconds between 0 and 600")
        calls.append({"tool": call["tool"], "input": call.get("input") or {}, "pause_s": float(pause)})
    per_reply = data.get("per_reply", 1)
    if not isinstance(per_reply, int) or isinstance(per_reply, bool) or per_reply < 1:
        raise BadRequest("per_reply must be a whole number ≥ 1")
    final = data.get("final", FINAL_TEXT)
    if not isinstance(final, str) or not final:
        raise BadRequest("final must be a non-empty string")
    replies = data.get("replies") or []
    if not isinstance(replies, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in replies):
        raise BadRequest("replies must be a list of whole numbers ≥ 1 (the calls each reply carries)")
    return Script(calls, per_reply, final, replies=list(replies))


# -- reading a conversation, per API ---------------------------------------------------------------
def _text(content: Any) -> str:
    """A message or tool-result content as the text a model reads: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict) and "content" in part:
            parts.append(_text(part["content"]))
    return "".join(parts)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadRequest(f"{what} must be a list")
    return value


@dataclass(frozen=True)
class Conversation:
    """What one request says: the calls the model already made, the tools offered, the results shown."""

    made: int
    tools: list[JSON]
    results: list[JSON]


def _chat_conversation(body: JSON) -> Conversation:
    made, results = 0, []
    for message in _list(body.get("messages"), "messages"):
        if not isinstance(message, dict):
            raise BadRequest("every message must be an object")
        if message.get("role") == "assistant":
            made += len(message.get("tool_calls") or [])
        elif message.get("role") == "tool":
            results.append({"id": message.get("tool_call_id"), "text": _text(message.get("content"))})
    tools = [
        {"name": f.get("name"), "description": f.get("description"), "parameters": f.get("parameters")}
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(f := t.get("function"), dict)
    ]
    return Conversation(made, tools, results)


def _messages_conversation(body: JSON) -> Conversation:
    made, results = 0, []
    for message in _list(body.get("messages"), "messages"):
        if not isinstance(message, dict):
            raise BadRequest("every message must be an object")
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "assistant":
            made += sum(1 for b in blocks if b.get("type") == "tool_use")
        for block in blocks:
            if block.get("type") == "tool_result":
                results.append({"id": block.get("tool_use_id"), "text": _text(block.get("content")), "error": bool(block.get("is_error"))})
    tools = [
        {"name": t.get("name"), "description": t.get("description"), "parameters": t.get("input_schema")}
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    return Conversation(made, tools, results)


def _responses_conversation(body: JSON) -> Conversation:
    items = body.get("input")
    items = [] if isinstance(items, str) else _list(items, "input")
    made, results = 0, []
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            made += 1
        elif item.get("type") == "function_call_output":
            results.append({"id": item.get("call_id"), "text": _text(item.get("output"))})
    tools = [
        {"name": t.get("name"), "description": t.get("description"), "parameters": t.get("parameters")}
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type") == "function"
    ]
    return Conversation(made, tools, results)


# -- writing a reply, per API ------------------------------------------------------------------------
_USAGE_CHAT = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
_USAGE_MESSAGES = {"input_tokens": 1, "output_tokens": 1}
_ids = itertools.count(1)


def _arguments(call: JSON) -> str:
    return json.dumps(call["input"], ensure_ascii=False)


def _chat_reply(model: str, calls: list[tuple[int, JSON]], final: str) -> JSON:
    message: JSON = {"role": "assistant", "content": None if calls else final}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_orsbench_{n}", "type": "function", "function": {"name": c["tool"], "arguments": _arguments(c)}} for n, c in calls
        ]
    return {
        "id": f"chatcmpl-orsbench-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}],
        "usage": _USAGE_CHAT,
    }


def _chat_chunks(model: str, calls: list[tuple[int, JSON]], final: str, usage: bool) -> Iterator[bytes]:
    head = {"id": f"chatcmpl-orsbench-{next(_ids)}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: JSON, finish: str | None = None) -> bytes:
        return _sse(None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    yield chunk({"role": "assistant", "content": None if calls else ""})
    for index, (n, c) in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, "id": f"call_orsbench_{n}", "type": "function", "function": {"name": c["tool"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": _arguments(c)}}]})
    if not calls:
        yield chunk({"content": final})
    yield chunk({}, "tool_calls" if calls else "stop")
    if usage:
        yield _sse(None, {**head, "choices": [], "usage": _USAGE_CHAT})
    yield b"data: [DONE]\n\n"


def _messages_content(calls: list[tuple[int, JSON]], final: str) -> list[JSON]:
    if not calls:
        return [{"type": "text", "text": final}]
    return [{"type": "tool_use", "id": f"toolu_orsbench_{n}", "name": c["tool"], "input": c["input"]} for n, c in calls]


def _messages_reply(model: str, calls: list[tuple[int, JSON]], final: str) -> JSON:
    return {
        "id": f"msg_orsbench_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _messages_content(calls, final),
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": _USAGE_MESSAGES,
    }


def _messages_events(model: str, calls: list[tuple[int, JSON]], final: str) -> Iterator[bytes]:
    message = {**_messages_reply(model, calls, final), "content": [], "stop_reason": None}
    yield _sse("message_start", {"type": "message_start", "message": message})
    for index, block in enumerate(_messages_content(calls, final)):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
    yield _sse("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 1}})
    yield _sse("message_stop", {"type": "message_stop"})


def _responses_reply(model: str, calls: list[tuple[int, JSON]], final: str) -> JSON:
    if calls:
        output: list[JSON] = [
            {"type": "function_call", "id": f"fc_orsbench_{n}", "call_id": f"call_orsbench_{n}", "name": c["tool"],
             "arguments": _arguments(c), "status": "completed"}
            for n, c in calls
        ]
    else:
        output = [{"type": "message", "id": f"msg_orsbench_{next(_ids)}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": final, "annotations": []}]}]
    return {
        "id": f"resp_orsbench_{next(_ids)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def _sse(event: str | None, data: JSON) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


#: The end of a model request's path → the API it speaks.
_APIS = {
    "chat/completions": "openai-chat",
    "messages": "anthropic-messages",
    "responses": "openai-responses",
}


class ScriptedModelApp:
    """The ASGI app: script registration under :data:`SCRIPTS`, the model APIs under :data:`MODEL_PREFIX`."""

    def __init__(self) -> None:
        self.scripts: OrderedDict[str, Script] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        try:
            if path == protocol.HEALTH:
                await send_json(send, 200, {"status": "ok"})
            elif path == SCRIPTS and method == "POST":
                await self._register(scope, receive, send)
            elif path.startswith(SCRIPTS + "/"):
                await self._script(path[len(SCRIPTS) + 1 :], method, send)
            elif method == "GET" and path.startswith(PLATFORM_ENVIRONMENTS) and path.endswith("/required-secrets"):
                # The OpenReward platform's answer for a registered environment that declares no secrets.
                await send_json(send, 200, {"secrets": []})
            elif path.startswith(MODEL_PREFIX):
                await self._model(scope, receive, send)
            else:
                await send_detail(send, 404, f"no route {method} {path}: model requests go to {MODEL_PREFIX}<id>/v1/...")
        except BadRequest as exc:
            await send_json(send, 400, {"error": {"type": "invalid_request_error", "message": str(exc)}})

    async def _register(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, _ = await read_body(receive, MAX_BODY)
        if len(body) > MAX_BODY:
            await send_detail(send, 413, f"a script over {MAX_BODY} bytes")
            return
        script = _parse_script(body)
        sid = secrets.token_hex(8)
        self.scripts[sid] = script
        while len(self.scripts) > MAX_SCRIPTS:
            self.scripts.popitem(last=False)
        await send_json(send, 201, {"id": sid, "path": f"{MODEL_PREFIX}{sid}/v1"})

    async def _script(self, sid: str, method: str, send: Send) -> None:
        script = self.scripts.get(sid)
        if script is None:
            await send_detail(send, 404, f"no script {sid!r} (never registered, deleted, or one of the oldest past {MAX_SCRIPTS})")
        elif method == "GET":
            await send_json(send, 200, script.transcript())
        elif method == "DELETE":
            del self.scripts[sid]
            await send_json(send, 200, {"deleted": sid})
        else:
            await send_detail(send, 405, f"{method} is not allowed here: GET or DELETE")

    async def _model(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid, _, rest = scope["path"][len(MODEL_PREFIX) :].partition("/")
        script = self.scripts.get(sid)
        if script is None:
            await send_json(send, 404, {"error": {"type": "not_found_error", "message": f"no script {sid!r} is registered on this scripted model"}})
            return
        if scope["method"] == "GET" and rest.rstrip("/").endswith("models"):
            await send_json(send, 200, {"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "orsbench"}]})
            return
        api = next((name for ending, name in _APIS.items() if rest.rstrip("/").endswith(ending)), None)
        if api is None or scope["method"] != "POST":
            await send_json(send, 404, {"error": {"type": "not_found_error", "message": f"the scripted model answers POST .../chat/completions, .../messages and .../responses, not {scope['method']} /{rest}"}})
            return
        raw, _ = await read_body(receive, MAX_BODY)
        if len(raw) > MAX_BODY:
            await send_json(send, 413, {"error": {"type": "request_too_large", "message": f"a request body over {MAX_BODY} bytes"}})
            return
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise BadRequest("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        conversation = {"openai-chat": _chat_conversation, "anthropic-messages": _messages_conversation, "openai-responses": _responses_conversation}[api](body)
        stream = body.get("stream") is True
        if stream and api == "openai-responses":
            raise BadRequest("the scripted model does not stream the Responses API: send stream: false")
        calls = script.reply(conversation.made)
        model = str(body.get("model") or "scripted")
        script.record(
            {"api": api, "stream": stream, "model": model, "made": conversation.made, "results": conversation.results,
             "reply": [c["tool"] for _, c in calls] if calls else None},
            conversation.tools,
        )
        pause = max((c["pause_s"] for _, c in calls), default=0.0)
        if pause:
            await asyncio.sleep(pause)  # the model "thinks": an idle gap in the episode, as the script asks
        if not stream:
            reply = {"openai-chat": _chat_reply, "anthropic-messages": _messages_reply, "openai-responses": _responses_reply}[api]
            await send_json(send, 200, reply(model, calls, script.final))
            return
        if api == "openai-chat":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = _chat_chunks(model, calls, script.final, include_usage)
        else:
            events = _messages_events(model, calls, script.final)
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def main(argv: list[str] | None = None) -> int:
    from orsbench.servers.app import announce_ready, serve_forever

    parser = argparse.ArgumentParser(prog="python -m orsbench.servers.scripted_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    on_ready = announce_ready(lambda url: f"orsbench: scripted model at {url} (register a script: POST {url}{SCRIPTS})", args.ready_file)
    serve_forever(ScriptedModelApp(), host=args.host, port=args.port, on_ready=on_ready)
    return 0


if __name__ == "__main__":
    sys.exit(main())
