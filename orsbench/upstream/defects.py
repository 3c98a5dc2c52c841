"""Known upstream defects, and which checks each one makes fail.

Every test in the suite asserts the *right* behaviour. Where the installed
trl 1.16.0 (or the openreward 0.1.167 client it drives) does something else,
the test carries ``pytest.mark.xfail(strict=True, reason=<what it does
instead>)``: the day upstream fixes it, the test passes, strict xfail turns
that into a failure, and this table has to be updated — the suite never
silently agrees with a bug, nor silently misses a fix.

Which tool trips which defect is decided by *predicates over the tool's
JSON Schema* written against trl 1.16.0's documented behaviour (a frozen
model, deliberately not calling TRL's own code), so any scenario registered
later gets the right expectations without editing this file, and a change in
TRL shows up as an unexpected pass.

``docs/conformance.md`` lists the same defects, one line each
(``test_docs_list_every_defect`` keeps the two in step).

A defect that shows in the client matrix knows where and how, on its own entry:
``shows_in`` is its predicate over a cell's facts (:class:`CellFacts`: which
client, which server, the scenario's tools and script, the fault profile's
facts), ``effect`` what it does to the verdict there
(:class:`~orsbench.verdict.Effect`, combined by :func:`orsbench.verdict.verdict_of`),
``masks`` whether it ends the episode before any other defect can show, and
``breaks`` the client checks of rules it makes fail (and where) without
deciding the verdict. :func:`shown_in` and :func:`broken_rules` ask every
defect; nothing outside this module branches on a client's name.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orsbench.protocol import JSON
from orsbench.upstream import schema_view
from orsbench.verdict import Effect, Verdict, verdict_of

if TYPE_CHECKING:
    import pytest

#: Names GRPOTrainer treats specially instead of as tools.
GRPO_RESERVED = ("reset", "get_reward")
#: Instance attributes of TRL's adapter (episode state) that shadow class-level methods.
ADAPTER_STATE = ("reward", "rewards", "metadata", "finished", "last_output")


@dataclass(frozen=True)
class CellFacts:
    """What a defect's predicate knows of one cell of the client matrix: who plays what, where, under which profile.

    Built by :mod:`orsbench.clients.cells` from the scenario (its task's tools, its script) and the fault
    profile's facts (:class:`orsbench.servers.faults.ClientFacts`), so a defect decides from data alone.
    """

    #: The client target (:data:`orsbench.clients.targets.CLIENT_TARGETS` name).
    client: str
    #: The server implementation (``mock``, ``sdk``, ``ors-sdk``).
    server: str
    scenario: str
    #: The fault profile played on the mock (``None``: a scenario cell).
    profile: str | None = None
    #: The tools of the task played, as the server lists them.
    tools: tuple[JSON, ...] = ()
    #: The scenario serves its tasks by index only (``/tasks`` answers 400).
    index_only: bool = False
    #: The server serves several environments and the script names a non-default one.
    several_envs: bool = False
    #: The script ends on ``finished``.
    finishes: bool = True
    #: A scripted result longer than one SSE chunk has runs of spaces: some chunk then starts with a space.
    spaced_long_result: bool = False
    #: A scripted call leaves out an optional parameter that has a JSON default.
    omits_a_default: bool = False
    #: Under the profile a correct client reports an error rather than finishing.
    expects_error: bool = False
    #: The profile refuses ``POST /create_session``: no ``/create`` reaches the server.
    refuses_session: bool = False
    #: The profile refuses the discovery routes (§2.1, §13.12) with 402, and nothing else.
    refuses_discovery: bool = False
    #: The client's code path reads a discovery route on its way to an episode (its target's ``listings``).
    reads_listings: bool = False
    #: The profile's refusals carry ``Retry-After``.
    retry_after: bool = False
    #: The client is given the server's URL alone (the ``url-only`` profile: no ``OPENREWARD_SESSION_URL``).
    url_only: bool = False
    #: A call before the last returns a reward (the episode's reward is spread over its calls).
    rewards_before_the_end: bool = False
    #: The reward each scripted call gets, in order, exactly as the server sends it (``None``: an unscored call).
    rewards: tuple[Any, ...] = ()
    #: The client's user refuses a reward that is not a finite number (its consumer profile checks what it takes).
    refuses_non_finite: bool = False
    #: orsbench ends the client with SIGTERM mid-call under the profile (``sigterm-mid-call``), SIGKILL after a grace.
    terminated: bool = False
    #: The script goes on after the call that returns ``finished: true`` (§13.14): a correct client never sends the rest.
    calls_after_finished: bool = False
    #: The scripted model's reply carrying the finishing call carries another call after it (§13.14).
    finishing_reply_goes_on: bool = False
    #: Times the client plays the script in one process (the ``two-runs`` profile: 2, §13.16).
    runs: int = 1
    #: Episodes one client run plays (the ``second-setup-fails`` profile: 3, §13.15).
    episodes: int = 1
    #: A session's setup fails under the profile (``setup-failure``: every one; ``second-setup-fails``: one).
    setup_fails: bool = False
    #: The client's own aggregation over several episodes averages the scored ones only (its consumer profile).
    aggregates_over_scored: bool = False

    @property
    def finishes_without_a_reward(self) -> bool:
        """The script's finishing call carries reward ``null`` (§13.10)."""
        return self.finishes and bool(self.rewards) and self.rewards[-1] is None

    @property
    def expected(self) -> Verdict:
        """The verdict a correct client gets in this cell."""
        return verdict_of([Effect.REPORTS_ERROR] if self.expects_error else [])


#: A predicate over a cell's facts.
Where = Callable[[CellFacts], bool]


@dataclass(frozen=True)
class Source:
    """Where the package whose code does it does it: a file of that installed distribution, a line, and words on it.

    A pin names the package it belongs to — the client, the SDK the client inherits, or the server it talks to — and
    the line that does it, so that a reader can check it and the day the line moves the pin says so
    (``tests/test_defect_sources.py`` reads ``shows`` on that line of the installed file).
    """

    #: The distribution (``pip show`` name) whose file it is.
    package: str
    #: The file, relative to the distribution's install root (site-packages).
    path: str
    line: int
    #: A fragment of that line, as the installed release has it.
    shows: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Defect:
    id: str
    upstream: str
    #: What upstream does instead of the right thing (the xfail reason).
    behaviour: str
    #: Client pain point(s) it belongs to (P1–P13, listed in docs/conformance.md).
    pain: str
    #: The matrix cells where it changes the episode (asked only for the clients that inherit it, or on its
    #: server for a server's defect); ``None``: it shows in no cell (a binding defect, judged per tool).
    shows_in: Where | None = None
    #: What it does to a cell's verdict where it shows.
    effect: Effect = Effect.RULE
    #: It ends the episode before any other defect can show (a failed dataset, a crashed factory, a hang).
    masks: bool = False
    #: Where it shows, the client takes for data what a correct client reports as an error (a case that expects one
    #: then gets none).
    unreported: bool = False
    #: Client checks of rules it makes fail, each with the cells where it does (the verdict does not depend on them).
    breaks: tuple[tuple[str, Where], ...] = ()
    #: The file and line of the package whose code does it (every pin names one).
    at: Source | None = None
    #: The client checks whose failure shows it in a run; a live run names it only where one of them failed (empty: a
    #: failed check, or the process, with its ``effect``).
    shown_by: tuple[str, ...] = ()

    @property
    def clients(self) -> tuple[str, ...]:
        """The client targets (:data:`orsbench.clients.targets.CLIENT_TARGETS` names) that inherit this defect."""
        return UPSTREAM_CLIENTS[self.upstream]

    def on_server(self, server: str) -> bool:
        """Whether this is a defect of the server implementation ``server`` (every client meets it there)."""
        return not self.clients and self.upstream.startswith(server + " ")

    def reaches(self, cell: CellFacts) -> bool:
        """Whether the cell's client inherits it, or (a server's defect) the cell is on its server."""
        return cell.client in self.clients or self.on_server(cell.server)

    def shows(self, cell: CellFacts) -> bool:
        """Whether it changes the episode in ``cell`` (other defects masking it aside: :func:`shown_in`)."""
        return self.shows_in is not None and self.reaches(cell) and self.shows_in(cell)

    @property
    def where(self) -> str:
        """The package and its file and line: ``trl 1.16.0, trl/experimental/openreward/environment.py:276``."""
        return f"{self.upstream}, {self.at}" if self.at is not None else self.upstream

    @property
    def summary(self) -> str:
        return f"{self.where}: {self.behaviour}"

    def mark(self) -> pytest.MarkDecorator:
        import pytest

        return pytest.mark.xfail(strict=True, reason=f"[{self.id}] {self.summary}")


TRL = "trl 1.16.0"
SDK = "openreward 0.1.167 client"
ORS = "ors-sdk 0.1.0 client"
INSPECT = "inspect-openreward 0.3.0"
INSPECT_AI = "inspect_ai 0.3.285"
ORS_SERVER = "ors-sdk 0.1.0 server"
FIREHORSE = "firehorse-cli 0.1.4"
PLATOON = "platoon 0.4.0"
BENCHFLOW = "benchflow 0.7.11"
#: Client variants (``orsbench.clients.targets.CLIENT_VARIANTS``): another entry point of a client, graded case by case.
FIREHORSE_MCP = "firehorse-cli 0.1.4 MCP bridge"
PLATOON_REACT = "platoon 0.4.0 platoon-react agent"
TASKSETS = "tasksets 0.1.4"
VERIFIERS = "verifiers 0.1.15.dev11"  # the tasksets variant's harness: its commit a079eafa2 (orsbench.clients.interpreters)

# -- where each defect shows in the client matrix (the predicates its entry names) ---------------------
# A predicate may name a client or a server where the defect's mechanism is that client's own use of an
# upstream library (inspect-openreward's solver lists tools through the sanitiser for "openai", firehorse's react
# agent for "anthropic" — only inspect's episode changes, as its tool definitions refuse the call the model makes
# without the parameter; firehorse's model is shown the schema without it, conformance/test_clients.py
# test_firehorse_shows_every_required_parameter; only ors-sdk's server has no finish latch): it is the defect's fact,
# on its entry.
def _scenario_cell(cell: CellFacts) -> bool:
    return cell.profile is None


def _under(profile: str) -> Where:
    return lambda cell: cell.profile == profile


def _creates(cell: CellFacts) -> bool:
    """A ``/create`` reaches the server (the profile does not refuse the session first, nor a listing the client stops
    at). Only predicates of ``breaks`` may call it: it asks which defects show (a ``shows_in`` calling it would loop)."""
    return not cell.refuses_session and not _stops_at_a_listing(cell)


def _stops_at_a_listing(cell: CellFacts) -> bool:
    """The client reads a listing the profile refuses, and reports the refusal (§13.12) before it opens a session."""
    return cell.refuses_discovery and cell.reads_listings and not _shown("platoon-402-listing-ignored")(cell)


def _listing_refused(cell: CellFacts) -> bool:
    """The client reads a discovery route and the profile refuses it 402 (§13.12)."""
    return cell.refuses_discovery and cell.reads_listings


def _index_only(cell: CellFacts) -> bool:
    return _scenario_cell(cell) and cell.index_only


def _sanitized(cell: CellFacts) -> bool:
    """inspect-openreward sanitises the task's tool schemas (for the openai provider) and one loses a parameter: its
    tool definition (ToolParams) then refuses the model's call, so nothing runs. firehorse's react agent sanitises too
    (for anthropic, agents/react.py:310), but its loop sends the call as the model made it: the episode is unchanged."""
    return cell.client == "inspect" and _scenario_cell(cell) and any(sanitized_params(t) for t in cell.tools)


def _factory(defect_id: str) -> Where:
    return lambda cell: (found := factory_defect(cell.tools)) is not None and found.id == defect_id


def _spaced_result(cell: CellFacts) -> bool:
    return _scenario_cell(cell) and cell.spaced_long_result


def _lands_in_default_env(cell: CellFacts) -> bool:
    """The script names a non-default environment and the session lands in the default one (§13.6)."""
    return _scenario_cell(cell) and cell.several_envs


def _get_task_on_ors_sdk(cell: CellFacts) -> bool:
    """A firehorse trial starts from the SDK's get_task (its orchestrator's own use of the SDK: the other clients'
    paths call it best effort or not at all), and ors-sdk's server answers /task without env_name."""
    return cell.client == "firehorse" and _scenario_cell(cell) and cell.server == "ors-sdk"


def _shown(*ids: str) -> Where:
    return lambda cell: any(d.id in ids for d in shown_in(cell))


def _by_name_sessions(cell: CellFacts) -> bool:
    """The openreward SDK, TRL and benchflow's session (the SDK's, as its users write it) open every session by name
    with no variant: /create never carries env_name (where a /create is sent: TRL given the URL alone reaches no
    server)."""
    return cell.client in ("openreward", "trl", "benchflow") and _creates(cell) and not (cell.client == "trl" and cell.url_only)


def _platoon_by_name(cell: CellFacts) -> bool:
    """platoon's ors+http service opens every session by name with no variant (through the SDK), when it opens one:
    not where it refuses a non-default environment first (platoon-non-default-env-refused)."""
    return cell.client == "platoon" and _creates(cell) and not (_scenario_cell(cell) and cell.several_envs)


def _task_default_env(cell: CellFacts) -> bool:
    """inspect-openreward opens sessions from the Tasks its dataset listed, all from the default environment."""
    return cell.client == "inspect" and _scenario_cell(cell) and cell.several_envs


def _trl_defaults(cell: CellFacts) -> bool:
    return factory_defect(cell.tools) is None and cell.omits_a_default


def _url_only(cell: CellFacts) -> bool:
    """The client has the server's URL alone, and takes it as a base URL (the SDK's variables are not set)."""
    return cell.url_only


def _setup_fails(cell: CellFacts) -> bool:
    return cell.setup_fails


def _episode_fails_in_an_aggregate(cell: CellFacts) -> bool:
    """One of several episodes fails, and the client's own aggregate averages the scored ones only (§13.15)."""
    return cell.episodes > 1 and cell.setup_fails and cell.aggregates_over_scored


def _firehorse_task_env(cell: CellFacts) -> bool:
    return _scenario_cell(cell) and cell.several_envs and not _get_task_on_ors_sdk(cell)


def _benchflow_refuses(cell: CellFacts) -> str | None:
    """What benchflow's reward seam refuses first in the cell's episode, when the episode gets that far.

    ``ORSAdapter.tool_outputs_to_reward_events`` converts the outputs in order and raises at the first reward
    that is not a number (``unscored``: a null; a boolean passes, as ``float(True)``) or is a finite number outside
    [0, 1] (``range``; a non-finite one it refuses rightly); then the ``ors-episode`` verifier wants a terminal
    reward (``unfinished``: no call said ``finished: true``). Where a correct client reports an error first (the
    profile's expectation), or ``/create`` is refused, the session fails before benchflow judges anything.
    """
    if cell.expects_error or cell.refuses_session:
        return None
    for reward in cell.rewards:
        if not isinstance(reward, (int, float)):
            return "unscored"
        if math.isfinite(reward) and not 0.0 <= reward <= 1.0:
            return "range"
        if not math.isfinite(reward):
            return None
    return None if cell.finishes else "unfinished"


def _benchflow(kind: str) -> Where:
    return lambda cell: _benchflow_refuses(cell) == kind


#: Which client targets run each upstream's code: TRL and inspect-openreward drive the openreward client.
UPSTREAM_CLIENTS: dict[str, tuple[str, ...]] = {
    TRL: ("trl",),
    SDK: ("openreward", "trl", "inspect", "firehorse", "platoon", "benchflow"),
    ORS: ("ors",),
    INSPECT: ("inspect",),
    INSPECT_AI: ("inspect",),
    FIREHORSE: ("firehorse",),
    PLATOON: ("platoon",),
    BENCHFLOW: ("benchflow",),
    # The variants are no rows of the matrix: their pins show in no cell (shows_in None) and are strict xfails of
    # their own tests (tests/test_client_variants.py), each run through check-client's cases.
    FIREHORSE_MCP: ("firehorse-mcp",),
    PLATOON_REACT: ("platoon-react",),
    TASKSETS: ("tasksets",),
    VERIFIERS: ("tasksets",),
    ORS_SERVER: (),  # a server defect: every client on that server meets it
}

DEFECTS: dict[str, Defect] = {
    d.id: d
    for d in (
        Defect(
            "keyword-crash",
            TRL,
            "a tool or parameter named like a Python keyword (class, from, lambda) passes the identifier regex, then exec() raises SyntaxError inside _RolloutEnvironment.__init__, so environment_factory() crashes",
            "P3",
            shows_in=_factory("keyword-crash"),
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('trl', 'trl/experimental/openreward/environment.py', 359, 'exec(src, ns)'),
        ),
        Defect(
            "non-identifier-skipped",
            TRL,
            "a tool whose name or any parameter name is not a Python identifier (file-path, a.b/c) is skipped with only a logger warning; the model never sees it",
            "P3",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 317, 'logger.warning("skipping tool with non-identifier name'),
        ),
        Defect(
            "reset-overridden",
            TRL,
            "a tool named reset replaces the adapter's reset(); GRPO then calls the tool instead of opening a session",
            "P4",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 363, 'setattr(cls, tool_name, fn)'),
        ),
        Defect(
            "get-reward-reserved",
            TRL,
            "a tool named get_reward is bound, and GRPO takes it as a reward source instead of a tool",
            "P4",
            at=Source('trl', 'trl/trainer/grpo_trainer.py', 694, 'elif member_name == "get_reward":'),
        ),
        Defect(
            "state-shadowed",
            TRL,
            "a tool named reward/rewards/metadata/finished/last_output is bound on the class but shadowed by the adapter's instance attribute; GRPO collects the attribute's value, not a callable",
            "P4",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 192, 'self.reward: float | None = None'),
        ),
        Defect(
            "underscore-hidden",
            TRL,
            "a tool whose name starts with _ is bound, but GRPO drops _-prefixed methods; the model never sees it",
            "P4",
            at=Source('trl', 'trl/trainer/grpo_trainer.py', 696, 'elif not member_name.startswith("_"):'),
        ),
        Defect(
            "type-lost",
            TRL,
            "_resolve_param_type keeps only a top-level type string or the first non-null anyOf/oneOf type, else the default's type, else str: $ref/oneOf models become str, anyOf[int, str] becomes int, type lists become str",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 78, 'def _resolve_param_type('),
        ),
        Defect(
            "enum-dropped",
            TRL,
            "enum/Literal values are dropped: the annotation is the bare type and the docstring carries no (choices: ...)",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 340, 'annotations[pname] = _PY_TYPE_OBJECTS[py_type]'),
        ),
        Defect(
            "items-dropped",
            TRL,
            "array item types, tuple prefixItems and dict value types are dropped: annotations are bare list/dict",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 340, 'annotations[pname] = _PY_TYPE_OBJECTS[py_type]'),
        ),
        Defect("nesting-dropped", TRL, "nested object properties are dropped: a $ref model becomes str (or a bare dict)", "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 339, 'py_type = _resolve_param_type(pdef)')),
        Defect("constraints-dropped", TRL, "minimum/maximum, length and item-count bounds are dropped", "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 339, 'py_type = _resolve_param_type(pdef)')),
        Defect(
            "bool-schema-crash",
            TRL,
            "a parameter whose schema is a boolean (true: any value; false: never present, both valid JSON Schema) reaches "
            "_resolve_param_type, which calls .get() on it: AttributeError inside _RolloutEnvironment.__init__, so "
            "environment_factory() crashes and no episode starts",
            "P3",
            shows_in=_factory("bool-schema-crash"),
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('trl', 'trl/experimental/openreward/environment.py', 85, 't = pdef.get("type")'),
        ),
        Defect(
            "top-level-only",
            TRL,
            "the binder reads only the top level's properties: a tool whose top level is a union of object schemas "
            "(anyOf/oneOf, as a pydantic RootModel writes it) or takes any key (additionalProperties: true, no properties) "
            "becomes a method with no parameters, so get_json_schema shows the model none and any argument it passes "
            "raises TypeError",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 325, 'schema.get("properties") or {}'),
        ),
        Defect(
            "description-filled",
            TRL,
            "an empty description is replaced: the tool's by 'Call the NAME tool.', a parameter's by its title or its "
            "name ('Word' for word), so the model reads text the environment never wrote",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 323, 'f"Call the {tool_name} tool."'),
        ),
        Defect(
            "docstring-sections",
            TRL,
            "descriptions are pasted into a Google-style docstring unescaped: a description containing Args:/Returns:/Raises: is cut there, and a parameter description line starting 'Word:' is parsed as another argument, so get_json_schema shows the model a truncated text",
            "P5",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 351, 'docstring = description + '),
        ),
        Defect(
            "none-forwarded",
            TRL,
            "an optional parameter without a JSON default (pydantic default_factory) or with default null on a non-nullable type gets '= None', and the generated body forwards every local, so the server receives null and answers input_validation",
            "P6",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 355, '_kwargs = dict(locals())'),
        ),
        Defect(
            "probe-task-0",
            TRL,
            "with neither indices nor task_tools_discovery_index, tool discovery probes task 0 only: task-scoped tools of other tasks are never bound",
            "P1",
            at=Source('trl', 'trl/experimental/openreward/_spec.py', 268, 'return [0]'),
        ),
        Defect(
            "task-spec-column",
            TRL,
            "a task-spec key named task_spec becomes a dataset column, GRPO passes it to reset(**row), and reset() "
            "creates the session from that value instead of the row's task_index (against a URL, /create then names "
            "the placeholder environment 'env' and fails with 404)",
            "P11",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 225, 'if task_spec is not None:'),
        ),
        Defect(
            "ragged-metadata",
            TRL,
            "task-spec values are folded into the dataset through Arrow: an object whose keys differ between tasks comes "
            "back with every key, the missing ones null (and a value whose JSON type differs between tasks makes "
            "train_dataset raise ArrowInvalid)",
            "P11",
            at=Source('trl', 'trl/experimental/openreward/_spec.py', 197, 'rows[key] = [s.get(key)'),
        ),
        Defect(
            "errors-as-text",
            TRL,
            "transport and HTTP failures (session gone, 404/500) are caught in _call_ors_tool and returned to the model as 'Error: ...' text; the rollout carries on as if the environment had answered",
            "P8",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 276, 'self.last_output = f"Error: {e}"'),
        ),
        Defect(
            "reset-leaks-session",
            TRL,
            "when get_prompt() fails inside reset(), the ORS session just created stays open on the server until the next reset() or _close()",
            "P13",
            shows_in=_setup_fails,
            effect=Effect.HARMS_SERVER,
            masks=True,
            at=Source('trl', 'trl/experimental/openreward/environment.py', 243, 'prompt = self._session.get_prompt()'),
        ),
        Defect(
            "images-dropped",
            TRL,
            "reset() and every tool method return _join_text_blocks(...): image blocks of the prompt and of tool results are skipped, so the model never sees an image (a screenshot tool reaches it as its caption alone)",
            "P8",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 244, 'return _join_text_blocks(prompt)'),
        ),
        Defect(
            "bool-reward",
            TRL,
            "a JSON boolean reward is taken as 1.0/0.0 (float(True)); RFC 008 excludes booleans from rewards",
            "P7",
            at=Source('trl', 'trl/experimental/openreward/environment.py', 286, 'step_reward = float(out.reward)'),
        ),
        Defect(
            "session-url",
            TRL,
            "OpenRewardSpec(url) builds openreward.OpenReward(base_url=url), whose base_url is the openreward web host: API and session traffic go to http://api.<host> and http://sessions.<host> (for http://127.0.0.1:PORT, names that do not resolve) instead of url, where environments.get(name, base_url=url) would reach it; given the URL alone, every reset() fails, so OPENREWARD_SESSION_URL must be set as well",
            "P10",
            shows_in=_url_only,
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('trl', 'trl/experimental/openreward/_spec.py', 348, 'kwargs["base_url"] = self._target'),
        ),
        Defect(
            "secret-names",
            SDK,
            "build_secrets_header (behind every session(secrets=...) of the SDK) accepts a plain string value only for a name in openreward's WELL_KNOWN_SECRETS and raises ValueError for any other: secrets={'NAME': 'value'} fails before /create for every client on the SDK (the SDK's own session(), TRL's documented dict[str, str], firehorse's --secret NAME=VALUE); TRL's tool probe swallows it (shared tools only) and reset() raises",
            "P13",
            at=Source('openreward', 'openreward/api/sandboxes/secrets.py', 156, 'if key not in WELL_KNOWN_SECRETS:'),
        ),
        Defect(
            "error-event-kills-session",
            SDK,
            "after one SSE error event (a tool raised) the client marks the session dead: every later call shows the model 'Error: environment session terminated ...' although the server session is alive",
            "P8",
            at=Source('openreward', 'openreward/api/environments/client.py', 993, 'self._mark_dead(ErrorResponse('),
        ),
        Defect(
            "sanitizer-drops-keyword-params",
            SDK,
            "sanitize_tool_schema (and session.list_tools(format=...)) deletes every key named title at any depth, so a parameter named title vanishes from properties for every provider (google also loses parameters named default and examples) while required still names it: the model is shown a schema without a parameter the server requires (inspect-openreward's solver lists tools for 'openai', firehorse's react agent for 'anthropic', agents/react.py:310)",
            "P5",
            shows_in=_sanitized,  # the model's call lacks the parameter: nothing runs
            effect=Effect.WRONG_DATA,
            masks=True,
            breaks=(("client.script_followed", _shown("sanitizer-drops-keyword-params")),),
            at=Source('openreward', 'openreward/api/environments/client.py', 162, 'if k != "title"'),
        ),
        Defect(
            "env-name-not-sent",
            SDK,
            "environments.get(name) without variant= sends the name only as X-Deployment: every path is bare (308 to the server's first environment) and /create carries no env_name, so on a server with several environments the episode silently runs in the default one (TRL's OpenRewardSpec(url, env_name=) and inspect-openreward pass the name this way)",
            "P12",
            shows_in=_lands_in_default_env,
            effect=Effect.WRONG_DATA,
            breaks=(
                ("client.env_name", _by_name_sessions),
                ("client.env_name", _task_default_env),
                ("client.env_name", _platoon_by_name),
            ),
            at=Source('openreward', 'openreward/api/environments/client.py', 753, 'if self.env.variant is None:'),
        ),
        Defect(
            "cut-call-rerun",
            SDK,
            "a /call stream that drops before its task_id event is re-POSTed without one (call_tool does not pass resumable_only=True, 'deferred to a follow-up' in client.py), so the tool runs a second time and the episode takes a step nobody asked for",
            "P8",
            shows_in=_under("cut-before-task-id"),
            effect=Effect.HARMS_SERVER,
            masks=True,
            at=Source('openreward', 'openreward/api/environments/client.py', 981, 'NOTE: the safe (never-re-invoke) /call retry via'),
        ),
        Defect(
            "nan-reward-taken",
            SDK,
            "a reward sent as NaN (Python's json.dumps writes the bare token for float('nan'); it is not JSON) is parsed "
            "by json.loads and kept by ToolOutput's float field: call_tool returns reward nan instead of refusing the "
            "answer, and every client on it hands the NaN on unless its own consumer checks the reward (platoon's grade and benchflow's [0, 1] check refuse it)",
            "P7",
            shows_in=lambda cell: _under("reward-nan")(cell) and not cell.refuses_non_finite,
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source('openreward', 'openreward/api/_session/http.py', 410, 'return json_lib.loads(final_result)'),
        ),
        Defect(
            "chunk-lstrip",
            SDK,
            "every SSE data line is lstrip()ped, so a result whose next chunk starts with spaces loses them: the model sees a different text than the environment returned",
            "P8",
            shows_in=_spaced_result,
            effect=Effect.WRONG_DATA,
            at=Source('openreward', 'openreward/api/_session/http.py', 326, 'value = value.lstrip()'),
            shown_by=("client.text_verbatim",),
        ),
        Defect(
            "no-end-retried-forever",
            SDK,
            "resumable_sse resets its retry counter on every HTTP 200, so a call whose stream ends without `end` is re-POSTed with its task_id forever: no error, the episode hangs and its session stays open",
            "P8",
            shows_in=_under("stream-no-end"),
            effect=Effect.HANGS,
            masks=True,
            at=Source('openreward', 'openreward/api/_session/http.py', 396, 'attempt = 0'),
        ),
        Defect(
            "ors-no-end-retried-forever",
            ORS,
            "resumable_sse sets attempt = 0 on every HTTP 200, so a call whose stream ends without `end` is re-POSTed with its task_id forever: no error, the episode hangs and its session stays open",
            "P8",
            shows_in=_under("stream-no-end"),
            effect=Effect.HANGS,
            masks=True,
            at=Source('ors-sdk', 'ors/client/_http.py', 165, 'attempt = 0'),
        ),
        Defect(
            "ors-chunk-lstrip",
            ORS,
            "_parse_sse_events lstrip()s every data value, so a result whose next chunk starts with spaces loses them: the model sees a different text than the environment returned",
            "P8",
            shows_in=_spaced_result,
            effect=Effect.WRONG_DATA,
            at=Source('ors-sdk', 'ors/client/_http.py', 116, 'value = value.lstrip()'),
            shown_by=("client.text_verbatim",),
        ),
        Defect(
            "ors-create-without-env-name",
            ORS,
            "a session opened by split and index POSTs /create without env_name (only a Task carries one) while its calls go to /{name}/call, which the server routes by session: on a server with several environments the episode silently runs in the default one",
            "P12",
            shows_in=_lands_in_default_env,
            effect=Effect.WRONG_DATA,
            breaks=(("client.env_name", _creates),),
            at=Source('ors-sdk', 'ors/client/session.py', 83, 'create_payload["split"] = self.split'),
        ),
        Defect(
            "ors-nan-reward-taken",
            ORS,
            "a reward sent as NaN is parsed by json.loads and kept by ToolOutput's float field: call_tool returns reward "
            "nan instead of refusing the answer",
            "P7",
            shows_in=_under("reward-nan"),
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source('ors-sdk', 'ors/client/_http.py', 179, 'return json_lib.loads(final_result)'),
        ),
        Defect(
            "ors-cut-call-rerun",
            ORS,
            "a /call stream that drops before its task_id event is re-POSTed without one, so the tool runs a second time",
            "P8",
            shows_in=_under("cut-before-task-id"),
            effect=Effect.HARMS_SERVER,
            masks=True,
            at=Source('ors-sdk', 'ors/client/_http.py', 159, 'if task_id:'),
        ),
        Defect(
            "ors-4xx-retried",
            ORS,
            "_is_retryable_http_error tests isinstance(e, aiohttp.ClientError) first, and ClientResponseError is one: every 4xx of a non-streaming request (/create, /prompt, /task_tools, /delete) is sent three times, 1 s and 2 s apart, before it is raised",
            "P8",
            # §13.13: the /create refused 400 under missing-task-429 is sent three times (the text plays no part).
            breaks=(("client.no_4xx_retry", _under("missing-task-429")),),
            at=Source('ors-sdk', 'ors/client/_http.py', 16, 'if isinstance(exception, (aiohttp.ClientError, asyncio.TimeoutError)):'),
        ),
        Defect(
            "ors-503-gives-up",
            ORS,
            "request_retryable stops after 3 attempts with 1 s and 2 s waits whatever Retry-After says: a 503 'starting' that lasts longer than about 4.5 s (a slow setup()) ends the episode with an error, where the openreward client rides it out",
            "P2",
            at=Source('ors-sdk', 'ors/client/_http.py', 57, 'stop=stop_after_attempt(3),'),
        ),
        Defect(
            "ors-retry-after-ignored",
            ORS,
            "request_retryable waits its own backoff, 1 s then 2 s (tenacity wait_exponential(multiplier=1, min=1)), whatever Retry-After says: a 429 or 503 with Retry-After: 2 is retried after 1 s, too soon (the retry usually still succeeds, so the episode survives)",
            "P2",
            breaks=(("client.retry_after", lambda cell: _creates(cell) and cell.retry_after),),
            at=Source('ors-sdk', 'ors/client/_http.py', 56, 'wait=wait_exponential(multiplier=1, min=1, max=10),'),
        ),
        Defect(
            "defaults-sent",
            TRL,
            "the generated tool method forwards every parameter, so a call that leaves out an optional parameter sends its JSON default explicitly (step() arrives as step(note='')): the server sees a different call than the model made",
            "P6",
            breaks=(("client.script_followed", _trl_defaults),),
            at=Source('trl', 'trl/experimental/openreward/environment.py', 355, '_kwargs = dict(locals())'),
        ),
        Defect(
            "inspect-finished-error",
            INSPECT,
            "generate(tool_calls='loop') does not stop on finished: when the model makes another call after the finishing one — in a later turn, or in the finishing call's own reply, whose calls Inspect runs at once — its episode_finished (or an input_validation) answer raises ToolCallError out of the tool, Inspect records a sample error, and the reward the solver had captured is thrown away (no score; with Inspect's defaults one such sample fails the eval; in the same-reply case the finishing call's own result is lost from the transcript too)",
            "P7",
            shows_in=lambda cell: cell.calls_after_finished and _creates(cell),
            effect=Effect.REPORTS_ERROR,
            breaks=(("client.stops_at_finished", lambda cell: cell.calls_after_finished and _creates(cell)),),
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 156, 'result = await session.call_tool(name, kwargs)'),
        ),
        Defect(
            "trl-calls-after-finished",
            TRL,
            "GRPOTrainer's tool loop runs every tool call the model makes until it stops calling tools, and "
            "_RolloutEnvironment's tool methods never look at finished: a call the model makes after the finishing one "
            "(in a later turn or the same reply) reaches the server; a server with a finish latch refuses it "
            "(episode_finished, handed to the model as 'Error: ...' text) and the rollout keeps its reward, one without "
            "a latch (ors-sdk's server) runs the tool again and its reward replaces the winning one",
            "P7",
            breaks=(("client.stops_at_finished", lambda cell: cell.calls_after_finished and _creates(cell)),),
            at=Source('trl', 'trl/trainer/grpo_trainer.py', 1957, 'while idxs_with_tool and iteration_num < self.max_tool_calling_iterations:'),
        ),
        Defect(
            "firehorse-runs-the-whole-reply",
            FIREHORSE,
            "the react agent's Anthropic loop (agents/react.py) runs every tool_use block of a reply before it looks at "
            "finished (its other providers' loops break there): a call the model makes after the finishing one in the "
            "same reply reaches the server, which refuses it (episode_finished); firehorse shows the model an is_error "
            "'Error: ...' result and the trial keeps its reward",
            "P7",
            breaks=(("client.stops_at_finished", lambda cell: cell.finishing_reply_goes_on and _creates(cell)),),
            at=Source('firehorse-cli', 'firehorse/agents/react.py', 403, 'for block in message.content:'),
        ),
        Defect(
            "inspect-ref-untyped",
            INSPECT,
            "openreward_solver builds each tool's parameters as Inspect's ToolParams(**schema), whose JSONSchema model has no $ref or $defs field (pydantic drops unknown keys) — whatever the provider, since sanitize_tool_schema keeps $ref: a parameter whose schema is a $ref (a pydantic model or Enum, also inside anyOf or array items) reaches the model as an untyped {} with only its description",
            "P5",
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 172, 'parameters=ToolParams(**schema),'),
        ),
        Defect(
            "ors-gc-closes-loop",
            ORS,
            "the sync EnvironmentsAPI closes its event loop when it is garbage collected (__del__ calls close(), which "
            "runs self._loop.close()), while each Environment it handed out keeps using that loop: the one-liner "
            "env = ORS(base_url=URL).environments.get(name) leaves the client unreferenced, and the environment's first "
            "session raises RuntimeError 'Event loop is closed' before /create (the openreward client's environment "
            "outlives its client)",
            "P13",
            at=Source("ors-sdk", "ors/client/environment.py", 453, "if not self._loop.is_closed():"),
        ),
        Defect(
            "ors-sdk-no-finish-latch",
            ORS_SERVER,
            "no finish latch: a call after the one that returned finished=True still runs the tool and answers ok with a new reward, so a client that keeps calling (Inspect's tool loop) runs tools the episode no longer accepts, and a trainer reading the last reward trains on the later one",
            "P7",
            at=Source('ors-sdk', 'ors/server.py', 482, 'res = await env._call_tool(tool_call.name, tool_call.input)'),
        ),
        Defect(
            "inspect-schema-refused",
            INSPECT,
            "_solver._wrap_tool builds inspect_ai's ToolParams(**schema), whose pydantic model refuses a boolean property "
            "schema (true/false) and items given as a list (draft-07's tuple): building the tool raises ValidationError, "
            "the sample errors before the model's first turn and the eval scores nothing",
            "P3",
            shows_in=lambda cell: cell.client == "inspect" and _scenario_cell(cell) and any(inspect_refused(t) for t in cell.tools),
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 172, 'parameters=ToolParams(**schema),'),
        ),
        Defect(
            "inspect-keywords-dropped",
            INSPECT,
            "ToolParams keeps only the keywords it models (type, format, description, default, enum, items, properties, "
            "additionalProperties, anyOf, required, pattern, min/maxLength, minimum/maximum, examples): const, "
            "exclusiveMinimum/exclusiveMaximum and minItems/maxItems are dropped, a top level that is a union of objects "
            "becomes an object with no parameters, and one that takes any key takes none (the openai sanitizer drops "
            "additionalProperties)",
            "P5",
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 172, 'parameters=ToolParams(**schema),'),
        ),        Defect(
            "inspect-items-dropped",
            INSPECT,
            "ToolParams has no prefixItems either, so a tuple reaches the model as an array with items {} (the openai sanitizer's empty items) or none (anthropic); and sanitize_tool_schema(..., 'openai') — the provider inspect-openreward picks for Inspect's openai API and any it does not know — drops additionalProperties, so a dict loses its value type (dict[str, float] is a bare object)",
            "P5",
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 165, 'schema = sanitize_tool_schema(tool_spec.input_schema, provider_format)'),
        ),
        Defect(
            "inspect-solver-drops-base-url",
            INSPECT,
            "openreward_solver opens its sessions on a new AsyncOpenReward().environments.get(environment.deployment_name, variant=...), dropping the base_url of the Environment it was handed: an environment reached by environments.get(name, base_url=URL) lists its dataset from URL, but every session goes to OPENREWARD_SESSION_URL, or to https://sessions.openreward.ai when that is unset",
            "P10",
            shows_in=_url_only,
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 105, 'async_env = AsyncOpenReward().environments.get('),
        ),
        Defect(
            "inspect-no-secrets",
            INSPECT,
            "openreward_solver takes no secrets: it opens each sample's session with the task and toolset only "
            "(async_env.session(task=task, toolset=toolset)), so an environment that needs a session secret refuses "
            "/create (400 naming the secret) and every sample errors before its first turn — an inspect-openreward "
            "user has no way to hand one on",
            "P13",
            at=Source("inspect-openreward", "inspect_openreward/_solver.py", 109, "async with async_env.session(task=task, toolset=toolset) as session:"),
        ),
        Defect(
            "inspect-result-images-dropped",
            INSPECT,
            "a tool's execute() returns only the TextBlock texts of the result: image blocks in tool results are dropped (the prompt's images do reach the model as ContentImage)",
            "P8",
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 162, 'block.text for block in result.blocks if isinstance(block, TextBlock)'),
        ),
        Defect(
            "inspect-list-tasks-only",
            INSPECT,
            "openreward_dataset() reads the split with list_tasks() only: an environment that serves tasks by index (/tasks answers 400) cannot be evaluated at all",
            "P11",
            shows_in=_index_only,
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('inspect-openreward', 'inspect_openreward/_dataset.py', 35, 'tasks = environment.list_tasks(split=split)'),
        ),
        Defect(
            "firehorse-error-results-unreported",
            FIREHORSE,
            "the react agent's Anthropic loop catches every exception of session.call_tool but ToolFailed and "
            "SessionTerminatedError and hands the model an is_error 'Error: ...' tool result, and the trial ends "
            "success=True with no error (agents/react.py:458): a session lost mid-episode (the server restarted: 404 "
            "'Active environment not found' on every later call) reaches the model call after call, and the run's "
            "result reports a trial without a reward, never the failure",
            "P8",
            shows_in=_under("restart"),
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source("firehorse-cli", "firehorse/agents/react.py", 433, "except Exception as e:"),
        ),
        Defect(
            "firehorse-needs-platform",
            FIREHORSE,
            "before any trial the orchestrator asks the OpenReward platform which secrets the environment requires (GET {OPENREWARD_API_URL}/v1/environments/NS/NAME/required-secrets, not part of ORS) and does not catch a failure: pointed at an ORS server alone (OPENREWARD_API_URL the server's URL), every run ends with a traceback on its 404 before a trial starts",
            "P10",
            at=Source('firehorse-cli', 'firehorse/orchestrator.py', 122, 'required = await env.list_required_secrets()'),
        ),
        Defect(
            "inspect-mean-over-scored",
            INSPECT_AI,
            "an errored sample has no score, and the eval's results count only the samples scored: under inspect eval --no-fail-on-error — orsbench's choice for its inspect target, so that one failed episode does not end the others, as a user evaluating many samples runs it (without it the first sample error fails the whole eval) — the "
            "openreward_scorer's mean in results.scores is over the scored samples only (scored_samples 2 of 3 samples), "
            "so an eval whose second episode failed its setup reports mean 1.0, the figure of a run with no failure",
            "P8",
            shows_in=_episode_fails_in_an_aggregate,
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source('inspect_ai', 'inspect_ai/_eval/task/results.py', 415, 'scored_samples = len(sample_scores_with_values)'),
        ),
        Defect(
            "firehorse-avg-reward-over-scored",
            FIREHORSE,
            "results.RunSummary.from_results averages the trials' rewards that are not None: a failed trial (its "
            "setup failed, reward None) is left out of avg_reward and counted only in n_failed, so run_result.json "
            "reports avg_reward 1.0 over 2 of 3 trials, the figure of a run with no failure",
            "P8",
            shows_in=_episode_fails_in_an_aggregate,
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source('firehorse-cli', 'firehorse/results.py', 89, 'avg = sum(rewards) / len(rewards) if rewards else None'),
        ),
        Defect(
            "firehorse-setup-leaks-session",
            FIREHORSE,
            "run_trial opens the session (__aenter__) and then reads the prompt and tools inside a try that closes the session only for a toolset rejection: when get_prompt() fails (a failed setup(), 500) the error is re-raised, the trial fails, and the session it opened is never deleted",
            "P13",
            shows_in=_setup_fails,
            effect=Effect.HARMS_SERVER,
            at=Source('firehorse-cli', 'firehorse/trial.py', 108, 'if toolset_name is None or not _is_toolset_rejection(enter_exc):'),
        ),
        Defect(
            "platoon-null-final-reward-refused",
            PLATOON,
            "OrsSession.grade takes the finishing call's reward and grades an episode whose finishing call carries reward "
            "null 'invalid (no_reward)': the rollout is dropped untrained although ORS allows a null reward (§4.2) and the "
            "earlier calls were rewarded",
            "P7",
            shows_in=lambda cell: _scenario_cell(cell) and cell.finishes_without_a_reward,
            effect=Effect.REPORTS_ERROR,
            at=Source('platoon', 'platoon/envs/ors/session.py', 998, '"no_reward", status="invalid"'),
        ),
        Defect(
            "platoon-402-listing-ignored",
            PLATOON,
            "the service reads GET /list_environments (check_server_environment) and the task's display name "
            "(RemoteBackend.task_name: POST /task) best effort: a 402 Payment Required on either is logged at debug "
            "level and taken as 'lists nothing' / 'no name', and the rollout goes on as if the listing had been "
            "empty; the refusal never reaches the user (§13.12)",
            "P8",
            shows_in=_listing_refused,
            effect=Effect.WRONG_DATA,
            unreported=True,
            at=Source('platoon', 'platoon/envs/ors/service.py', 852, 'logger.debug("Cannot list the environments of the env server %s"'),
        ),
        Defect(
            "platoon-non-default-env-refused",
            PLATOON,
            "an ors+http://HOST/Env service opens its sessions through the openreward client without a variant, which "
            "sends no env_name (see env-name-not-sent); on a server that serves several environments, Env one of them "
            "but not the first, check_server_environment refuses the session (EnvSetupError env_config: 'select it with "
            "?variant=Env') instead of naming Env on /create, so the rollout never starts",
            "P12",
            shows_in=lambda cell: _scenario_cell(cell) and cell.several_envs,
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('platoon', 'platoon/envs/ors/service.py', 462, 'raise EnvSetupError('),
        ),
        Defect(
            "firehorse-get-task-env-name",
            SDK,
            "AsyncEnvironment.get_task reads res['env_name'] from the /task answer unguarded, and ors-sdk's server answers /task with the task alone (ors/server.py:364, {'task': task}): every caller of get_task on that server raises KeyError 'env_name' — firehorse's orchestrator starts each trial from it (firehorse/orchestrator.py:162), so every firehorse trial fails with the error 'env_name' before a session is opened",
            "P11",
            shows_in=_get_task_on_ors_sdk,
            effect=Effect.REPORTS_ERROR,
            masks=True,
            at=Source('openreward', 'openreward/api/environments/client.py', 1158, 'environment_name=res["env_name"]'),
        ),
        Defect(
            "firehorse-task-env-name",
            FIREHORSE,
            "a trial's session is opened from the Task that the orchestrator's get_task returned, and the SDK fetched it from the server's default environment (its bare path, see env-name-not-sent): on a server with several environments /create names the default one ('two-envs-decoy' where the run was started for --env orsbench/two-envs) and the episode plays there",
            "P12",
            breaks=(("client.env_name", _firehorse_task_env),),
            at=Source('firehorse-cli', 'firehorse/orchestrator.py', 162, 'task = await env.get_task(config.split, abs_index)'),
        ),
        Defect(
            "benchflow-unscored-call-refused",
            BENCHFLOW,
            "write_ors_tool_outputs_jsonl (ORSAdapter.tool_outputs_to_reward_events, \"the runtime-side contract\" for "
            "ORS session output) wants a number on every tool output: a call the environment does not score (reward "
            "null, an unscored step) raises ValueError 'outputs[N].reward must be numeric', so an episode rewarded "
            "only at its end (sparse-reward's reveals, a hint, a long read before the answer) is never scored",
            "P7",
            shows_in=_benchflow("unscored"),
            effect=Effect.REPORTS_ERROR,
            at=Source('benchflow', 'benchflow/adapters/ors.py', 245, 'reward must be numeric'),
        ),
        Defect(
            "benchflow-reward-outside-unit-refused",
            BENCHFLOW,
            "the same conversion takes only rewards in [0, 1] (the ors-episode verifier too): a finite reward outside "
            "it on any call (sparse-reward's -1 for a wrong total, a -0.25 step penalty, a reward of 2) raises "
            "ValueError 'outputs[N].reward must be finite and between 0.0 and 1.0' and the episode is not scored",
            "P7",
            shows_in=_benchflow("range"),
            effect=Effect.REPORTS_ERROR,
            at=Source('benchflow', 'benchflow/adapters/ors.py', 247, 'must be finite and between 0.0 and 1.0'),
        ),
        Defect(
            "benchflow-unfinished-refused",
            BENCHFLOW,
            "the ors-episode verifier takes only a terminal (finished) record's reward and fails closed without one "
            "(VerifierOutputParseError 'did not include a terminal reward'): an episode that ends without finished: "
            "true (a turn limit, a script that stops early) is an error, even when its calls were rewarded",
            "P7",
            shows_in=_benchflow("unfinished"),
            effect=Effect.REPORTS_ERROR,
            at=Source('benchflow', 'benchflow/task/verifier_ors_episode.py', 187, 'did not include a terminal reward'),
        ),
        Defect(
            "benchflow-bool-reward",
            BENCHFLOW,
            "_bounded_reward does float(value): a JSON boolean reward (true) passes the [0, 1] check as 1.0 and the "
            "ors-episode verifier scores the episode 1.0 (the openreward client hands the boolean on as sent)",
            "P7",
            at=Source('benchflow', 'benchflow/adapters/ors.py', 243, 'reward = float(value)'),
        ),
        Defect(
            "inspect-sigterm-leaks-session",
            INSPECT,
            "ended with SIGTERM mid-call, the eval leaves its session open: inspect eval keeps Python's default SIGTERM "
            "(the process dies, nothing runs), and even unwound (SystemExit, as orsbench's adapter turns SIGTERM into) "
            "the sample is cancelled with the POST /delete of openreward's AsyncSession.__aexit__ (inside "
            "inspect-openreward's `async with async_env.session(...)`) never sent: the sample errors with "
            "CancelledError and the server holds the session until its TTL",
            "P13",
            breaks=(("client.deletes_on_sigterm", lambda cell: cell.terminated),),
            at=Source('inspect-openreward', 'inspect_openreward/_solver.py', 109, 'async with async_env.session(task=task, toolset=toolset) as session:'),
        ),
        Defect(
            "firehorse-sigterm-leaks-session",
            FIREHORSE,
            "its CLI installs no SIGTERM handler: a firehorse run ended with SIGTERM mid-call (a scheduler's preemption, "
            "timeout) dies at once, the trial's `async with` session never closed, and the server holds the session until "
            "its TTL (unwound instead, as orsbench's adapter turns SIGTERM into SystemExit, the trial deletes it: the "
            "matrix's firehorse cell passes)",
            "P13",
            at=Source('firehorse-cli', 'firehorse/cli.py', 460, 'def main(argv: list[str] | None = None) -> int:'),
        ),
        Defect(
            "firehorse-secret-on-command-line",
            FIREHORSE,
            "its CLI takes a session secret only as an argument, --secret NAME=VALUE (no variable, no file): a firehorse "
            "user's secret sits in the firehorse process's /proc/PID/cmdline, readable by every user of the machine "
            "(ps), for the whole evaluation (docs/protocol.md §14.4; orsbench's firehorse target runs the same CLI "
            "in-process, so its matrix episodes carry no secret on a command line)",
            "P13",
            at=Source('firehorse-cli', 'firehorse/cli.py', 105, '"--secret", action="append"'),
        ),
        Defect(
            "firehorse-mcp-second-session",
            FIREHORSE_MCP,
            "the bridge opens a session of its own for the tool calls (OpenRewardBridge.initialize) and never reads its "
            "prompt, while the model was given the prompt of the trial's session (firehorse/trial.py:101), which gets no "
            "call: every episode of firehorse's CLI agents (claude-code, codex, gemini, hermes) acts on a session other "
            "than the one whose prompt the model read — an environment that sets its task up in get_prompt, or draws it "
            "per session, is played blind — and holds two sessions on the server",
            "P8",
            at=Source("firehorse-cli", "firehorse/mcp/bridge.py", 122, "self._session = env.session(task, secrets, toolset=self._toolset_name)"),
        ),
        Defect(
            "firehorse-mcp-episode-complete-in-text",
            FIREHORSE_MCP,
            "the bridge appends '[EPISODE COMPLETE] The environment has signaled that this task is finished. Final reward: "
            "R. Stop making tool calls.' to the finishing call's result, and the claude-code agent's rollout logger strips "
            "only the [OR_REWARD:...] marker (agents/claude_code.py:296, strip_or_reward_marker; strip_bridge_markers, "
            "which removes both, is used only on the environment's own text): the finishing call's recorded text is not "
            "what the environment returned",
            "P8",
            at=Source("firehorse-cli", "firehorse/mcp/bridge.py", 546, '[EPISODE COMPLETE] The environment has signaled'),
        ),
        Defect(
            "firehorse-mcp-failure-unreported",
            FIREHORSE_MCP,
            "a tool that raises (an SSE error event, ToolFailed) or a session lost mid-episode (404) reaches the model as an "
            "isError 'Session terminated: ...' or 'Unexpected error: ...' result, and the claude-code agent reads only the "
            "bridge's result file: the trial ends success=True with no error (agents/claude_code.py:821), its reward the "
            "last one before the failure — the run's result never mentions it",
            "P8",
            at=Source("firehorse-cli", "firehorse/mcp/bridge.py", 443, "self._session_terminated = True"),
        ),
        Defect(
            "firehorse-mcp-bool-reward",
            FIREHORSE_MCP,
            "parse_or_reward_marker keeps any int or float from the bridge's [OR_REWARD:{\"r\": ...}] marker, a JSON "
            "boolean too (isinstance(True, int)): a reward sent as true (the openreward client hands it on as sent) is the "
            "claude-code rollout's reward for the call and, through the result file's last_reward, the trial's",
            "P7",
            at=Source("firehorse-cli", "firehorse/mcp/convert.py", 62, "if reward is not None and not isinstance(reward, (int, float)):"),
        ),
        Defect(
            "platoon-react-text-as-placeholders",
            PLATOON_REACT,
            "the react agent hands the model each tool result as ToolResult.as_text() (react.py:88): its text blocks "
            "joined by newlines and an image block as the text '[image/png]' (platoon/envs/service.py:143), so the model "
            "never sees the image and reads a text the environment did not send ('[image/png]\\nthe 4x4 image above')",
            "P8",
            at=Source("platoon", "platoon/harness/builtin/react.py", 88, '"content": result.as_text()'),
        ),
        Defect(
            "platoon-react-raised-tool-trained-as-zero",
            PLATOON_REACT,
            "a tool that raises (an SSE error event: the openreward client's ToolFailed, which ends the session) reaches "
            "the react agent's model as an error tool message, the agent goes on, and OrsSession.grade scores the episode "
            "0.0 'no_submit' (a non-terminal tool's raise is the policy's call gone wrong, session.py:36-40): the "
            "environment's failure is trained on as a zero reward and never reported (the ors+http adapter of the platoon "
            "row writes each error result as an error line, so only this agent path shows it)",
            "P8",
            at=Source("platoon", "platoon/envs/ors/session.py", 820, 'return Outcome(status="scored", rewards={"reward": 0.0}, reason="no_submit"'),
        ),
        Defect(
            "verifiers-tool-failure-as-result",
            VERIFIERS,
            "the base harness runs each tool call of a reply inside 'except Exception as e: content = "
            "tool_error_content(e)' (str(e)): whatever the taskset's call_tool raises — the openreward client's "
            "ToolFailed (a tool raised), its ToolCallError (ok: false, input_validation), a 404 of a lost session, "
            "State.add_step_reward's TypeError on a boolean reward — becomes that call's tool message, the rollout goes "
            "on, and the state has no error: OpenRewardTaskset's rollout ends scored (its reward the sum so far, 0.0) "
            "and is trained on as if the environment had answered",
            "P8",
            at=Source("verifiers", "verifiers/v1/harness.py", 518, "content = tool_error_content(e)"),
        ),
        Defect(
            "verifiers-runs-the-whole-reply",
            VERIFIERS,
            "the base harness runs every tool call of a reply at once (asyncio.gather) and looks at the stop condition "
            "only after all of them: a call the model makes after the finishing one in the same reply is sent to the "
            "server with it, concurrently — run before the finish or refused after it, as the race goes (§13.14)",
            "P8",
            at=Source("verifiers", "verifiers/v1/harness.py", 522, "await asyncio.gather("),
        ),
        Defect(
            "tasksets-no-secrets",
            TASKSETS,
            "OpenRewardSession.start opens each rollout's session as environment.session(task=...) with no secrets, and "
            "OpenRewardTasksetConfig has no field for them: an environment that needs a secret (an API key for its "
            "sandbox or judge) refuses every session (400 on /create), and the rollout fails before its prompt",
            "P10",
            at=Source("tasksets", "tasksets/openreward.py", 59, "self.session_context = environment.session("),
        ),
        Defect(
            "tasksets-task-env-name",
            TASKSETS,
            "load_tasks lists the split through the openreward client's environment without a variant (config.variant is "
            "None unless the user sets it), whose bare path the server answers from its default environment (see "
            "env-name-not-sent), and each rollout's session is opened from that listed Task: on a server with several "
            "environments /create names the default one ('two-envs-decoy' for environment='two-envs') and the rollout "
            "plays there",
            "P12",
            at=Source("tasksets", "tasksets/openreward.py", 148, "environment.list_tasks(split=task_split)"),
        ),
    )
}

