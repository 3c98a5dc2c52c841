"""inspect-openreward under a real ``inspect_ai.eval``, with a scripted offline model.

``openreward_dataset`` + ``openreward_solver`` + ``openreward_scorer``, and
Inspect's ``mockllm/model`` scripted to make the script's tool calls (usage set,
so it never fetches a tokenizer). Like an eager model it asks for the last call
once more after the script: a client must stop the loop on ``finished``.

Inspect shows each tool result to the model as a tool message; the reward and
``finished`` reach the eval only through the score, so the adapter records
them on the last call. What the model was shown as tools is kept in
``episode.extras["tools_seen"]`` (Inspect's ``ToolInfo`` dumps).
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode


def play(episode: AdapterEpisode) -> None:
    import openreward
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
    from inspect_openreward import openreward_dataset, openreward_scorer, openreward_solver

    environment = openreward.OpenReward().environments.get(episode.env)
    episode.stage = "dataset"
    dataset = openreward_dataset(environment, episode.split, limit=episode.index + 1)
    calls = list(episode.calls)
    planned = [*calls, calls[-1]] if calls else []  # the last call once more: the loop must stop on finished
    turns = iter(planned)
    seen: list[Any] = []

    def policy(messages: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        seen.append([tool.model_dump(exclude_none=True) for tool in tools])
        call = next(turns, None)
        if call is None:
            output = ModelOutput.from_content("mockllm/model", "done")
        else:
            output = ModelOutput.for_tool_call("mockllm/model", call.tool, dict(call.input))
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    episode.stage = "eval"
    with tempfile.TemporaryDirectory(prefix="orsbench-inspect-") as logs:
        task = Task(dataset=dataset[episode.index :], solver=openreward_solver(environment), scorer=openreward_scorer())
        [log] = inspect_eval(
            task,
            model=get_model("mockllm/model", custom_outputs=policy),
            log_dir=logs,
            display="none",
            max_samples=1,
            fail_on_error=False,
            score_display=False,
        )
        sample = (log.samples or [None])[0]
    episode.extras["tools_seen"] = seen[0] if seen else []
    if sample is None:
        raise RuntimeError(f"the eval ended {log.status} without a sample: {log.error.message if log.error else ''}")
    answered = [m for m in sample.messages if isinstance(m, ChatMessageTool) and m.error is None]
    score = next(iter((sample.scores or {}).values()), None)
    meta = (score.metadata or {}) if score is not None else {}
    episode.stage = "call"
    for number, message in enumerate(answered, 1):
        last = number == len(answered)
        episode.record(message.function or "", message.text, meta.get("reward") if last else None, bool(meta.get("finished")) and last)
    if sample.error is not None:
        episode.stage = "sample"
        raise RuntimeError(f"sample error: {sample.error.message}")
    episode.stage = None


register(
    ClientTarget(
        "inspect",
        "inspect-openreward",
        "inspect-openreward (Inspect eval)",
        play,
        modules=("openreward", "inspect_ai", "inspect_ai.model", "inspect_openreward"),
        extra="inspect",
        startup_s=20.0,
        concurrency=2,
        consumer=Consumer(
            "last",
            no_reward="zero",
            images=False,
            source="inspect-openreward 0.3.0: _solver._wrap_tool keeps each non-null reward (the last wins), "
            "openreward_scorer scores 0.0 without one; a call that raises is a sample error; a tool result shows "
            "its text blocks only (the prompt's images do reach the model)",
        ),
    ),
    origin=__name__,
)
