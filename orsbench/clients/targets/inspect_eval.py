"""inspect-openreward through ``inspect eval``: Inspect's own CLI, its OpenAI provider, the scripted model.

What an inspect-openreward user runs, with the LLM replaced by orsbench's
scripted model (``ORSBENCH_MODEL_URL``)::

    inspect eval orsbench/clients/targets/inspect_task.py@ors_episode -T url=... -T env=... \\
        --model openai/scripted --model-base-url $ORSBENCH_MODEL_URL -M responses_api=false --log-format json

Inspect's command line loads the task file (:mod:`orsbench.clients.targets.inspect_task`:
``openreward_dataset`` + ``openreward_solver`` + ``openreward_scorer``), runs the
eval, and its ``openai`` provider sends each turn to the scripted model as a
Chat Completions request (``responses_api=false``: Inspect takes a model name it
does not know for a frontier one and would use the Responses API, after a
"hello, world" probe of reasoning summaries) — tools converted by inspect-openreward
(``sanitize_tool_schema(..., "openai")`` into ``ToolParams``) and by Inspect's
provider, exactly as a real model would receive them. The scripted model makes
the script's calls, then says it is done; Inspect's ``generate(tool_calls="loop")``
knows nothing of ``finished``, so it asks the model once more after the
finishing call (the model answers with text, and the loop ends).

The eval runs in this process (Inspect's click command, called as ``inspect``
calls it), so the matrix's forked children skip Inspect's import. What it did
is read back from its own log (``--log-dir``, JSON): each tool message the
model was shown, the score's reward and ``finished``. The reward and
``finished`` reach the log only through the score, so they are reported on the
last call — and the target's consumer profile says so once (``unsurfaced``): per call,
inspect shows its user no reward and no ``finished``, so ``client.reward_as_sent``
judges the episode's reward and ``finished`` on the last call and is not applicable
call by call. What the model was offered as tools comes from the scripted model
(``ClientOutcome.tools_seen``).
"""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

#: The task file ``inspect eval`` is given (a user's own, as inspect-openreward's README writes it).
TASK_FILE = Path(__file__).with_name("inspect_task.py")
#: The model: Inspect's OpenAI provider (Chat Completions) on the scripted model.
MODEL = "openai/scripted"


def command_line(episode: AdapterEpisode, log_dir: str) -> list[str]:
    """The ``inspect`` arguments for one episode."""
    return [
        "eval", f"{TASK_FILE}@ors_episode",
        "-T", f"url={episode.url}", "-T", f"env={episode.env}", "-T", f"split={episode.split}", "-T", f"index={episode.index}",
        *(["-T", f"count={episode.episodes}"] if episode.episodes > 1 else []),
        "--model", MODEL,
        "--model-base-url", episode.model_url,
        "-M", "responses_api=false",
        "--log-dir", log_dir,
        "--log-format", "json",
        "--display", "none",
        "--max-samples", "1",
        "--no-fail-on-error",
        "--no-score-display",
        "--ctl-server", "false",  # no per-episode control socket for `inspect ctl`: nothing here attaches to it
    ]  # fmt: skip


def read_model_database() -> None:
    """Read Inspect's model database once, before the matrix forks its episodes.

    Every eval looks its model up there (``inspect_ai.model._model_info``), and the first lookup in a process
    parses the database's YAML files in pure Python: about half of an episode's CPU (0.5 s of some 0.9 s), paid
    again by every forked child of a parent that never looked a model up. Nothing else is cached here.
    """
    try:
        from inspect_ai.model._model_info import _get_lookup_index, _get_model_info_db
    except ImportError:  # Inspect moved it: each episode reads the database itself, as before
        return
    _get_model_info_db()
    _get_lookup_index()


