"""Isolation checks: several sessions at once, as a trainer uses an environment (``docs/protocol.md`` §15).

Each check reads one scene of the ``isolation`` probe (:mod:`orsbench.checks.isolation_probe`),
judged by the rules of :mod:`orsbench.checks.scenes` against each task's control, and — with
``--explore N`` — what the stateful explorer (:mod:`orsbench.checks.interleavings`) found
against the same rule. A finding's reproducer replays every request of the scene's sessions
in the order sent, the other sessions' deletes included (``CheckOutcome.replay``). A scene
that cannot be played on this environment (one task, tasks alike, no slow tool) is not
applicable, and one that could have been and was not (a refused ``/create``, no ids, the time
budget spent) is a skip; both say why, and neither is a pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from orsbench import protocol
from orsbench.checks.evidence import Evidence, answer, short
from orsbench.checks.model import CheckOutcome, Severity, Status, failed, not_applicable, passed, skipped
from orsbench.checks.registry import check
from orsbench.checks.scenes import (
    Isolation,
    Problem,
    Scene,
    finished_of,
    judge,
    labels,
    refused_finished,
    related,
    resumed_result,
    through_batch,
)
from orsbench.wire.evidence import Exchange

#: What every remediation of this group starts from.
_KEEP = "Keep everything an episode changes on the session's own object, never in a module-level variable, a class attribute or a cache keyed by task"


def _facts(ev: Evidence) -> Isolation | CheckOutcome:
    facts = ev.facts.isolation
    if facts is None:
        return skipped("not probed")
    if facts.skip:
        return skipped(facts.skip)
    return facts


def _scene(ev: Evidence, name: str) -> tuple[Isolation, Scene] | CheckOutcome:
    facts = _facts(ev)
    if isinstance(facts, CheckOutcome):
        return facts
    scene = facts.scene(name)
    if scene.skip:
        return not_applicable(scene.skip) if scene.inapplicable else skipped(scene.skip)
    return facts, scene


def _ttl(ev: Evidence) -> float | None:
    """The TTL a session may be reaped after (``--ttl``, or as an orsbench server reports it)."""
    config = (ev.facts.orsbench_stats or {}).get("config") or {}
    ttl = ev.options.ttl if ev.options.ttl is not None else config.get("ttl")
    return float(ttl) if isinstance(ttl, (int, float)) else None


def _finding(scene: Scene, problems: list[Problem], measured: object = None) -> CheckOutcome:
    """The first problem as a failure: its exchanges as evidence, the scene up to it as the reproducer."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more: {'; '.join(p.message for p in problems[1:3])})" if len(problems) > 1 else ""
    outcome = failed(first.message + more + first.context, measured if measured is not None else [p.message for p in problems], *related(scene, first))
    outcome.replay = scene.exchanges(through_batch(scene, first.step))
    return outcome


def _explored(ev: Evidence, check_id: str, outcome: CheckOutcome) -> CheckOutcome:
    """Fold the explorer's finding on this check's rule into the directed scene's verdict."""
    facts = ev.facts.isolation
    explored = facts.explored if facts is not None else None
    if explored is None or outcome.status in (Status.FAIL, Status.ERROR):
        return outcome
    found = explored.of(check_id)
    if found is None:
        if outcome.status is Status.PASS:
            outcome.message += f"; the explorer broke it in none of {explored.examples} interleavings ({explored.steps} steps)"
        return outcome
    program = "; ".join(found.program)
    result = failed(
        f"the stateful explorer broke it after {len(found.program)} steps ({program}): {found.message}",
        {"program": found.program, "seed": explored.seed},
        *found.evidence,
    )
    result.replay = found.replay
    return result


def _verdict(
    ev: Evidence,
    check_id: str,
    name: str,
    pick: Callable[[Scene, Problem], bool],
    done: Callable[[Isolation, Scene], str | CheckOutcome],
) -> CheckOutcome:
    """The verdict of one rule on scene ``name``: its problems that ``pick`` keeps, else what ``done`` says it showed."""
    got = _scene(ev, name)
    if isinstance(got, CheckOutcome):
        return _explored(ev, check_id, got)
    facts, scene = got
    problems = [p for p in judge(scene, facts.controls, ev.options.timeout, _ttl(ev)) if pick(scene, p)]
    if problems:
        return _finding(scene, problems)
    shown = done(facts, scene)
    return _explored(ev, check_id, shown if isinstance(shown, CheckOutcome) else passed(shown, len(scene.steps)))