#: The order defects that show together are named in: the one that decides the verdict first.
_WEIGHT = {Effect.HANGS: 0, Effect.REPORTS_ERROR: 1, Effect.HARMS_SERVER: 2, Effect.WRONG_DATA: 3, Effect.RULE: 4}


def shown_in(cell: CellFacts) -> list[Defect]:
    """The pinned defects that change the episode in ``cell``, the one that decides its verdict first.

    A defect that ``masks`` (the episode ends where it strikes) is the only one shown.
    """
    shown = [d for d in DEFECTS.values() if d.shows(cell)]
    masking = [d for d in shown if d.masks]
    return masking[:1] if masking else sorted(shown, key=lambda d: _WEIGHT[d.effect])


def predicted(cell: CellFacts) -> Verdict:
    """The verdict the pinned defects predict for ``cell``: the cell's own expectation and each shown defect's effect."""
    shown = shown_in(cell)
    expected = [Effect.REPORTS_ERROR] if cell.expects_error and not any(d.unreported for d in shown) else []
    return verdict_of([*expected, *(d.effect for d in shown)])


def broken_rules(cell: CellFacts) -> dict[str, Defect]:
    """Client checks of rules the pinned defects make fail in ``cell``, by check id (the verdict does not depend on them)."""
    found: dict[str, Defect] = {}
    for defect in DEFECTS.values():
        if defect.reaches(cell):
            for check, where in defect.breaks:
                if where(cell):
                    found.setdefault(check, defect)
    return found


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # the binder's own regex (environment.py)
_DOC_SECTIONS = ("Args:", "Returns:", "Raises:")
_ARG_LINE = re.compile(r"\n[ \t]*\w+:")


