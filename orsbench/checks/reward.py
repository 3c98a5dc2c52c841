"""Reward checks: every ToolOutput's reward and finished flag, as trainers read them."""

from __future__ import annotations

from orsbench.checks import verdicts
from orsbench.checks.evidence import Evidence, call_label, call_results, short
from orsbench.checks.model import CheckOutcome, Severity, failed, passed, skipped, warned
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
