"""Supervised warm-up: teach a random policy the tool-call format before GRPO.

A policy with random weights never writes ``<tool_call>{...}</tool_call>``, so
GRPO would see no tool call, no reward and no gradient. About a hundred steps
of plain next-token training on scripted episodes fix that. The episodes are
rendered exactly as GRPOTrainer renders its prompts (the same tool methods, the
same training chat template), and the loss covers only the assistant turns.

The scripts are deliberately *imperfect*: each final answer is right with
probability ``correct_fraction`` and otherwise another task's answer. A policy
that always wins (or always loses) gives every rollout of a group the same
reward, hence zero advantage and no parameter update; a mixed policy gives
GRPO something to learn from in the first step.

Tool results in the scripts come from the scenario's own code
(``orsbench.scenarios``), run in-process, so the warm-up never touches the
server and the server's call counters measure GRPO alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbench.protocol import JSON
from orsbench.scenarios import Episode, Scenario

Call = tuple[str, JSON]
#: A script picks the next call (or ``None``: done) from the task, the results so far, all training tasks,
#: a seeded RNG and the probability of answering right.
Script = Callable[[JSON, list[str], list[JSON], random.Random, float], "Call | None"]

FINAL_MESSAGE = "done"
#: Bump when the training loop changes, so stale warm-up checkpoints are not reused.
WARMUP_VERSION = 1


@dataclass(frozen=True)
class WarmupConfig:
    """How long and how hard to pre-train the tool-call format."""

    steps: int = 100
    batch_size: int = 8
    learning_rate: float = 5e-3
    #: Scripted episodes to draw (cycled through during training).
    episodes: int = 96
    #: Probability that a script's final answer is right.
    correct_fraction: float = 0.5
    seed: int = 0


# -- scripts: one per scenario ------------------------------------------------
def _other(tasks: list[JSON], task: JSON, key: str, rng: random.Random) -> Any:
    values = sorted({t[key] for t in tasks if t[key] != task[key]}, key=str)
    return rng.choice(values) if values else task[key]


def _echo(task: JSON, results: list[str], tasks: list[JSON], rng: random.Random, p: float) -> Call | None:
    if results:
        return None
    text = task["target"] if rng.random() < p else _other(tasks, task, "target", rng)
    return ("echo", {"text": text})


def _sparse_reward(task: JSON, results: list[str], tasks: list[JSON], rng: random.Random, p: float) -> Call | None:
    from orsbench.scenarios.sparse_reward import digits

    if not results:
        return ("reveal", {"position": 0})
    if len(results) == 1:
        total = sum(digits(task))
        if rng.random() >= p:
            total += rng.choice((-3, -2, -1, 1, 2, 3))
        return ("submit", {"total": total})
    return None


def _task_tool(task: JSON, results: list[str], tasks: list[JSON], rng: random.Random, p: float) -> Call | None:
    if not results:
        kind = task["kind"]
        if kind == "add":
            a, b = map(int, re.findall(r"-?\d+", task["question"])[:2])
            return ("add", {"a": a, "b": b})
        if kind == "lookup":
            return ("lookup", {"key": re.search(r"'([^']*)'", task["question"]).group(1)})
        return (kind, {})
    if len(results) == 1:
        value = task["answer"] if rng.random() < p else _other(tasks, task, "answer", rng)
        return ("answer", {"value": value})
    return None


SCRIPTS: dict[str, Script] = {"echo": _echo, "sparse-reward": _sparse_reward, "task-tool": _task_tool}


def script_for(scenario_name: str) -> Script:
    try:
        return SCRIPTS[scenario_name]
    except KeyError:
        raise ValueError(f"no warm-up script for scenario {scenario_name!r}; scenarios with one: {', '.join(SCRIPTS)}") from None


# -- episodes -------------------------------------------------------------------
def run_tool(scenario: Scenario, episode: Episode, name: str, args: JSON) -> str:
    """Run one tool in-process and return the text the TRL adapter would hand the model."""
    tool = scenario.session_tools(episode.task)[name]
    params = tool.params.model_validate(args) if tool.params is not None else None
    result = tool.fn(scenario, episode, params)
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    text = "\n".join(b["text"] for b in result.blocks if b.get("type") == "text" and b.get("text"))
    return text or "(no output)"  # the adapter's placeholder for an empty result


def scripted_episode(scenario: Scenario, task: JSON, tasks: list[JSON], rng: random.Random, p: float) -> list[JSON]:
    """One conversation: the prompt, the scripted tool calls with their real results, a closing message."""
    script = script_for(scenario.name)
    episode = Episode(scenario, dict(task), split="train")
    prompt = "\n".join(b["text"] for b in scenario.prompt(episode) if b.get("type") == "text")
    messages: list[JSON] = [{"role": "user", "content": prompt}]
    results: list[str] = []
    while (call := script(task, results, tasks, rng, p)) is not None:
        name, args = call
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}],
            }
        )
        results.append(run_tool(scenario, episode, name, args))
        messages.append({"role": "tool", "name": name, "content": results[-1]})
    messages.append({"role": "assistant", "content": FINAL_MESSAGE})
    return messages


def scripted_episodes(scenario: Scenario, tasks: list[JSON], config: WarmupConfig) -> list[list[JSON]]:
    """``config.episodes`` conversations, cycling over ``tasks`` in a seeded order."""
    rng = random.Random(config.seed)
    return [
        scripted_episode(scenario, tasks[i % len(tasks)], tasks, rng, config.correct_fraction) for i in range(config.episodes)
    ]


# -- training ---------------------------------------------------------------------
@dataclass
class WarmupResult:
    path: Path
    cached: bool
    seconds: float
    losses: list[float]

    def summary(self) -> JSON:
        return {
            "cached": self.cached,
            "seconds": round(self.seconds, 2),
            "first_loss": self.losses[0] if self.losses else None,
            "final_loss": self.losses[-1] if self.losses else None,
        }


def encode(tokenizer, episodes: list[list[JSON]], tools: list, chat_template: str) -> list[tuple[list[int], list[int]]]:
    """Token ids and assistant-token masks, rendered with the template GRPOTrainer will use."""
    encoded = []
    for messages in episodes:
        out = tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            chat_template=chat_template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        if not any(out["assistant_masks"]):
            raise ValueError("the chat template marked no assistant tokens; it needs {% generation %} blocks")
        encoded.append((list(out["input_ids"]), list(out["assistant_masks"])))
    return encoded


def warm_up(
    base_path: Path,
    encoded: list[tuple[list[int], list[int]]],
    config: WarmupConfig,
    cache_dir: Path,
) -> WarmupResult:
    """Train the model at ``base_path`` on ``encoded``; return the checkpoint directory (cached by content)."""
    from training_smoke import tiny

    key = hashlib.sha256(
        json.dumps([WARMUP_VERSION, base_path.name, dataclasses.asdict(config), encoded], sort_keys=True).encode()
    ).hexdigest()[:16]
    out = Path(cache_dir) / f"warm-{key}"
    if out.exists():
        meta = json.loads((out / tiny.META).read_text())
        return WarmupResult(out, True, 0.0, meta["losses"])

    import torch

    start = time.perf_counter()
    model, tokenizer = tiny.load(base_path)
    torch.manual_seed(config.seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.0)
    order = random.Random(config.seed)
    pad = tokenizer.pad_token_id
    losses: list[float] = []
    for _ in range(config.steps):
        batch = _collate(order.sample(encoded, min(config.batch_size, len(encoded))), pad)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(round(loss.item(), 4))
    model.eval()
    with tiny.building(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / tiny.META).write_text(json.dumps({"losses": losses}))
    return WarmupResult(out, False, time.perf_counter() - start, losses)


def _collate(batch: list[tuple[list[int], list[int]]], pad: int) -> JSON:
    """Right-padded tensors; labels are the ids on assistant tokens and -100 (ignored) elsewhere."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad)
    attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100)
    for row, (ids, mask) in enumerate(batch):
        n = len(ids)
        input_ids[row, :n] = torch.tensor(ids)
        attention_mask[row, :n] = 1
        labels[row, :n] = torch.where(torch.tensor(mask, dtype=torch.bool), torch.tensor(ids), -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