def _properties(spec: JSON) -> tuple[JSON, list[str], list[str]]:
    schema = spec.get("input_schema") or {}
    props: JSON = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    ordered = [n for n in props if n in required] + [n for n in props if n not in required]
    return props, ordered, sorted(required)


def binding_defect(spec: JSON) -> Defect | None:
    """Why TRL 1.16 does not bind this tool at all (``None``: it binds)."""
    name = spec["name"]
    _, params, _ = _properties(spec)
    if not _IDENTIFIER.match(name) or any(not _IDENTIFIER.match(p) for p in params):
        return DEFECTS["non-identifier-skipped"]
    if bool_schema_params(spec):
        return DEFECTS["bool-schema-crash"]
    if keyword.iskeyword(name) or any(keyword.iskeyword(p) or p == "self" for p in params):
        return DEFECTS["keyword-crash"]
    return None


def bool_schema_params(spec: JSON) -> list[str]:
    """Top-level parameters whose schema is a boolean (``true``/``false``): TRL 1.16's ``_resolve_param_type`` calls ``.get`` on them."""
    props = (spec.get("input_schema") or {}).get("properties") or {}
    return [name for name, prop in props.items() if isinstance(prop, bool)]


def hidden_by_the_top_level(spec: JSON) -> bool:
    """Whether the tool takes parameters its top level does not list in ``properties``: a union of objects, or any key.

    TRL 1.16 binds only the top-level ``properties`` (``top-level-only``), and so does inspect's ToolParams.
    """
    schema = spec.get("input_schema") or {}
    return not schema.get("properties") and bool(schema_view.view(schema)["names"])


