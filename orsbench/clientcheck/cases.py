"""The cases a client is graded on: a scenario, optionally under a fault, served on 127.0.0.1.

Cases are not written out one by one: they are derived from the registries
every other front end uses, so a scenario or fault profile registered later
(a hazard) is a case with no edit here —

* every scenario a client episode is played on (:func:`orsbench.clientcheck.episodes.scenarios`),
  named after it (``echo``, ``schema-zoo``);
* every fault profile of the client matrix (:func:`orsbench.clientcheck.profiles.profiles`), on
  that matrix's scenario with its scaled knobs, named ``sparse-reward+stream-drop``;
* a few cases of our own that provoke a client rule no profile does (:data:`EXTRA`).

The script comes from the scenario (:func:`orsbench.clientcheck.episodes.script`);
``expect`` says what a correct client does with it: play it to the end
(``"finish"``) or stop at a failure it reports as an error (``"error"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from secrets import token_urlsafe
from typing import Any, Literal

from orsbench.clientcheck.episodes import INDEX, SPLIT, Script, Step, scenarios, script
from orsbench.clientcheck.profiles import BASELINE, profiles
from orsbench.config import ServerConfig
from orsbench.registry import Registry
from orsbench.scenarios import SCENARIOS, get_scenario, suite_params

Expect = Literal["finish", "error"]

#: Seconds a case's command may run unless the case or ``--timeout`` says otherwise.
DEFAULT_DEADLINE_S = 20.0


@dataclass(frozen=True)
class Case:
    """One served situation a client command plays its script in."""

    name: str
    scenario: str
    summary: str
    faults: tuple[str, ...] = ()
    #: :class:`ServerConfig` fields (a fault's scaled timing, a seed).
    knobs: tuple[tuple[str, Any], ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    split: str = SPLIT
    index: int = INDEX
    #: Secrets handed to the adapter (``ORSBENCH_SECRETS``), which it must pass to the session.
    secrets: tuple[tuple[str, str], ...] = ()
    deadline: float = DEFAULT_DEADLINE_S
    expect: Expect = "finish"
    tags: frozenset[str] = field(default_factory=frozenset)
    #: The calls to make, when the scenario's own client episode does not fit the case (``()``: it does).
    steps: tuple[Step, ...] = ()
    #: The reward a correct client ends with, for a case with ``steps`` (``None``: the steps do not aim for one).
    reward: float | None = None
    #: How many of the script's calls the scripted model makes in one reply (``ORSBENCH_MODEL_URL``).
    per_reply: int = 1
    #: Whether the command's environment carries the openreward SDK's URL variables (``False``: the
    #: ``url-only`` case, where a client has the server's URL alone).
    sdk_urls: bool = True
    #: A ``/_orsbench/stats`` request counter (``"fault sigterm-mid-call"``): once it moves, orsbench sends the
    #: client SIGTERM mid-episode and SIGKILL after :data:`~orsbench.clientcheck.process.TERMINATE_GRACE_S`
    #: (``None``: the client ends by itself).
    terminate_on: str | None = None
    #: Times the client plays the script in one process (``ORSBENCH_RUNS``, §13.16), each run in a session of its own.
    runs: int = 1
    #: Episodes each run plays (``ORSBENCH_EPISODES``, §13.15): tasks ``index`` .. ``index + episodes - 1``, then an aggregate.
    episodes: int = 1

    def config(self, **changes: Any) -> ServerConfig:
        """The server configuration of this case (with the request log on: the grader reads it)."""
        return ServerConfig(faults=self.faults, request_log=True, **{**dict(self.knobs), **changes})

    @property
    def script(self) -> Script:
        if self.steps:
            return Script(self.scenario, self.steps, reward=self.reward, finished=self.expect == "finish").repeated(self.plays)
        return script(self.scenario).repeated(self.plays)

    @property
    def plays(self) -> int:
        """Times the script is played in the case: each run's episodes, one session each."""
        return self.runs * self.episodes

    @property
    def default_env(self) -> str:
        """The environment a ``/create`` without ``env_name`` plays on this case's server (its first served one);
        ``""`` where the case serves no scenario of ours (a user's server: the caller knows its listing)."""
        if self.scenario not in SCENARIOS:
            return ""
        return get_scenario(self.scenario, **dict(self.params)).served()[0].name

    def with_deadline(self, seconds: float) -> Case:
        return replace(self, deadline=seconds)


