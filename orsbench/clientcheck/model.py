"""The scripted model a case's agent harness talks to: one server per process, one script per episode.

A harness takes a model, not a script. For each episode orsbench registers the
case's script with the scripted model (:mod:`orsbench.servers.scripted_model`)
and hands the harness its base URL as ``ORSBENCH_MODEL_URL`` — and as
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` with placeholder keys, so a harness
left on its provider SDK's defaults talks to it too and never spends a real
key. The model answers with the script's calls as tool calls, then a final
message; what the harness sent it (the tools it offered, the results it showed)
comes back with :meth:`ModelScript.transcript`.

The server starts on first use (through :func:`orsbench.servers.launch.start_scripted_model`,
like every server orsbench starts) and is stopped by PID at exit.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from orsbench.clientcheck import contract
from orsbench.clientcheck.episodes import Script
from orsbench.servers.launch import RunningServer, local_http, start_scripted_model
from orsbench.servers.scripted_model import MODEL_PREFIX, PLACEHOLDER_KEY, SCRIPTS

_LOCK = threading.Lock()
_SERVER: RunningServer | None = None
_OWNER = 0  # the PID that started it: a forked child starts its own rather than share a parent's handle


def server() -> RunningServer:
    """This process's scripted model, started on first use."""
    global _SERVER, _OWNER
    with _LOCK:
        if _SERVER is None or _OWNER != os.getpid() or not _SERVER.alive():
            _SERVER, _OWNER = start_scripted_model(), os.getpid()
        return _SERVER


@dataclass(frozen=True)
class ModelScript:
    """One script registered with the scripted model: the harness's model for one episode."""

    server_url: str
    id: str

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``…/v1``); Anthropic's SDK takes :attr:`anthropic_url`."""
        return f"{self.server_url}{MODEL_PREFIX}{self.id}/v1"

    @property
    def anthropic_url(self) -> str:
        """The base URL for Anthropic's SDK, which appends ``/v1/messages`` itself."""
        return f"{self.server_url}{MODEL_PREFIX}{self.id}"

    @property
    def platform_url(self) -> str:
        """The OpenReward platform stand-in (``OPENREWARD_API_URL`` for a harness that asks it which secrets are required)."""
        return self.server_url

    def environment(self) -> dict[str, str]:
        """The variables that point a harness at this model (placeholder keys: the model checks none)."""
        return {
            contract.MODEL_URL: self.base_url,
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": PLACEHOLDER_KEY,
            "ANTHROPIC_BASE_URL": self.anthropic_url,
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
        }

    def transcript(self) -> dict[str, Any] | None:
        """What the harness sent the model: ``requests`` (api, stream, results shown, reply) and the ``tools`` offered."""
        try:
            response = local_http().get(f"{self.server_url}{SCRIPTS}/{self.id}", timeout=10)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def forget(self) -> None:
        try:
            local_http().delete(f"{self.server_url}{SCRIPTS}/{self.id}", timeout=10)
        except httpx.HTTPError:
            pass


def register(script: Script, *, per_reply: int = 1) -> ModelScript:
    """Register ``script`` (its steps become the model's tool calls, ``per_reply`` to a reply) with this process's model.

    Where a step says it is made ``with_previous`` (the finishing call and one after it in one reply, §13.14), the
    replies are the script's own (:meth:`~orsbench.clientcheck.episodes.Script.replies`).
    """
    running = server()
    body = {**script.contract_json(), "per_reply": per_reply}
    if any(step.with_previous for step in script.steps):
        body["replies"] = script.replies()
    response = local_http().post(running.url + SCRIPTS, json=body, timeout=10)
    response.raise_for_status()
    return ModelScript(running.url, str(response.json()["id"]))


def tools_shown(transcript: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The tools the harness offered the model on its first request (``name``, ``description``, ``parameters``)."""
    if not transcript or not transcript.get("requests"):
        return []
    return list(transcript["tools"][transcript["requests"][0]["tools"]])