def empty_descriptions(spec: JSON) -> list[str]:
    """Where a description is given but empty: ``"tool"`` and/or the parameters (TRL 1.16 fills them in)."""
    found = ["tool"] if spec.get("description") == "" else []
    return found + [name for name, text in schema_view.descriptions(spec.get("input_schema")).items() if text == ""]


def signature_defect(spec: JSON) -> Defect | None:
    """Why the bound method's parameters are not the schema's (``None``: they are)."""
    if (defect := binding_defect(spec)) is not None:
        return defect
    if hidden_by_the_top_level(spec) and schema_view.parameters(spec.get("input_schema"))["properties"]:
        return DEFECTS["top-level-only"]
    return None


def exposure_defect(spec: JSON) -> Defect | None:
    """Why GRPO does not hand the model a callable for this tool (``None``: it does)."""
    if (defect := binding_defect(spec)) is not None:
        return defect
    name = spec["name"]
    if name == "reset":
        return DEFECTS["reset-overridden"]
    if name == "get_reward":
        return DEFECTS["get-reward-reserved"]
    if name in ADAPTER_STATE:
        return DEFECTS["state-shadowed"]
    if name.startswith("_"):
        return DEFECTS["underscore-hidden"]
    return None


# -- a frozen model of trl 1.16.0's _resolve_param_type, for the "types" aspect ----------------
_TRL_TYPES = ("string", "integer", "number", "boolean", "array", "object")


