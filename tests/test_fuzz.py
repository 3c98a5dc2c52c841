"""Bad input never hurts the mock engine: a property-based fuzz of malformed requests.

Hypothesis generates requests that are wrong in exactly the ways real clients
get ORS wrong — bad JSON, wrong types, missing or extra fields, huge bodies,
bad or missing headers, unknown environment names, path tricks, malformed
``X-Secrets``, invalid ``task_id``s — and sends them to one mock engine over
real TCP (the server is a subprocess, so a crash or a dropped connection shows
as exactly that). Every answer must be a 4xx whose JSON body has a ``detail``;
never a 5xx, never a connection closed without an answer. Two answers that are
not 4xx are the protocol's own and are accepted as such: a 307/308 redirect
(followed, and the target must then answer 4xx), and a resume with an unknown
``task_id``, which the reference answers 200 with one ``error`` event
(``docs/protocol.md`` §3.2).

After each category the server must still serve a whole normal episode, and
two sessions made before the fuzz must have kept their state: one has revealed
two digits (the count comes back in ``submit``'s metadata), the other has
finished (the finish latch still refuses calls).

Requests go through ``httpcore`` so paths are sent as written (httpx would
normalise ``..``). The default run sends well over 1,000 requests, with a fixed
Hypothesis seed; ``pytest -m slow tests/test_fuzz.py`` runs ten times as many,
randomly.
"""

from __future__ import annotations

import base64
import json
import string
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpcore
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from orsbench import protocol
from orsbench.scenarios import get_scenario
from orsbench.scenarios.sparse_reward import digits
from orsbench.servers.launch import RunningServer, serve
from orsbench.wire.sse import parse

ENV = "sparse-reward"
MAX_BODY = 1 << 20  # ServerConfig.max_body's default

#: Requests each category sends at least, in the default run (sum ≥ 1,000).
QUOTAS = {"bodies": 400, "headers": 250, "paths": 250, "secrets": 150, "task_ids": 120, "huge": 30}


# -- the target -------------------------------------------------------------------
@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def detail(self) -> Any:
        try:
            return json.loads(self.body).get("detail")
        except (ValueError, AttributeError):
            return None


@dataclass
class Target:
    """The served engine, a raw HTTP client to it, and a valid session for deep validation."""

    server: RunningServer
    port: int
    pool: httpcore.ConnectionPool
    fuzz_sid: str = ""
    sent: Counter[str] = field(default_factory=Counter)

    def send(self, method: str, target: str, headers: dict[str, str] | None = None, body: Any = b"", *, category: str) -> Reply:
        """One request, path as given; a transport failure fails the test (it is a dropped connection)."""
        self.sent[category] += 1
        sent_headers = [
            (b"Host", f"127.0.0.1:{self.port}".encode()),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()),
        ]
        url = httpcore.URL(scheme=b"http", host=b"127.0.0.1", port=self.port, target=target.encode("ascii"))
        try:
            response = self.pool.request(method.encode(), url, headers=sent_headers, content=body)
        except httpcore.TimeoutException as exc:
            raise AssertionError(f"{method} {target[:200]}: no answer ({exc!r})") from None
        except httpcore.NetworkError as exc:
            raise AssertionError(f"{method} {target[:200]}: connection dropped ({exc!r})") from None
        except httpcore.RemoteProtocolError as exc:
            raise AssertionError(f"{method} {target[:200]}: connection closed without an answer ({exc!r})") from None
        return Reply(response.status, {k.decode().lower(): v.decode("latin-1") for k, v in response.headers}, response.content)

    def json(self, method: str, target: str, sid: str | None, body: Any) -> Reply:
        headers = {"Content-Type": "application/json"}
        if sid is not None:
            headers[protocol.SESSION_HEADER] = sid
        return self.send(method, target, headers, json.dumps(body).encode(), category="setup")


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with serve(ENV) as server:
        port = urlsplit(server.url).port
        assert port is not None
        with httpcore.ConnectionPool(max_connections=1, retries=0) as pool:
            t = Target(server, port, pool)
            t.fuzz_sid = new_session(t, index=1)
            yield t