def _compared(facts: Isolation, scene: Scene, sessions: list[str], steps: range | None = None) -> str:
    """What a pass compared: prompts and answers, or only that nothing broke (what varies alone is not compared)."""
    chosen = scene.steps if steps is None else [scene.steps[n] for n in steps]
    mine = [s for s in chosen if s.session in sessions]
    control = {label: facts.controls.get(scene.tracks[label].index) for label in sessions if label in scene.tracks}
    parts = []
    prompts = [s for s in mine if s.action == "prompt"]
    if prompts:
        told = all(c is not None and c.prompt_stable for c in (control.get(s.session) for s in prompts))
        parts.append(
            f"{_n(len(prompts), 'prompt')} as alone" if told else f"{_n(len(prompts), 'prompt')} (not compared: prompts vary between solo sessions)"
        )
    calls = [s for s in mine if s.action == "call"]
    if calls:
        answers = sum(
            1 for s in calls if s.position is not None and (c := control.get(s.session)) is not None and c.expects(s.position) is not None
        )
        parts.append(
            f"{answers} of {_n(len(calls), 'answer')} as alone"
            if answers
            else f"{_n(len(calls), 'call')} ran (answers not compared: no two solo plays of these calls agreed)"
        )
    return ", ".join(parts) or "nothing to compare"


def _budget(facts: Isolation) -> str:
    """The probe's budget, where it was scaled from the environment's measured times (else nothing)."""
    if facts.budget_why.startswith("the play budget"):
        return ""
    return f" (every scene played in {facts.scenes_s:g} s, within a budget of {facts.budget_s:g} s, {facts.budget_why})"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# -- the checks ----------------------------------------------------------------------------------------
@check(
    "isolation.interleaved_tasks",
    severity=Severity.REQUIRED,
    title="sessions on different tasks, used in turn, each keep their own task; finishing one never ends the other",
    probe="isolation",
    spec="§15.1, §15.3",
    remediation=f"{_KEEP}: build the task's state in the session's environment object (its __init__/setup) and read it "
    "from self in prompts and tools. A module-level `STATE = {}` or `current_task` set by the latest /create serves every "
    "older session the newest session's task.",
    requires=("session.create", "session.prompt"),
)
def interleaved_tasks(ev: Evidence) -> CheckOutcome:
    def done(facts: Isolation, scene: Scene) -> str:
        return f"{labels(scene.tracks.values())}, created before either was used: {_compared(facts, scene, ['A', 'B'])}{_budget(facts)}"

    return _verdict(ev, "isolation.interleaved_tasks", "interleaved", lambda s, p: True, done)


@check(
    "isolation.same_task_fresh",
    severity=Severity.REQUIRED,
    title="a second session on a task starts from the task's fresh state (never another session's finished episode)",
    probe="isolation",
    spec="§15.1, §15.4",
    remediation=f"{_KEEP}. A GRPO group opens 8–64 sessions on one task at once: each needs its own game, board or "
    "sandbox; share only what no episode changes (the task's data, read-only), and never key an episode's state by task id.",
    requires=("session.create",),
)
def same_task_fresh(ev: Evidence) -> CheckOutcome:
    facts = ev.facts.isolation
    poisoned = _poisoned_controls(facts) if isinstance(facts, Isolation) else None
    if poisoned is not None:
        return poisoned

    def before_delete(scene: Scene, problem: Problem) -> bool:
        return problem.session in ("C", "D", "F", "G") and problem.step < scene.measured.get("deleted_at", len(scene.steps))

    def done(facts: Isolation, scene: Scene) -> str | CheckOutcome:
        if not scene.of("D", "call"):
            return skipped("the second session on the task made no call")
        index = scene.tracks["C"].index
        finished = any(s.action == "call" and finished_of(s.exchange) for s in scene.of("C"))
        how = "played task {} to finished".format(index) if finished else f"played task {index} ({len(scene.of('C', 'call'))} calls)"
        before = range(scene.measured.get("deleted_at", len(scene.steps)))
        return (
            f"C {how}; then D's and F's first calls ran as in a fresh session ({_compared(facts, scene, ['D', 'F'], before)})"
            f"{_budget(facts)}"
        )

    return _verdict(ev, "isolation.same_task_fresh", "same_task", before_delete, done)