def trl_1_16_type(prop: JSON) -> str:
    kind = prop.get("type")
    if isinstance(kind, str) and kind in _TRL_TYPES:
        return kind
    for key in ("anyOf", "oneOf"):
        for option in prop.get(key) or []:
            inner = option.get("type") if isinstance(option, dict) else None
            if isinstance(inner, str) and inner in _TRL_TYPES:
                return inner
    default = prop.get("default")
    if default is not None:
        return schema_view.value_type(default)
    return "string"


def accepts_null(prop: JSON, defs: JSON) -> bool:
    if isinstance(prop, bool):
        return prop  # a boolean schema: true takes any value (null too), false none
    node = schema_view.resolve(prop, defs)
    for member in schema_view.members(node):
        kind = member.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind) or None in (member.get("enum") or []):
            return True
    return False


def aspect_defect(spec: JSON, aspect: str) -> Defect | None:
    """Why ``get_json_schema`` of the bound method disagrees with the server on ``aspect``."""
    if (defect := binding_defect(spec)) is not None:
        return defect
    server = schema_view.view(spec.get("input_schema"))
    if hidden_by_the_top_level(spec) and server[aspect]:
        return DEFECTS["top-level-only"]  # TRL shows none of what the top level's members (or its open keys) say
    if aspect == "types":
        props = (spec.get("input_schema") or {}).get("properties") or {}
        if any([trl_1_16_type(props[n])] != server["types"][n] for n in props if server["types"][n]):
            return DEFECTS["type-lost"]
    checks = {
        "enums": "enum-dropped",
        "items": "items-dropped",
        "nesting": "nesting-dropped",
        "constraints": "constraints-dropped",
    }
    if aspect in checks and server[aspect]:
        return DEFECTS[checks[aspect]]
    return None


