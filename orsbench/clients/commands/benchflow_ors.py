"""benchflow 0.7.11's ORS seam under orsbench's adapter contract, run by the Python of the trainers' venv (>= 3.12).

    <venv>/bin/python orsbench/clients/commands/benchflow_ors.py

Why a file of its own: benchflow needs Python 3.12, orsbench runs on 3.11 too. This file imports nothing of
orsbench (like ``examples/adapters/adapter.mjs`` for Node): the ``benchflow`` client target
(:mod:`orsbench.clients.targets.benchflow`) runs it in the environment :mod:`orsbench.clients.interpreters`
builds, and ``orsbench check-client --client-cmd`` can run it too.

What benchflow's ORS path is, read from its wheel: benchflow ships no ORS session client (its hosted-env runner
refuses ``openreward:`` references: "recognized but not executable in this path yet"). Its ORS code is the reward
seam on either side of the session: ``benchflow.write_ors_tool_outputs_jsonl`` (``adapters/ors.py``, "the
runtime-side contract for producing that artifact from local or hosted ORS session output") turns the session's
tool outputs into ``trajectory/ors-rewards.jsonl``, and a task whose ``verifier/verifier.md`` selects an
``ors-episode`` strategy has ``Verifier.verify()`` read that file and take the terminal reward. So a benchflow user
plays the session with the openreward SDK and hands the outputs to benchflow; this adapter does the same:

* the session, as the openreward SDK's users write it for an environment server of their own (the openreward
  target's way, ``environments.get(name, base_url=URL)``): open it for (split, index) with the secrets, read the
  prompt, make each call, stop at ``finished``, leave the ``with`` block (which deletes the session); a call that
  raises ends the episode;
* each call's output as benchflow's docstring shapes it, ``{"tool", "reward", "finished"}``, written by
  ``benchflow.write_ors_tool_outputs_jsonl`` into a rollout folder (``RolloutPaths``);
* the episode graded by benchflow's own verifier: ``Verifier(Task(task_dir), RolloutPaths(rollout), sandbox)
  .verify()`` on a task whose ``verifier/verifier.md`` declares ``type: ors-episode`` over that file (the evidence
  is local: the sandbox is never asked for it). Its ``reward`` is what benchflow scores the rollout with.

What it writes (``docs/clients.md``): one line per call, ``{"tool", "text", "reward", "finished"}`` as the SDK
returned it, or ``{"error", "raised": true, "stage"}`` where the client raised; then benchflow's judgement — an
episode line ``{"episode_reward": R, "benchflow": "ors-episode"}`` or, where benchflow refuses the episode (a
reward that is null, non-finite or outside [0, 1]; no terminal reward), an error line with its words and
``stage`` ``benchflow-rewards`` (the conversion) or ``benchflow-verify`` (the verifier). Exit status 0 when
benchflow scored the episode, 1 when the client or benchflow failed it, 2 for a usage error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from command_contract import Out, episodes, runs  # a sibling (see its docstring): these adapters import nothing of orsbench

REQUIRED = ("ORSBENCH_URL", "ORSBENCH_ENV", "ORSBENCH_SCRIPT", "ORSBENCH_OUT")
#: Where benchflow's ``ors-episode`` strategy reads the rewards (the artifact its docs name), inside the rollout.
EVIDENCE = "trajectory/ors-rewards.jsonl"

#: The benchflow task the episode is verified under: a native ``task.md`` and a verifier package whose one strategy
#: is ``ors-episode`` over the rewards file, as benchflow's own tests and its ors-episode contract write it.
TASK_MD = "---\nschema_version: '1.3'\n---\n\n## prompt\n\nSolve the ORS environment's task with its tools.\n"
VERIFIER_MD = f"""---
verifier:
  name: orsbench-ors-episode
  default_strategy: ors
  strategies:
    ors:
      type: ors-episode
      inputs: [{EVIDENCE}]
      format: jsonl
