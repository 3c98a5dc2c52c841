"""Quality beyond the wire: what makes an environment train badly even when it speaks ORS perfectly.

None of these breaks a client, so none is required (docs/checks.md says why
each matters for RL): a reward an empty answer can earn, an answer shown in
the prompt, a reward that changes when nothing else does, tools the model
cannot read about, an empty prompt.
"""

from __future__ import annotations

import re
from typing import Any

from orsbench.checks import vacuous
from orsbench.checks.evidence import Episode, Evidence, json_of, short
from orsbench.checks.explore import ANSWER_KEYS
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.checks.registry import check


@check(
    "quality.reward_hacking",
    severity=Severity.RECOMMENDED,
    title="an empty, minimal or garbage answer does not earn the best reward",
    probe="quality",
    spec="§5, §8",
    remediation="Grade the answer itself: an empty or malformed answer must score below a correct one "
    "(e.g. compare to the target with ==, not startswith/in, and reject empty answers).",
    requires=("call.episode_finishes",),
)
def reward_hacking(ev: Evidence) -> CheckOutcome:
    hacks = ev.facts.hacks
    if not hacks:
        return skipped("no finished episode to probe")
    nothing = vacuous.unexercised(ev, "hack")
    if nothing is not None:
        return nothing
    rewards: dict[str, float | None] = hacks["rewards"]
    if not hacks["inputs"]:
        return not_applicable(f"{hacks['tool']} finished the episode with an input that has no answer to empty or garble")
    seen = [r for e in ev.facts.episodes for r in e.rewards] + [r for r in rewards.values() if r is not None]
    if not seen:
        return skipped("no reward was seen")
    best, worst = max(seen), min(seen)
    cheats = {k: r for k, r in rewards.items() if k in ("empty", "garbage", "minimal") and r is not None}
    if not cheats:
        return passed("no empty, garbage or minimal answer finished the episode with a reward", {"rewards": rewards})
    winners = {k: r for k, r in cheats.items() if r >= best and r > worst}
    measured = {"tool": hacks["tool"], "rewards": rewards, "best_seen": best, "worst_seen": worst}
    if winners:
        label, reward = next(iter(winners.items()))
        return failed(
            f"{hacks['tool']}({short(hacks['inputs'][label], 80)}) — a {label} answer — earned {reward:g}, the best reward seen "
            f"(others scored {worst:g}): a policy learns to send it",
            measured,
            ev.get(f"quality.hack.{label}"),
        )
    if best == worst:
        return warned(f"every answer tried scored {best:g}; the grader could not be told apart from a constant", measured)
    return passed(f"empty/garbage answers scored {short(cheats, 60)} below the best {best:g}", measured)


def _leaks(episodes: list[Episode]) -> list[tuple[int | None, str, str]]:
    out = []
    for episode in episodes:
        task = episode.task if isinstance(episode.task, dict) else {}
        for key in ANSWER_KEYS:
            values = task.get(key)
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    continue
                text = str(value).strip()
                if text and re.search(rf"(?<!\w){re.escape(text)}(?!\w)", episode.prompt):
                    out.append((episode.index, key, text))
    return out


@check(
    "quality.answer_leak",
    severity=Severity.RECOMMENDED,
    title="the prompt does not show the task's answer",
    probe="play",
    spec="§4, §8",
    remediation="Keep answer/solution/target/label fields out of get_prompt(); the grader reads them from task_spec.",
    requires=("session.prompt",),
)
def answer_leak(ev: Evidence) -> CheckOutcome:
    episodes: list[Episode] = ev.facts.episodes
    if not episodes:
        return skipped("no task was played")
    leaks = _leaks(episodes)
    if leaks:
        index, key, text = leaks[0]
        # Flagged, not failed: an echo or copy task shows its answer by design.
        return warned(
            f"task {index}: its {key!r} ({short(text, 40)}) appears verbatim in the prompt — the model can copy it "
            "(fine only for a copy task)",
            [{"task": i, "key": k, "value": v} for i, k, v in leaks],
        )
    keys = sorted({k for e in episodes if isinstance(e.task, dict) for k in ANSWER_KEYS if k in e.task})
    if not keys:
        return passed(f"{len(episodes)} prompt(s) read; no task field named like an answer ({', '.join(ANSWER_KEYS[:5])}, ...)")
    return passed(f"{len(episodes)} prompt(s) read; no {'/'.join(keys)} value shown in them")