def docstring_defect(spec: JSON) -> Defect | None:
    if (defect := binding_defect(spec)) is not None:
        return defect
    if hidden_by_the_top_level(spec) and schema_view.descriptions(spec.get("input_schema")):
        return DEFECTS["top-level-only"]  # the parameters (and their descriptions) are not shown at all
    if [where for where in empty_descriptions(spec) if where != "tool"]:
        return DEFECTS["description-filled"]  # the tool's own empty description is not compared (none to show)
    description = spec.get("description") or ""
    params = schema_view.descriptions(spec.get("input_schema")).values()
    if any(s in description for s in _DOC_SECTIONS) or any(
        "Returns:" in p or "Raises:" in p or _ARG_LINE.search(p) for p in params
    ):
        return DEFECTS["docstring-sections"]
    return None


def call_defect(spec: JSON) -> Defect | None:
    """Why calling the bound method with only the required arguments is not ok:true on the server."""
    if (defect := binding_defect(spec)) is not None:
        return defect
    if spec["name"] == "reset":
        return DEFECTS["reset-overridden"]
    if hidden_by_the_top_level(spec) and schema_view.required_example(spec.get("input_schema")):
        return DEFECTS["top-level-only"]  # the method takes none of the arguments the schema needs
    schema = spec.get("input_schema") or {}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    props, _, required = _properties(spec)
    for name, prop in props.items():
        if name in required:
            continue
        if prop.get("default") is None and not accepts_null(prop, defs):
            return DEFECTS["none-forwarded"]
    return None


