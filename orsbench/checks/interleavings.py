"""The stateful explorer (``orsbench check --explore N``): random interleavings of sessions, checked after every step.

The isolation probe's scenes (:mod:`orsbench.checks.isolation_probe`) are the interleavings a
person thought of. This explorer tries the ones nobody did: a hypothesis
:class:`~hypothesis.stateful.RuleBasedStateMachine` whose rules are the requests of several
sessions — *create* (on one of the tasks the probe controlled; sometimes with an id deleted
before), *prompt*, *call* (the next call of the task's script), *resume* (the session's last
call, by its ``task_id``), *ping*, *delete*, and *calls at once* (every open session's next
call, sent together) — over two to four session slots. After every step the whole interleaving
so far is judged by the rules of §15 (:func:`orsbench.checks.scenes.judge`, against each task's
control); a broken rule fails the step, hypothesis shrinks the interleaving to the shortest one
that still breaks it, and the check the rule belongs to fails with that interleaving as its
reproducer (every request in the order sent).

Seeded (``--explore-seed``, default the fuzz's ``--seed``), bounded by N steps while generating
and by time in all, shrinking included (the play budget, 30 s, or what N steps take on this environment
if more: :func:`time_limit`, from the setup and call times the controls measured); hypothesis' examples database is kept where
``--explore-db PATH`` says (a failure found once is tried first next time), and nowhere otherwise.
"""

from __future__ import annotations

import hashlib
import string
import time
from collections.abc import Callable
from typing import Any

from orsbench.checks.collector import Collector
from orsbench.checks.evidence import task_id_of
from orsbench.checks.scenes import Control, Explored, Found, Isolation, Problem, Scene, judge, related, through_batch

#: How many session slots an interleaving uses (2–4 sessions at a time).
SLOTS = 4
#: Steps per interleaving while generating (hypothesis runs up to this many rules per example).
STEPS_PER_EXAMPLE = 12
#: The explorer's time bound: the play budget (30 s), or this much per asked-for step when N asks for more.
SECONDS_PER_STEP = 0.25
#: Which check each kind of broken rule belongs to, when nothing more specific applies.
RULE_OF = {"resume": "isolation.resume_own_result"}


class Broken(AssertionError):
    """A rule of §15 broke at the last step (what the state machine's invariant raises)."""


