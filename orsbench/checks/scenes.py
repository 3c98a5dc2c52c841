"""Sessions at once: what the isolation probe and the explorer record, and the rules that judge it.

A trainer never uses an environment one session at a time (``docs/protocol.md`` §15), so the
isolation probe (:mod:`orsbench.checks.isolation_probe`) and the stateful explorer
(:mod:`orsbench.checks.interleavings`) drive several sessions through *scenes*: sessions on
different tasks used in turn, sessions on one task of which one is deleted, calls sent at once.
What each session sees is compared with its **control** — the same task played alone, by one
session, just before — under one set of rules (:func:`judge`), shared by the checks
(:mod:`orsbench.checks.isolation`) and the explorer so that both read a scene the same way:

* a call the control answered with a result must not answer an error event, a 5xx, a 404 or a
  broken stream (the session became unusable);
* a call must not be refused as ``episode_finished`` in a session that never finished — its first
  call above all (it started from another session's finished state);
* the prompt must be the control's, and each call's answer the control's answer at the same step,
  wherever the environment is deterministic enough to tell: a prompt counts when two solo
  sessions of the task saw the same one, answers as far as two solo plays agreed (text always,
  reward and ``finished`` when they agreed too);
* a resumed call returns the very result the session's own call returned.

Pure data and pure functions: nothing here talks to a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.checks.evidence import answer, result_of, short
from orsbench.checks.explore import classify
from orsbench.checks.explore import prompt_text as _text_of
from orsbench.checks.gameplay import answer_text
from orsbench.protocol import JSON
from orsbench.wire.evidence import Exchange

#: Kinds of outcome that mean the session could not be used (as :func:`orsbench.checks.explore.classify` names them).
UNUSABLE = ("raise", "hang", "stream", "http", "reaped")


@dataclass
class Step:
    """One request of a scene: which session sent it, what it was, and (for a call) its step in the task's script."""

    session: str
    action: str  # create, prompt, call, resume, ping, delete, create_session
    exchange: Exchange
    position: int | None = None
    #: For a resume: the step whose call it resumes (its index in the scene's steps).
    resumes: int | None = None


@dataclass
class Track:
    """One session of a scene: its label, id and task."""

    label: str
    sid: str
    index: int | None
    #: Its id was created, deleted, and created again in this scene (§15.4).
    reused: bool = False


@dataclass
class Control:
    """A task played alone by one session: what every session on that task must see (§15)."""

    index: int | None
    #: The calls every session on the task makes, in order: the played episode's, then its last one again.
    script: list[tuple[str, JSON]]
    prompt: str = ""
    #: Whether its own ``/prompt`` answered (200) at all: where it did not (a setup longer than ``--timeout``), another
    #: session's unanswered prompt on the task is the task's, not a sign of shared state.
    prompt_answered: bool = True
    #: Whether the prompt is a fingerprint of the task: two solo sessions saw the same one.
    prompt_stable: bool = False
    #: The control's answer at each step of the script (see :func:`signature`).
    answers: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    #: How many leading answers two solo plays agreed on (0: answers are not compared).
    comparable: int = 0
    #: Whether rewards and ``finished`` agreed too (else only the answers' text is compared).
    rewards_stable: bool = False
    exchanges: list[Exchange] = field(default_factory=list)
    #: Why the task has no usable control (its solo session was refused), if so.
    refused: str | None = None
    #: How long its prompt took to be ready after ``/create`` (the environment's setup, waited out), in seconds.
    setup_s: float = 0.0
    #: How long each call of its script took, alone, in seconds: what the probe's time budget is sized by.
    call_s: list[float] = field(default_factory=list)

    def expects(self, position: int) -> str | None:
        """The answer step ``position`` must give, when it can be told (else ``None``)."""
        if position < min(self.comparable, len(self.answers)):
            return self.answers[position]
        return None