def factory_defect(tools: Iterable[JSON]) -> Defect | None:
    """Why ``environment_factory()`` cannot build an adapter whose ``reset`` is the adapter's own (the first tool that crashes it)."""
    tools = list(tools)
    crashes = (DEFECTS["keyword-crash"], DEFECTS["bool-schema-crash"])
    for spec in tools:
        if (defect := binding_defect(spec)) in crashes:
            return defect
    if any(spec["name"] == "reset" for spec in tools):
        return DEFECTS["reset-overridden"]
    return None


def union_defect(union: Iterable[JSON], first_task_tools: set[str] | None) -> Defect | None:
    """Why a factory instance does not expose every tool of the union (``first_task_tools``: names task 0 lists, when discovery probes task 0 only)."""
    union = list(union)
    if (defect := factory_defect(union)) is not None:
        return defect
    for spec in union:
        if (defect := exposure_defect(spec)) is not None:
            return defect
    if first_task_tools is not None and any(spec["name"] not in first_task_tools for spec in union):
        return DEFECTS["probe-task-0"]
    return None


def marks(defect: Defect | None) -> list[pytest.MarkDecorator]:
    return [defect.mark()] if defect is not None else []


# -- predicates of the other clients ----------------------------------------------------
def _uses_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_uses_ref(v) for k, v in node.items() if k not in ("$defs", "definitions"))
    if isinstance(node, list):
        return any(_uses_ref(v) for v in node)
    return False


