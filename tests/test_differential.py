"""Differential test: mock engine, openreward SDK twin and ors-sdk twin, step by step.

The same scripted episode of every scenario runs against all three
implementations. The SDK twin runs openreward 0.1.167's own ``Server``, so its
transcript is the yardstick: a step of the mock or of ors-sdk may differ from
it only where :data:`orsbench.servers.differences.DIFFERENCES` lists a
difference for that implementation (or for the SDK twin itself) at that step,
and a difference that only leaves keys out must leave out exactly those keys.
A listed step pattern no step shows any more fails as stale. Transcripts
(status, content type, location, parsed JSON bodies and SSE event sequences)
are compared once run-specific values are masked: session ids, task ids and
keep-alive comments (timing).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from concurrent.futures import ThreadPoolExecutor

import pytest

from orsbench.servers.differences import DIFFERENCES, Difference
from orsbench.wire import Exchange, WireClient

pytest.importorskip("openreward")
pytest.importorskip("ors")

_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_PYDANTIC_URL = re.compile(r",? ?'url': 'https://errors\.pydantic\.dev/[^']*'")

Step = tuple[str, Callable[[WireClient, dict[str, Any]], Exchange]]


def mask(value: Any) -> Any:
    if isinstance(value, str):
        return _PYDANTIC_URL.sub("", _UUID.sub("<id>", value))
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items() if k != "url"}
    return value


def normalise(exchange: Exchange) -> dict[str, Any]:
    out: dict[str, Any] = {"status": exchange.status, "type": exchange.content_type.split(";")[0]}
    if "location" in exchange.headers:
        out["location"] = exchange.headers["location"]
    for header in ("x-backend-state", "retry-after"):
        if header in exchange.headers:
            out[header] = exchange.headers[header]
    if exchange.sse is not None:
        events = []
        for event in exchange.sse.events:
            data: Any = event.data
            if event.event in ("end", "chunk") and data:
                data = json.loads(exchange.reassembled() or "null") if event.event == "end" else "<chunk>"
            events.append((event.event, mask(data)))
        out["events"] = events
    else:
        body = exchange.json_or_none()
        out["body"] = mask(body) if body is not None else exchange.body.decode(errors="replace")
    return out


def session(env: str, index: int) -> list[Step]:
    return [
        ("create_session", lambda c, s: _remember(s, "sid", c.create_session())),
        ("create", lambda c, s: c.create(s["sid"], split="train", index=index)),
        ("create duplicate", lambda c, s: c.create(s["sid"], split="train", index=index)),  # → 400
        ("prompt", lambda c, s: c.prompt(env, s["sid"])),
        ("messages", lambda c, s: c.messages(env, s["sid"])),
        ("task_tools", lambda c, s: c.task_tools(env, s["sid"])),
        ("ping", lambda c, s: c.ping(s["sid"])),
    ]


def _remember(state: dict[str, Any], key: str, exchange: Exchange) -> Exchange:
    state[key] = exchange.task_id
    return exchange


def discovery(env: str) -> list[Step]:
    return [
        ("health", lambda c, s: c.health()),
        ("version", lambda c, s: c.version()),
        ("list_environments", lambda c, s: c.list_environments()),
        ("tools", lambda c, s: c.tools(env)),
        ("splits", lambda c, s: c.splits(env)),
        ("tasks test", lambda c, s: c.tasks(env, "test")),
        ("num_tasks train", lambda c, s: c.num_tasks(env, "train")),
        ("task -1", lambda c, s: c.task(env, "train", -1)),
        ("task 999", lambda c, s: c.task(env, "train", 999)),
        ("task_range 1-4", lambda c, s: c.task_range(env, "train", 1, 4)),
        ("tasks unknown split", lambda c, s: c.tasks(env, "nope")),
        ("tasks extra field", lambda c, s: c.request("POST", f"/{env}/tasks", json_body={"split": "train", "x": 1})),
        ("redirect /tools", lambda c, s: c.request("GET", "/tools")),
        ("GET /call", lambda c, s: c.request("GET", f"/{env}/call")),
        ("create without sid", lambda c, s: c.request("POST", "/create", json_body={})),
        ("create task_spec and index", lambda c, s: c.create("fresh", split="train", index=0, task_spec={"a": 1})),
        ("create unknown env", lambda c, s: c.create("fresh", split="train", index=0, env_name="nope")),
        ("ping unknown sid", lambda c, s: c.ping("never")),
        ("prompt unknown sid", lambda c, s: c.prompt(env, "never")),
        ("delete unknown sid", lambda c, s: c.delete("never")),
    ]


def teardown() -> list[Step]:
    return [
        ("delete_session", lambda c, s: c.delete_session(s["sid"])),
        ("delete", lambda c, s: c.delete(s["sid"])),
        ("ping after delete", lambda c, s: c.ping(s["sid"])),
        ("delete again", lambda c, s: c.delete(s["sid"])),
    ]


def call(env: str, name: str, tool_input: dict[str, Any], label: str = "") -> Step:
    """A ``/call`` step labelled ``call NAME INPUT`` (plus ``label`` to tell repeats apart)."""
    text = f"call {name} {json.dumps(tool_input, sort_keys=True)}{label}"
    return text, lambda c, s: _remember(s, "task", c.call(env, s["sid"], name, tool_input))


def resume(env: str) -> Step:
    return "resume last task_id", lambda c, s: c.call(env, s["sid"], "x", {}, task_id=s["task"])


#: The secret the ``secrets`` scenario needs (a test value, never a real one).
SECRET = {"ORSBENCH_HAZARD_TOKEN": "differential-test-token"}

SCRIPTS: dict[str, list[Step]] = {
    "echo": [
        *discovery("echo"),
        *session("echo", 0),
        call("echo", "echo", {"text": "nope"}),
        resume("echo"),
        call("echo", "echo", {"txt": 1}),
        call("echo", "nope", {}),
        call("echo", "echo", {"text": "hello"}),
        call("echo", "echo", {"text": "hello"}, " after finished"),
        call("echo", "nope", {}, " after finished"),
        ("resume unknown task_id", lambda c, s: c.call("echo", s["sid"], "echo", {}, task_id="deadbeef")),
        ("call without input", lambda c, s: c.request("POST", "/echo/call", sid=s["sid"], json_body={"name": "echo"})),
        ("score_group", lambda c, s: c.score_group("echo", s["sid"], [])),
        *teardown(),
    ],
    "task-tool": [
        *discovery("task-tool"),
        *session("task-tool", 1),
        call("task-tool", "lookup", {"key": "beta"}),
        call("task-tool", "add", {"a": 1, "b": 2}),
        call("task-tool", "hint", {}),
        call("task-tool", "answer", {"value": "green"}),
        call("task-tool", "lookup", {"key": "beta"}, " after finished"),
        *teardown(),
    ],
    "sparse-reward": [
        *discovery("sparse-reward"),
        *session("sparse-reward", 3),
        call("sparse-reward", "reveal", {"position": 0}),
        call("sparse-reward", "reveal", {"position": -1}),
        call("sparse-reward", "reveal", {"position": 9}),
        call("sparse-reward", "submit", {"total": 999}),
        call("sparse-reward", "reveal", {"position": 0}, " after finished"),
        *teardown(),
    ],
    "slow": [
        *discovery("slow"),
        *session("slow", 0)[:2],
        ("prompt during setup", lambda c, s: c.prompt("slow", s["sid"])),  # setup still running → 503 starting
        ("task_tools during setup", lambda c, s: c.task_tools("slow", s["sid"])),
        call("slow", "wait", {"seconds": 1.2}),  # waits out setup, then keep-alives
        call("slow", "step", {}),
        call("slow", "step", {"note": "x"}),
        call("slow", "step", {}, " (finishes)"),
        *teardown(),
    ],
    "schema-zoo": [
        *discovery("schema-zoo"),
        *session("schema-zoo", 1),
        call("schema-zoo", "class", {"label": "k"}),
        call("schema-zoo", "inspect_task", {"field": "id"}),
        call("schema-zoo", "long_text", {"size": 5000}),
        call("schema-zoo", "explode", {"message": "boom"}),
        call("schema-zoo", "score", {"value": 1.0, "as_bool": True}),
        call("schema-zoo", "score", {"value": 0.5, "finish": True}),
        call("schema-zoo", "score", {"value": 1.0}, " after finished"),
        *teardown(),
    ],
    "schema-zoo-index": [
        *discovery("schema-zoo-index"),
        *session("schema-zoo-index", 2),
        call("schema-zoo-index", "answer", {"word": "gamma"}),
        *teardown(),
    ],
    "schema-zoo-prompt": [
        *discovery("schema-zoo-prompt"),
        *session("schema-zoo-prompt", 1),
        call("schema-zoo-prompt", "answer", {"value": "7"}),
        *teardown(),
    ],
    "broken-session": [
        ("create_session", lambda c, s: _remember(s, "sid", c.create_session())),
        ("create task 2", lambda c, s: c.create(s["sid"], split="train", index=2)),
        call("broken-session", "ping", {}),
        ("create task 0 (constructor fails)", lambda c, s: c.create("broken-0", split="train", index=0)),
        ("task_tools task 0", lambda c, s: c.task_tools("broken-session", "broken-0")),
        ("prompt task 0", lambda c, s: c.prompt("broken-session", "broken-0")),
        ("create task 1 with X-Secrets", lambda c, s: c.create("broken-1", split="train", index=1, secrets={"API_TOKEN": "t"})),
        ("prompt task 1 with X-Secrets", lambda c, s: c.prompt("broken-session", "broken-1")),
        (
            "create task 1 with body secrets",
            lambda c, s: c.create("broken-1b", split="train", index=1, extra={"secrets": {"API_TOKEN": "t"}}),
        ),
        ("prompt task 1 with body secrets", lambda c, s: c.prompt("broken-session", "broken-1b")),
        ("create task 1 without secrets", lambda c, s: c.create("broken-1c", split="train", index=1)),
        ("prompt task 1 without secrets", lambda c, s: c.prompt("broken-session", "broken-1c")),
        *teardown(),
    ],
    # The hazards (docs/protocol.md §13).
    "images": [
        *discovery("images"),
        *session("images", 0),
        call("images", "look", {}),
        call("images", "answer", {"colour": "red"}),
        *teardown(),
    ],
    "schema-keywords": [
        *discovery("schema-keywords"),
        *session("schema-keywords", 0),
        call("schema-keywords", "record", {}),
        call("schema-keywords", "record", {"title": "entry 0", "default": "fallback-0", "examples": ["e0", "e1"]}),
        *teardown(),
    ],
    "dense-reward": [
        *discovery("dense-reward"),
        *session("dense-reward", 1),
        *(call("dense-reward", "step", {}, f" #{n}") for n in range(1, 5)),
        call("dense-reward", "step", {}, " after finished"),
        *teardown(),
    ],
    "two-envs": [
        *discovery("two-envs"),
        *session("two-envs", 0),
        call("two-envs", "sign", {"word": "harbor"}),
        ("create without env_name", lambda c, s: c.create("decoy-1", split="train", index=0)),
        ("call in the default env", lambda c, s: c.call("two-envs", "decoy-1", "sign", {"word": "harbor"})),
        ("delete default-env session", lambda c, s: c.delete("decoy-1")),
        *teardown(),
    ],
    "secrets": [
        *discovery("secrets"),
        ("create_session", lambda c, s: _remember(s, "sid", c.create_session())),
        ("create without secret", lambda c, s: c.create("nosecret-1", split="train", index=0)),
        ("prompt without secret", lambda c, s: c.prompt("secrets", "nosecret-1")),
        ("create with body secrets", lambda c, s: c.create("nosecret-2", split="train", index=0, extra={"secrets": SECRET})),
        ("create with X-Secrets", lambda c, s: c.create(s["sid"], split="train", index=0, secrets=SECRET)),
        ("prompt with X-Secrets", lambda c, s: c.prompt("secrets", s["sid"])),
        call("secrets", "whoami", {}),
        *teardown(),
    ],
    "recover": [
        *discovery("recover"),
        *session("recover", 0),
        call("recover", "guess", {"number": 0}),
        call("recover", "guess", {"number": 1}),
        *teardown(),
    ],
    "schema-conflict": [
        *discovery("schema-conflict"),
        *session("schema-conflict", 1),
        call("schema-conflict", "configure", {"level": "high"}),
        call("schema-conflict", "hint", {}),
        *teardown(),
    ],
}

PARAMS = {"slow": {"setup": 1.5, "steps": 3}}
#: ServerConfig knobs per scenario. slow: /prompt gives up after 1 s (503 with 0.5 s of setup left), and the
#: call after it waits up to 1 s more (0.5 s to spare), so the script holds on a loaded machine.
KNOBS: dict[str, dict[str, Any]] = {"slow": {"setup_wait_timeout": 1.0}}


IMPLS = ("mock", "sdk", "ors-sdk")
Transcript = dict[str, dict[str, Any]]


def transcript(server, scenario: str) -> Transcript:
    """Step label → normalised exchange, in script order."""
    state: dict[str, Any] = {}
    with WireClient(server.url) as client:
        return {label: normalise(run(client, state)) for label, run in SCRIPTS[scenario]}


_TRANSCRIPTS: dict[str, dict[str, Transcript]] = {}


def transcripts(factory, scenario: str) -> dict[str, Transcript]:
    """impl → transcript of ``scenario`` (servers shared through the plugin's factory; played once per process)."""
    if scenario not in _TRANSCRIPTS:
        with ThreadPoolExecutor(len(IMPLS)) as pool:
            start = lambda impl: factory(scenario, impl=impl, params=PARAMS.get(scenario), **KNOBS.get(scenario, {}))  # noqa: E731
            servers = dict(zip(IMPLS, pool.map(start, IMPLS)))
        _TRANSCRIPTS[scenario] = {impl: transcript(server, scenario) for impl, server in servers.items()}
    return _TRANSCRIPTS[scenario]


def without(value: Any, keys: set[str]) -> Any:
    """``value`` with every dict key in ``keys`` removed, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, (list, tuple)):
        return type(value)(without(v, keys) for v in value)
    return value


def explain(impl: str, scenario: str, reference: Transcript, observed: Transcript) -> tuple[list[str], set[str]]:
    """(unexplained differing steps, ids of the listed differences these steps show) of ``impl`` vs the SDK twin."""
    listed: tuple[Difference, ...] = DIFFERENCES[impl] + (DIFFERENCES["sdk"] if impl != "sdk" else ())
    problems: list[str] = []
    seen: set[str] = set()
    for label, expected in reference.items():
        got = observed[label]
        if got == expected:
            continue
        step = f"{scenario}/{label}"
        relevant = [d for d in listed if d.shows_at(step)]
        omitted = {key for d in relevant for key in d.omits}
        outright = [d for d in relevant if not d.omits]
        if omitted and without(expected, omitted) == got:
            seen |= {d.id for d in relevant if d.omits and without(expected, set(d.omits)) != expected}
        elif outright:
            seen |= {d.id for d in outright}
        else:
            problems.append(f"{step}: unlisted difference\n  sdk:   {expected}\n  {impl}: {got}")
    return problems, seen


@pytest.mark.parametrize("scenario", list(SCRIPTS))
def test_step_labels_are_unique(scenario):
    labels = [label for label, _ in SCRIPTS[scenario]]
    assert len(labels) == len(set(labels))


# the slow scenario's transcripts wait out its sleeping tool on both servers: behind the slow marker
@pytest.mark.parametrize("scenario", [pytest.param(s, marks=[pytest.mark.slow] if s == "slow" else []) for s in SCRIPTS])
def test_mock_and_sdk_twin_transcripts_match(ors_server_factory, scenario):
    runs = transcripts(ors_server_factory, scenario)
    assert list(runs["mock"]) == list(runs["sdk"])
    problems, _ = explain("mock", scenario, runs["sdk"], runs["mock"])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scenario", list(SCRIPTS))
def test_ors_sdk_differs_from_the_sdk_twin_only_as_listed(ors_server_factory, scenario):
    runs = transcripts(ors_server_factory, scenario)
    problems, _ = explain("ors-sdk", scenario, runs["sdk"], runs["ors-sdk"])
    assert not problems, "\n".join(problems)


def test_every_listed_step_difference_still_shows(ors_server_factory):
    """No stale entry: each difference that names steps is seen at one of them (all scenarios, both comparisons)."""
    seen: dict[str, set[str]] = {impl: set() for impl in IMPLS}
    for scenario in SCRIPTS:
        runs = transcripts(ors_server_factory, scenario)
        for impl in ("mock", "ors-sdk"):
            _, ids = explain(impl, scenario, runs["sdk"], runs[impl])
            for difference_id in ids:
                owner = "sdk" if any(d.id == difference_id for d in DIFFERENCES["sdk"]) else impl
                seen[owner].add(difference_id)
    stale = [f"{impl} {d.id}" for impl in IMPLS for d in DIFFERENCES[impl] if d.steps and d.id not in seen[impl]]
    assert not stale, f"listed differences no scripted step shows any more: {stale}"


def test_difference_ids_are_unique_and_step_patterns_name_scripted_scenarios():
    for impl, listed in DIFFERENCES.items():
        assert len({d.id for d in listed}) == len(listed), impl
        for difference in listed:
            for pattern in difference.steps:
                scenario = pattern.split("/", 1)[0]
                assert scenario == "*" or scenario in SCRIPTS, f"{impl} {difference.id}: {pattern}"