@dataclass
class Scene:
    """Several sessions and every request they sent, in the order sent (other sessions' deletes included)."""

    name: str
    tracks: dict[str, Track] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    #: Why the scene could not be played (a check reading it skips with this), if so.
    skip: str | None = None
    #: The scene can never be played on this environment (one task, tasks alike, no slow tool): its checks are
    #: not applicable rather than skipped — no run of this environment could do better.
    inapplicable: bool = False
    #: What the scene measured beyond its steps (ids handed out, timings, ...).
    measured: dict[str, Any] = field(default_factory=dict)

    def exchanges(self, upto: int | None = None) -> list[Exchange]:
        """Every request of the scene in the order sent, up to and including step ``upto``."""
        chosen = self.steps if upto is None else self.steps[: upto + 1]
        return [s.exchange for s in chosen]

    def of(self, label: str, action: str | None = None) -> list[Step]:
        return [s for s in self.steps if s.session == label and (action is None or s.action == action)]


@dataclass
class Found:
    """A rule of §15 the stateful explorer broke, with the shortest interleaving it found that breaks it."""

    #: The check whose rule it is (``isolation.*``).
    check: str
    message: str
    #: The exchanges that show it (the breaking step first).
    evidence: list[Exchange]
    #: Every request of the interleaving, in the order sent: its reproducer.
    replay: list[Exchange]
    #: The interleaving, one line per step (``create A on task 0``, ``call B``, ...).
    program: list[str]
    #: The interleaving as a scene (its sessions and steps, up to the breaking one): judged again, it breaks again.
    scene: Scene | None = None


@dataclass
class Explored:
    """What ``--explore N`` did: how much it explored, and what it found."""

    seed: int
    budget: int
    steps: int = 0
    examples: int = 0
    seconds: float = 0.0
    found: list[Found] = field(default_factory=list)
    #: Why it stopped before its budget (time, or nothing to explore), if it did.
    stopped: str = ""
    #: A digest of every step it took, in order: the same seed against the same server takes the same steps.
    trail: str = ""
    #: Its time bound in seconds, and how it was sized (the play budget, or the environment's measured times).
    limit_s: float = 0.0
    limit_why: str = ""

    def of(self, check: str) -> Found | None:
        return next((f for f in self.found if f.check == check), None)


@dataclass
class Isolation:
    """What the isolation probe learned: a control per task, the scenes it played, what the explorer found."""

    controls: dict[int | None, Control] = field(default_factory=dict)
    scenes: dict[str, Scene] = field(default_factory=dict)
    #: Why no scene could be played at all, if so.
    skip: str | None = None
    #: The stateful explorer's run (``--explore N``), if asked for.
    explored: Explored | None = None
    seconds: float = 0.0
    #: The probe's time budget in seconds (the explorer aside), and how it was sized: the play budget, or scaled
    #: from the environment's measured setup and call times so that a slow environment plays every scene.
    budget_s: float = 0.0
    budget_why: str = ""
    #: How long the controls and scenes took (the explorer aside), seconds: what the budget bounds.
    scenes_s: float = 0.0

    def scene(self, name: str) -> Scene:
        """The scene ``name`` (one that never ran is a skip naming why)."""
        return self.scenes.get(name) or Scene(name, skip=self.skip or "not played")


@dataclass
class Problem:
    """One rule of §15 a scene broke: at which step, in which session, and how."""

    kind: str  # unusable, finished, prompt, answer, resume, ping, refused
    session: str
    step: int
    message: str
    #: Which other session's request came just before, and what is most likely shared (see :func:`likely_shared`).
    context: str = ""

    @property
    def told(self) -> str:
        """The message with its context: what a finding says."""
        return self.message + self.context


# -- reading answers ---------------------------------------------------------------------------------
def outcome_kind(exchange: Exchange, timeout: float) -> tuple[str, Any]:
    """``(kind, result)`` of a ``/call`` answer (the tool-failure classification the probes use)."""
    outcome = classify(exchange, timeout)
    return outcome.kind, outcome.result if outcome.kind in ("ok", "ok-false") else outcome.detail