def inspect_untyped_params(spec: JSON) -> list[str]:
    """Parameters inspect-openreward shows the model without their type (a ``$ref`` anywhere in them)."""
    props = (spec.get("input_schema") or {}).get("properties") or {}
    return [name for name, prop in props.items() if _uses_ref(prop)]


def inspect_itemless_params(spec: JSON) -> list[str]:
    """Parameters whose tuple element types or dict value types inspect-openreward drops."""
    props = schema_view.parameters(spec.get("input_schema"))["properties"]
    return [n for n, p in props.items() if set(schema_view.items_of(p) or {}) & {"prefixItems", "values"}]


#: Schema keywords openreward's sanitize_tool_schema deletes wherever they appear as keys, per provider.
SANITIZED_KEYS: dict[str, frozenset[str]] = {
    "openai": frozenset({"title"}),
    "openrouter": frozenset({"title"}),
    "anthropic": frozenset({"title"}),
    "google": frozenset({"title", "default", "examples"}),
}


def sanitized_params(spec: JSON, provider: str = "openai") -> list[str]:
    """Parameters ``sanitize_tool_schema(schema, provider)`` deletes because of their name (§13.2)."""
    props = (spec.get("input_schema") or {}).get("properties") or {}
    return [name for name in props if name in SANITIZED_KEYS[provider]]


def inspect_refused(spec: JSON) -> list[str]:
    """Where inspect_ai's ToolParams refuses the tool's schema: a boolean schema, or ``items`` as a list, where its
    model (``JSONSchema``) wants an object — in ``properties``, ``items`` and ``anyOf``, at any depth."""
    found: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, bool):
            found.append(f"{where} is {json_bool(node)}")
            return
        if not isinstance(node, dict):
            return
        items = node.get("items")
        if isinstance(items, list):
            found.append(f"{where}.items is a list")
        elif items is not None:
            walk(items, f"{where}.items")
        for name, prop in (node.get("properties") or {}).items():
            walk(prop, f"{where}.{name}" if where else name)
        for i, member in enumerate(node.get("anyOf") or []):
            walk(member, f"{where}.anyOf[{i}]")

    walk(spec.get("input_schema") or {}, "")
    return found


def json_bool(value: bool) -> str:
    return "true" if value else "false"


def inspect_dropped_keywords(spec: JSON) -> list[str]:
    """What ToolParams leaves out of the tool's schema: ``const``, exclusive bounds, item counts (where), a top level's parameters."""
    found: list[str] = []
    if hidden_by_the_top_level(spec):
        found.append("the top level's parameters")
    for name, prop in schema_view.parameters(spec.get("input_schema"))["properties"].items():
        keys = [k for m in schema_view.members(prop) for k in _INSPECT_UNMODELLED if k in m]
        if keys:
            found.append(f"{name}: {', '.join(dict.fromkeys(keys))}")
    return found


#: Keywords inspect_ai's JSONSchema model has no field for (dropped when a ToolParams is built).
_INSPECT_UNMODELLED = ("const", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems")


def inspect_binding_defect(spec: JSON) -> Defect | None:
    """Why inspect-openreward shows the model a parameter with less type than the server declared."""
    if inspect_refused(spec):
        return DEFECTS["inspect-schema-refused"]
    if sanitized_params(spec):  # inspect-openreward sanitises for the openai provider
        return DEFECTS["sanitizer-drops-keyword-params"]
    if inspect_untyped_params(spec):
        return DEFECTS["inspect-ref-untyped"]
    if inspect_itemless_params(spec):
        return DEFECTS["inspect-items-dropped"]
    if inspect_dropped_keywords(spec):
        return DEFECTS["inspect-keywords-dropped"]
    return None
