"""The reference adapter: a correct ORS client in raw httpx, speaking the adapter contract.

``orsbench check-client --client-cmd "python -m orsbench.clientcheck.reference"`` (or, a second
faster per case, the file itself: :func:`command`)
passes every case; that is how the suite tests itself, and this file is the
worked example of ``docs/clients.md`` §"What a correct client does" for anyone
writing a client in another language. Each rule of ``docs/protocol.md`` §12 it
follows is one small method, so the suite's tests make a faulty client by
overriding exactly one of them (``tests/clients/faulty.py``).

What it does: open a session (``/create_session`` then ``/create`` with
``env_name``, the task and ``X-Secrets``), read the prompt, make the script's
calls in order — resuming a cut stream by its ``task_id``, waiting as long as
``Retry-After`` says before retrying a 429/502/503/504, never retrying another
4xx — stop at ``finished`` or at a failure (an ``ok: false`` refusal is reported
and the episode goes on), delete the session, and write one contract line per
call. Exit status 0, or 1 when the episode ended on a failure. Ended with
SIGTERM (a scheduler preempting it, ``timeout``, Ctrl-C's cousin), it stops where
it is, still deletes its session, and exits 143 (docs/protocol.md §13.17):
Python's own SIGTERM would skip every ``finally``.
call. Exit status 0, or 1 when the episode ended on a failure. Under ``ORSBENCH_RUNS=N`` it plays
the script N times in its one process, a fresh :class:`Adapter` (HTTP pool, session) per run; under
``ORSBENCH_EPISODES=N`` each run plays tasks ``INDEX`` .. ``INDEX+N-1`` and reports its mean over all N.
"""

from __future__ import annotations

import base64
import json
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx

if __package__:  # imported as orsbench.clientcheck.reference (a subclass in a test, the matrix)
    from orsbench import protocol
    from orsbench.clientcheck import contract
    from orsbench.wire import sse
else:  # run as a file: load the three stdlib-only modules it needs by path, not the orsbench package
    import importlib.util

    def _load(name: str, relative: str) -> Any:
        """Why by path: ``import orsbench`` costs over a second (scenarios, pydantic), once per case."""
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    protocol = _load("orsbench_protocol", "protocol.py")
    contract = _load("orsbench_contract", "clientcheck/contract.py")
    sse = _load("orsbench_sse", "wire/sse.py")

SSEStream, parse = sse.SSEStream, sse.parse

#: Statuses worth retrying (after Retry-After, else RETRY_DEFAULT_S): rate limits and a backend not ready.
RETRYABLE = frozenset({429, 502, 503, 504})
RETRY_DEFAULT_S = 1.0
ATTEMPTS = 5
#: Resumes of one cut stream before giving up on it.
RESUMES = 3


class ClientError(Exception):
    """A failure the client reports to its caller (and the adapter writes as ``{"error": ...}``)."""


class Refused(ClientError):
    """An ``ok: false`` answer: the tool refused this input; the session is fine and the episode goes on."""

    def __init__(self, message: str, reason: str | None) -> None:
        super().__init__(message)
        self.reason = reason


