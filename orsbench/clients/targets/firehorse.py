"""firehorse-cli through its own command line: ``firehorse --agent react --model anthropic/...`` on the scripted model.

What a firehorse user runs to evaluate an environment, with the LLM replaced by
orsbench's scripted model (``ORSBENCH_MODEL_URL``): firehorse's CLI parses the
flags, its orchestrator (``run_evaluation``) counts the split's tasks, asks the
platform which secrets the environment needs, lists the tools, fetches the task
and runs one trial (``run_trial``: a session, the prompt, the tools); its
``react`` agent then drives that session through the Anthropic Messages API —
each reply of the scripted model a tool call of the script — until the
environment says ``finished`` or the model stops calling tools. Nothing of
firehorse is re-implemented here: the adapter builds the command line and
reads what firehorse wrote (``--output-dir``: the trial's JSONL trajectory and
``run_result.json``).

How the flags are chosen, as a firehorse user would for an ORS server on this
machine:

* ``--env orsbench/<env>`` — firehorse requires ``<namespace>/<environment>``; the
  namespace travels only as the ``X-Deployment`` label, the name picks nothing
  (the SDK's paths are bare, see the ``env-name-not-sent`` defect);
* ``--split``, ``--skip-tasks <index> --max-tasks 1`` — the one task of the case;
* ``--provider-url`` — the scripted model (Anthropic's SDK base URL), with a placeholder key;
* ``--no-logging`` — no rollout upload to openreward.ai (offline);
* ``--secret NAME=VALUE`` — in this process's argument list, never on a command line (a firehorse user's own
  command line carries it: the ``firehorse-secret-on-command-line`` defect, seen through firehorse's console script).

firehorse takes no server URL: the openreward SDK's own variables say where the
environment is, so the adapter sets ``OPENREWARD_SESSION_URL`` to the case's URL
(the ``url-only`` case gives nothing else). ``OPENREWARD_API_URL`` is the OpenReward *platform*, which
firehorse asks for the environment's required secrets before any trial
(``firehorse-needs-platform``): the scripted model's server stands in for it.

Each call's line comes from firehorse's own trajectory: a ``tool_result`` event
(the tool, reward, finished) and the ``tool_results`` message that carries what
the model was shown; a result firehorse showed the model as ``Error: ...``
(``is_error``: a call that raised anything but ToolFailed or SessionTerminatedError) is
passed on untranslated — the text the model read, ``"is_error": true`` beside it — for
firehorse's loop goes on after it and its trial's result never mentions it, except
after the finishing call: firehorse's Anthropic loop runs the rest of that reply
(``firehorse-runs-the-whole-reply``, §13.14), the trial keeps its reward, and the
refusal is reported as what the model was shown (``after_finished``).
A trial that ended with an error (``run_result.json``) ends the episode with it.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
from urllib.parse import urlsplit, urlunsplit
from typing import TYPE_CHECKING, Any

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

#: The namespace of ``--env``: firehorse requires one, the server never sees it but as a label.
NAMESPACE = "orsbench"
#: The model firehorse's react agent is given: its Anthropic provider, on the scripted model.
MODEL = "anthropic/scripted"


def command_line(episode: AdapterEpisode, output_dir: str) -> list[str]:
    """The ``firehorse`` arguments for one episode (secrets included: this list never reaches a process's command line)."""
    provider_url = episode.model_url.removesuffix("/").removesuffix("/v1")  # Anthropic's SDK appends /v1/messages
    argv = [
        "--env", f"{NAMESPACE}/{episode.env}",
        "--agent", "react",
        "--model", MODEL,
        "--provider-url", provider_url,
        "--split", episode.split,
        "--skip-tasks", str(episode.index),
        "--max-tasks", str(episode.episodes),
        "--run-name", "orsbench",
        "--no-logging",
        "--output-dir", output_dir,
    ]  # fmt: skip
    for name, value in episode.secrets.items():
        argv += ["--secret", f"{name}={value}"]
    return argv


def platform_url(model_url: str) -> str:
    """The OpenReward platform stand-in: the scripted model's server root (it answers ``required-secrets``)."""
    parts = urlsplit(model_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _events(output_dir: str, trial_id: Any = None) -> list[dict[str, Any]]:
    """A trial's trajectory events, in order (firehorse writes ``trial_<id>.jsonl``); every trial's without ``trial_id``."""
    events = []
    pattern = "trial_*.jsonl" if trial_id is None else f"trial_{trial_id}.jsonl"
    for path in sorted(glob.glob(os.path.join(output_dir, pattern))):
        with open(path, encoding="utf-8") as handle:
            events += [json.loads(line) for line in handle if line.strip()]
    return events


def _trial_id(trial: dict[str, Any]) -> Any:
    """The id firehorse's react agent names a trial's trajectory by (``trial_<id>.jsonl``)."""
    spec = trial.get("task_spec") or {}
    return spec.get("id", spec.get("index", trial.get("task_index")))


def _text(content: Any) -> str:
    """A tool result's content as the model read it: its text blocks joined (firehorse shows images as blocks)."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict) and block.get("type") == "text")


def record_trajectory(episode: AdapterEpisode, events: list[dict[str, Any]]) -> None:
    """One contract line per call firehorse made, from its trajectory (in the order the model made them)."""
    names: dict[str, str] = {}
    scored: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("type") == "assistant":
            for block in (event.get("raw") or {}).get("content") or []:
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
        elif event.get("type") == "tool_result":
            scored[event.get("tool_use_id", "")] = event
        elif event.get("type") == "tool_results":
            for block in (event.get("raw") or {}).get("content") or []:
                use_id = block.get("tool_use_id", "")
                tool = names.get(use_id, "")
                shown = _text(block.get("content"))
                if episode.finished and block.get("is_error"):  # a call after the finishing one (the same reply's)
                    episode.after_finished(tool, shown, is_error=True)
                    continue
                if block.get("is_error"):
                    # firehorse's own output, untranslated: the model was shown this text as a tool result (is_error) and
                    # the trial went on, its result (run_result.json) saying nothing of it (agents/react.py:433-444, 458).
                    episode.record(tool, shown, None, False, is_error=True)
                    continue
                if use_id not in scored:  # a result with no tool_result event: the trajectory lacks what firehorse did
                    episode.error(f"{tool}: firehorse's trajectory has no tool_result event for the result it showed: {shown}", raised=False)
                    continue
                result = scored[use_id]
                episode.record(tool, shown, result.get("reward"), bool(result.get("finished")))


def play(episode: AdapterEpisode) -> None:
    from firehorse.cli import main as firehorse

    from orsbench.clients.transcript import ClientExited, ClientReported, UsageError

    if not episode.model_url:
        raise UsageError("firehorse plays through a model: ORSBENCH_MODEL_URL is not set (orsbench check-client and matrix set it)")
    os.environ["OPENREWARD_SESSION_URL"] = episode.url  # firehorse takes no URL: the SDK's variable is how it is told
    os.environ["OPENREWARD_API_URL"] = platform_url(episode.model_url)
    with tempfile.TemporaryDirectory(prefix="orsbench-firehorse-") as output_dir:
        episode.stage = "run"
        code = firehorse(command_line(episode, output_dir))
        episode.stage = "trial"
        try:
            with open(os.path.join(output_dir, "run_result.json"), encoding="utf-8") as handle:
                summary = json.load(handle)
        except FileNotFoundError:
            record_trajectory(episode, _events(output_dir))
            raise ClientReported(f"firehorse exited {code} without a run_result.json") from None
        trials = summary.get("trials") or []
        if episode.episodes == 1 or len(trials) <= 1:
            record_trajectory(episode, _events(output_dir))
        else:  # ORSBENCH_EPISODES (§13.15): one trial per task, each trajectory in task order, each failure said
            failed = 0
            for trial in sorted(trials, key=lambda t: t.get("task_index", 0)):
                record_trajectory(episode, _events(output_dir, _trial_id(trial)))
                if trial.get("error"):
                    failed += 1
                    episode.error(f"firehorse: trial failed (exit {code}): {trial['error']}", raised=False)
            # firehorse's own aggregate, as run_result.json reports it: avg_reward, over the trials that have a reward.
            averaged = sum(1 for t in trials if t.get("final_reward") is not None)
            episode.aggregate(summary.get("avg_reward"), averaged, firehorse="run_result.json avg_reward", n_failed=summary.get("n_failed"))
            if failed:
                raise ClientExited(1)
    if not trials:
        raise ClientReported(f"firehorse ran no trial (exit {code}, {summary.get('n_tasks')} task(s))")
    if trials[0].get("error"):
        raise ClientReported(f"firehorse: trial failed (exit {code}): {trials[0]['error']}")
    episode.stage = None


register(
    ClientTarget(
        "firehorse",
        "firehorse-cli",
        "firehorse-cli (its CLI, react agent, scripted model)",
        play,
        plays_episodes=True,
        modules=("openreward", "anthropic", "firehorse.cli", "firehorse.orchestrator", "firehorse.agents.react"),
        # firehorse's agent registry imports every agent; the Anthropic client its HTTP stack on first use.
        warm=(
            "firehorse.agents.codex", "firehorse.agents.gemini", "firehorse.agents.hermes", "firehorse.agents.resum",
            "firehorse.agents.claude_code", "firehorse.rollout_replay", "httpcore2", "truststore", "anyio._backends._asyncio",
        ),  # fmt: skip
        extra="firehorse",
        takes_model=True,
        startup_s=10.0,
        concurrency=2,
        listings=("num_tasks", "task", "tools"),  # the orchestrator's task selection, then the trial's tool list
        consumer=Consumer(
            "last",
            images=False,
            failed_call="error result",
            source="firehorse-cli 0.1.4: the react agent keeps last_reward, the last non-null reward (the trial's "
            "final_reward, null without one); run_trial hands the model the prompt's text blocks only (tool results "
            "keep their images on the Anthropic path); a call that raises reaches the model as an is_error "
            "'Error: ...' tool result and the loop goes on (ToolFailed and SessionTerminatedError end the trial); "
            "results.RunSummary.avg_reward is the mean of the trials' rewards that are not None: a failed trial is "
            "left out of it (counted in n_failed only)",
            aggregate="scored",
        ),
    ),
    origin=__name__,
)