def _poisoned_controls(facts: Isolation) -> CheckOutcome | None:
    """A control — the first session of this probe on its task — whose very first call was refused as finished."""
    for control in facts.controls.values():
        calls = [e for e in control.exchanges if e.method == "POST" and e.url.endswith("/call")]
        if calls and refused_finished(calls[0]):
            outcome = failed(
                f"a new session on task {control.index} was refused its first call as episode_finished: it started from "
                "an earlier session's finished episode (this run played the task to finished before)",
                {"task": control.index},
                calls[0],
                *control.exchanges[:1],
            )
            outcome.replay = control.exchanges
            return outcome
    return None


@check(
    "isolation.delete_leaves_other",
    severity=Severity.REQUIRED,
    title="deleting a session leaves another on the same task fully usable",
    probe="isolation",
    spec="§15.2, §15.4",
    remediation="Tear down only what the deleted session owns in /delete (teardown): a sandbox, container or directory "
    "shared by the sessions of a task is removed when the last of them goes (reference-count it), or each session gets its "
    "own; another session's tools must keep working.",
    requires=("isolation.same_task_fresh", "session.delete", "session.ping"),
)
def delete_leaves_other(ev: Evidence) -> CheckOutcome:
    def after_delete(scene: Scene, problem: Problem) -> bool:
        deleted = scene.measured.get("deleted_at", len(scene.steps))
        again = scene.measured.get("recreated_at", len(scene.steps))
        return problem.session in ("D", "F", "G") and deleted < problem.step < again

    def done(facts: Isolation, scene: Scene) -> str:
        upto = scene.measured.get("recreated_at", len(scene.steps))
        after = [s for s in scene.steps[scene.measured.get("deleted_at", 0) + 1 : upto] if s.session in ("D", "F", "G")]
        calls = sum(1 for s in after if s.action == "call")
        start = scene.measured.get("deleted_at", 0) + 1
        shown = _compared(facts, scene, ["D", "F", "G"], range(start, scene.measured.get("recreated_at", len(scene.steps))))
        return f"after C was deleted, D, F and G answered {_n(len(after), 'request')}, {_n(calls, 'call')} among them: {shown}"

    return _verdict(ev, "isolation.delete_leaves_other", "same_task", after_delete, done)


@check(
    "isolation.recreated_sid_fresh",
    severity=Severity.REQUIRED,
    title="a session id created again after its episode finished and was deleted starts fresh",
    probe="isolation",
    spec="§15.4, §2.4",
    remediation="Forget everything about a sid on /delete — the finish latch, results, counters — not just the "
    "environment object: a dict keyed by sid that outlives the session hands its finished state to the next /create of that id.",
    requires=("isolation.same_task_fresh", "session.recreate_deleted_sid"),
)
def recreated_sid_fresh(ev: Evidence) -> CheckOutcome:
    def done(facts: Isolation, scene: Scene) -> str | CheckOutcome:
        if "C2" not in scene.tracks:
            return skipped(f"the id could not be created again: {scene.measured.get('recreate_refused') or 'not tried'}")
        index = scene.tracks["C2"].index
        return f"C's id, created again on task {index} after C finished and was deleted: {_compared(facts, scene, ['C2'])}"

    return _verdict(ev, "isolation.recreated_sid_fresh", "same_task", lambda s, p: p.session == "C2", done)