class Adapter:
    """Plays ``ORSBENCH_SCRIPT`` against ``ORSBENCH_URL``; override one method to break one rule."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        self.url = env[contract.URL].rstrip("/")
        self.env_name = env[contract.ENV]
        self.split = env[contract.SPLIT]
        self.index = int(env[contract.INDEX])
        with open(env[contract.SCRIPT]) as handle:
            self.calls: list[dict[str, Any]] = json.load(handle)["calls"]
        self.out_path = env[contract.OUT]
        self.secrets: dict[str, str] = json.loads(env.get(contract.SECRETS) or "{}")
        self.http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(10.0, read=protocol.CLIENT_READ_TIMEOUT_S))
        self.sid: str | None = None
        #: The episode ended on a reported failure: the exit status is 1.
        self.failed = False
        #: The last non-null reward the episode was given (its score in an aggregate over episodes).
        self.reward: float | None = None

    # -- the contract's output ----------------------------------------------------------
    def write(self, line: dict[str, Any]) -> None:
        with open(self.out_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    # -- HTTP with the retry rules ----------------------------------------------------------
    def headers(self) -> dict[str, str]:
        return {protocol.SESSION_HEADER: self.sid} if self.sid else {}

    def retry_delay(self, response: httpx.Response) -> float:
        """Seconds to wait before retrying ``response``: its Retry-After, else a default."""
        try:
            return max(0.0, float(response.headers.get(protocol.RETRY_AFTER_HEADER, RETRY_DEFAULT_S)))
        except ValueError:
            return RETRY_DEFAULT_S

    def should_retry(self, response: httpx.Response) -> bool:
        return response.status_code in RETRYABLE

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried on a retryable status after the wait the server asked for."""
        for attempt in range(ATTEMPTS):
            response = self.http.request(method, path, headers={**self.headers(), **kwargs.pop("headers", {})}, **kwargs)
            if response.status_code < 400:
                return response
            if attempt + 1 < ATTEMPTS and self.should_retry(response):
                time.sleep(self.retry_delay(response))
                continue
            break
        raise ClientError(f"{method} {path} answered {response.status_code}: {response.text[:300]}")

    # -- the session -------------------------------------------------------------------
    def create_body(self) -> dict[str, Any]:
        return {"env_name": self.env_name, "split": self.split, "index": self.index}

    def secrets_header(self) -> dict[str, str]:
        if not self.secrets:
            return {}
        encoded = json.dumps({name: {"value": value} for name, value in self.secrets.items()})
        return {protocol.SECRETS_HEADER: base64.b64encode(encoded.encode()).decode()}

    def open(self) -> None:
        created = self.request("POST", protocol.CREATE_SESSION)
        event = parse(created.content).first(protocol.EVENT_TASK_ID)
        if event is None or not event.data:
            raise ClientError("/create_session sent no session id")
        self.sid = event.data
        self.request("POST", protocol.CREATE, json=self.create_body(), headers=self.secrets_header())
        self.request("GET", protocol.env_path(self.env_name, protocol.PROMPT))

    def close(self) -> None:
        if self.sid is not None:
            try:
                self.request("POST", protocol.DELETE)
            except (ClientError, httpx.HTTPError):
                pass  # a session the server already lost: nothing left to free

    # -- tool calls --------------------------------------------------------------------------
    def stream(self, body: dict[str, Any]) -> SSEStream:
        """POST one ``/call`` body; the events that arrived (a cut connection keeps what came before it)."""
        path = protocol.env_path(self.env_name, protocol.CALL)
        for attempt in range(ATTEMPTS):
            raw = bytearray()
            try:
                with self.http.stream("POST", path, json=body, headers=self.headers()) as response:
                    if response.status_code >= 400:
                        response.read()
                        if attempt + 1 < ATTEMPTS and self.should_retry(response):
                            time.sleep(self.retry_delay(response))
                            continue
                        raise ClientError(f"/call answered {response.status_code}: {response.text[:300]}")
                    for chunk in response.iter_raw():
                        raw += chunk
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout):
                pass  # cut: what arrived is parsed; the caller resumes by task_id
            return parse(bytes(raw))
        raise ClientError("/call kept answering retryable errors")

    def assemble(self, stream: SSEStream) -> str | None:
        """``chunk`` data + ``end`` data, exactly as sent (the one reassembly, ``wire/sse.py``); ``None`` when no ``end`` came."""
        return stream.reassembled(protocol.EVENT_CHUNK, protocol.EVENT_END)

    def after_cut(self, tool: str, tool_input: dict[str, Any], task_id: str) -> SSEStream:
        """A stream cut after its ``task_id``: resume the task (the tool already ran; never run it again)."""
        return self.stream({"name": tool, "input": tool_input, "task_id": task_id})

    def call(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """One tool call; the ``output`` of an ``ok: true`` answer, or :class:`ClientError`."""
        stream = self.stream({"name": tool, "input": tool_input})
        first = stream.first(protocol.EVENT_TASK_ID)
        task_id = first.data if first is not None else None
        for _ in range(RESUMES):
            if self.terminal(stream) or not task_id:
                break
            stream = self.after_cut(tool, tool_input, task_id)
        error = stream.first(protocol.EVENT_ERROR)
        if error is not None:
            raise ClientError(f"{tool} failed: {error.data}")
        text = self.assemble(stream)
        if text is None:
            raise ClientError(f"{tool}: the stream ended without a result" + ("" if task_id else " (cut before its task_id)"))
        try:
            result = json.loads(text)
        except ValueError:
            raise ClientError(f"{tool}: the result is not JSON") from None
        if not isinstance(result, dict):
            raise ClientError(f"{tool}: the result is not a JSON object")
        return self.unwrap(tool, result)

    @staticmethod
    def terminal(stream: SSEStream) -> bool:
        return any(e.event in (protocol.EVENT_END, protocol.EVENT_ERROR) for e in stream.events)

    def unwrap(self, tool: str, result: dict[str, Any]) -> dict[str, Any]:
        if result.get("ok") is not True:
            raise Refused(f"{tool} refused ({result.get('reason')}): {result.get('error')}", result.get("reason"))
        output = result.get("output")
        if not isinstance(output, dict):
            raise ClientError(f"{tool}: ok:true without an output object")
        self.validate(output)
        return output

    def validate(self, output: dict[str, Any]) -> None:
        """Reward: a finite number or null (a JSON boolean is not one); finished: a boolean."""
        reward = output.get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward)):
            raise ClientError(f"the reward {json.dumps(reward)} is not a number")
        if not isinstance(output.get("finished", False), bool):
            raise ClientError(f"finished {json.dumps(output.get('finished'))} is not a boolean")

    @staticmethod
    def text_of(output: dict[str, Any]) -> str:
        return "".join(b.get("text", "") for b in output.get("blocks") or [] if isinstance(b, dict) and b.get("type") == "text")

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        return {"tool": tool, "text": self.text_of(output), "reward": output.get("reward"), "finished": bool(output.get("finished"))}

    def report_failure(self, tool: str, error: Exception) -> bool:
        """Write the failure of a call; whether to stop the episode.

        An ``ok: false`` refusal leaves the session usable, so the loop goes on (the model would be told
        and try again); any other failure ends the episode.
        """
        reason = {"reason": error.reason} if isinstance(error, Refused) else {}
        self.write({"tool": tool, "error": str(error), **reason})
        self.failed = True
        return not isinstance(error, Refused)

    def should_stop(self, output: dict[str, Any]) -> bool:
        return bool(output.get("finished"))

    # -- the episode -------------------------------------------------------------------
    def on_sigterm(self) -> None:
        """SIGTERM ends the episode as an exception would (``SystemExit(143)``), so ``play``'s ``finally`` deletes the session."""

        def stop(signum: int, frame: Any) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup it starts is not interrupted again
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stop)

    def play(self) -> int:
        self.on_sigterm()
        try:
            self.open()
        except (ClientError, httpx.HTTPError) as exc:
            self.write({"error": f"could not open the session: {exc}"})
            self.close()
            return 1
        try:
            for call in self.calls:
                try:
                    output = self.call(call["tool"], call["input"])
                except (ClientError, httpx.HTTPError) as exc:
                    if self.report_failure(call["tool"], exc):
                        break
                    continue
                self.write(self.line(call["tool"], output))
                self.failed = False
                if output.get("reward") is not None:
                    self.reward = output["reward"]
                if self.should_stop(output):
                    break
        finally:
            self.close()
            self.http.close()
        return 1 if self.failed else 0


