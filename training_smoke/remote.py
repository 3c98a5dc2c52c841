"""``python -m training_smoke --url URL``: the CPU profile against an ORS server the user runs.

orsbench cannot run a foreign environment's tools in-process, so the warm-up is
derived from what the server publishes instead of from a scenario's code:

* the prompts of the first training tasks (one short session per task:
  ``/create``, ``GET prompt``, ``/delete``);
* its shared tools' JSON Schemas (``GET /{env}/tools``), each turned into the
  smallest valid input by the project's JSON-Schema example builder, and into
  variants of it that carry a word or number of the task's prompt (quoted
  words first), so that some scripted answers win: GRPO learns nothing from
  a group whose rewards are all equal.

Each scripted episode is a prompt, one tool call with one of those inputs
(drawn at random), a placeholder tool result and a closing message. The warm-up's loss covers only
the assistant's turns, so the placeholder result costs nothing: what the tiny
policy learns is the call's *format*, which is what GRPO needs in order to
reach the server at all. When no input can be built for any tool (or the
server has no tools), :class:`CannotScript` says why.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from orsbench import protocol

JSON = dict[str, Any]
SPLIT = "train"
#: What the scripted episodes show as a tool's result (never trained on: only assistant turns are).
PLACEHOLDER_RESULT = "(tool output)"


class CannotScript(Exception):
    """The server's tools give no way to script a warm-up episode; the message says why."""


def example_input(schema: Any) -> JSON:
    """The smallest valid input for ``schema`` (a thin call, so the builder can be repointed in one place)."""
    from orsbench.checks.schema_input import minimal_input

    return minimal_input(schema)


def example_variants(schema: Any, base: JSON, seeds: list[Any]) -> list[JSON]:
    """Valid inputs that put each seed into each property ``base`` fills (the same builder's ``variants``)."""
    from orsbench.checks.schema_input import variants

    return variants(schema, base, seeds)


def quoted_seeds(prompt: str) -> list[str]:
    """The strings a prompt quotes (``'falcon'``, ``"x"``), in order."""
    return [a or b for a, b in re.findall(r"'([^']+)'|\"([^\"]+)\"", prompt)]


def prompt_seeds(prompt: str, limit: int = 12) -> list[Any]:
    """Values a task's prompt suggests: quoted strings first, then words and integers, in order, unique."""
    quoted = quoted_seeds(prompt)
    words = re.findall(r"-?\d+|[A-Za-z_]\w*", prompt)
    out: list[Any] = []
    for token in quoted + words:
        value: Any = int(token) if re.fullmatch(r"-?\d+", token) else token
        if value not in out:
            out.append(value)
    return out[:limit]


@dataclass
class RemoteServer:
    """A server the user runs: the same face as ``launch.RunningServer`` minus what only orsbench's servers have."""

    url: str
    env_name: str
    #: Foreign servers have no ``/_orsbench/stats``: call counts come from the TRL adapter alone.
    counts_calls: bool = False

    def stats(self) -> JSON:
        return {}

    def env(self) -> dict[str, str]:
        return {protocol.ENV_API_URL: self.url, protocol.ENV_SESSION_URL: self.url, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}


def connect(url: str, env: str | None) -> RemoteServer:
    """Check the server answers and pick its environment (``env``, or the only one it lists)."""
    from orsbench.wire import WireClient

    with WireClient(url, timeout=15) as client:
        listing = client.list_environments()
        if not listing.ok:
            raise CannotScript(f"{url}: listing environments failed ({listing.error or listing.status}); is the server up?")
        names = _env_names(listing.json_or_none())
    if env is not None:
        if names and env not in names:
            raise CannotScript(f"{url} has no environment {env!r}; it lists: {', '.join(names)}")
        return RemoteServer(url.rstrip("/"), env)
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise CannotScript(f"{url} lists {len(names)} environments ({listed}): name one with --env")
    return RemoteServer(url.rstrip("/"), names[0])


def _env_names(body: Any) -> list[str]:
    items = body.get("environments", body) if isinstance(body, dict) else body
    names = []
    for item in items if isinstance(items, list) else []:
        name = item.get("name") if isinstance(item, dict) else item
        if isinstance(name, str):
            names.append(name)
    return names


def published(server: RemoteServer, num_tasks: int) -> tuple[list[str], list[JSON], int]:
    """``(prompts of the first tasks, shared tool specs, tasks in the split)`` as the server publishes them."""
    from orsbench.wire import WireClient

    env = server.env_name
    with WireClient(server.url, timeout=30) as client:
        tools = client.tools(env)
        if not tools.ok:
            raise CannotScript(f"GET /{env}/tools failed ({tools.error or tools.status})")
        body = tools.json_or_none()
        specs = body.get("tools", []) if isinstance(body, dict) else body or []
        count = client.num_tasks(env, SPLIT)
        total = _count(count.json_or_none()) if count.ok else None
        if not total:
            raise CannotScript(f"{env} has no tasks in split {SPLIT!r} (num_tasks answered {count.status})")
        prompts = [_prompt(client, env, i) for i in range(min(num_tasks, total))]
    return prompts, [s for s in specs if isinstance(s, dict) and isinstance(s.get("name"), str)], total


def _count(body: Any) -> int | None:
    value = body.get("num_tasks") if isinstance(body, dict) else body
    return value if isinstance(value, int) else None


def _prompt(client: Any, env: str, index: int) -> str:
    sid = client.new_session()
    created = client.create(sid, env_name=env, split=SPLIT, index=index)
    try:
        if not created.ok:
            raise CannotScript(f"opening a session on task {index} failed ({created.error or created.status}: {created.detail})")
        answer = client.prompt(env, sid)
        blocks = answer.json_or_none() if answer.ok else None
        if isinstance(blocks, dict):
            blocks = blocks.get("blocks") or blocks.get("prompt")
        return "\n".join(b["text"] for b in blocks or [] if isinstance(b, dict) and b.get("type") == "text" and b.get("text"))
    finally:
        client.delete(sid)


def schema_episodes(prompts: list[str], tool_specs: list[JSON], episodes: int, seed: int = 0) -> list[list[JSON]]:
    """``episodes`` scripted conversations: a prompt, one call with a schema-built input, a placeholder result."""
    calls: list[tuple[str, JSON, JSON]] = []
    problems: list[str] = []
    for spec in tool_specs:
        schema = spec.get("input_schema") or {"type": "object", "properties": {}}
        try:
            calls.append((spec["name"], schema, example_input(schema)))
        except Exception as exc:  # noqa: BLE001 - any builder failure means "cannot script this tool"
            problems.append(f"{spec['name']}: {exc}")
    if not calls:
        why = "; ".join(problems) if problems else "the server lists no shared tools (task-scoped tools are not scripted)"
        raise CannotScript(f"no tool call can be scripted for the warm-up: {why}")
    if not any(prompts):
        raise CannotScript("every task's prompt came back empty")
    rng = random.Random(seed)
    out = []
    for i in range(episodes):
        name, schema, base = calls[i % len(calls)]
        prompt = prompts[i % len(prompts)]
        # Half the episodes use a value the prompt quotes (the likeliest answer: "Echo 'falcon'"), the rest any
        # candidate, so answers vary across a GRPO group and some of them win.
        quoted = example_variants(schema, base, quoted_seeds(prompt))
        args = rng.choice(quoted if quoted and rng.random() < 0.5 else [base, *example_variants(schema, base, prompt_seeds(prompt))])
        out.append(
            [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]},
                {"role": "tool", "name": name, "content": PLACEHOLDER_RESULT},
                {"role": "assistant", "content": "done"},
            ]
        )
    return out
