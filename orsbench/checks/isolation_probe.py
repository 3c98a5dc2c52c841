"""The ``isolation`` probe: several sessions at once, as a trainer uses an environment (``docs/protocol.md`` §15).

It runs after play, fuzz and quality — it replays the calls the play probe learned — and
before timing. First a **control** per task: the task played alone by one session (the
played episode's calls, then its last call again), compared with the play probe's episode
to learn what is a fingerprint of the task (a prompt two solo sessions saw alike, answers two
solo plays agreed on). Then the scenes, each a few sessions and every request they send, in
the order sent (:class:`~orsbench.checks.scenes.Scene`):

* ``interleaved`` — A on task i, B on task j, both created before either is used, then used in
  turn: prompts, then the calls of each task's script alternately;
* ``same_task`` — C, D, F and G on one task: C plays its script to the end, D and F make their
  first calls, C is deleted, D and F carry on and G (idle until then) plays the whole script; then
  C's id is created again and used;
* ``resume`` — A calls, B (on another task) calls, then each resumes its own ``task_id`` and A
  resumes B's;
* ``concurrent_create`` — eight ``/create_session`` at once;
* ``ping_during_call`` — a ping sent while the slowest tool runs in the same session;
* ``concurrent_calls`` — eight sessions over two tasks, created, prompted and called at once (each
  round of their scripts sent together).

The TTL scene (an idle session while another pings) is in :mod:`orsbench.checks.timing`.
Bounded like the other probes: each call by ``--timeout``, a script by
:data:`MAX_SCRIPT` calls and :data:`SCRIPT_SECONDS` of tool time, the whole probe by
the play budget (``Options.play_seconds``, 30 s) — or, where the controls' measured setup and call
times say the scenes need more and the slowest tool takes at most :data:`FULLY_CHECKED_S`, by a budget
scaled to what they need (:class:`Costs`; ``Isolation.budget_why`` says which). A scene starts only
when its estimated time fits what is left, so the budget holds; sessions are deleted at the end of
each scene. Where a scene cannot be played (one task, tasks alike, no ids, no slow tool) it records
why, and its checks skip.
With ``--explore N`` the stateful explorer (:mod:`orsbench.checks.interleavings`) runs last.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from orsbench.checks.collector import Collector, probe
from orsbench.checks.evidence import NO_SUCH_TOOL, Episode, answer, task_id_of
from orsbench.checks.explore import answer_of, classify
from orsbench.checks.scenes import (
    Control,
    Isolation,
    Scene,
    Step,
    Track,
    comparable,
    distinct,
    finished_of,
    prompt_text,
    signature,
)
from orsbench.protocol import JSON
from orsbench.wire.evidence import Exchange

T = TypeVar("T")

#: At most this many of an episode's calls are replayed per session (plus its last call again).
MAX_SCRIPT = 12
#: A script stops before the call that would take its tools' time (as the play probe measured it) past this.
SCRIPT_SECONDS = 1.0
#: How many ``/create_session`` (and sessions) are sent at once.
AT_ONCE = 8
#: A tool is slow enough to ping during when the play probe saw it take this long ...
SLOW_CALL_S = 0.5
#: A slowest tool up to this long gets every scene played: the probe's budget is scaled from its measured times.
FULLY_CHECKED_S = 10.0
#: ... and short enough to wait for when it takes at most this long (as long as any tool of a fully checked environment).
SLOWEST_WAITED_S = FULLY_CHECKED_S
#: A ping answered within this long of the call's end was answered with it (its thread's clock lags a little).
WITH_CALL_S = 0.15
#: The tasks given a control (and used by the scenes): the played ones, at most this many.
MAX_TASKS = 2


@probe("isolation", leaf=True)  # the timing probe after it reads nothing it finds
def probe_isolation(col: Collector) -> None:
    """Controls per task, then the scenes of several sessions at once; then the explorer, if asked."""
    ev = col.ev
    if ev.env is None:
        return
    facts = ev.facts.isolation = Isolation()
    started = time.monotonic()
    try:
        facts.controls = {index: _control(col, index, script) for index, script in _tasks(col)}
        usable = [c for c in facts.controls.values() if c.refused is None]
        if not usable:
            first = next(iter(facts.controls.values()), None)
            facts.skip = f"no session could be opened: {first.refused}" if first else "no task to open a session on"
            return
        costs = Costs.of(facts, ev.facts.durations)
        facts.budget_s, facts.budget_why = costs.budget(col.options.play_seconds, time.monotonic() - started)
        for name, play in SCENES:
            spent = time.monotonic() - started
            need = costs.scene(name, facts)
            if spent + need > facts.budget_s:
                if costs.slowest > FULLY_CHECKED_S:
                    facts.scenes[name] = Scene(
                        name,
                        skip=f"the isolation probe's time budget ({facts.budget_s:g} s) would be spent: this scene takes about "
                        f"{need:.0f} s here, and {spent:.0f} s are gone ({facts.budget_why})",
                    )
                    continue
                # Every scene of an environment whose slowest tool takes at most FULLY_CHECKED_S is played: the budget
                # grows to what the measurements say this scene needs, and says so.
                facts.budget_s = round(spent + need * MARGIN, 1)
                facts.budget_why += f"; raised to {facts.budget_s:g} s for the {name} scene (about {need:.0f} s here)"
            began = time.monotonic()
            facts.scenes[name] = play(Stage(col, name, facts))
            facts.scenes[name].measured.setdefault("seconds", round(time.monotonic() - began, 3))
            if name == "ping_during_call" and facts.scenes[name].measured.get("ping_waited_for_call"):
                costs.serial = True  # the server runs one call at a time: calls sent at once take their sum
        facts.scenes_s = round(time.monotonic() - started, 3)
        if col.options.explore > 0:
            from orsbench.checks.interleavings import explore  # imports hypothesis: only when asked for

            facts.explored = explore(col, facts, lambda: Stage(col, "explore", facts))
    finally:
        facts.seconds = round(time.monotonic() - started, 3)


# -- what the scenes cost here ----------------------------------------------------------------------------
#: Headroom over the estimate when the budget is scaled (timings on a loaded machine wander).
MARGIN = 1.3


@dataclass
class Costs:
    """What each scene costs on this environment, from the controls' measured setup and call times (alone)."""

    #: The longest setup waited out by a control (``/create`` to a ready prompt), seconds.
    setup: float
    #: The longest script, played alone, seconds.
    script: float
    #: The longest first call of a script, seconds.
    first: float
    #: The slowest tool the play probe or a control saw, seconds.
    slowest: float
    #: The tool ``ping_during_call`` waits on, seconds (0: none).
    ping_tool: float = 0.0
    #: Calls sent at once run one after another (the ping scene showed a blocked event loop).
    serial: bool = False

    @classmethod
    def of(cls, facts: Isolation, durations: dict[str, float]) -> Costs:
        usable = [c for c in facts.controls.values() if c.refused is None]
        calls = [t for c in usable for t in c.call_s]
        picked = _slow_tool(durations)
        return cls(
            setup=max((c.setup_s for c in usable), default=0.0),
            script=max((sum(c.call_s) for c in usable), default=0.0),
            first=max((c.call_s[0] for c in usable if c.call_s), default=0.0),
            slowest=max([*durations.values(), *calls, 0.0]),
            ping_tool=picked[1] if picked is not None and picked[1] <= FULLY_CHECKED_S else 0.0,
        )

    def scene(self, name: str, facts: Isolation) -> float:
        """About how long scene ``name`` takes here (sessions set up in turn, at worst; requests ~50 ms each)."""
        requests = 0.05
        if name == "interleaved":
            return 2 * self.setup + 2 * self.script + 8 * requests
        if name == "same_task":  # C plays all, D two calls, F and G all, C2 one; C's and C2's setups waited out
            return 2 * self.setup + 3 * self.script + 2 * self.first + 20 * requests
        if name == "resume":  # A's call, and resuming it (a replay, or the call again)
            return 2 * self.setup + 2 * self.first + 8 * requests
        if name == "concurrent_create":
            return 8 * requests
        if name == "ping_during_call":
            return self.setup + self.ping_tool + 4 * requests
        if name == "concurrent_calls":
            return self.setup + self.script * (AT_ONCE if self.serial else 1) + 4 * requests * AT_ONCE
        return 0.0

    def budget(self, play_seconds: float, spent: float) -> tuple[float, str]:
        """The probe's budget, and how it was sized: the play budget, or what every scene needs here."""
        need = spent + sum(self.scene(name, Isolation()) for name, _ in SCENES)
        measured = f"setup {self.setup:.1f} s, a script {self.script:.1f} s alone, the slowest tool {self.slowest:.1f} s"
        if need <= play_seconds or self.slowest > FULLY_CHECKED_S:
            why = f"the play budget ({measured})"
            if self.slowest > FULLY_CHECKED_S:
                why += f"; not scaled: the slowest tool takes more than {FULLY_CHECKED_S:g} s"
            return play_seconds, why
        scaled = round(spent + (need - spent) * MARGIN, 1)
        return scaled, f"scaled from the play budget ({play_seconds:g} s) to what every scene needs here: {measured}"