def command() -> str:
    """The shell command running this file as a script (it then starts without importing ``orsbench``)."""
    import shlex

    return shlex.join([sys.executable, str(Path(__file__).resolve())])


def main(adapter: type[Adapter] = Adapter) -> int:
    missing = [name for name in (contract.URL, contract.ENV, contract.SPLIT, contract.INDEX, contract.SCRIPT, contract.OUT) if name not in os.environ]
    if missing:
        print(f"{sys.argv[0]}: run me under `orsbench check-client --client-cmd ...`: {', '.join(missing)} not set", file=sys.stderr)
        return 2
    # ORSBENCH_RUNS: the script played that many times in this one process, each run a client of its own
    # (its own HTTP pool, session and episode state: nothing of one run is carried into the next, §13.16).
    # ORSBENCH_EPISODES: each run plays tasks INDEX .. INDEX+N-1, going on after a failed one, then reports its
    # mean over all N, a failed episode as 0 (§13.15).
    codes = []
    episodes, first = contract.episodes(os.environ), int(os.environ[contract.INDEX])
    for _ in range(contract.runs(os.environ)):
        scores = []
        for number in range(episodes):
            client = adapter({**os.environ, contract.INDEX: str(first + number)})
            code = client.play()
            codes.append(code)
            scores.append(0.0 if code else float(client.reward or 0.0))
        if episodes > 1:
            client.write(contract.aggregate_line(sum(scores) / episodes, episodes))
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