class World:
    """One interleaving being played: its sessions (slot → label), what each did, and every request, in order."""

    def __init__(self, stage: Any, tasks: list[Control]) -> None:
        #: The isolation probe's Stage this interleaving plays on (made by the caller: this module imports no probe).
        self.stage = stage
        self.tasks = tasks
        self.labels: dict[int, str] = {}  # slot -> the label of the session open in it
        self.generation: dict[int, int] = {}
        self.deleted: list[tuple[str, Control]] = []  # ids deleted in this interleaving, with their task
        self.position: dict[str, int] = {}
        self.last_call: dict[str, int] = {}  # label -> the step of its last call
        #: Sessions that fetched their prompt: a session's first request after /create is its prompt, as every real
        #: client sends it (and as the control did: environments that deal their game in get_prompt need it).
        self.prompted: set[str] = set()
        self.program: list[str] = []
        self.at_once: set[int] = set()  # steps sent together with others
        self.judged = 0

    @property
    def scene(self) -> Scene:
        return self.stage.scene

    def label(self, slot: int) -> str:
        generation = self.generation[slot] = self.generation.get(slot, 0) + 1
        letter = string.ascii_uppercase[slot]
        return letter if generation == 1 else f"{letter}{generation}"

    def open_slot(self, n: int) -> int | None:
        """The ``n``-th open slot (modulo their number), so that every drawn step acts on a session."""
        open_ = sorted(self.labels)
        return open_[n % len(open_)] if open_ else None

    # the rules' actions
    def create(self, n: int, task: int, again: bool) -> None:
        free = [slot for slot in range(SLOTS) if slot not in self.labels]
        if not free:
            return
        slot = free[n % len(free)]
        control = self.tasks[task % len(self.tasks)]
        reused = self.deleted.pop(0) if again and self.deleted else None
        label = self.label(slot)
        if reused is not None:
            control = reused[1]
        if not self.stage.open(label, control.index, sid=reused[0] if reused else None, again=reused is not None):
            return
        self.labels[slot] = label
        self.position[label] = 0
        self.program.append(f"create {label} on task {control.index}" + (" (an id deleted before)" if reused else ""))

    def prompt(self, n: int) -> None:
        """Fetch the prompt of an open session that has not fetched it yet (a client fetches it once, first)."""
        waiting = [slot for slot in sorted(self.labels) if self.labels[slot] not in self.prompted]
        if waiting:
            self._prompt(self.labels[waiting[n % len(waiting)]])

    def _prompt(self, label: str) -> None:
        self.stage.prompt(label)
        self.prompted.add(label)
        self.program.append(f"prompt {label}")

    def _next(self, label: str) -> int | None:
        script = self.stage.control(label).script
        if not script:
            return None
        position = min(self.position[label], len(script) - 1)
        self.position[label] += 1
        return position

    def call(self, n: int) -> None:
        slot = self.open_slot(n)
        label = self.labels.get(slot) if slot is not None else None
        if label is not None and label not in self.prompted:
            self._prompt(label)  # its first request: the prompt, as the control's was
            return
        position = self._next(label) if label else None
        if label is None or position is None:
            return
        self.stage.call(label, position)
        self.last_call[label] = len(self.scene.steps) - 1
        self.program.append(f"call {label} ({self.stage.control(label).script[position][0]})")

    def calls_at_once(self) -> None:
        chosen = [(label, p) for label in self.labels.values() if label in self.prompted and (p := self._next(label)) is not None]
        if len(chosen) < 2:
            return
        first = len(self.scene.steps)
        self.stage.at_once([lambda label=label, p=p: self.stage.call(label, p) for label, p in chosen])
        self.at_once.update(range(first, len(self.scene.steps)))
        for n in range(first, len(self.scene.steps)):
            self.last_call[self.scene.steps[n].session] = n
        self.program.append(f"calls at once: {', '.join(label for label, _ in chosen)}")

    def resume(self, n: int) -> None:
        slot = self.open_slot(n)
        label = self.labels.get(slot) if slot is not None else None
        if label is None or label not in self.last_call or not task_id_of(self.scene.steps[self.last_call[label]].exchange):
            return
        self.stage.resume(label, self.last_call[label])
        self.program.append(f"resume {label}'s last call")

    def ping(self, n: int) -> None:
        slot = self.open_slot(n)
        if slot is not None:
            self.stage.ping(self.labels[slot])
            self.program.append(f"ping {self.labels[slot]}")

    def delete(self, n: int) -> None:
        slot = self.open_slot(n)
        label = self.labels.pop(slot, None) if slot is not None else None
        if label is None:
            return
        track = self.scene.tracks[label]
        self.stage.delete(label)
        self.deleted.append((track.sid, self.stage.control(label)))
        self.program.append(f"delete {label}")

    def close(self) -> None:
        for label in list(self.labels.values()):
            self.stage.col.end_session(self.scene.tracks[label].sid)
        self.labels.clear()

    # the invariant
    def broken(self, timeout: float, ttl: float | None) -> Problem | None:
        """The first rule the steps since the last look broke (judged with everything before them)."""
        problems = [p for p in judge(self.scene, self.stage.facts.controls, timeout, ttl) if p.step >= self.judged]
        self.judged = len(self.scene.steps)
        return problems[0] if problems else None

    def check_of(self, problem: Problem) -> str:
        """The check whose rule ``problem`` broke."""
        if problem.kind in RULE_OF:
            return RULE_OF[problem.kind]
        if problem.step in self.at_once:
            return "isolation.concurrent_calls_own_task"
        track = self.scene.tracks[problem.session]
        if track.reused:
            return "isolation.recreated_sid_fresh"
        born = next(n for n, s in enumerate(self.scene.steps) if s.session == problem.session)
        others = [s for s in self.scene.steps[born : problem.step] if s.session != problem.session]
        if problem.kind in ("unusable", "ping") and any(s.action == "delete" for s in others):
            return "isolation.delete_leaves_other"
        other_tasks = {self.scene.tracks[s.session].index for s in others if s.session in self.scene.tracks}
        if problem.kind == "finished" or other_tasks <= {track.index}:
            return "isolation.same_task_fresh"
        return "isolation.interleaved_tasks"