@check(
    "isolation.resume_own_result",
    severity=Severity.REQUIRED,
    title="a resume by task_id returns the session's own result, whatever other sessions did in between",
    probe="isolation",
    spec="§15.5, §3.2",
    remediation="Make task ids unique across the server (uuid4), and store results by that id: ids counted per session "
    "(1, 2, 3 ...) in one server-wide store hand a resuming client another session's result.",
    requires=("call.resume_by_task_id",),
)
def resume_own_result(ev: Evidence) -> CheckOutcome:
    got = _scene(ev, "resume")
    if isinstance(got, CheckOutcome):
        return got
    facts, scene = got
    ids = scene.measured.get("task_ids", {})
    problems = [p for p in judge(scene, facts.controls, ev.options.timeout, _ttl(ev)) if p.kind == "resume"]
    if ids.get("A") and ids.get("A") == ids.get("B"):
        first = scene.of("B", "call")[0]
        problems.insert(
            0,
            Problem(
                "resume",
                "B",
                scene.steps.index(first),
                f"A's call and B's call (sessions on tasks {scene.tracks['A'].index} and {scene.tracks['B'].index}) were both "
                f"given the task_id {ids['A']!r}: a resume cannot tell them apart",
            ),
        )
        if len(problems) > 1:
            problems[0].message += f"; {problems[1].message}"
            problems[0].step = problems[1].step
            del problems[1:]
    if problems:
        return _explored(ev, "isolation.resume_own_result", _finding(scene, problems, {"task_ids": ids}))
    foreign = _foreign(scene)
    return _explored(
        ev,
        "isolation.resume_own_result",
        passed(f"A and B each resumed their own task_id and got their own result; {foreign}", {"task_ids": ids, "foreign": foreign}),
    )


def _foreign(scene: Scene) -> str:
    """What resuming another session's task_id did (the reference replays it: task ids are not tied to a session, §3.2)."""
    steps = [s for s in scene.of("A", "resume") if s.resumes is not None and scene.steps[s.resumes].session == "B"]
    if not steps:
        return "another session's task_id was not tried"
    step = steps[0]
    mine = resumed_result(step.exchange)
    theirs = resumed_result(scene.steps[step.resumes or 0].exchange)
    if mine is not None and mine == theirs:
        return "resuming B's task_id in A replays B's result (as the reference does: task ids are server-wide)"
    return f"resuming B's task_id in A answered {short(answer(step.exchange), 80)}"


@check(
    "isolation.concurrent_create_distinct",
    severity=Severity.REQUIRED,
    title="/create_session sent 8 times at once hands out 8 distinct ids",
    probe="isolation",
    spec="§15.6, §2.2",
    remediation="Make ids that cannot collide: uuid4 per /create_session, or a counter incremented atomically (under a "
    "lock, with no await between reading and writing it); a read-await-write counter gives two rollouts one session.",
    requires=("session.create_session_unique",),
)
def concurrent_create_distinct(ev: Evidence) -> CheckOutcome:
    got = _scene(ev, "concurrent_create")
    if isinstance(got, CheckOutcome):
        return got
    _, scene = got
    ids = scene.measured.get("ids", [])
    exchanges = [s.exchange for s in scene.steps]
    missing = [e for e in exchanges if not e.task_id]
    if missing and all(e.status in (429, 503) for e in missing):
        return skipped(f"{len(missing)} of {len(ids)} /create_session sent at once were turned away ({answer(missing[0])}): the server limits them")
    if missing:
        outcome = failed(f"{len(missing)} of {len(ids)} /create_session sent at once gave no id: {answer(missing[0])}", ids, *missing[:3])
        outcome.replay = exchanges
        return outcome
    repeated = {sid: n for sid, n in Counter(ids).items() if n > 1}
    if repeated:
        shown = ", ".join(f"{sid!r} ×{n}" for sid, n in repeated.items())
        twins = [e for e in exchanges if e.task_id in repeated]
        outcome = failed(
            f"{len(ids)} /create_session sent at once gave {len(set(ids))} distinct ids ({shown}): two rollouts would share one session",
            ids,
            *twins[:4],
        )
        outcome.replay = exchanges
        return outcome
    return _explored(ev, "isolation.concurrent_create_distinct", passed(f"{len(ids)} at once, {len(set(ids))} distinct ids", ids))


@check(
    "isolation.concurrent_calls_own_task",
    severity=Severity.REQUIRED,
    title="sessions on different tasks created, prompted and called at once are each served and graded by their own task",
    probe="isolation",
    spec="§15.1, §15.6",
    remediation=f"{_KEEP}; a tool must not park the session in a module-level `current` variable across an await "
    "(another call runs there and overwrites it): pass the session's object along instead.",
    requires=("isolation.same_task_fresh",),
)
def concurrent_calls_own_task(ev: Evidence) -> CheckOutcome:
    def done(facts: Isolation, scene: Scene) -> str:
        tasks = sorted({str(t.index) for t in scene.tracks.values()})
        return f"{len(scene.tracks)} sessions over tasks {', '.join(tasks)} at once: {_compared(facts, scene, list(scene.tracks))}"

    return _verdict(ev, "isolation.concurrent_calls_own_task", "concurrent_calls", lambda s, p: True, done)


