"""platoon 0.4.0's ORS client under orsbench's adapter contract, run by platoon's own interpreter (Python >= 3.12).

    <venv>/bin/python orsbench/clients/commands/platoon_ors.py

Why a file of its own: platoon needs Python 3.12, orsbench runs on 3.11 too, so platoon cannot be imported
beside the other client targets. This file imports nothing of orsbench (like ``examples/adapters/adapter.mjs``
for Node): the ``platoon`` client target (:mod:`orsbench.clients.targets.platoon`) runs it in the virtual
environment :mod:`orsbench.clients.interpreters` builds, and ``orsbench check-client --cmd`` can run it too.

It drives platoon the way platoon's rollout (``platoon.harness.rollout.run_harness_rollout``) does, with the
script in the model's place:

* the service from the URI a config names, ``get_service("ors+http://HOST:PORT/ENV", secrets=...)``;
* the task by its id, ``service.get_task("<split>:<index>")``, then ``service.open(task, rollout_id=...)``;
* the agent's tool plane: ``session.tools()`` is what the agent sees, a call to a tool it does not see is
  refused without reaching the env (``platoon.harness.inline.InlineAgentContext.call_tool``), every other call
  is ``session.call_tool`` (a call that raises becomes an error result, as ``platoon.gateway.mcp`` does);
* the script goes on after an error result (platoon shows it to the model, which carries on), and after a
  ``finished`` result too where it goes on (§13.14): platoon's harness runs whatever calls the model makes, and its
  session's finish latch (``OrsSession._refusal``: ``environment_already_finished``) answers them without reaching
  the env — each such answer is written as platoon gave it, untranslated: ``{"tool", "text", "reward", "finished",
  "is_error", "after_finished": true}`` (its latch repeats ``finished: true`` and the last reward, flagged ``is_error``);
* SIGTERM is handled as platoon's rollout worker handles it: the sessions still open are deleted, then the episode
  ends (:func:`unwind_on_sigterm`, docs/protocol.md §13.17);
* the episode is graded the rollout's way (``platoon.harness.inline.grade_session``, written out in :func:`grade`:
  ``platoon.harness`` imports the model gateway, which needs ``tinker`` and torch) and the session closed.

What it writes (``docs/clients.md``): one line per call, ``{"tool", "text", "reward", "finished"}`` with the text
blocks' text as platoon hands them to the model, or ``{"tool", "error", "raised": false, "reason"}`` for an error
result (platoon reports failures as results, never by raising); then, after the grade, an episode line::

    {"episode_reward": 1.0, "outcome": "scored", "reason": null, "failure_kind": null}

``episode_reward`` is what platoon trains on (``Outcome.reward``: null for an outcome that does not train, which
is also reported as an error line: the trainer drops that rollout). Exit status 0 when the grade is ``scored``,
1 when it is not, 2 for a usage error.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

from command_contract import Out, play_episodes  # a sibling (see its docstring): these adapters import nothing of orsbench

REQUIRED = ("ORSBENCH_URL", "ORSBENCH_ENV", "ORSBENCH_SCRIPT", "ORSBENCH_OUT")


def service_uri(url: str, env: str) -> str:
    """The URI a platoon config names an ORS env server by: ``ors+http://HOST:PORT/ENV``."""
    parts = urlsplit(url)
    return f"ors+{parts.scheme}://{parts.netloc}/{quote(env, safe='')}"


def text_of(result: Any) -> str:
    """The text blocks of a platoon ``ToolResult``, in order, as the model reads them (images are blocks of their own)."""
    return "".join(str(block.get("text", "")) for block in result.content if block.get("type") == "text")


async def open_session(environ: dict[str, str], out: Out) -> tuple[Any, Any] | None:
    """The task and the session platoon opens for task INDEX of SPLIT, as its ors+http service does; ``None`` when
    it fails (the error line written, with platoon's ``failure_kind``: the rollout fails there)."""
    from platoon.envs.service import get_service

    secrets = json.loads(environ.get("ORSBENCH_SECRETS") or "{}")
    split, index = environ.get("ORSBENCH_SPLIT") or "train", int(environ.get("ORSBENCH_INDEX") or 0)
    service = get_service(service_uri(environ["ORSBENCH_URL"], environ["ORSBENCH_ENV"]), secrets=secrets)
    try:
        task = await service.get_task(f"{split}:{index}")
        session = await service.open(task, rollout_id=f"orsbench-{uuid.uuid4().hex[:12]}")
    except Exception as exc:  # noqa: BLE001 - the rollout fails here: platoon's EnvSetupError and its kind
        kind = getattr(exc, "failure_kind", None)
        out.write({"error": f"{type(exc).__name__}: {exc}", "raised": True, "stage": "session", "failure_kind": kind})
        return None
    return task, session


