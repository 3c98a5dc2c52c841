"""Whether a check's probe exercised anything: no pass without its condition having been tried.

The play, fuzz and quality probes count every call they make as *run* (the tool ran, failed in
it, or the server judged the input) or *refused* for a reason that has nothing to do with the
input (:class:`~orsbench.checks.evidence.Refusal`: ``episode_finished``, ``not_found``, a 404,
an HTTP 4xx before any stream). A check over a probe whose every call was refused has judged
nothing: its verdict is a skip that says why — or a failure where the refusal is itself the
defect, a fresh session's first call answered ``episode_finished`` (the finish latch belongs to
one session, docs/protocol.md §5 and §8; sessions that start finished mean state kept per task or
per process, and a GRPO group of rollouts on one task trains on one real episode).
"""

from __future__ import annotations

from collections import Counter

from orsbench.checks.evidence import Evidence, Refusal
from orsbench.checks.model import CheckOutcome, failed, skipped

#: How each counted probe reads in a finding.
WHAT = {
    "play": "playing",
    "fuzz": "the fuzz",
    "replay": "the replay of a finished episode",
    "hack": "the empty/garbage-answer probe",
}


def _refused(ev: Evidence, probe: str) -> list[Refusal]:
    return [r for r in ev.facts.refusals if r.probe == probe]


def _tally(refusals: list[Refusal]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in Counter(r.reason for r in refusals).most_common())


def blocked(ev: Evidence, probe: str) -> bool:
    """``probe`` sent calls and not one of them ran."""
    return not ev.facts.ran[probe] and bool(_refused(ev, probe))


def unexercised(ev: Evidence, *probes: str) -> CheckOutcome | None:
    """The verdict of a check over ``probes`` when refusals left it nothing to judge, else ``None``.

    A failure when any of ``probes`` was blocked by a wrong refusal (a fresh session's first call
    answered ``episode_finished``), even if another probe ran: what that probe was there to try was
    never tried, and the reason is a defect. A skip naming the refusals when none of ``probes`` ran
    anything. ``None`` otherwise: judge what ran (:func:`note` says what did not).
    """
    for probe in probes:
        refused = _refused(ev, probe)
        wrong = next((r for r in refused if r.wrong), None)
        if wrong is None or ev.facts.ran[probe]:
            continue
        return failed(
            f"{WHAT.get(probe, probe)} could not try anything: none of its {len(refused)} call(s) ran ({_tally(refused)}) — "
            f"a session the checker had just created answered its first call ({wrong.exchange}) with episode_finished, "
            "so it started finished. Sessions on one task share their episode (an environment cached per task, or "
            "state kept at module or class level); every rollout after the first on a task is refused",
            {"probe": probe, "ran": 0, "refused": dict(Counter(r.reason for r in refused)), "first": wrong.exchange},
            ev.get(wrong.exchange),
        )
    if any(ev.facts.ran[p] for p in probes) or not any(_refused(ev, p) for p in probes):
        return None
    refused = [r for p in probes for r in _refused(ev, p)]
    return skipped(
        f"nothing was tried: every one of the {len(refused)} call(s) of {' and '.join(WHAT.get(p, p) for p in probes)} was "
        f"refused without running the tool ({_tally(refused)})"
    )


def note(ev: Evidence, *probes: str) -> str:
    """``"; the fuzz tried nothing (5 call(s) refused: 5 not_found)"`` for each of ``probes`` that was blocked, else ``""``."""
    parts = [
        f"{WHAT.get(p, p)} tried nothing ({len(_refused(ev, p))} call(s) refused: {_tally(_refused(ev, p))})"
        for p in probes
        if blocked(ev, p)
    ]
    return "".join(f"; {part}" for part in parts)