def new_session(t: Target, index: int) -> str:
    sid = f"fuzz-witness-{uuid.uuid4()}"
    reply = t.json("POST", protocol.CREATE, sid, {"split": "train", "index": index})
    assert reply.status == 200, reply
    return sid


def call(t: Target, sid: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """A tool call; the ``end`` event's JSON (parsed with the project's SSE parser)."""
    reply = t.json("POST", protocol.env_path(ENV, protocol.CALL), sid, {"name": name, "input": tool_input})
    assert reply.status == 200, reply
    events = {e.event: e.data for e in parse(reply.body).events}
    assert protocol.EVENT_END in events, f"no end event: {reply.body[:300]!r}"
    return json.loads(events[protocol.EVENT_END])


TASKS = get_scenario(ENV).list_tasks("train")


@dataclass
class Witnesses:
    """Sessions made before a fuzz category whose state must survive it."""

    revealing: str  # revealed positions 0 and 1 of task 2
    finished: str  # submitted task 0 correctly


@pytest.fixture
def witnesses(target: Target) -> Witnesses:
    revealing = new_session(target, index=2)
    for position in (0, 1):
        assert call(target, revealing, "reveal", {"position": position})["ok"] is True
    finished = new_session(target, index=0)
    done = call(target, finished, "submit", {"total": sum(digits(TASKS[0]))})
    assert done["output"]["finished"] is True
    return Witnesses(revealing, finished)


def assert_still_serving(t: Target, w: Witnesses, category: str, quota: int) -> None:
    """After the fuzz: quota met, no 5xx ever, witnesses intact, a normal episode works."""
    assert t.sent[category] >= quota, f"{category}: sent {t.sent[category]} requests, expected at least {quota}"
    # The revealing session still counts two revealed digits, and is not finished.
    submitted = call(t, w.revealing, "submit", {"total": sum(digits(TASKS[2]))})
    assert submitted["ok"] is True, submitted
    assert submitted["output"]["metadata"] == {"revealed": 2}, submitted
    assert submitted["output"]["reward"] == 1.0
    # The finished session's latch still holds.
    refused = call(t, w.finished, "reveal", {"position": 0})
    assert refused["ok"] is False and refused["reason"] == protocol.REASON_EPISODE_FINISHED, refused
    # A whole normal episode.
    sid = new_session(t, index=0)
    prompt = t.send("GET", protocol.env_path(ENV, protocol.PROMPT), {protocol.SESSION_HEADER: sid}, category="setup")
    assert prompt.status == 200 and json.loads(prompt.body)[0]["type"] == "text"
    for position in range(TASKS[0]["length"]):
        assert call(t, sid, "reveal", {"position": position})["ok"] is True
    assert call(t, sid, "submit", {"total": sum(digits(TASKS[0]))})["output"]["reward"] == 1.0
    assert t.json("POST", protocol.DELETE, sid, None).status == 200
    stats = t.server.stats()
    server_errors = {code: n for code, n in stats["statuses"].items() if int(code) >= 500}
    assert not server_errors, f"the engine answered 5xx: {server_errors}"
    assert t.server.alive()


def assert_clear_4xx(reply: Reply, what: str) -> None:
    assert 400 <= reply.status < 500, f"{what}: expected a 4xx, got {reply.status} {reply.body[:300]!r}"
    detail = reply.detail()
    assert detail, f"{what}: {reply.status} without a JSON detail: {reply.body[:300]!r}"


def follow_to_4xx(t: Target, method: str, path: str, headers: dict[str, str], body: bytes, category: str) -> Reply:
    """Send, following 307/308 (as the SDK's aiohttp does) at most 3 times; the end must be a clear 4xx."""
    reply = t.send(method, path, headers, body, category=category)
    hops = 0
    while reply.status in (307, 308):
        hops += 1
        assert hops <= 3, f"{method} {path[:200]}: redirect loop"
        location = reply.headers.get("location", "")
        assert location, f"{method} {path[:200]}: {reply.status} without Location"
        parts = urlsplit(location)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        reply = t.send(method, path, headers, body, category=category)
    assert_clear_4xx(reply, f"{method} {path[:200]}")
    return reply


# -- strategies ---------------------------------------------------------------------
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
JSON_VALUES = st.recursive(
    JSON_LEAVES, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12
)
#: Header values a valid HTTP/1.1 request can carry (no CTLs: those are framing errors, tested apart).
HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=60
).map(str.strip)

