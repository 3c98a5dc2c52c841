"""The TRL target observes TRL's own error path (the SDK call ``_call_ors_tool`` wraps, raising), never a text prefix.

trl 1.16.0's ``_call_ors_tool`` returns ``f"Error: {e}"`` for an exception and the tool's text otherwise: a tool that
answers ``ok: true`` with a text starting "Error: " took TRL's success path, and the adapter reports it as the answer
it is; a tool that raises (an SSE error event) took the exception path, and is reported as the error TRL showed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orsbench.clientcheck.episodes import Script, Step
from orsbench.clients.run import play
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.servers.launch import start
from orsbench.servers.user_app import AppTarget
from orsbench.verdict import Verdict

pytestmark = pytest.mark.skipif(not CLIENT_TARGETS["trl"].installed, reason="trl is not installed")

ENV = AppTarget.parse(str(Path(__file__).parent / "envs" / "error_text.py") + ":ErrorText")


def test_an_ok_answer_reading_error_is_a_success() -> None:
    server = start(ENV)
    try:
        script = Script("error-text", (Step("lookup", {"key": "x"}, "Error: no such key 'x'", reward=0.0), Step("submit", {"answer": "4"}, "right", reward=1.0)))
        outcome = play("trl", server, script, deadline=60)
    finally:
        server.stop()
    assert outcome.error is None, outcome.describe()
    assert outcome.outputs == ["Error: no such key 'x'", "right"] and outcome.reward == 1.0 and outcome.finished, outcome.describe()
    assert outcome.verdict == Verdict.WORKS or "client.env_name" in outcome.rules, outcome.describe()
    assert not outcome.problems, outcome.describe()


def test_a_raising_tool_is_trls_error_path() -> None:
    """tool-raises' second call raises (an error event): TRL hands the model "Error: ...", the adapter reports it."""
    from orsbench.clients.targets.trl_spec import watch_error_path

    class Session:
        def call_tool(self, name: str, args: dict) -> str:
            if name == "boom":
                raise RuntimeError("tool 'boom' raised")
            return "ok"

    class Rollout:
        _session = Session()

    raised = watch_error_path(Rollout)
    assert Rollout._session.call_tool("fine", {}) == "ok" and raised == []
    with pytest.raises(RuntimeError):
        Rollout._session.call_tool("boom", {})
    assert [str(e) for e in raised] == ["tool 'boom' raised"]