@check(
    "isolation.ping_during_call",
    severity=Severity.REQUIRED,
    title="/ping answers at once while a tool call runs in the same session",
    probe="isolation",
    spec="§15.7, §8",
    remediation="Never hold a per-session lock across a running tool for /ping, and never block the event loop in a tool "
    "(run blocking work in a thread: asyncio.to_thread): clients ping long calls to keep the session alive, and a ping "
    "that waits for the call lets the TTL reap the session mid-call.",
    requires=("session.ping",),
)
def ping_during_call(ev: Evidence) -> CheckOutcome:
    got = _scene(ev, "ping_during_call")
    if isinstance(got, CheckOutcome):
        return got
    _, scene = got
    m = scene.measured
    pings = scene.of("P", "ping")
    calls = scene.of("P", "call")
    if not pings or not calls:
        return skipped("the call or the ping was not sent")
    ping, call = pings[0].exchange, calls[0].exchange
    if ping.status != 200:
        outcome = failed(f"a /ping sent {m['ping_sent_after_s']:g} s into a {m['tool']} call answered {answer(ping)}", m, ping, call)
        outcome.replay = scene.exchanges()
        return outcome
    if m["ping_waited_for_call"] and m["ping_s"] > 0.2:
        outcome = failed(
            f"a /ping sent {m['ping_sent_after_s']:g} s into a {m['call_s']:g} s {m['tool']} call waited {m['ping_s']:g} s and "
            "answered only when the call ended: pings for a long call keep nothing alive",
            m,
            ping,
            call,
        )
        outcome.replay = scene.exchanges()
        return outcome
    return passed(f"answered in {m['ping_s']:g} s, {m['ping_sent_after_s']:g} s into a {m['call_s']:g} s {m['tool']} call", m, ping)


def _sessions_between(ev: Evidence, first: Exchange | None, last: Exchange, *also: Exchange | None) -> list[Exchange]:
    """Every request of the sessions ``first`` and ``also`` created, from ``first`` to ``last``, in the order sent."""
    history = ev.history or list(ev.exchanges.values())
    sids = {e.request_headers.get(protocol.SESSION_HEADER) for e in (first, *also) if e is not None}
    where = {id(e): n for n, e in enumerate(history)}
    if first is None or id(first) not in where or id(last) not in where:
        return [e for e in (first, *also, last) if e is not None]
    start, end = where[id(first)], where[id(last)]
    return [e for e in history[start : end + 1] if e.request_headers.get(protocol.SESSION_HEADER) in sids]


@check(
    "isolation.ttl_per_session",
    severity=Severity.RECOMMENDED,
    title="an idle session is reaped after the TTL even while other sessions ping",
    probe="timing",
    spec="§15.7, §8",
    remediation="Keep an idle clock per session (reset by that session's own requests and pings) and reap each by its own; "
    "a server-wide timer reset by any request keeps every abandoned session alive while one client pings.",
    requires=("session.ttl_reap",),
)
def ttl_per_session(ev: Evidence) -> CheckOutcome:
    idle, kept = ev.get("timing.ttl.idle.ping"), ev.get("timing.ttl.kept.ping")
    if idle is None or kept is None:
        return skipped(ev.facts.ttl_skip or "not probed")
    waited = ev.facts.ttl_waited
    if idle.status == 404:
        return passed(f"the idle session was reaped within {waited} s while another was pinged", {"waited_s": waited}, idle, kept)
    later = ev.get("timing.ttl.idle.ping.unpinged")
    if later is not None and later.status == 404:
        outcome = failed(
            f"idle for {waited} s, the session still answered /ping with {answer(idle)} while another session was pinged, and "
            f"was reaped once nobody pinged: it was kept alive by another session's pings",
            {"waited_s": waited, "idle": idle.status, "idle_unpinged": later.status},
            idle,
            later,
        )
        outcome.replay = _sessions_between(ev, ev.get("timing.ttl.idle.create"), later, ev.get("timing.ttl.kept.create"))
        return outcome
    return failed(f"idle for {waited} s, the session still answers /ping with {answer(idle)}", {"waited_s": waited}, idle, kept)