#: Filled on first use by :mod:`orsbench.clientcheck.catalogue` (it loads every scenario and fault profile):
#: a process that only needs the contract, as each built-in client adapter does, skips that (~0.4 s).
CASES: Registry[Case] = Registry("client case", modules=("orsbench.clientcheck.catalogue",))


def _summary(scenario: str) -> str:

    cls = SCENARIOS.get(scenario) if scenario in SCENARIOS else None
    return (cls.summary if cls is not None and cls.summary else f"the {scenario} scenario").rstrip(".")


def register_all() -> None:
    """Register the catalogue's cases (run once, by :mod:`orsbench.clientcheck.catalogue`)."""
    from orsbench.servers.faults import FAULTS

    for name in scenarios():
        CASES.register(
            Case(
                name,
                name,
                _summary(name),
                params=tuple(suite_params(name).items()),
                tags=frozenset({"scenario"}),
            )
        )
    for profile in profiles():
        if profile.name == BASELINE or profile.facts.test_aid:
            continue  # the baseline is the scenario's own case; a test aid is no trouble a client meets
        summary = profile.summary or (FAULTS.get(profile.name).summary if profile.name in FAULTS else profile.name)
        played = profile.script()
        own = played != script(profile.scenario)  # the script goes on past finished (§13.14)
        CASES.register(
            Case(
                f"{profile.scenario}+{profile.name}",
                profile.scenario,
                summary,
                faults=(profile.name,) if profile.fault else (),
                sdk_urls=profile.sdk_urls,
                terminate_on=profile.terminate_on,
                runs=profile.runs,
                episodes=profile.episodes,
                knobs=profile.knobs,
                params=tuple(suite_params(profile.scenario).items()),
                # The matrix's deadline leaves out a client's start-up (it forks one ready); a command pays for its own.
                deadline=max(profile.deadline, DEFAULT_DEADLINE_S),
                expect=profile.facts.expect,
                tags=frozenset({"profile"}),
                steps=played.steps if own else (),
                reward=played.reward if own else None,
            )
        )
    for case in (*EXTRA, *_hazard_cases()):
        CASES.register(case)


#: A secret made up per process for the ``secrets`` case: it must reach the environment and nothing else.
_CASE_SECRET = token_urlsafe(12)


def _hazard_cases() -> list[Case]:
    """Hazard scenarios whose client episode needs more than the scenario's own script, when registered.

    ``recover``: the first call is refused (``ok: false``) and the episode goes on to a winning call;
    ``secrets``: the session needs a secret in ``X-Secrets``, and ``whoami()`` shows its fingerprint.
    """

    out = []
    if "recover" in SCENARIOS and "recover" not in scenarios():
        from orsbench.scenarios.hazards import BAD_GUESS

        number = get_scenario("recover").list_tasks(SPLIT)[INDEX]["number"]
        steps = (Step("guess", dict(BAD_GUESS)), Step("guess", {"number": number}, "right"))
        out.append(Case("recover", "recover", _summary("recover"), steps=steps, tags=frozenset({"hazard"})))
    if "secrets" in SCENARIOS and "secrets" not in scenarios():
        from orsbench.scenarios.hazards import SECRET_NAME, secret_text

        steps = (Step("whoami", {}, secret_text(_CASE_SECRET)),)
        out.append(
            Case("secrets", "secrets", _summary("secrets"), secrets=((SECRET_NAME, _CASE_SECRET),), steps=steps, tags=frozenset({"hazard"}))
        )
    return out


#: Cases of our own: client rules no scenario or profile provokes.
EXTRA: tuple[Case, ...] = (
    Case(
        "echo+reward-bool",
        "echo",
        "the server sends the reward as a JSON boolean (true): a client must not train on it as 1.0",
        faults=("reward-bool",),
        expect="error",
        tags=frozenset({"violation"}),
    ),
    Case(
        "echo+missing-task",
        "echo",
        "the task asked for does not exist: /create answers 400, which a client reports and never retries",
        index=10_000,
        expect="error",
        tags=frozenset({"4xx"}),
    ),
)


def cases() -> list[Case]:
    """Every case, in catalogue order (scenarios, then fault profiles, then our own)."""
    return CASES.values()


def get_case(name: str) -> Case:
    """The case called ``name`` (:class:`~orsbench.registry.UnknownName`, listing the known ones, otherwise)."""
    return CASES.get(name)