#: Every body route with a valid body and, per field, values of a type it refuses.
NOT_STR = (
    st.integers()
    | st.lists(JSON_LEAVES, max_size=3)
    | st.dictionaries(st.text(max_size=5), JSON_LEAVES, max_size=3)
    | st.booleans()
)
NOT_INT = (
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)
    | st.lists(JSON_LEAVES, max_size=3)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
    | st.dictionaries(st.text(max_size=5), JSON_LEAVES, max_size=2)
)
NOT_DICT = st.lists(JSON_LEAVES, max_size=3) | st.text(max_size=10) | st.integers() | st.none()
NOT_LIST = st.dictionaries(st.text(max_size=5), JSON_LEAVES, max_size=3) | st.text(max_size=10) | st.integers()
BODY_ROUTES: dict[str, tuple[dict[str, Any], dict[str, Any], set[str]]] = {
    # route: (valid body, {field: strategy of refused values}, required fields)
    protocol.env_path(ENV, protocol.TASKS): ({"split": "train"}, {"split": NOT_STR | st.none()}, {"split"}),
    protocol.env_path(ENV, protocol.NUM_TASKS): ({"split": "train"}, {"split": NOT_STR | st.none()}, {"split"}),
    protocol.env_path(ENV, protocol.TASK): (
        {"split": "train", "index": 0},
        {"split": NOT_STR | st.none(), "index": NOT_INT | st.none()},
        {"split", "index"},
    ),
    protocol.env_path(ENV, protocol.TASK_RANGE): (
        {"split": "train", "start": 0, "stop": 2},
        {"split": NOT_STR, "start": NOT_INT, "stop": NOT_INT},
        {"split"},
    ),
    protocol.CREATE: (
        {"split": "train", "index": 0},
        {"split": NOT_STR, "index": NOT_INT, "env_name": NOT_STR, "task_spec": NOT_DICT.filter(lambda v: v is not None)},
        set(),
    ),
    protocol.env_path(ENV, protocol.CALL): (
        {"name": "reveal", "input": {"position": 0}},
        {"name": NOT_STR | st.none(), "input": NOT_DICT, "task_id": NOT_STR},
        {"name", "input"},
    ),
}