def signature(exchange: Exchange, timeout: float, *, rewards: bool = True) -> str:
    """What a call answered, comparable between two sessions of the same task.

    ``ok:true``: the text of its blocks, then (with ``rewards``) its reward and ``finished``;
    ``ok:false``: its reason and error; anything else: the kind of failure.
    """
    kind, result = outcome_kind(exchange, timeout)
    if kind == "ok":
        output = result.get("output") if isinstance(result, dict) else None
        text = answer_text(output)
        if rewards and isinstance(output, dict):
            return f"{text} · reward {output.get('reward')!r} · finished {output.get('finished')!r}"
        return text
    if kind == "ok-false" and isinstance(result, dict):
        return f"ok:false {result.get('reason')}: {result.get('error')}"
    return kind


def finished_of(exchange: Exchange) -> bool:
    """The call answered ``ok: true`` with ``finished: true``."""
    kind, body = result_of(exchange)
    output = body.get("output") if kind == "result" and isinstance(body, dict) and body.get("ok") is True else None
    return isinstance(output, dict) and output.get("finished") is True


def refused_finished(exchange: Exchange) -> bool:
    """The call was refused because the episode has finished (``ok: false``, ``reason: episode_finished``)."""
    kind, body = result_of(exchange)
    return kind == "result" and isinstance(body, dict) and body.get("ok") is False and body.get("reason") == protocol.REASON_EPISODE_FINISHED


def prompt_text(exchange: Exchange | None) -> str | None:
    """The text of a ``/prompt`` answer's blocks (``None`` unless it answered 200)."""
    return None if exchange is None or exchange.status != 200 else _text_of(exchange)


def resumed_result(exchange: Exchange) -> str | None:
    """The reassembled result of a call or resume (``None`` without an ``end``)."""
    kind, body = result_of(exchange)
    if kind != "result":
        return None
    return json.dumps(body, sort_keys=True)


def distinct(a: Control, b: Control) -> bool:
    """Whether a session served by the wrong one of two tasks would show it: prompts or an answer differ."""
    if a.prompt_stable and b.prompt_stable and a.prompt != b.prompt:
        return True
    shared = min(a.comparable, b.comparable, len(a.answers), len(b.answers))
    return any(a.answers[k] != b.answers[k] for k in range(shared))


def comparable(control: Control) -> bool:
    """Whether anything of the task is a fingerprint: its prompt, or at least one answer."""
    return control.prompt_stable or control.comparable > 0


# -- the rules -----------------------------------------------------------------------------------------
#: A session's own protocol requests that change what it sees, in order: ``("prompt", None)`` or ``("call", k)``.
Move = tuple[str, int | None]


def trace_of(control: Control) -> list[Move]:
    """The requests the control sent, in order: the prompt first (as every real client does), then its script."""
    return [("prompt", None)] + [("call", k) for k in range(len(control.script))]


def judge(scene: Scene, controls: dict[int | None, Control], timeout: float, ttl: float | None = None) -> list[Problem]:
    """Every rule of §15 the scene broke, in the order its steps were sent.

    A session is compared with its control only while it has sent the very requests the control sent, in
    the same order (:func:`trace_of`): what a session's own calls did to its state — a counter's value, a
    board, a transcript in its prompt — is what the control saw too, and never a finding. A session that
    left the control's path (a prompt fetched again, a call beyond the script) is held only to what no
    request of its own can excuse: answers at all, never a 404 or a 5xx, never refused as finished unless
    it finished. With ``ttl``, a session that answers 404 after being idle that long was reaped (§8), not broken.
    """
    problems: list[Problem] = []
    finished: dict[str, bool] = {}
    calls: dict[str, int] = {}
    history: dict[str, list[Move]] = {}
    seen: dict[str, float] = {}  # session -> when its last request ended
    reaped: set[str] = set()
    for n, step in enumerate(scene.steps):
        track = scene.tracks.get(step.session)
        if track is None:
            continue
        control = controls.get(track.index)
        ex = step.exchange
        idle = ex.started_at - seen.get(step.session, ex.started_at)
        seen[step.session] = ex.started_at + ex.elapsed
        if step.action != "create" and (step.session in reaped or (ttl is not None and ex.status == 404 and idle >= ttl * 0.8)):
            reaped.add(step.session)  # idle past the TTL: gone by the rules, whatever it answers now
            continue
        if step.action == "create":
            reaped.discard(step.session)
            finished[step.session], calls[step.session], history[step.session] = False, 0, []
            continue
        mine = history.setdefault(step.session, [])
        if step.action in ("prompt", "call"):
            mine.append((step.action, step.position))
        follows = control is not None and mine == trace_of(control)[: len(mine)]
        found: Problem | None = None
        if step.action == "prompt":
            text = prompt_text(ex)
            if text is None and (control is None or control.prompt_answered):  # as for calls: judged where alone it answered
                found = Problem("unusable", step.session, n, f"session {step.session}'s /prompt answered {_answer(ex)}")
            elif follows and control is not None and control.prompt_stable and text != control.prompt:
                found = Problem(
                    "prompt",
                    step.session,
                    n,
                    f"session {step.session} (task {track.index}) was shown the prompt {short(text, 90)!r}; alone, the "
                    f"first prompt of task {track.index} is {short(control.prompt, 90)!r}",
                )
        elif step.action == "ping":
            if ex.status != 200:
                found = Problem("ping", step.session, n, f"session {step.session}'s /ping answered {_answer(ex)}")
        elif step.action == "resume":
            problems += _resume(scene, step, n)
        elif step.action == "call" and control is not None and step.position is not None:
            found = _call(step, n, track, control, finished.get(step.session, False), calls.get(step.session, 0), timeout, follows)
            calls[step.session] = calls.get(step.session, 0) + 1
            if finished_of(ex):
                finished[step.session] = True
        if found is not None:
            found.context = _context(scene, n, controls, found, timeout)
            problems.append(found)
    return problems


