"""Where each implementation answers differently from openreward 0.1.167's ``Server``: the one list.

orsbench serves every scenario three ways — its mock engine (``mock``), the
openreward SDK twin (``sdk``) and the ors-sdk twin (``ors-sdk``). The SDK twin
runs the reference server itself, so its transcript is the yardstick; what the
others (and the twin's own scenario plumbing) do differently is listed here,
once, as data:

* the README shows each twin's list
  (:func:`orsbench.servers.implementations.differences_markdown`) between ``<!-- impl-differences -->``
  markers (``tests/test_docs.py`` keeps them equal);
* ``tests/test_differential.py`` plays scripted episodes of every scenario on
  all three implementations and accepts a step that differs from the SDK
  twin's only when a listed difference names that step — and fails on a listed
  step pattern that no step shows any more (a stale entry).

A difference names the steps where it shows as ``"scenario/step label"`` globs
over the differential scripts (empty when the scripts cannot show it, e.g. a
knob). When the implementation merely leaves keys out of an answer, ``omits``
says which: the test then removes exactly those keys from the reference answer
and requires the rest to be equal, so an omission cannot hide another change.

The mock's deliberate differences keep their own list
(:data:`orsbench.servers.engine.DELIBERATE_DIFFERENCES`, shown in the README
under "deliberate differences"); :data:`DIFFERENCES` ``["mock"]`` attaches step
patterns to the ones the scripts exercise.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from orsbench.servers.engine import DELIBERATE_DIFFERENCES

__all__ = ["DIFFERENCES", "Difference"]


@dataclass(frozen=True)
class Difference:
    """One known way an implementation's answers differ from the reference server's."""

    #: Short stable name, e.g. ``no-finish-latch``.
    id: str
    #: One sentence for people (the README line).
    summary: str
    #: ``"scenario/step label"`` globs of the differential scripts where it shows.
    steps: tuple[str, ...] = ()
    #: JSON keys the implementation leaves out of those answers (empty: the answer differs outright).
    omits: tuple[str, ...] = ()

    def shows_at(self, step: str) -> bool:
        return any(fnmatchcase(step, pattern) for pattern in self.steps)


def _mock(fragment: str, id: str, steps: tuple[str, ...] = ()) -> Difference:
    """A mock difference whose summary is the one deliberate difference containing ``fragment``."""
    (summary,) = [text for text in DELIBERATE_DIFFERENCES if fragment in text]
    return Difference(id, summary, steps)


_AFTER_FINISHED = (
    "echo/call echo * after finished",
    "task-tool/call lookup * after finished",
    "sparse-reward/call reveal * after finished",
    "schema-zoo/call score * after finished",
    "dense-reward/call step * after finished",
)

#: impl → its known differences from openreward 0.1.167's Server.
DIFFERENCES: dict[str, tuple[Difference, ...]] = {
    "mock": (
        _mock("Malformed X-Secrets", "secrets-header-400"),
        _mock("size limit", "body-limit-413"),
        _mock("task list is not available", "index-api-400"),
        _mock("/docs", "no-docs"),
        _mock("/version", "version-emulated"),
        _mock("task_spec the scenario cannot play", "task-spec-422"),
        _mock(
            "`secrets` field",
            "body-secrets-redacted",
            ("broken-session/create task 1 with body secrets", "secrets/create with body secrets"),
        ),
        _mock("SessionRefused", "session-refused-4xx", ("secrets/create without secret",)),
        _mock("API-key", "api-key"),
    ),
    "sdk": (
        Difference(
            "constructor-deferred",
            "A scenario hook that fails while a session is constructed (broken-session task 0) fails at /task_tools "
            "with 500 after /create answered 200: the twin builds the session without running it; the mock (and a "
            "hand-written environment whose constructor raises) answers /create with 500.",
            (
                "broken-session/create task 0 (constructor fails)",
                "broken-session/task_tools task 0",
                "broken-session/prompt task 0",
            ),
        ),
        Difference(
            "task-tools-by-name",
            "Task-scoped tools are served from the scenario's tools by name, so a tool whose schema differs between "
            "tasks (schema-conflict) has the even-task schema on every task.",
            ("schema-conflict/task_tools", "schema-conflict/call configure *"),
        ),
        Difference(
            "episode-split-index",
            "Scenarios see episode.split and episode.index as None: the SDK hands the environment only the task.",
        ),
        Difference(
            "score-group-by-class",
            "Whether /score_group is supported is decided from the scenario class: a score_group that returns None at "
            "call time streams an SSE error instead of answering 404.",
        ),
        Difference(
            "reserved-tool-names",
            "Tool names that are Environment attributes (setup, teardown, list_tools, name, ...) cannot be served "
            "(ToolNameError names the tool); any other string works.",
        ),
        Difference(
            "fixed-knobs",
            "Retry-After on 503 starting stays 2 and the 10 s disconnect poll of a running call is fixed; max_body and "
            "seed are ignored; faults and api_key are refused (mock engine only).",
        ),
    ),
    "ors-sdk": (
        Difference(
            "no-setup-wait-cap",
            "No cap on waiting for setup(): /prompt, /task_tools and /call wait until it ends, so there is never a "
            "503 starting (X-Backend-State, Retry-After); setup_wait_timeout is ignored.",
            ("slow/prompt during setup",),
        ),
        Difference(
            "no-finish-latch",
            "No finish latch: a call after the one that returned finished:true still runs and may pay out again "
            "(TRL then trains on the later reward).",
            _AFTER_FINISHED,
        ),
        Difference(
            "no-error-reason",
            "ok:false answers are {ok, error}: no reason (not_found, input_validation, episode_finished).",
            ("*/call *",),
            ("reason",),
        ),
        Difference(
            "tools-listing-minimal",
            "/tools and /task_tools answer {tools} only: no terminal_tool, supports_score_group, message_block_types.",
            ("*/tools", "*/task_tools", "*/task_tools during setup"),
            ("terminal_tool", "supports_score_group", "message_block_types"),
        ),
        Difference(
            "task-no-env-name",
            "/task and /task_range omit env_name (/tasks has it).",
            ("*/task -1", "*/task_range 1-4"),
            ("env_name",),
        ),
        Difference("no-messages-route", "No /{env}/messages route: 404 Not Found.", ("*/messages",)),
        Difference(
            "no-score-group-route",
            "No /{env}/score_group route: 404 Not Found for every environment, whatever it implements.",
            ("*/score_group",),
        ),
        Difference(
            "no-version-route",
            "No /version route: it is redirected (308) to /{first env}/version, which is 404.",
            ("*/version",),
        ),
        Difference(
            "secrets-in-body",
            "Secrets travel in the /create body ({\"secrets\": {name: value}}), not in the X-Secrets header, which "
            "is ignored; openreward rejects the body field with 422.",
            (
                "broken-session/prompt task 1 with X-Secrets",
                "broken-session/create task 1 with body secrets",
                "broken-session/prompt task 1 with body secrets",
                # The secrets hazard: a session that needs its secret in X-Secrets never gets it, and its
                # constructor (run inside ors-sdk's setup task) fails every later request with 500.
                "secrets/create without secret",
                "secrets/prompt without secret",
                "secrets/create with body secrets",
                "secrets/prompt with X-Secrets",
                "secrets/call whoami *",
            ),
        ),
    ),
}