def play(episode: AdapterEpisode) -> None:
    from inspect_ai._cli.main import inspect as inspect_cli
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ChatMessageTool

    from orsbench.clients.transcript import ClientExited, ClientReported, UsageError

    if not episode.model_url:
        raise UsageError("inspect plays through a model: ORSBENCH_MODEL_URL is not set (orsbench check-client and matrix set it)")
    with tempfile.TemporaryDirectory(prefix="orsbench-inspect-") as logs:
        episode.stage = "eval"
        try:
            inspect_cli.main(command_line(episode, logs), prog_name="inspect", auto_envvar_prefix="INSPECT", standalone_mode=True)
            code = 0
        except SystemExit as exc:  # how a click command ends
            code = exc.code if isinstance(exc.code, int) else 1
        found = sorted(glob.glob(os.path.join(logs, "*.json")))
        if not found:
            raise ClientReported(f"inspect eval exited {code} without writing a log")
        log = read_eval_log(found[-1])
    samples = list(log.samples or [])
    if not samples:
        where = "dataset" if log.error and "dataset" in (log.error.traceback or "") else "eval"
        episode.stage = where
        raise ClientReported(f"inspect eval exited {code}, {log.status} without a sample: {log.error.message if log.error else ''}")
    errors = []
    for sample in samples:  # one per episode (ORSBENCH_EPISODES: the eval's samples index .. index+N-1), in the log's order
        answered = [m for m in sample.messages if isinstance(m, ChatMessageTool) and m.error is None]
        score = next(iter((sample.scores or {}).values()), None)
        meta = (score.metadata or {}) if score is not None else {}
        episode.stage = "call"
        for number, message in enumerate(answered, 1):
            last = number == len(answered)
            episode.record(message.function or "", message.text, meta.get("reward") if last else None, bool(meta.get("finished")) and last)
        if sample.error is not None:
            episode.stage = "sample"
            errors.append(f"sample error: {sample.error.message}")
            if len(samples) > 1:
                episode.error(errors[-1], raised=False)
    if episode.episodes > 1:
        # Inspect's own aggregate, as `inspect eval` reports it: the scorer's mean, over the samples it scored.
        scores = log.results.scores if log.results is not None else []
        mean = scores[0].metrics.get("mean") if scores else None
        episode.aggregate(mean.value if mean is not None else None, scores[0].scored_samples if scores else 0, inspect="results.scores[0]")
    if errors:
        if len(samples) > 1:
            raise ClientExited(1)  # each failed sample's error is written above
        raise ClientReported(errors[0])
    episode.stage = None


register(
    ClientTarget(
        "inspect",
        "inspect-openreward",
        "inspect-openreward (inspect eval, openai provider, scripted model)",
        play,
        plays_episodes=True,
        modules=("openreward", "openai", "inspect_ai", "inspect_ai.model", "inspect_ai._cli.main", "inspect_openreward"),
        # What an eval imports on its way (the openai provider, the ACP server, the log's markdown): some 15 s of
        # imports per episode on a busy machine, done once before the matrix forks.
        warm=(
            "inspect_ai.model._providers.openai", "inspect_ai.model._openai_responses", "inspect_ai.agent._acp.server",
            "inspect_ai.hooks", "inspect_ai._cli._scanner", "inspect_ai.solver._transcript", "markdown_it", "linkify_it",
            "numpy", "openai.resources.chat", "openai.pagination", "rich.markdown", "truststore", "httpcore2", "pydantic.v1",
            "anyio._backends._asyncio", "inspect_ai._control.scoring", "inspect_ai.hooks._startup",
            # and what every episode still imported (read from a forked episode's sys.modules): ~0.3 s of CPU each
            "inspect_ai.model._providers.anthropic", "inspect_ai.model._providers.none", "inspect_ai._control.config_record",
            "inspect_ai.agent._acp._client_registry", "inspect_ai.agent._acp.transport_live", "openai.resources.chat.completions",
            "openai.lib._chat_completion_resources", "openai.types.chat.completions.message_list_params", "rich._emoji_codes",
            "fsspec.implementations.chained",
        ),  # fmt: skip
        warm_up=read_model_database,
        extra="inspect",
        takes_model=True,
        startup_s=20.0,
        concurrency=2,
        listings=("tasks",),  # the dataset, before any sample
        consumer=Consumer(
            "last",
            no_reward="zero",
            images=False,
            source="inspect-openreward 0.3.0: _solver._wrap_tool keeps each non-null reward (the last wins), "
            "openreward_scorer scores 0.0 without one; a call that raises is a sample error; a tool result shows "
            "its text blocks only (the prompt's images do reach the model); over several samples the eval's "
            "results.scores mean is over the scored samples only: an errored sample (--no-fail-on-error) is left out",
            aggregate="scored",
            # What an inspect user reads is the eval log: the score, not the tool calls' rewards and finished flags.
            unsurfaced=(
                ("reward", "inspect-openreward 0.3.0 _solver.py:157-158 keeps only the latest non-null reward in "
                 "state.metadata, and _scorer.py:23-29 scores that: the log shows the episode's reward, on its score"),
                ("finished", "_solver.py:159-160 latches state.metadata's openreward_finished, read by _scorer.py:24: "
                 "the log shows whether the episode finished, on its score"),
            ),
        ),
    ),
    origin=__name__,
)
