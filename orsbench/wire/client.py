"""A raw ORS client that returns evidence instead of interpreting it.

Unlike the openreward SDK, :class:`WireClient` never retries, never follows
redirects unless asked, and never coerces a response: every method returns an
:class:`~orsbench.wire.evidence.Exchange` holding the raw bytes, so checks can
judge exactly what the server said. Event streams are read incrementally through
the project's one SSE parser, with arrival times for keep-alive cadence checks;
a compressed body (``Content-Encoding: gzip`` from a balancer) is decoded first,
as every HTTP client library decodes it, and the encoding stays in the headers.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any, Mapping

import httpx

from orsbench import protocol
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import SSEParser, SSEStream


def encode_secrets(secrets: Mapping[str, str]) -> str:
    """``X-Secrets`` as the SDK sends it: base64(JSON ``{name: {"value": ...}}``)."""
    payload = {k: {"value": v} for k, v in secrets.items()}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def add_secrets(header: str | None, secrets: Mapping[str, str]) -> str:
    """An ``X-Secrets`` value holding ``header``'s entries (when it decodes) with ``secrets`` on top.

    A proxy adds its operator's secrets to a client's ``/create`` this way: the
    client's other entries (the SDK's ``api_key``) still reach the server.
    """
    entries: dict[str, Any] = {}
    if header:
        try:
            decoded = json.loads(base64.b64decode(header, validate=True))
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            entries = decoded
    entries.update({k: {"value": v} for k, v in secrets.items()})
    return base64.b64encode(json.dumps(entries).encode()).decode()


class WireClient:
    """Synchronous raw client over httpx. One instance per target server."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        api_key: str | None = None,
        follow_redirects: bool = False,
        transport: httpx.BaseTransport | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        #: Every exchange this client made, in order: the history a reproducer replays a session from.
        self.log: list[Exchange] = []
        #: ``X-Secrets`` for every ``/create`` that does not bring its own (``docs/protocol.md`` §14).
        self._secrets_header = encode_secrets(secrets) if secrets else None
        headers = {"User-Agent": "orsbench"}
        if api_key:
            headers[protocol.API_KEY_HEADER] = api_key
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout),
            headers=headers,
            follow_redirects=follow_redirects,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one request primitive --------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        sid: str | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        read_timeout: float | None = None,
        max_stream_seconds: float | None = None,
    ) -> Exchange:
        """Send one request; read an event stream incrementally when ``stream`` is true.

        ``max_stream_seconds`` bounds how long a stream is read in total (a server
        that never ends its stream cannot hang a check).
        """
        send_headers: dict[str, str] = dict(headers or {})
        if self._secrets_header and path == protocol.CREATE and protocol.SECRETS_HEADER not in send_headers:
            send_headers[protocol.SECRETS_HEADER] = self._secrets_header
        if sid is not None:
            send_headers[protocol.SESSION_HEADER] = sid
        if json_body is not None:
            content = json.dumps(json_body).encode()
            send_headers.setdefault("Content-Type", protocol.JSON_CONTENT_TYPE)
        if stream:
            send_headers.setdefault("Accept", "text/event-stream")
        timeout = self._http.timeout if read_timeout is None else httpx.Timeout(self._http.timeout.connect, read=read_timeout)
        exchange = Exchange.begin(method, self.base_url + path, send_headers, content or b"")
        self.log.append(exchange)
        start = exchange.started_at
        body: bytes = b""
        sse: SSEStream | None = None
        try:
            with self._http.stream(method, path, content=content, headers=send_headers, timeout=timeout) as response:
                exchange.answer(response.status_code, {k.lower(): v for k, v in response.headers.items()})
                if stream and exchange.is_sse:
                    parser = SSEParser()
                    received = bytearray()
                    try:
                        # Decoded as httpx and aiohttp clients decode it: a balancer that gzips event streams
                        # (Content-Encoding, kept in the headers and reported by deployment.stream_compression)
                        # must not be misread as SSE framing.
                        for chunk in response.iter_bytes():
                            received += chunk
                            parser.feed(chunk)
                            if max_stream_seconds is not None and time.monotonic() - start > max_stream_seconds:
                                exchange.error = f"stream still open after {max_stream_seconds:g}s; stopped reading"
                                break
                    finally:
                        # Keep what arrived before a failure: a cut stream is evidence too
                        # (and its task_id is what a client resumes with).
                        body, sse = bytes(received), parser.close()
                else:
                    body = response.read()  # an event stream read whole is parsed by finish()
        except httpx.HTTPError as exc:
            exchange.error = f"{type(exc).__name__}: {exc}"
        return exchange.finish(body, sse=sse)

    # -- discovery --------------------------------------------------------------
    def health(self) -> Exchange:
        return self.request("GET", protocol.HEALTH)

    def version(self) -> Exchange:
        return self.request("GET", protocol.VERSION)

    def list_environments(self) -> Exchange:
        return self.request("GET", protocol.LIST_ENVIRONMENTS)

    def tools(self, env: str) -> Exchange:
        return self.request("GET", protocol.env_path(env, protocol.TOOLS))

    def splits(self, env: str) -> Exchange:
        return self.request("GET", protocol.env_path(env, protocol.SPLITS))

    def tasks(self, env: str, split: str) -> Exchange:
        return self.request("POST", protocol.env_path(env, protocol.TASKS), json_body={"split": split})

    def num_tasks(self, env: str, split: str) -> Exchange:
        return self.request("POST", protocol.env_path(env, protocol.NUM_TASKS), json_body={"split": split})

    def task(self, env: str, split: str, index: int) -> Exchange:
        return self.request("POST", protocol.env_path(env, protocol.TASK), json_body={"split": split, "index": index})

    def task_range(self, env: str, split: str, start: int | None = None, stop: int | None = None) -> Exchange:
        body: dict[str, Any] = {"split": split}
        if start is not None:
            body["start"] = start
        if stop is not None:
            body["stop"] = stop
        return self.request("POST", protocol.env_path(env, protocol.TASK_RANGE), json_body=body)

    # -- sessions ---------------------------------------------------------------
    def create_session(self) -> Exchange:
        return self.request("POST", protocol.CREATE_SESSION, stream=True, max_stream_seconds=30)

    def create(
        self,
        sid: str,
        *,
        env_name: str | None = None,
        split: str | None = None,
        index: int | None = None,
        task_spec: Mapping[str, Any] | None = None,
        secrets: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Exchange:
        body: dict[str, Any] = {}
        if env_name is not None:
            body["env_name"] = env_name
        if task_spec is not None:
            body["task_spec"] = dict(task_spec)
        if split is not None:
            body["split"] = split
        if index is not None:
            body["index"] = index
        body.update(extra or {})
        headers = {protocol.SECRETS_HEADER: encode_secrets(secrets)} if secrets else None
        return self.request("POST", protocol.CREATE, sid=sid, json_body=body, headers=headers)

    def ping(self, sid: str) -> Exchange:
        return self.request("POST", protocol.PING, sid=sid)

    def delete(self, sid: str) -> Exchange:
        return self.request("POST", protocol.DELETE, sid=sid)

    def delete_session(self, sid: str) -> Exchange:
        return self.request("POST", protocol.DELETE_SESSION, sid=sid)

    def task_tools(self, env: str, sid: str) -> Exchange:
        return self.request("GET", protocol.env_path(env, protocol.TASK_TOOLS), sid=sid)

    def prompt(self, env: str, sid: str) -> Exchange:
        return self.request("GET", protocol.env_path(env, protocol.PROMPT), sid=sid)

    def messages(self, env: str, sid: str) -> Exchange:
        return self.request("GET", protocol.env_path(env, protocol.MESSAGES), sid=sid)

    def call(
        self,
        env: str,
        sid: str,
        name: str,
        tool_input: Any,
        *,
        task_id: str | None = None,
        read_timeout: float | None = None,
        max_stream_seconds: float | None = 120,
    ) -> Exchange:
        body: dict[str, Any] = {"name": name, "input": tool_input}
        if task_id is not None:
            body["task_id"] = task_id
        return self.request(
            "POST",
            protocol.env_path(env, protocol.CALL),
            sid=sid,
            json_body=body,
            stream=True,
            read_timeout=read_timeout,
            max_stream_seconds=max_stream_seconds,
        )

    def score_group(self, env: str, sid: str, candidates: list[Any]) -> Exchange:
        return self.request(
            "POST", protocol.env_path(env, protocol.SCORE_GROUP), sid=sid, json_body={"candidates": candidates}, stream=True
        )

    def stats(self) -> Exchange:
        return self.request("GET", protocol.STATS)

    # -- helpers ------------------------------------------------------------------
    def new_session(self) -> str:
        """A sid from ``/create_session`` (falls back to a local uuid if the server fails)."""
        exchange = self.create_session()
        return exchange.task_id or str(uuid.uuid4())