---
"""


def text_of(blocks: Any) -> str:
    """The text blocks of a result, joined as a model would read them."""
    return "".join(getattr(block, "text", "") or "" for block in blocks)


def play_session(environ: dict[str, str], out: Out) -> list[dict[str, Any]] | None:
    """The session with the openreward SDK; the tool outputs for benchflow, or None when the client raised."""
    import openreward

    calls = json.loads(open(environ["ORSBENCH_SCRIPT"], encoding="utf-8").read())["calls"]
    secrets = json.loads(environ.get("ORSBENCH_SECRETS") or "{}") or None  # the SDK checks names even for {}
    split, index = environ.get("ORSBENCH_SPLIT") or "train", int(environ.get("ORSBENCH_INDEX") or 0)
    outputs: list[dict[str, Any]] = []
    stage = "session"
    try:
        environment = openreward.OpenReward().environments.get(environ["ORSBENCH_ENV"], base_url=environ["ORSBENCH_URL"])
        with environment.session(split=split, index=index, secrets=secrets) as session:
            stage = "prompt"
            session.get_prompt()
            stage = "call"
            for call in calls:
                if call.get("pause_s"):
                    time.sleep(float(call["pause_s"]))
                name = call["tool"]
                result = session.call_tool(name, dict(call.get("input") or {}))
                finished = bool(result.finished)
                out.write({"tool": name, "text": text_of(result.blocks), "reward": result.reward, "finished": finished})
                outputs.append({"tool": name, "reward": result.reward, "finished": finished})
                if finished:
                    break
            stage = "delete"
    except Exception as exc:  # noqa: BLE001 - what the client raised ends the episode
        out.write({"error": f"{type(exc).__name__}: {exc}"[:2000], "raised": True, "stage": stage})
        return None
    return outputs


def judge(outputs: list[dict[str, Any]], workdir: Path, out: Out) -> int:
    """benchflow's reward seam on the session's outputs: 0 when it scored the episode, 1 when it refused it."""
    import benchflow
    from benchflow.task import Task, Verifier
    from benchflow.task.paths import RolloutPaths

    task_dir = workdir / "task"
    (task_dir / "verifier").mkdir(parents=True)
    (task_dir / "task.md").write_text(TASK_MD)
    (task_dir / "verifier" / "verifier.md").write_text(VERIFIER_MD)
    rollout = RolloutPaths(workdir / "rollout")
    rollout.mkdir()
    stage = "benchflow-rewards"
    try:
        benchflow.write_ors_tool_outputs_jsonl(outputs, rollout.rollout_dir / EVIDENCE)
        stage = "benchflow-verify"
        result = asyncio.run(Verifier(Task(task_dir), rollout, None).verify())
    except Exception as exc:  # noqa: BLE001 - benchflow refuses the episode: its own words
        out.write({"error": f"benchflow refused the episode: {type(exc).__name__}: {exc}"[:2000], "raised": True, "stage": stage})
        return 1
    out.write({"episode_reward": result.rewards["reward"], "benchflow": "ors-episode"})
    return 0


def unwind_on_sigterm() -> None:
    """SIGTERM ends the episode as an exception does (``SystemExit(143)``), once, so the client's own cleanup runs on
    the way out — what a correct application around it does (docs/protocol.md §13.17); Python's default just dies."""

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main() -> int:
    environ = dict(os.environ)
    missing = [name for name in REQUIRED if not environ.get(name)]
    if missing:
        why = f"{', '.join(missing)} not set: run it under orsbench check-client or matrix"
        print(f"benchflow adapter: error: {why}", file=sys.stderr)
        return 2
    try:
        import benchflow.adapters.ors  # noqa: F401 - the code under test must be importable
        import openreward  # noqa: F401
    except ImportError as exc:
        print(f"benchflow adapter: error: benchflow or openreward is not installed in {sys.executable}: {exc}", file=sys.stderr)
        return 2
    out = Out(environ["ORSBENCH_OUT"])
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="orsbench-benchflow-"))
    unwind_on_sigterm()
    try:
        # ORSBENCH_RUNS (docs/protocol.md §13.16): the session and its judgement run that many times in this one
        # process, as a loop over runs calls them; a run that fails ends the loop, as it would end the user's.
        # ORSBENCH_EPISODES (§13.15): tasks INDEX .. INDEX+N-1 one by one, going on after one that fails; benchflow's
        # reward seam judges one rollout at a time, so no aggregate line is written here.
        first, played = int(environ.get("ORSBENCH_INDEX") or 0), 0
        for run in range(runs(environ)):
            code = 0
            for number in range(episodes(environ)):
                played += 1
                outputs = play_session({**environ, "ORSBENCH_INDEX": str(first + number)}, out)
                code = max(code, 1 if outputs is None else judge(outputs, workdir / f"play-{played}", out))
            if code:
                return code
        return 0
    except SystemExit:
        out.write({"error": "ended by SIGTERM before the episode's end", "raised": True})
        raise
    except Exception as exc:  # noqa: BLE001 - a crash of this adapter is reported, then exits 1
        out.write({"error": f"{type(exc).__name__}: {exc}", "raised": True})
        traceback.print_exc()
        return 1
    finally:
        out.handle.close()
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"benchflow adapter: {time.monotonic() - started:.2f}s", file=sys.stderr)


if __name__ == "__main__":
    sys.stdout.flush()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip atexit: the SDK's loop threads would otherwise delay the exit