def explore(col: Collector, facts: Isolation, new_stage: Callable[[], Any]) -> Explored:
    """Run the explorer for ``--explore`` steps (see the module docstring); what it did and found.

    ``new_stage``: a fresh stage for each interleaving (the isolation probe passes its own ``Stage``).
    """
    options = col.options
    seed = options.explore_seed if options.explore_seed is not None else options.seed
    explored = Explored(seed=seed, budget=options.explore)
    tasks = [c for c in facts.controls.values() if c.refused is None]
    if not tasks:
        explored.stopped = "no task could be opened"
        return explored
    try:
        from hypothesis import HealthCheck, Phase, Verbosity, settings
        from hypothesis import seed as seeded
        from hypothesis import strategies as st
        from hypothesis.database import DirectoryBasedExampleDatabase
        from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, precondition, rule
    except ImportError as exc:  # hypothesis is a core dependency; say so rather than crash if it is missing
        explored.stopped = f"hypothesis is not importable: {exc}"
        return explored

    ttl, _ = col.ttl()
    trail = hashlib.sha256()
    started = time.monotonic()
    explored.limit_s, explored.limit_why = time_limit(options.play_seconds, options.explore, tasks)
    limit = explored.limit_s
    deadline = started + limit
    state: dict[str, Any] = {"found": False}

    def spent() -> bool:
        over_budget = explored.steps >= explored.budget and not state["found"]
        return over_budget or time.monotonic() > deadline

    slots = st.integers(0, SLOTS - 1)

    def some_open(machine: Any) -> bool:
        return bool(machine.world.labels)

    def some_free(machine: Any) -> bool:
        return len(machine.world.labels) < SLOTS

    def two_open(machine: Any) -> bool:
        return len(machine.world.labels) >= 2

    class Interleavings(RuleBasedStateMachine):
        """Two to four sessions over the controlled tasks, in any order (§15)."""

        def __init__(self) -> None:
            super().__init__()
            self.world = World(new_stage(), tasks)

        def _step(self, action: Any, *args: Any) -> None:
            if spent():
                return
            before = len(self.world.scene.steps)
            action(*args)
            if len(self.world.scene.steps) > before:
                explored.steps += 1
                trail.update(self.world.program[-1].encode() if self.world.program else b"")
                if len(self.world.program) == 1:
                    explored.examples += 1  # an interleaving that sent something

        @precondition(some_free)
        @rule(n=slots, task=st.integers(0, len(tasks) - 1), again=st.booleans())
        def create(self, n: int, task: int, again: bool) -> None:
            self._step(self.world.create, n, task, again)

        @precondition(some_open)
        @rule(n=slots)
        def prompt(self, n: int) -> None:
            self._step(self.world.prompt, n)

        @precondition(some_open)
        @rule(n=slots)
        def call(self, n: int) -> None:
            self._step(self.world.call, n)

        @precondition(two_open)
        @rule()
        def calls_at_once(self) -> None:
            self._step(self.world.calls_at_once)

        @precondition(some_open)
        @rule(n=slots)
        def resume(self, n: int) -> None:
            self._step(self.world.resume, n)

        @precondition(some_open)
        @rule(n=slots)
        def ping(self, n: int) -> None:
            self._step(self.world.ping, n)

        @precondition(some_open)
        @rule(n=slots)
        def delete(self, n: int) -> None:
            self._step(self.world.delete, n)

        @invariant()
        def sessions_keep_to_themselves(self) -> None:
            problem = self.world.broken(options.timeout, ttl)
            if problem is not None:
                state["found"] = True
                _remember(explored, self.world, problem)
                raise Broken(problem.told)

        def teardown(self) -> None:
            self.world.close()

    config = settings(
        max_examples=max(1, -(-explored.budget // STEPS_PER_EXAMPLE) * 4),
        stateful_step_count=STEPS_PER_EXAMPLE,
        deadline=None,
        database=DirectoryBasedExampleDatabase(options.explore_db) if options.explore_db else None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
    )
    machine = seeded(seed)(Interleavings)
    test = get_state_machine_test(machine, settings=config)
    try:
        test()
    except Exception:  # noqa: BLE001 - a broken rule (already remembered), or hypothesis giving up on a flaky one
        pass
    explored.seconds = round(time.monotonic() - started, 3)
    explored.trail = trail.hexdigest()[:16]
    if time.monotonic() > deadline:
        explored.stopped = f"the time budget ({limit:g} s: {explored.limit_why}) was spent"
    return explored


def time_limit(play_seconds: float, steps: int, tasks: list[Control]) -> tuple[float, str]:
    """The explorer's time bound for ``steps`` steps, and how it was sized.

    A step costs what the environment takes for it: of every three steps drawn about two make a call or
    fetch a new session's prompt (calls at once, resumes, creates and pings cost little), so a step is
    counted as a third of a setup and two calls, as the controls timed them alone — at least
    :data:`SECONDS_PER_STEP`. The bound is that times the steps asked for (with room for shrinking), never less
    than the play budget: an environment with 8 s tools gets the steps it was asked for, not four of them.
    """
    calls = [t for c in tasks for t in c.call_s]
    call = sum(calls) / len(calls) if calls else 0.0
    setup = max((c.setup_s for c in tasks), default=0.0)
    per_step = max(SECONDS_PER_STEP, (setup + 2 * call) / 3)
    wanted = round(steps * per_step * 1.5, 1)
    if wanted <= play_seconds:
        return play_seconds, f"the play budget ({play_seconds:g} s)"
    return wanted, f"{steps} steps at about {per_step:.2f} s each here (setup and calls as timed alone), with room to shrink"


def _remember(explored: Explored, world: World, problem: Problem) -> None:
    """Keep the shortest interleaving that broke each check's rule."""
    check = world.check_of(problem)
    kept = explored.of(check)
    if kept is not None and len(kept.program) <= len(world.program):
        return
    if kept is not None:
        explored.found.remove(kept)
    upto = through_batch(world.scene, problem.step)
    scene = Scene(world.scene.name, dict(world.scene.tracks), list(world.scene.steps[: upto + 1]))
    explored.found.append(
        Found(
            check=check,
            message=problem.told,
            evidence=related(world.scene, problem),
            replay=scene.exchanges(),
            program=list(world.program),
            scene=scene,
        )
    )