def _call(step: Step, n: int, track: Track, control: Control, done: bool, made: int, timeout: float, follows: bool) -> Problem | None:
    ex, position = step.exchange, step.position or 0
    kind, result = outcome_kind(ex, timeout)
    where = f"session {step.session} (task {track.index}), call {made + 1} {_tool(ex)}"
    alone = control.kinds[position] if follows and position < len(control.kinds) else None
    if kind in UNUSABLE:
        if alone in ("ok", "ok-false"):
            return Problem("unusable", step.session, n, f"{where} answered {_failure(kind, result, ex)}; alone, the task answered it")
        if not follows and kind in ("http", "reaped"):
            return Problem("unusable", step.session, n, f"{where} answered {_failure(kind, result, ex)}")
        return None
    if refused_finished(ex) and not done:
        control_refused = (
            follows
            and position < len(control.answers)
            and control.answers[position].startswith(f"ok:false {protocol.REASON_EPISODE_FINISHED}")
        )
        if not control_refused:
            first = " — its first call" if made == 0 else ""
            return Problem("finished", step.session, n, f"{where} was refused as episode_finished, yet this session never finished{first}")
    expected = control.expects(position) if follows else None
    if expected is not None:
        got = signature(ex, timeout, rewards=control.rewards_stable)
        if got != expected:
            return Problem(
                "answer",
                step.session,
                n,
                f"{where} answered {short(got, 90)!r}; alone, after the same requests, task {track.index} answered {short(expected, 90)!r}",
            )
    return None


def _context(scene: Scene, n: int, controls: dict[int | None, Control], problem: Problem, timeout: float) -> str:
    """Which other session's request came just before step ``n``, and what is most likely shared."""
    before = next((s for s in reversed(scene.steps[:n]) if s.session != problem.session and s.session in scene.tracks), None)
    preceded = f" — just after {_request(scene, before)}" if before is not None else ""
    return f"{preceded}. {likely_shared(scene, n, controls, problem, timeout)}"


def _request(scene: Scene, step: Step) -> str:
    """``session B's /create on task 5``, ``session C's call find({...})``, ``session C's /delete``."""
    track = scene.tracks[step.session]
    if step.action == "create":
        return f"session {step.session}'s /create on task {track.index}"
    if step.action in ("call", "resume"):
        return f"session {step.session}'s {step.action} {_tool(step.exchange)} (task {track.index})"
    return f"session {step.session}'s /{step.action}"