async def play(environ: dict[str, str], out: Out) -> int:
    calls = json.loads(open(environ["ORSBENCH_SCRIPT"], encoding="utf-8").read())["calls"]
    opened = await open_session(environ, out)
    if opened is None:
        return 1
    _, session = opened
    try:
        visible = {tool.name for tool in await session.tools()}
        finished = False
        for call in calls:
            if call.get("pause_s"):
                await asyncio.sleep(float(call["pause_s"]))
            name, arguments = call["tool"], dict(call.get("input") or {})
            result = await _call(session, visible, name, arguments)
            if finished:  # platoon's finish latch answers it (environment_already_finished) without reaching the env
                # platoon's own answer, untranslated: its latch's result carries finished and the last reward again,
                # flagged is_error (platoon/envs/ors/session.py:703 and _bridge_error) — a call that never ran.
                line = {"tool": name, "text": text_of(result), "reward": result.reward, "finished": bool(result.finished)}
                out.write({**line, "is_error": bool(result.is_error), "after_finished": True})
                continue
            if result.is_error:
                reason = (result.metadata or {}).get("error_reason")
                out.write({"tool": name, "error": result.as_text(), "raised": False, "reason": reason})
            else:
                images = sum(1 for block in result.content if block.get("type") == "image")
                line = {"tool": name, "text": text_of(result), "reward": result.reward, "finished": bool(result.finished)}
                out.write({**line, **({"images": images} if images else {})})
            finished = finished or bool(result.finished)
        outcome = await grade(session)
    finally:
        await session.close()
    if not outcome.trainable:  # the trainer drops the rollout: the failure platoon reports
        why = f"the rollout is not trained: {outcome.status} ({outcome.failure_kind}): {outcome.reason}"
        out.write({"error": why, "raised": False, "stage": "grade"})
    grade_line = {"outcome": outcome.status, "reason": outcome.reason, "failure_kind": outcome.failure_kind}
    out.write({"episode_reward": outcome.reward, **grade_line})
    return 0 if outcome.trainable else 1


async def grade(session: Any) -> Any:
    """``platoon.harness.inline.grade_session``: the session's grade, failing closed (a grader that raises is an
    infra error, never a score). Written out here because ``platoon.harness`` imports platoon's model gateway,
    which needs ``tinker`` (and torch): not part of the ORS path."""
    from platoon.envs.service import Outcome

    try:
        return await session.grade()
    except Exception as exc:  # noqa: BLE001 - as grade_session does
        return Outcome.infra(f"unexpected:{type(exc).__name__}", reason=f"grading raised: {exc}")


async def _call(session: Any, visible: set[str], name: str, arguments: dict[str, Any]) -> Any:
    """One call through platoon's tool plane, as an inline agent makes it."""
    from platoon.envs.service import ToolResult

    if name not in visible:
        return ToolResult.text(f"Tool {name!r} is not available to this agent (tool access: all).", is_error=True)
    try:
        return await session.call_tool(name, arguments)
    except Exception as exc:  # noqa: BLE001 - platoon.gateway.mcp turns a raising call into an error result
        return ToolResult.text(f"Tool {name!r} failed: {type(exc).__name__}: {exc}", is_error=True)


#: Seconds the SIGTERM handler gives platoon's session deletes (its rollout worker's SIGTERM_CLEANUP_SECONDS).
SIGTERM_CLEANUP_S = 5.0


def unwind_on_sigterm() -> None:
    """On SIGTERM, what platoon's rollout worker does (``platoon.train.tinker.workers.entrypoint``): refuse further
    calls and take the sessions still open (``platoon.envs.ors.cleanup.shut_down``), delete them on a thread and loop
    of their own (``delete_orphaned_sessions``), then end the episode as an exception does (``SystemExit(143)``).
    docs/protocol.md §13.17; Python's default SIGTERM would just die, the sessions left open."""
    import threading

    from platoon.envs.ors.cleanup import delete_orphaned_sessions, shut_down

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sessions = shut_down()
        if sessions:
            deletes = threading.Thread(
                target=lambda: asyncio.run(delete_orphaned_sessions(sessions, SIGTERM_CLEANUP_S)), daemon=True
            )
            deletes.start()
            deletes.join(SIGTERM_CLEANUP_S + 1.0)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main() -> int:
    # platoon's own aggregate lives in its eval runner (platoon/eval/runner.py), which the ors+http service does not
    # drive: no aggregate line is written here.
    return play_episodes("platoon", play, required=REQUIRED, client="platoon.envs.ors",
                         not_importable="platoon is not installed", on_start=unwind_on_sigterm)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
