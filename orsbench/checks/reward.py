"""Reward checks: every ToolOutput's reward and finished flag, as trainers read them."""

from __future__ import annotations

from orsbench.checks import verdicts
from orsbench.checks.evidence import WIN_REWARD, Episode, Evidence, call_label, call_results, result_of, short
from orsbench.checks.gameplay import answer_text
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.checks.registry import CALLS, FINISHER, check

def _outputs(ev: Evidence) -> list[tuple[str, dict]]:
    return verdicts.outputs_of(call_results(ev))


@check(
    "reward.well_formed",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="reward is a finite number or null — never a bool or a string",
    probe="play",
    spec="§4.2",
    remediation="Send reward as a JSON number (e.g. 1.0) or null; true/false are not rewards, and NaN/Infinity are not JSON.",
    requires=("call.end_json",),
)
def well_formed(ev: Evidence) -> CheckOutcome:
    outputs = _outputs(ev)
    if not outputs:
        return skipped("no call answered ok:true")
    bad = {}
    shown = []
    for name, output in outputs:
        why = verdicts.reward(output)
        if why:
            bad[call_label(name)] = why
            shown.append(ev.get(name))
    if bad:
        return failed("; ".join(list(bad.values())[:3]), bad, *shown[:3])
    # Folded outputs add their count and a sample of their rewards: the message shows 80 characters.
    rewards = [output.get("reward") for _, output in outputs] + ev.folded.rewards
    count = len(outputs) + ev.folded.counts["reward.well_formed"]
    return passed(f"{count} reward(s): {short(rewards, 80)}", rewards)


@check(
    "reward.finished_bool",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="finished is a JSON bool",
    probe="play",
    spec="§4",
    remediation='Send "finished": true or false in every ToolOutput (not 0/1, not a string, not omitted).',
    requires=("call.end_json",),
)
def finished_bool(ev: Evidence) -> CheckOutcome:
    outputs = _outputs(ev)
    if not outputs:
        return skipped("no call answered ok:true")
    wrong = {call_label(n): o.get("finished") for n, o in outputs if verdicts.finished_flag(o)}
    missing = [call_label(n) for n, o in outputs if verdicts.finished_flag(o) is None]
    if wrong:
        name, value = next(iter(wrong.items()))
        return failed(f"{name}: finished is {value!r}, not a bool", wrong, *(ev.get(n) for n, _ in outputs if call_label(n) in wrong))
    if missing or ev.folded.counts[verdicts.MISSING_FINISHED]:
        count = len(missing) + ev.folded.counts[verdicts.MISSING_FINISHED]
        return warned(f"finished is omitted in {count} output(s) (clients read it as false)", missing)
    count = len(outputs) + ev.folded.counts["reward.finished_bool"]
    return passed(f"{count} output(s) carry a bool", count)


@check(
    "reward.terminal_reward",
    severity=Severity.ADVISORY,
    passive=(FINISHER,),
    title="the output that finishes the episode carries a numeric reward",
    probe="play",
    spec="§4.2",
    remediation="Return a numeric reward with finished:true; a null final reward gives a trainer no signal for the episode.",
    requires=("call.episode_finishes", "reward.well_formed"),
)
def terminal_reward(ev: Evidence) -> CheckOutcome:
    final = [(n, o) for n, o in _outputs(ev) if o.get("finished") is True]
    if not final:
        return skipped("no output with finished:true", depends_on="call.episode_finishes")
    name, output = final[0]
    if output.get("reward") is None:
        return warned(f"{call_label(name)} finished the episode with reward null", None, ev.get(name))
    return passed(f"final reward {output['reward']}", output["reward"])


@check(
    "reward.win_finishes",
    severity=Severity.RECOMMENDED,
    title=f"a call that earns the top reward ({WIN_REWARD:.1f}) ends the episode (finished: true)",
    probe="play",
    spec="§4.2, §5, §8",
    remediation="Return finished=True with the output that solves the task (ToolOutput(..., reward=1.0, finished=True)); "
    "a solved episode that stays open is rolled out to the trainer's turn limit, and the calls after the win are "
    "trained on as if the task were still open.",
    requires=("call.end_json",),
)
def win_finishes(ev: Evidence) -> CheckOutcome:
    episodes = ev.facts.episodes
    if not episodes:
        return skipped("no episode was played")
    stuck = [e for e in episodes if not e.finished and e.unfinished_win is not None]
    dense = next((why for e in episodes if (why := dense_rewards(e)) is not None), None)
    if stuck and dense is not None:
        # The check reads 1.0 as "solved": on an environment that pays every good step, 1.0 is not a win.
        return not_applicable(f"the environment's rewards are dense ({dense}): {WIN_REWARD:.1f} rewards a step, not a win")
    if stuck:
        episode = stuck[0]
        name = episode.unfinished_win or ""
        exchange = ev.get(name)
        kind, body = result_of(exchange)
        output = body.get("output") if kind == "result" and isinstance(body, dict) else None
        text = answer_text(output) if isinstance(output, dict) else ""
        reward = output.get("reward") if isinstance(output, dict) else WIN_REWARD
        position = name.rsplit(".", 1)[-1]
        after = len(episode.calls) - 1 - int(position) if position.isdigit() else 0
        return failed(
            f"task {episode.index}: {call_label(name)} earned reward {reward:g} ({short(text, 60)!r}) with finished: false, "
            f"and the episode never finished ({after} more call(s); {episode.stopped or 'play stopped'}) — a trainer keeps "
            "rolling out a solved task until its turn limit",
            {"task": episode.index, "call": call_label(name), "reward": reward, "calls_after": after},
            exchange,
        )
    wins = [e for e in episodes if e.unfinished_win is not None or (e.reward is not None and e.reward >= WIN_REWARD)]
    if not wins:
        return skipped(f"no call earned the top reward ({WIN_REWARD:.1f}) while playing")
    return passed(f"{len(wins)} episode(s) earned {WIN_REWARD:.1f} and ended with finished: true", len(wins))


def dense_rewards(episode: Episode) -> str | None:
    """Why ``episode``'s rewards read as dense — paid on steps, not for a win — or ``None``.

    A reward of 1.0 marks a win only where it is final: an environment that pays 1.0 again on
    later calls whose outcome differs (the game went on), that pays more than 1.0, or that
    finishes later after paying 1.0 on the way, pays steps. An environment that answers the
    same "solved!" to the same winning call again and again is a win left open (this check's
    finding), not a dense reward.
    """
    paid: list[tuple[int, str]] = []
    for n, reward in enumerate(episode.sent_rewards):
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            continue
        if reward > WIN_REWARD:
            return f"call {n + 1} paid {reward:g}, more than {WIN_REWARD:.1f}"
        last = episode.finished and n == len(episode.calls) - 1
        if reward >= WIN_REWARD and not last:
            paid.append((n, episode.answers[n] if n < len(episode.answers) else ""))
    if paid and episode.finished:
        return f"call {paid[0][0] + 1} paid {WIN_REWARD:.1f} and the episode went on to finish at call {len(episode.calls)}"
    outcomes = {answer for _, answer in paid}
    if len(outcomes) >= 2:
        shown = ", ".join(repr(short(a, 30)) for a in list(outcomes)[:2])
        return f"{len(paid)} calls paid {WIN_REWARD:.1f} without finishing, with {len(outcomes)} different outcomes ({shown}, ...)"
    return None