def likely_shared(scene: Scene, n: int, controls: dict[int | None, Control], problem: Problem, timeout: float) -> str:
    """The likeliest thing the sessions share, read from what the session was shown instead of its own."""
    step, track = scene.steps[n], scene.tracks[problem.session]
    if problem.kind == "finished":
        return "Likely shared: a finished episode kept by task or by session id (a cache or dict that outlives the session)"
    if problem.kind == "unusable" and any(s.action == "delete" and s.session != problem.session for s in scene.steps[:n]):
        return "Likely shared: something another session's /delete tore down (a sandbox, directory or connection per task)"
    if problem.kind not in ("prompt", "answer"):
        return "Likely shared: state kept outside the session's own object"
    if problem.kind == "prompt":
        got = prompt_text(step.exchange)
        theirs = [c for i, c in controls.items() if i != track.index and c.prompt_stable and c.prompt == got]
    else:
        got = signature(step.exchange, timeout)
        bare = signature(step.exchange, timeout, rewards=False)
        theirs = [c for i, c in controls.items() if i != track.index and (got in c.answers or bare in c.answers)]
    if theirs:
        return (
            f"Likely shared: it is what task {theirs[0].index} shows — the task lives in a module-level object (a global, "
            "a class attribute, a 'current' variable) that another session's request overwrote, or its draws come from "
            "a global random generator that another session's /create seeded"
        )
    own = controls.get(track.index)
    if problem.kind == "answer" and own is not None and (got in own.answers or bare in own.answers):
        return (
            f"Likely shared: it is task {track.index}'s own answer at another step — sessions on one task share one "
            "game or episode (an object or cache keyed by the task)"
        )
    return (
        "Likely shared: a module-level object, or a global random generator — a library that seeds or draws from "
        "Python's global `random` (or numpy's) lets one session's /create or calls change another's draws; give each "
        "session its own random.Random(seed)"
    )


def _resume(scene: Scene, step: Step, n: int) -> list[Problem]:
    if step.resumes is None:
        return []
    original = scene.steps[step.resumes]
    if original.session != step.session:
        return []  # a task_id of another session: recorded, judged by the check (the reference replays it anywhere)
    first, again = resumed_result(original.exchange), resumed_result(step.exchange)
    if first is None:
        return []
    if again != first:
        task_id = _task_id_sent(step.exchange)
        return [
            Problem(
                "resume",
                step.session,
                n,
                f"session {step.session} resumed its own task_id {task_id!r} and got {short(again or _answer(step.exchange), 90)}; "
                f"its call had returned {short(first, 90)}",
            )
        ]
    return []


def _task_id_sent(exchange: Exchange) -> str | None:
    try:
        body = json.loads(exchange.request_body)
    except ValueError:
        return None
    return body.get("task_id") if isinstance(body, dict) else None


def _tool(exchange: Exchange) -> str:
    try:
        body = json.loads(exchange.request_body)
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    return f"{body.get('name')}({short(body.get('input'), 40)})"


def _answer(exchange: Exchange) -> str:
    return answer(exchange)


def _failure(kind: str, detail: Any, exchange: Exchange) -> str:
    if kind == "reaped":
        return "404: the session is gone"
    return f"{kind}: {short(detail, 100)}" if detail else kind


def related(scene: Scene, problem: Problem) -> list[Exchange]:
    """The exchanges that show a problem: its own, then what other sessions did just before it (a create, a delete)."""
    shown = [scene.steps[problem.step].exchange]
    for step in reversed(scene.steps[: problem.step]):
        if step.session != problem.session and step.action in ("create", "delete", "call") and len(shown) < 4:
            shown.append(step.exchange)
    return shown


def through_batch(scene: Scene, step: int) -> int:
    """``step``, or the last step sent together with it: a race is replayed with every request that met in it."""
    end = max(s.exchange.started_at + s.exchange.elapsed for s in scene.steps[: step + 1])
    while step + 1 < len(scene.steps) and scene.steps[step + 1].exchange.started_at < end:
        step += 1
        end = max(end, scene.steps[step].exchange.started_at + scene.steps[step].exchange.elapsed)
    return step


def labels(tracks: Iterable[Track]) -> str:
    """``A on task 0, B on task 5``."""
    return ", ".join(f"{t.label} on task {t.index}" for t in tracks)