@st.composite
def malformed_body(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(route, body bytes, how it is wrong) — always wrong in at least one way."""
    route = draw(st.sampled_from(sorted(BODY_ROUTES)))
    valid, refused, required = BODY_ROUTES[route]
    how = draw(st.sampled_from(["not json", "truncated", "not an object", "wrong type", "missing field", "extra field", "empty"]))
    if how == "not json":
        raw = draw(st.binary(min_size=1, max_size=200))
        assume(not _is_json(raw))
        return route, raw, how
    if how == "truncated":
        text = json.dumps(valid)
        return route, text[: draw(st.integers(1, len(text) - 1))].encode(), how
    if how == "not an object":
        value = draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
        return route, json.dumps(value).encode(), how
    if how == "empty":
        return route, draw(st.sampled_from([b"", b" ", b"\n", b"\t\r\n"])), how
    body = dict(valid)
    if how == "wrong type":
        name = draw(st.sampled_from(sorted(refused)))
        body[name] = draw(refused[name])
    elif how == "missing field":
        if not required:  # /create: neither task_spec nor split+index
            body.pop("index")
        else:
            body.pop(draw(st.sampled_from(sorted(required))))
    else:
        extra = draw(
            st.text(min_size=1, max_size=12).filter(lambda k: k not in valid and k not in refused and k not in {"toolset_name"})
        )
        body[extra] = draw(JSON_VALUES)
    return route, json.dumps(body).encode(), how


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


SESSION_ROUTES = [
    ("GET", protocol.env_path(ENV, protocol.PROMPT)),
    ("GET", protocol.env_path(ENV, protocol.MESSAGES)),
    ("GET", protocol.env_path(ENV, protocol.TASK_TOOLS)),
    ("POST", protocol.env_path(ENV, protocol.CALL)),
    ("POST", protocol.env_path(ENV, protocol.SCORE_GROUP)),
    ("POST", protocol.PING),
]


@st.composite
def bad_session_headers(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes]:
    """A session-bound request whose X-Session-ID is missing, blank or unknown, plus junk headers."""
    method, route = draw(st.sampled_from(SESSION_ROUTES))
    headers: dict[str, str] = {}
    sid_kind = draw(st.sampled_from(["missing", "blank", "unknown", "long"]))
    if sid_kind == "blank":
        # h11 will not send a value of spaces (parsers strip them anyway); NBSP is whitespace to str.strip().
        headers[protocol.SESSION_HEADER] = draw(st.sampled_from(["", "\xa0", "\xa0\xa0"]))
    elif sid_kind == "unknown":
        headers[protocol.SESSION_HEADER] = draw(HEADER_TEXT.filter(bool))
    elif sid_kind == "long":
        headers[protocol.SESSION_HEADER] = "s" * draw(st.integers(1_000, 60_000))
    junk_names = st.sampled_from(
        [
            "Content-Type",
            "Accept",
            protocol.API_KEY_HEADER,
            "Authorization",
            protocol.SECRETS_HEADER,
            protocol.DEPLOYMENT_HEADER,
            "X-Forwarded-For",
            "Cookie",
            "X-Whatever",
        ]
    )
    for name, value in draw(st.dictionaries(junk_names, HEADER_TEXT, max_size=4)).items():
        headers[name] = value
    body = json.dumps({"name": "reveal", "input": {"position": 0}}).encode() if method == "POST" else b""
    return method, route, headers, body


ROUTE_NAMES = sorted(
    {*protocol.ROOT_SEGMENTS, protocol.TOOLS, protocol.SPLITS, protocol.TASKS, protocol.TASK, protocol.CALL, protocol.PROMPT}
)
SEGMENT = st.one_of(
    st.sampled_from(
        [
            "..",
            ".",
            "%2e%2e",
            "%2E",
            "%2f",
            "%00",
            "%0d%0a",
            "%ff",
            "%",
            "%zz",
            "~",
            "",
            ENV.upper(),
            ENV.title(),
            "_orsbench",
            "-",
        ]
    ),
    st.sampled_from(ROUTE_NAMES),
    st.text(max_size=12).map(lambda s: quote(s, safe="")),
    st.integers(10, 5000).map(lambda n: "a" * n),
)


@st.composite
def tricky_path(draw: st.DrawFn) -> tuple[str, str]:
    """(method, path) for a path that is no route: junk segments, dot tricks, encodings, odd case."""
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"]))
    segments = draw(st.lists(SEGMENT, min_size=0, max_size=5))
    # The last real segment is never a route name, so no trick can land on a real route.
    last = "x-" + draw(st.text(alphabet=string.ascii_lowercase + string.digits + "-_.", max_size=10))
    path = "/" + "/".join([*segments, last]) + draw(st.sampled_from(["", "", "/", "//"]))
    if draw(st.booleans()):
        path += "?" + quote(draw(st.text(max_size=20)), safe="=&")
    return method, path


@st.composite
def malformed_secrets(draw: st.DrawFn) -> str:
    """An X-Secrets value that is not base64 JSON of {name: {"value": str}}."""
    kind = draw(st.sampled_from(["text", "b64 bytes", "b64 json", "b64 deep", "b64 unwrapped"]))
    if kind == "text":
        value = draw(HEADER_TEXT.filter(bool))
    elif kind == "b64 bytes":
        value = base64.b64encode(draw(st.binary(min_size=1, max_size=80))).decode()
    elif kind == "b64 json":
        value = base64.b64encode(json.dumps(draw(JSON_VALUES)).encode()).decode()
    elif kind == "b64 deep":
        depth = draw(st.integers(500, 20_000))
        value = base64.b64encode(("[" * depth + "]" * depth).encode()).decode()
    else:  # a common mistake: the value itself instead of {"value": ...}
        value = base64.b64encode(
            json.dumps({draw(st.text(min_size=1, max_size=10)): draw(st.text(max_size=10))}).encode()
        ).decode()
    assume(not _valid_secrets(value))
    return value


def _valid_secrets(value: str) -> bool:
    try:
        decoded = json.loads(base64.b64decode(value, validate=True))
    except (ValueError, RecursionError):
        return False
    return isinstance(decoded, dict) and all(isinstance(e, dict) and isinstance(e.get("value"), str) for e in decoded.values())


# -- the fuzz -------------------------------------------------------------------------
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def scales() -> list[Any]:
    """The default run, and a ten-times larger random one selected with ``-m slow``."""
    return [pytest.param(1, id="default"), pytest.param(10, id="large", marks=pytest.mark.slow)]


@pytest.fixture(params=scales())
def scale(request: pytest.FixtureRequest) -> int:
    if request.param > 1 and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the large fuzz runs with -m slow")
    return request.param


def fuzz_settings(category: str, scale: int, **extra: Any) -> settings:
    return settings(FUZZ, max_examples=QUOTAS[category] * scale, derandomize=scale == 1, **extra)


def test_malformed_bodies_get_422_or_400(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Bad JSON, truncated JSON, wrong top-level type, wrong field types, missing and extra fields."""

    @fuzz_settings("bodies", scale)
    @given(case=malformed_body())
    def fuzz(case: tuple[str, bytes, str]) -> None:
        route, body, how = case
        headers = {"Content-Type": "application/json", protocol.SESSION_HEADER: target.fuzz_sid}
        reply = target.send("POST", route, headers, body, category="bodies")
        assert_clear_4xx(reply, f"POST {route} ({how}) {body[:120]!r}")

    fuzz()
    assert_still_serving(target, witnesses, "bodies", QUOTAS["bodies"] * scale)


def test_bad_or_missing_session_headers_get_400_or_404(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Missing, blank, unknown and 60 kB X-Session-IDs, with junk in other headers."""

    @fuzz_settings("headers", scale)
    @given(case=bad_session_headers())
    def fuzz(case: tuple[str, str, dict[str, str], bytes]) -> None:
        method, route, headers, body = case
        reply = target.send(method, route, headers, body, category="headers")
        assert_clear_4xx(reply, f"{method} {route} headers={ {k: v[:40] for k, v in headers.items()} }")
        sid = headers.get(protocol.SESSION_HEADER, "").strip()
        expected = 404 if sid else 400
        assert reply.status == expected, f"{method} {route} with sid {sid[:40]!r}: expected {expected}, got {reply.status}"

    fuzz()
    assert_still_serving(target, witnesses, "headers", QUOTAS["headers"] * scale)


def test_unknown_envs_and_path_tricks_end_in_4xx(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Unknown env names, ``..`` and encoded dots/slashes/NUL/CRLF, long segments, odd methods and queries."""

    @fuzz_settings("paths", scale)
    @given(case=tricky_path())
    def fuzz(case: tuple[str, str]) -> None:
        method, path = case
        follow_to_4xx(target, method, path, {protocol.SESSION_HEADER: target.fuzz_sid}, b"", "paths")

    fuzz()
    assert_still_serving(target, witnesses, "paths", QUOTAS["paths"] * scale)


def test_malformed_x_secrets_get_400_without_echo(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Not base64, not JSON, not ``{name: {"value": str}}``, nested 20,000 deep: 400, and the value is not echoed."""

    @fuzz_settings("secrets", scale)
    @given(secrets=malformed_secrets())
    def fuzz(secrets: str) -> None:
        headers = {
            "Content-Type": "application/json",
            protocol.SESSION_HEADER: f"fuzz-{uuid.uuid4()}",
            protocol.SECRETS_HEADER: secrets,
        }
        reply = target.send("POST", protocol.CREATE, headers, b'{"split": "train", "index": 0}', category="secrets")
        assert_clear_4xx(reply, f"X-Secrets {secrets[:80]!r}")
        assert reply.status == 400
        if len(secrets) >= 8:
            assert secrets.encode("latin-1") not in reply.body, "the detail echoes the X-Secrets value"

    fuzz()
    assert_still_serving(target, witnesses, "secrets", QUOTAS["secrets"] * scale)


def test_invalid_task_ids_are_refused(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Resuming with a task_id that does not exist: 200 + one ``error: unknown task_id`` (reference), or 422 for a non-string."""

    @fuzz_settings("task_ids", scale)
    @given(
        task_id=st.one_of(
            st.text(max_size=200),
            st.integers(),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            st.booleans(),
        )
    )
    def fuzz(task_id: Any) -> None:
        body = json.dumps({"name": "reveal", "input": {"position": 0}, "task_id": task_id}).encode()
        headers = {"Content-Type": "application/json", protocol.SESSION_HEADER: target.fuzz_sid}
        reply = target.send("POST", protocol.env_path(ENV, protocol.CALL), headers, body, category="task_ids")
        if isinstance(task_id, str):
            assert reply.status == 200, f"task_id {task_id!r}: {reply.status} {reply.body[:200]!r}"
            events = parse(reply.body).events
            assert [(e.event, e.data) for e in events] == [(protocol.EVENT_ERROR, protocol.UNKNOWN_TASK_ID)], reply.body[:300]
        else:
            assert_clear_4xx(reply, f"task_id {task_id!r}")

    fuzz()
    assert_still_serving(target, witnesses, "task_ids", QUOTAS["task_ids"] * scale)


def test_huge_bodies_get_413(target: Target, witnesses: Witnesses, scale: int) -> None:
    """Bodies over the 1 MiB limit, announced by Content-Length or streamed chunked, on every body route."""

    @fuzz_settings("huge", scale)
    @given(route=st.sampled_from(sorted(BODY_ROUTES)), extra=st.integers(1, 3 * MAX_BODY), chunked=st.booleans())
    def fuzz(route: str, extra: int, chunked: bool) -> None:
        size = MAX_BODY + extra
        payload = b'{"split": "' + b"x" * (size - 13) + b'"}'

        def pieces() -> Iterator[bytes]:
            for start in range(0, len(payload), 1 << 16):
                yield payload[start : start + (1 << 16)]

        headers = {"Content-Type": "application/json", protocol.SESSION_HEADER: target.fuzz_sid}
        reply = target.send("POST", route, headers, pieces() if chunked else payload, category="huge")
        assert_clear_4xx(reply, f"POST {route} with {size} bytes ({'chunked' if chunked else 'content-length'})")
        assert reply.status == 413

    fuzz()
    assert_still_serving(target, witnesses, "huge", QUOTAS["huge"] * scale)


def test_broken_http_framing_is_refused_and_the_server_lives(target: Target) -> None:
    """What no HTTP client library will send: the HTTP parser (uvicorn's) answers 400 and the engine never sees it."""
    import socket

    cases = [
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: a\r\nX-Session-ID: a\x01b\r\n\r\n",
        b"GET /he alth HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /create HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
        b"POST /create HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
        b"GET /health HTTP/9.9\r\nHost: a\r\n\r\n",
    ]
    for raw in cases:
        with socket.create_connection(("127.0.0.1", target.port), timeout=5) as sock:
            sock.sendall(raw)
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400"), f"{raw!r}: {answer[:120]!r}"
    reply = target.send("GET", protocol.HEALTH, category="setup")
    assert reply.status == 200 and target.server.alive()