# -- tasks and their controls ---------------------------------------------------------------------------
def _tasks(col: Collector) -> list[tuple[int | None, list[tuple[str, JSON]]]]:
    """The tasks the scenes use, each with its script: the played ones, else the task under test and one more."""
    ev = col.ev
    out: list[tuple[int | None, list[tuple[str, JSON]]]] = []
    for episode in ev.facts.episodes:
        if episode.index not in [i for i, _ in out]:
            out.append((episode.index, script_of(episode, ev.facts.durations)))
    if not out:
        out.append((ev.index, []))
    if len(out) < MAX_TASKS and ev.split is not None and (ev.facts.count or 0) > 1:
        # Fewer tasks played than the scenes use (an episode that never finished stops play): a task more,
        # shown by its prompt alone.
        played = {index for index, _ in out}
        spare = next((i for i in (ev.facts.count - 1, 0, ev.facts.count // 2) if i not in played), None)
        if spare is not None:
            out.append((spare, []))
    return out[:MAX_TASKS]


def script_of(episode: Episode, durations: dict[str, float]) -> list[tuple[str, JSON]]:
    """The calls every session on the episode's task makes: its first ones (bounded in count and tool time), then the last again."""
    calls: list[tuple[str, JSON]] = []
    spent = 0.0
    for tool, value in episode.calls[:MAX_SCRIPT]:
        took = durations.get(tool, 0.0)
        if calls and spent + took > SCRIPT_SECONDS:
            break
        calls.append((tool, value))
        spent += took
    if calls and spent + durations.get(calls[-1][0], 0.0) > SCRIPT_SECONDS:
        return calls  # the last call again (the finish latch, across sessions) only where it is cheap
    return calls + calls[-1:]


def _control(col: Collector, index: int | None, script: list[tuple[str, JSON]]) -> Control:
    """Play ``script`` on task ``index`` in a session of its own; compare with the play probe's episode."""
    ev = col.ev
    control = Control(index, script)
    sid = col.new_sid()
    created = col.client.create(sid, env_name=ev.env, **_source(col, index))
    control.exchanges.append(created)
    if created.status != 200:
        control.refused = f"/create on task {index} answered {answer(created)}"
        return control
    col.adopt(sid)
    try:
        waited = time.monotonic()
        shown = col.ready(lambda: col.client.prompt(ev.env or "", sid))
        control.setup_s = round(time.monotonic() - waited, 3)
        control.exchanges.append(shown)
        control.prompt = prompt_text(shown) or ""
        control.prompt_answered = prompt_text(shown) is not None
        texts: list[str] = []
        rewards: list[Any] = []  # each call's (reward, finished), as the episode keeps them beside its answers
        for tool, value in script:
            exchange = col.kept_call(sid, tool, value)
            control.exchanges.append(exchange)
            control.call_s.append(round(exchange.elapsed, 3))
            outcome = classify(exchange, col.options.timeout)
            control.kinds.append(outcome.kind)
            texts.append(answer_of(outcome))
            output = outcome.result.get("output") if not outcome.failure and isinstance(outcome.result, dict) else None
            rewards.append(output.get("reward") if isinstance(output, dict) else None)
    finally:
        control.exchanges.append(col.end_session(sid))
    episode = next((e for e in ev.facts.episodes if e.index == index), None)
    again = _solo_prompt(col, index) if episode is None else episode.prompt
    control.prompt_stable = again is not None and again == control.prompt
    if episode is not None:
        agreed = 0
        for mine, theirs in zip(texts, _solo_answers(col, episode)):
            if mine != theirs:
                break
            agreed += 1
        control.comparable = agreed
        played = episode.sent_rewards[:agreed]
        control.rewards_stable = agreed > 0 and rewards[: len(played)] == played
    calls = [e for e in control.exchanges if e.method == "POST" and e.url.endswith("/call")]
    control.answers = [signature(e, col.options.timeout, rewards=control.rewards_stable) for e in calls]
    return control


def _solo_answers(col: Collector, episode: Episode) -> list[str]:
    """What the play probe's episode answered, and — after its finish — what its finishing call answered again (``latch.known``)."""
    answers = list(episode.answers)
    again = col.ev.get("latch.known")
    if episode.finished and episode is col.ev.facts.episodes[0] and again is not None:
        answers.append(answer_of(classify(again, col.options.timeout)))
    return answers


def _solo_prompt(col: Collector, index: int | None) -> str | None:
    """The prompt a second solo session on task ``index`` sees (the session probe's, for the task under test)."""
    ev = col.ev
    if index == ev.index and ev.get("session.prompt") is not None:
        return prompt_text(ev.get("session.prompt"))
    sid = col.new_sid()
    if col.client.create(sid, env_name=ev.env, **_source(col, index)).status != 200:
        return None
    try:
        return prompt_text(col.ready(lambda: col.client.prompt(ev.env or "", sid)))
    finally:
        col.client.delete(sid)


def _source(col: Collector, index: int | None) -> dict[str, Any]:
    if index is None or col.ev.split is None:
        return col.task_source()
    return {"split": col.ev.split, "index": index}


# -- playing a scene -------------------------------------------------------------------------------------
class Stage:
    """Plays one scene: opens its sessions, sends their requests (alone or at once) and records every step."""

    def __init__(self, col: Collector, name: str, facts: Isolation) -> None:
        self.col = col
        self.facts = facts
        self.scene = Scene(name)
        self._lock = threading.Lock()
        #: Why the last refused ``/create`` was refused.
        self.refused: str | None = None

    @property
    def env(self) -> str:
        return self.col.ev.env or ""

    def control(self, label: str) -> Control:
        return self.facts.controls[self.scene.tracks[label].index]

    # recording
    def _add(self, label: str, action: str, exchange: Exchange, **extra: Any) -> int:
        with self._lock:
            self.scene.steps.append(Step(label, action, exchange, **extra))
            self.col.rec(f"isolation.{self.scene.name}.{len(self.scene.steps)}", exchange)
            return len(self.scene.steps) - 1

    def at_once(self, actions: list[Callable[[], T]]) -> list[T]:
        """Run ``actions`` in threads released together; their steps are kept in the order they were sent."""
        first = len(self.scene.steps)
        barrier = threading.Barrier(len(actions))

        def released(action: Callable[[], T]) -> T:
            barrier.wait(timeout=self.col.options.timeout)
            return action()

        with ThreadPoolExecutor(max_workers=len(actions), thread_name_prefix="orsbench-iso") as pool:
            results = list(pool.map(released, actions))
        with self._lock:
            self.scene.steps[first:] = sorted(self.scene.steps[first:], key=lambda s: s.exchange.started_at)
        return results

    # sessions
    def open(self, label: str, index: int | None, sid: str | None = None, *, again: bool = False) -> bool:
        """``/create`` session ``label`` on task ``index`` (``sid``: that id; ``again``: an id deleted before); whether it was."""
        sid = sid or self.col.new_sid()
        exchange = self.col.client.create(sid, env_name=self.col.ev.env, **_source(self.col, index))
        self._add(label, "create", exchange)
        if exchange.status != 200:
            self.refused = f"/create of session {label} on task {index} answered {answer(exchange)}"
            return False
        self.col.adopt(sid)
        with self._lock:
            self.scene.tracks[label] = Track(label, sid, index, reused=again)
        return True

    def prompt(self, label: str) -> Exchange:
        sid = self.scene.tracks[label].sid
        exchange = self.col.ready(lambda: self.col.client.prompt(self.env, sid))
        self._add(label, "prompt", exchange)
        return exchange

    def call(self, label: str, position: int) -> Exchange:
        """Session ``label`` makes call ``position`` of its task's script."""
        tool, value = self.control(label).script[position]
        exchange = self.col.kept_call(self.scene.tracks[label].sid, tool, value)
        self._add(label, "call", exchange, position=position)
        return exchange

    def call_tool(self, label: str, tool: str, value: Any) -> Exchange:
        """Session ``label`` calls ``tool`` outside its script (a call whose answer no other session shares)."""
        exchange = self.col.call(self.scene.tracks[label].sid, tool, value)
        self._add(label, "call", exchange)
        return exchange

    def resume(self, label: str, of: int) -> Exchange:
        """Session ``label`` resumes the call of step ``of`` (its own or another session's) by its ``task_id``."""
        original = self.scene.steps[of].exchange
        body = _json(original.request_body)
        exchange = self.col.call(
            self.scene.tracks[label].sid, body.get("name", ""), body.get("input", {}), task_id=task_id_of(original)
        )
        self._add(label, "resume", exchange, resumes=of)
        return exchange

    def ping(self, label: str) -> Exchange:
        exchange = self.col.client.ping(self.scene.tracks[label].sid)
        self._add(label, "ping", exchange)
        return exchange

    def delete(self, label: str) -> Exchange:
        exchange = self.col.end_session(self.scene.tracks[label].sid)
        self._add(label, "delete", exchange)
        return exchange

    def abort(self) -> Scene:
        """The scene cannot go on (a ``/create`` was refused): its checks skip saying why."""
        self.scene.skip = self.refused or "a session could not be opened"
        return self.close()

    def close(self) -> Scene:
        """Delete every session of the scene still open; the scene."""
        deleted = {s.session for s in self.scene.steps if s.action == "delete"}
        live = [t for t in self.scene.tracks.values() if t.label not in deleted or _recreated(self.scene, t.label)]
        for track in live:
            self.col.end_session(track.sid)
        return self.scene


def _recreated(scene: Scene, label: str) -> bool:
    last = [s.action for s in scene.steps if s.session == label and s.action in ("create", "delete")]
    return bool(last) and last[-1] == "create"


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _pair(facts: Isolation) -> tuple[Control, Control] | str:
    """Two tasks a mix-up would show on (their prompts or answers differ), or why this environment has none."""
    usable = [c for c in facts.controls.values() if c.refused is None]
    if len(usable) < 2:
        refused = next((c.refused for c in facts.controls.values() if c.refused), None)
        why = f"a second task's session was refused ({refused})" if refused else "the split has one task, or sessions take a task_spec"
        return f"only one task could be opened ({why}): no second task to mix up with"
    told = [c for c in usable if comparable(c)]
    if len(told) < 2:
        return (
            "the environment's prompts and answers vary between two solo sessions of the same task, so nothing shows "
            "which task served a session"
        )
    for a in told:
        for b in told:
            if a is not b and distinct(a, b):
                return a, b
    tasks = ", ".join(str(c.index) for c in told)
    return f"tasks {tasks} look alike from outside (same prompt, same answers to their calls): a mix-up would not show"


def _cannot(name: str, why: str) -> Scene:
    """A scene this environment can never play (its checks are not applicable, saying why)."""
    return Scene(name, skip=why, inapplicable=True)


# -- the scenes ----------------------------------------------------------------------------------------
def play_interleaved(st: Stage) -> Scene:
    """A on task i and B on task j, both created before either is used, then used in turn."""
    pair = _pair(st.facts)
    if isinstance(pair, str):
        return _cannot(st.scene.name, pair)
    i, j = pair
    if not (st.open("A", i.index) and st.open("B", j.index)):
        return st.abort()
    st.prompt("A")
    st.prompt("B")
    for k in range(max(len(i.script), len(j.script))):
        if k < len(i.script):
            st.call("A", k)
        if k < len(j.script):
            st.call("B", k)
    return st.close()


def play_same_task(st: Stage) -> Scene:
    """C, D, F and G on one task: C plays to the end, D and F start, C is deleted; D and F go on, G plays it all;
    then C's id is created again and used. Every session fetches its prompt before its first call, as its control did
    (and every real client does), and then only calls: what it sees is compared with the control at the same point."""
    control = next(c for c in st.facts.controls.values() if c.refused is None)
    if not control.script:
        return Scene(st.scene.name, skip="no tool input could be built (call.tool_inputs): sessions cannot be played")
    index, length = control.index, len(control.script)
    if not all(st.open(label, index) for label in ("C", "D", "F", "G")):
        return st.abort()
    st.prompt("C")
    for k in range(length):
        st.call("C", k)
    st.prompt("D")
    st.call("D", 0)
    st.prompt("F")
    st.call("F", 0)
    c_sid = st.scene.tracks["C"].sid
    st.delete("C")
    st.scene.measured["deleted_at"] = len(st.scene.steps) - 1
    st.ping("D")
    st.ping("F")
    for k in range(1, length):
        st.call("F", k)
    if length > 1:
        st.call("D", 1)
    st.prompt("G")  # created before the delete, used only after it: every tool of the script, from the start
    for k in range(length):
        st.call("G", k)
    st.scene.measured["recreated_at"] = len(st.scene.steps)
    if st.open("C2", index, sid=c_sid, again=True):
        st.prompt("C2")
        st.call("C2", 0)
    else:
        st.scene.measured["recreate_refused"] = st.refused
    return st.close()


def play_resume(st: Stage) -> Scene:
    """A calls, B (on another task, else the same) calls an unknown tool; each resumes its own task_id, A resumes B's."""
    usable = [c for c in st.facts.controls.values() if c.refused is None and c.script]
    if not usable:
        return Scene(st.scene.name, skip="no tool input could be built (call.tool_inputs): no call to resume")
    pair = _pair(st.facts)
    i, j = pair if not isinstance(pair, str) else (usable[0], usable[0])
    if not (st.open("A", i.index) and st.open("B", j.index)):
        return st.abort()
    st.prompt("A")
    st.prompt("B")
    first = st.call("A", 0)
    a_call = len(st.scene.steps) - 1
    second = st.call_tool("B", NO_SUCH_TOOL, {})
    b_call = len(st.scene.steps) - 1
    if not task_id_of(first) or not task_id_of(second):
        st.scene.skip = "a /call stream carried no task_id event (call.first_event_task_id): nothing to resume"
        return st.close()
    st.resume("A", a_call)
    st.resume("B", b_call)
    st.resume("A", b_call)
    st.scene.measured["task_ids"] = {"A": task_id_of(first), "B": task_id_of(second)}
    return st.close()


def play_concurrent_create(st: Stage) -> Scene:
    """Eight ``/create_session`` at once: each must hand out an id of its own."""
    if not st.col.ev.facts.create_session_works:
        return Scene(st.scene.name, skip="/create_session hands out no ids (session.create_session_sse): nothing to race")

    def one(n: int) -> Callable[[], Exchange]:
        def send() -> Exchange:
            exchange = st.col.client.create_session()
            st._add(f"S{n + 1}", "create_session", exchange)
            return exchange

        return send

    answers = st.at_once([one(n) for n in range(AT_ONCE)])
    st.scene.measured["ids"] = [task_id_of(a) for a in answers]
    for sid in st.scene.measured["ids"]:
        if sid:
            st.col.seen_sid(sid)
    return st.scene


def play_concurrent_calls(st: Stage) -> Scene:
    """Eight sessions over two tasks: created, prompted, and making each call of their scripts, at once."""
    pair = _pair(st.facts)
    if isinstance(pair, str):
        return _cannot(st.scene.name, pair)
    tasks = [c for c in st.facts.controls.values() if c.refused is None and comparable(c)]
    labels = [f"P{n + 1}" for n in range(AT_ONCE)]
    sids = [st.col.new_sid() for _ in labels]
    indices = [tasks[n % len(tasks)].index for n in range(AT_ONCE)]
    created = st.at_once([lambda n=n: st.open(labels[n], indices[n], sid=sids[n]) for n in range(AT_ONCE)])
    if not all(created):
        return st.abort()
    st.at_once([lambda label=label: st.prompt(label) for label in labels])
    rounds = max(len(st.control(label).script) for label in labels)
    # Each session's script, one call per session at once in each round; the scripts end together, so the calls
    # that finish (and grade) each task's episode are sent in the same round as the other task's.
    late = {label: rounds - len(st.control(label).script) for label in labels}
    for k in range(rounds):
        playing = [label for label in labels if k >= late[label]]
        st.at_once([lambda label=label: st.call(label, k - late[label]) for label in playing])
    st.at_once([lambda label=label: st.delete(label) for label in labels])
    return st.scene


def play_ping_during_call(st: Stage) -> Scene:
    """A ping sent while the slowest tool runs in the same session: it must not wait for the call."""
    ev = st.col.ev
    plan = dict(ev.facts.call_plan)
    played = {tool: value for e in ev.facts.episodes for tool, value in e.calls}
    picked = _slow_tool(ev.facts.durations)
    if picked is None:
        longest = max(ev.facts.durations.items(), key=lambda kv: kv[1], default=None)
        seen = f" (the longest: {longest[0]}, {longest[1]:.2f} s)" if longest else ""
        return _cannot(st.scene.name, f"no tool call took {SLOW_CALL_S:g} s or more{seen}: a ping during a call cannot be timed")
    tool, took = picked
    if took > SLOWEST_WAITED_S:
        return Scene(st.scene.name, skip=f"the only slow tool ({tool}) takes {took:.1f} s, more than the {SLOWEST_WAITED_S:g} s this probe waits")
    control = next(c for c in st.facts.controls.values() if c.refused is None)
    if not st.open("P", control.index):
        return st.abort()
    sid = st.scene.tracks["P"].sid
    value = played.get(tool, plan.get(tool, {}))
    st.prompt("P")  # waits out setup: the call below must start at once, not retry a 503 "starting"

    def run_call() -> Exchange:
        exchange = st.col.call(sid, tool, value)
        st._add("P", "call", exchange)
        return exchange

    def run_ping() -> Exchange:
        time.sleep(min(took / 3, 0.5))
        return st.ping("P")

    call, ping = st.at_once([run_call, run_ping])  # type: ignore[list-item]
    st.scene.measured.update(
        tool=tool,
        call_s=round(call.elapsed, 3),
        ping_sent_after_s=round(ping.started_at - call.started_at, 3),
        ping_s=round(ping.elapsed, 3),
        # Answered with the call rather than before it (the client's clocks of two threads: a little slack).
        ping_waited_for_call=ping.started_at + ping.elapsed >= call.started_at + call.elapsed - WITH_CALL_S,
    )
    return st.close()


def _slow_tool(durations: dict[str, float]) -> tuple[str, float] | None:
    """The tool to ping during: the slowest one this probe waits for, else the quickest slow one (``None``: no slow tool)."""
    slow = [(t, d) for t, d in durations.items() if d >= SLOW_CALL_S]
    if not slow:
        return None
    waited = [(t, d) for t, d in slow if d <= SLOWEST_WAITED_S]
    return max(waited, key=lambda kv: kv[1]) if waited else min(slow, key=lambda kv: kv[1])


#: The scenes in the order played (each name is what the checks read).
SCENES: tuple[tuple[str, Callable[[Stage], Scene]], ...] = (
    ("interleaved", play_interleaved),
    ("same_task", play_same_task),
    ("resume", play_resume),
    ("concurrent_create", play_concurrent_create),
    # Before the calls at once: one slow call is cheap, while eight at once on a server whose tools block its event
    # loop take eight times as long — and would spend the budget this scene needs to name that very defect.
    ("ping_during_call", play_ping_during_call),
    ("concurrent_calls", play_concurrent_calls),
)

__all__ = ["SCENES", "Stage", "probe_isolation", "script_of", "finished_of"]