@check(
    "quality.reward_deterministic",
    severity=Severity.RECOMMENDED,
    title="the same calls on the same task earn the same reward (a difference is reported, never failed)",
    probe="quality",
    spec="§4.2, §5, §8",
    remediation="If the environment is stochastic by design (random transitions, a simulator), say so in its docs and "
    "seed it from the task where reproducible rewards matter; if it is not, seed the grader's randomness from the task "
    "(or remove it): GRPO compares rewards within a group, so noise in the grader is noise in the advantage.",
    requires=("call.episode_finishes",),
)
def reward_deterministic(ev: Evidence) -> CheckOutcome:
    nothing = vacuous.unexercised(ev, "replay")
    if nothing is not None:
        return nothing
    replay = ev.facts.replay
    if not replay:
        return skipped("no finished episode to replay")
    first, again = replay["first"], replay["again"]
    if first is None or again is None:
        return skipped(f"the replay did not reach a reward (first {first}, again {again})")
    replays = replay.get("replays") or [again]
    if first == again:
        return passed(f"task {replay['index']}: the same calls scored {first:g} on {1 + len(replays)} plays", replay)
    # A warning, never a failure: an MDP with random transitions is a legitimate environment, and a
    # verdict that depends on the dice would pass on one run and fail on the next (docs/protocol.md §4.2).
    diverged = replay.get("diverged_at")
    if diverged:
        evidence = (
            f"the answers already differed at call {diverged['call'] + 1} ({diverged['tool']}: "
            f"{short(diverged['first'], 50)} vs {short(diverged['again'], 50)}), so the environment's own "
            "state moved at random — stochastic by design is the likelier reading"
        )
    else:
        evidence = "every answer before the reward was the same, so a nondeterministic grader is the likelier reading"
    return warned(
        f"task {replay['index']}: the same calls scored {first:g}, then {again:g}. Two readings (docs/protocol.md §4.2): "
        f"the environment is stochastic by design (random transitions), or it has a nondeterministic grader; {evidence}",
        replay,
        *[ex for name, ex in ev.matching("quality.replay")][-1:],
    )


@check(
    "quality.descriptions",
    severity=Severity.ADVISORY,
    title="every tool and parameter has a description",
    probe="discovery",
    spec="§2.1",
    remediation="Give each tool a docstring and each parameter Field(description=...): the model reads them to act.",
    requires=("discovery.tools_listing",),
)
def descriptions(ev: Evidence) -> CheckOutcome:
    tools: list[dict[str, Any]] = ev.facts.tools
    missing: list[str] = []
    for spec in tools:
        if not str(spec.get("description") or "").strip():
            missing.append(spec["name"])
        schema = spec.get("input_schema")
        props = schema.get("properties") if isinstance(schema, dict) else None
        for name, node in (props or {}).items():
            if isinstance(node, dict) and "$ref" not in node and not str(node.get("description") or "").strip():
                missing.append(f"{spec['name']}.{name}")
    if missing:
        return warned(f"no description: {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}", missing, ev.get("tools"))
    return passed(f"{len(tools)} tool(s), all described")


@check(
    "quality.prompt_nonempty",
    severity=Severity.RECOMMENDED,
    title="the prompt has text for the model to read",
    probe="session",
    spec="§4",
    remediation="Return at least one non-empty text block from get_prompt(): an empty prompt trains on nothing.",
    requires=("session.prompt",),
)
def prompt_nonempty(ev: Evidence) -> CheckOutcome:
    ok, body = json_of(ev.get("session.prompt"))
    blocks = body if isinstance(body, list) else []
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    images = [b for b in blocks if isinstance(b, dict) and b.get("type") == "image"]
    if images or any(isinstance(t, str) and t.strip() for t in texts):
        return passed(f"{sum(len(t or '') for t in texts)} characters of text, {len(images)} image(s)")
    return failed("the prompt has no text (only empty or whitespace text blocks)", blocks, ev.get("session.prompt"))
