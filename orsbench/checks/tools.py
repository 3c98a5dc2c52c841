"""Tool failures on valid input: a tool that raises, hangs, or breaks its stream.

The evidence is every call the ``play`` and ``fuzz`` probes made with an input
the tool's own JSON Schema accepts; a failure found either way is reported
with the smallest failing input (the fuzz shrinks it) and what a real client
does next. Both are required: a real client breaks.
"""

from __future__ import annotations

import json

from orsbench import schema_examples
from orsbench.checks import vacuous
from orsbench.checks.evidence import Evidence, Failure, short
from orsbench.checks.model import CheckOutcome, Severity, failed, passed, skipped, warned
from orsbench.checks.registry import check

#: What the openreward client and TRL do after a tool raised (an SSE ``error`` event) or answered 5xx.
CRASH_CONSEQUENCE = (
    "the openreward client marks the session dead after one error event, and TRL's OpenRewardSpec then feeds the "
    "model \"Error: environment session terminated\" for the rest of the rollout"
)
#: What they do when a tool never answers.
HANG_CONSEQUENCE = (
    "the openreward client keeps waiting while the server's keep-alive pings arrive, so the TRL rollout — and the "
    "GRPO step waiting for it — stalls"
)


def _failures(ev: Evidence, kinds: tuple[str, ...]) -> list[Failure]:
    answered = ev.facts.tool_answers
    found: list[Failure] = [
        f
        for f in ev.facts.tool_failures
        # A stream broken on every call is the server's framing (call.end_event's finding), not this tool's.
        if f.kind in kinds and (f.kind != "stream" or answered.get(f.tool))
    ]
    # One finding per tool: the smallest input that showed it.
    best: dict[str, Failure] = {}
    for failure in found:
        size = len(json.dumps(failure.input, default=repr))
        if failure.tool not in best or size < len(json.dumps(best[failure.tool].input, default=repr)):
            best[failure.tool] = failure
    return list(best.values())


def _calls(ev: Evidence) -> int:
    """Calls of play and fuzz that ran (a call refused without running its tool tried no input)."""
    return ev.facts.ran["play"] + ev.facts.ran["fuzz"]


def _shown(failure: Failure) -> str:
    value = failure.input
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if len(text) > 120:
        lengths = {k: len(v) for k, v in value.items() if isinstance(v, str) and len(v) > 40}
        text = short(value, 100) + (f" (string lengths {lengths})" if lengths else "")
    return f"{failure.tool}({text})"


@check(
    "tool.no_crash_on_valid_input",
    severity=Severity.REQUIRED,
    title="no tool raises, answers 5xx or breaks its stream on an input its schema accepts",
    probe="fuzz",
    spec="§5",
    remediation="Return a ToolOutput that says what is wrong (or ok:false via input validation) instead of raising; "
    "validate inputs in the params model so bad values are rejected, not crashed on.",
    requires=("call.tool_inputs",),
)
def no_crash(ev: Evidence) -> CheckOutcome:
    found = _failures(ev, ("raise", "http", "stream"))
    calls = _calls(ev)
    if found:
        kinds = {"raise": "raised", "http": "answered 5xx", "stream": "broke the stream"}
        text = "; ".join(f"{_shown(f)} {kinds[f.kind]} ({f.found_by}): {f.detail[:100]}" for f in found[:3])
        return failed(
            f"{text} — {CRASH_CONSEQUENCE}",
            {"failures": [f.to_json() for f in found], "calls": calls},
            *(ev.get(f.exchange) for f in found[:3]),
        )
    nothing = vacuous.unexercised(ev, "fuzz", "play")
    if nothing is not None:
        return nothing
    if not calls:
        return skipped("no valid input was tried (play and fuzz made no call)")
    note = "" if ev.options.fuzz > 0 else " (fuzz off: play only)"
    if ev.options.fuzz > 0 and not schema_examples.can_fuzz():
        note = ' (boundary inputs only: pip install "orsbench[conformance]" for the hypothesis-jsonschema fuzz)'
    note += vacuous.note(ev, "fuzz", "play")
    return passed(f"{calls} valid input(s) tried{note}; no tool raised", {"calls": calls, "fuzz": ev.facts.fuzz})


@check(
    "tool.no_hang",
    severity=Severity.REQUIRED,
    title="no tool call on a valid input runs past --timeout",
    probe="fuzz",
    spec="§5, §7",
    remediation="Bound the tool's work (a time limit, an input length limit in the params model) and answer within the "
    "client's patience; a long task should still end with a ToolOutput. On the openreward SDK, a sync tool that raises "
    "StopIteration (a next() on an exhausted iterator) hangs too: the SDK cannot hand that exception back, so catch it.",
    requires=("call.tool_inputs",),
)
def no_hang(ev: Evidence) -> CheckOutcome:
    found = _failures(ev, ("hang",))
    if found:
        text = "; ".join(f"{_shown(f)} ({f.found_by}): {f.detail[:100]}" for f in found[:3])
        return failed(f"{text} — {HANG_CONSEQUENCE}", [f.to_json() for f in found], *(ev.get(f.exchange) for f in found[:3]))
    nothing = vacuous.unexercised(ev, "fuzz", "play")
    if nothing is not None:
        return nothing
    calls = _calls(ev)
    if not calls:
        return skipped("no valid input was tried (play and fuzz made no call)")
    return passed(
        f"{calls} call(s) each ended within --timeout {ev.options.timeout:g} s{vacuous.note(ev, 'fuzz', 'play')}", calls
    )


@check(
    "tool.exercised",
    severity=Severity.ADVISORY,  # a tool no episode reached: the player may just not have found its use
    title="every listed tool was called with a valid input while playing, not only fuzzed",
    probe="fuzz",
    spec="§2.1, §5",
    remediation="Make every listed tool reachable in an episode: describe when to use it, and do not end the episode "
    "before a tool that matters can be called (or remove tools no episode needs).",
    requires=("call.tool_inputs",),
)
def exercised(ev: Evidence) -> CheckOutcome:
    """The play report per tool: played (in an episode, or once on a fresh session), fuzzed, won with it."""
    report = ev.facts.tool_play
    if not report:
        return skipped("no episode was played")
    nothing = vacuous.unexercised(ev, "play")
    if nothing is not None:
        return nothing
    rows: dict[str, dict[str, object]] = {}
    for name, entry in report.items():
        row = dict(entry)
        row["fuzzed"] = (ev.facts.fuzz.get(name) or {}).get("calls", 0)
        rows[name] = row
    words = []
    for name, row in rows.items():
        how = [f"played {row['played']}"] if row["played"] else []
        if row.get("covered"):
            how.append(f"called once on its own ({row['covered']})")
        if row["fuzzed"]:
            how.append(f"fuzzed {row['fuzzed']}")
        if row["won"]:
            how.append("won with it")
        if row.get("unbuildable"):
            how.append(f"no valid input: {row['unbuildable']}")
        words.append(f"{name}: {', '.join(how) or 'never called'}")
    unplayed = [n for n, row in rows.items() if not row["played"]]
    text = "; ".join(words)
    if unplayed:
        return warned(
            f"{', '.join(unplayed)} never came up in an episode of inputs learned from the environment "
            f"(docs/protocol.md §5) — {text}",
            rows,
        )
    return passed(f"every listed tool was played (docs/protocol.md §5) — {text}", rows)
