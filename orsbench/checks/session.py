"""Session checks: create_session, /create and its refusals, task_tools, prompt, ping, delete, readiness, TTL, score_group."""

from __future__ import annotations

from collections.abc import Callable

from orsbench import protocol
from orsbench.checks.evidence import Evidence, answer, block_problems, expect_status, json_of, result_of, short, stream_of
from orsbench.checks.model import CheckOutcome, Severity, failed, passed, skipped, warned
from orsbench.checks.registry import check
from orsbench.wire.evidence import Exchange



def _statuses(ev: Evidence, names: list[str], expected: int) -> tuple[dict[str, int | None], list[Exchange]]:
    measured: dict[str, int | None] = {}
    wrong: list[Exchange] = []
    for name in names:
        ex = ev.get(name)
        if ex is None:
            continue
        measured[name.rsplit(".", 1)[-1]] = ex.status
        if ex.status != expected:
            wrong.append(ex)
    return measured, wrong


def _refused(ev: Evidence, cases: tuple[str, ...], wanted: str, refused: Callable[[int | None], bool]) -> CheckOutcome:
    """Each ``/create`` case must be refused, and leave no session behind (``task_tools`` → not 200)."""
    problems, measured, shown = [], {}, []
    for case in cases:
        ex, left = ev.get(f"session.create.{case}"), ev.get(f"session.create.{case}.left")
        if ex is None:
            continue
        label = case.replace("_", " ")
        measured[case] = ex.status
        shown.append(ex)
        if not refused(ex.status):
            problems.append(f"{label}: expected {wanted}, got {answer(ex)}")
        elif left is not None and left.status == 200:
            problems.append(f"{label}: refused, yet the sid answers task_tools with 200 (a session was left behind)")
    if not measured:
        return skipped("not probed")
    if problems:
        return failed("; ".join(problems), measured, *shown)
    return passed(", ".join(f"{case.replace('_', ' ')} → {status}" for case, status in measured.items()), measured)


def _route(ex: Exchange) -> str:
    return f"{ex.method} /{ex.url.split('//', 1)[-1].split('/', 1)[-1]}"


@check(
    "session.create_session_sse",
    severity=Severity.REQUIRED,
    passive=("session.create_session",),
    title="POST /create_session streams a task_id event (the sid), then end",
    probe="session",
    spec="§2.2, §11.1",
    remediation="Answer POST /create_session with text/event-stream: `event: task_id` carrying the new sid, then `event: end`; "
    'a JSON {"sid"} body sends the reference client into endless retries.',
)
def create_session_sse(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.create_session")
    if ex is None:
        return skipped("not probed")
    if ex.status != 200:
        return failed(f"expected 200 text/event-stream, got {answer(ex)}", ex.status, ex)
    if not ex.is_sse:
        return failed(
            f"expected text/event-stream, got {ex.content_type or 'no content type'}: {short(ex.body, 80)}", ex.content_type, ex
        )
    stream = stream_of(ex)
    names = stream.names() if stream else []
    if not names or names[0] != protocol.EVENT_TASK_ID or not ex.task_id:
        return failed(f"expected a first event task_id with the sid, got events {names}", names, ex)
    if protocol.EVENT_END not in names[1:]:
        return failed(f"no end event after task_id (events {names}); the client waits, then retries", names, ex)
    return passed(f"sid {ex.task_id}", names, ex)


@check(
    "session.create_session_unique",
    severity=Severity.REQUIRED,
    passive=("session.create_session.second",),
    title="each /create_session gives a new sid",
    probe="session",
    spec="§2.2",
    remediation="Generate a fresh id (e.g. uuid4) for every /create_session.",
    requires=("session.create_session_sse",),
)
def create_session_unique(ev: Evidence) -> CheckOutcome:
    a, b = ev.get("session.create_session"), ev.get("session.create_session.second")
    if a is None or b is None or not b.task_id:
        return failed(f"second /create_session: {answer(b)}", None, b)
    if a.task_id == b.task_id:
        return failed(f"both calls gave {a.task_id}", a.task_id, a, b)
    return passed("two distinct sids", [a.task_id, b.task_id])


@check(
    "session.create",
    severity=Severity.REQUIRED,
    passive=("session.create",),
    title='POST /create with split and index answers 200 {"sid"}',
    probe="session",
    spec="§2.2",
    remediation='Answer POST /create (X-Session-ID, {"env_name"?, "split", "index"}) with 200 {"sid": <the X-Session-ID>}.',
)
def create(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.create")
    if ex is None:
        return skipped("not probed")
    ok, body = json_of(ex)
    sid = ev.facts.sid
    if ex.status is None and "timeout" in (ex.error or "").lower():
        # a slow setup, not a refusal: say which knob bounds it (a real environment building its puzzle in setup took 75 s)
        return failed(
            f"expected 200, got {answer(ex)}: /create took longer than --timeout {ev.options.timeout:g} s — if the "
            "environment's setup is that slow by design, run again with a longer --timeout (trainers' clients wait too)",
            ex.status,
            ex,
        )
    if ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", ex.status, ex)
    if not ok or not isinstance(body, dict) or body.get("sid") != sid:
        return failed(f'expected {{"sid": {sid!r}}}, got {short(ex.body)}', short(ex.body), ex)
    return passed(f"session {sid} on {ev.split}[{ev.index}]", sid, ex)


@check(
    "session.missing_sid_400",
    severity=Severity.REQUIRED,
    title="requests without X-Session-ID are answered 400",
    probe="session",
    spec="§1.1",
    remediation="Answer session routes (/create, /ping, /delete, /{env}/prompt, /{env}/call, ...) without X-Session-ID with 400 "
    '{"detail": "X-Session-ID header is required"}.',
)
def missing_sid_400(ev: Evidence) -> CheckOutcome:
    names = [
        "session.no_sid.create",
        "session.no_sid.ping",
        "session.no_sid.prompt",
        "session.no_sid.call",
        "session.no_sid.delete",
    ]
    measured, wrong = _statuses(ev, names, 400)
    if not measured:
        return skipped("not probed")
    if wrong:
        return failed("; ".join(f"{_route(e)} → {answer(e)}" for e in wrong), measured, *wrong)
    return passed("400 on create, ping, prompt, call, delete", measured)


@check(
    "session.sdk_headers_accepted",
    severity=Severity.REQUIRED,
    title="requests with the headers the openreward SDK always sends are served",
    probe="session",
    spec="§6.3, §11.15",
    remediation="Accept an empty X-API-Key (the SDK sends one without a key) and an X-Secrets header of base64 JSON "
    '{name: {"value", "allowed_domains"}} on /create (the SDK always sends one).',
    requires=("session.create",),
)
def sdk_headers_accepted(ev: Evidence) -> CheckOutcome:
    measured, wrong = _statuses(ev, ["session.sdk_headers.create", "session.sdk_headers.tools"], 200)
    if not measured:
        return skipped("not probed")
    if wrong:
        return failed("; ".join(f"{_route(e)} → {answer(e)}" for e in wrong), measured, *wrong)
    return passed(
        "/create with X-Secrets and an empty X-API-Key → 200; tools → 200", measured, ev.get("session.sdk_headers.create")
    )


@check(
    "session.duplicate_sid_400",
    severity=Severity.REQUIRED,
    passive=("session.create.duplicate",),
    title="/create with an active sid is answered 400",
    probe="session",
    spec="§2.2",
    remediation='Refuse /create for a sid that is already active with 400 {"detail": "Session already exists"}; never replace it.',
    requires=("session.create",),
)
def duplicate_sid_400(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("session.create.duplicate"), 400)


@check(
    "session.create_exactly_one_task_source",
    severity=Severity.REQUIRED,
    title="/create needs exactly one of task_spec or split+index",
    probe="session",
    spec="§2.2",
    remediation="Refuse /create bodies with both task_spec and split/index, or neither, with 4xx (422 in the reference), and keep no session.",
)
def create_exactly_one_task_source(ev: Evidence) -> CheckOutcome:
    return _refused(ev, ("both", "neither"), "4xx", lambda status: status is not None and 400 <= status < 500)


@check(
    "session.create_task_spec",
    severity=Severity.RECOMMENDED,
    title="/create accepts a task_spec",
    probe="session",
    spec="§2.2",
    remediation='Accept POST /create {"task_spec": <task object>} (the SDK\'s session(task=...) sends it).',
    requires=("session.create",),
)
def create_task_spec(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("session.create.task_spec"), 200)


@check(
    "session.create_invalid_task_400",
    severity=Severity.REQUIRED,
    title="/create with an unknown split or an index past the end is answered 400",
    probe="session",
    spec="§2.2",
    remediation='Answer /create with an unknown split or out-of-range index with 400 ("Invalid split" / "Invalid index"), creating nothing.',
    requires=("session.create",),
)
def create_invalid_task_400(ev: Evidence) -> CheckOutcome:
    return _refused(ev, ("invalid_split", "invalid_index"), "400", lambda status: status == 400)


@check(
    "session.create_unknown_env_404",
    severity=Severity.RECOMMENDED,
    title="/create with an unknown env_name is answered 404",
    probe="session",
    spec="§2.2",
    remediation='Answer /create {"env_name": <unknown>} with 404 {"detail": "unknown environment \'<name>\'"}.',
    requires=("session.create",),
)
def create_unknown_env_404(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.create.unknown_env")
    if ex is None:
        return skipped("not probed")
    if ex.status == 404:
        return passed("404", ex.status, ex)
    if ex is not None and ex.status is not None and 400 <= ex.status < 500:
        return warned(f"{ex.status} (the reference answers 404)", ex.status, ex)
    return failed(f"expected 404, got {answer(ex)}", None if ex is None else ex.status, ex)


@check(
    "session.task_tools_superset",
    severity=Severity.REQUIRED,
    passive=("session.task_tools",),
    title="GET /{env}/task_tools lists every shared tool (task_tools ⊇ tools)",
    probe="session",
    spec="§2.4",
    remediation="Answer GET /{env}/task_tools with the shared tools plus the task's own tools, in the ListToolsOutput shape.",
    requires=("session.create", "discovery.tools_listing"),
)
def task_tools_superset(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.task_tools")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200 or not ok or not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        return failed(f'expected 200 {{"tools": [...]}}, got {answer(ex)}', None if ex is None else ex.status, ex)
    names = {t.get("name") for t in body["tools"] if isinstance(t, dict)}
    shared = {t["name"] for t in ev.facts.tools}
    missing = sorted(shared - names)
    if missing:
        return failed(f"shared tools missing from task_tools: {missing}", {"missing": missing}, ex, ev.get("tools"))
    extra = sorted(n for n in names - shared if isinstance(n, str))
    return passed(f"{len(names)} tool(s){f', task-scoped: {extra}' if extra else ''}", {"task_scoped": extra}, ex)


@check(
    "session.prompt",
    severity=Severity.REQUIRED,
    passive=("session.prompt",),
    title="GET /{env}/prompt answers a non-empty list of content blocks",
    probe="session",
    spec="§2.4, §4",
    remediation='Answer GET /{env}/prompt with [{"type": "text", "text": ...} | {"type": "image", "data", "mimeType"}, ...].',
    requires=("session.create",),
)
def prompt(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.prompt")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200 or not ok:
        return failed(f"expected 200 with JSON blocks, got {answer(ex)}", None if ex is None else ex.status, ex)
    problems = block_problems(body, "prompt")
    if not problems and not body:
        problems = ["the prompt is an empty list"]
    if problems:
        return failed("; ".join(problems[:3]), problems, ex)
    return passed(f"{len(body)} block(s): {short(body[0].get('text', body[0].get('type')), 60)}", len(body), ex)


@check(
    "session.messages",
    severity=Severity.ADVISORY,
    passive=("session.messages",),
    title="GET /{env}/messages answers a list of messages",
    probe="session",
    spec="§2.4, §4",
    remediation='Serve GET /{env}/messages as [{"role": "system"|"user"|"assistant", "blocks": [...]}] (clients fall back to /prompt on 404).',
    requires=("session.create",),
)
def messages(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.messages")
    if ex is not None and ex.status == 404:
        return warned("404: not served (clients fall back to /prompt)", 404, ex)
    ok, body = json_of(ex)
    if ex is None or ex.status != 200 or not ok or not isinstance(body, list):
        return failed(f"expected 200 with a JSON array, got {answer(ex)}", None if ex is None else ex.status, ex)
    problems = []
    for i, msg in enumerate(body):
        if not isinstance(msg, dict) or msg.get("role") not in ("system", "user", "assistant"):
            problems.append(f"messages[{i}] has no valid role")
        else:
            problems += block_problems(msg.get("blocks"), f"messages[{i}].blocks", protocol.BLOCK_TYPES)
    if problems:
        return failed("; ".join(problems[:3]), problems, ex)
    return passed(f"{len(body)} message(s)", len(body), ex)


@check(
    "session.ping",
    severity=Severity.REQUIRED,
    passive=("session.ping",),
    title="POST /ping on a live session answers 200",
    probe="session",
    spec="§2.4, §6.6",
    remediation='Answer POST /ping (root path, X-Session-ID) for a live session with 200 {"status": "ok"} and refresh its TTL.',
    requires=("session.create",),
)
def ping(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("session.ping"), 200)


@check(
    "session.ping_unknown_404",
    severity=Severity.REQUIRED,
    passive=("session.unknown.ping",),
    title="POST /ping for an unknown sid answers 404",
    probe="session",
    spec="§2.4, §11.12",
    remediation='Answer /ping for a sid with no active session with 404 {"detail": "Active environment not found"}.',
)
def ping_unknown_404(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("session.unknown.ping"), 404)


@check(
    "session.unknown_sid_404",
    severity=Severity.REQUIRED,
    passive=("session.unknown.prompt", "session.unknown.call"),
    title="prompt and call for an unknown sid answer 404",
    probe="session",
    spec="§2.3",
    remediation='Answer session-bound routes for an unknown sid with 404 {"detail": "Active environment not found"} (not 5xx, not a stream).',
)
def unknown_sid_404(ev: Evidence) -> CheckOutcome:
    measured, wrong = _statuses(ev, ["session.unknown.prompt", "session.unknown.call"], 404)
    if not measured:
        return skipped("not probed")
    if wrong:
        return failed("; ".join(f"{_route(e)} → {answer(e)}" for e in wrong), measured, *wrong)
    return passed("404 on prompt and call", measured)


@check(
    "session.delete",
    severity=Severity.REQUIRED,
    passive=("session.delete",),
    title='POST /delete answers 200 {"sid"}',
    probe="session",
    spec="§2.4",
    remediation='Answer POST /delete with 200 {"sid": <sid>} after tearing the session down.',
)
def delete(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.delete")
    if ex is None:
        return skipped("not probed")
    ok, body = json_of(ex)
    if ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", ex.status, ex)
    if not ok or not isinstance(body, dict) or "sid" not in body:
        return warned(f'200 but the body is {short(ex.body, 60)}, not {{"sid": ...}}', short(ex.body), ex)
    return passed("200", ex.status, ex)


@check(
    "session.ping_after_delete_404",
    severity=Severity.REQUIRED,
    passive=("session.after_delete.ping",),
    title="POST /ping after /delete answers 404",
    probe="session",
    spec="§2.4, §8",
    remediation="Forget a session on /delete: a later /ping must answer 404 so clients stop pinging a dead session.",
    requires=("session.delete", "session.ping_unknown_404"),
)
def ping_after_delete_404(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("session.after_delete.ping"), 404, "", ev.get("session.delete"))


@check(
    "session.use_after_delete_404",
    severity=Severity.REQUIRED,
    passive=("session.after_delete.prompt",),
    title="GET /{env}/prompt after /delete answers 404",
    probe="session",
    spec="§2.3, §11.11",
    remediation="Answer session-bound routes for a deleted session with 404 (410 only to requests that were waiting when it was deleted).",
    requires=("session.delete", "session.unknown_sid_404"),
)
def use_after_delete_404(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.after_delete.prompt")
    if ex is not None and ex.status == 404:
        return passed("404", ex.status, ex)
    if ex is not None and ex.status == 410:
        return warned("410 (the reference answers 404 once deletion has finished)", ex.status, ex)
    return failed(f"expected 404, got {answer(ex)}", None if ex is None else ex.status, ex)


@check(
    "session.delete_idempotent",
    severity=Severity.REQUIRED,
    # All three, or the verdict would speak for cases the traffic never tried.
    passive=("session.delete.again+session.delete.unknown+session.delete_session",),
    title="/delete and /delete_session always answer 200",
    probe="session",
    spec="§2.4, §11.12",
    remediation='Answer /delete for an already deleted or unknown sid, and /delete_session, with 200 {"sid"}: clients call both on exit.',
    requires=("session.delete",),
)
def delete_idempotent(ev: Evidence) -> CheckOutcome:
    names = ["session.delete.again", "session.delete.unknown", "session.delete_session"]
    measured, wrong = _statuses(ev, names, 200)
    if not measured:
        return skipped("not probed")
    if wrong:
        return failed("; ".join(f"{_route(e)} → {answer(e)}" for e in wrong), measured, *wrong)
    return passed("200 for a second delete, an unknown sid and delete_session", measured)


@check(
    "session.recreate_deleted_sid",
    severity=Severity.REQUIRED,
    passive=("session.recreate",),
    title="a deleted sid can be /create'd again",
    probe="session",
    spec="§2.4, §11.12",
    remediation="Drop every trace of a sid on /delete so that /create with the same sid works again.",
    requires=("session.delete", "session.ping"),
)
def recreate_deleted_sid(ev: Evidence) -> CheckOutcome:
    ex, ping_ex = ev.get("session.recreate"), ev.get("session.recreate.ping")
    if ex is None or ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", None if ex is None else ex.status, ex)
    if ping_ex is None or ping_ex.status != 200:
        return failed(f"re-created, but /ping answers {answer(ping_ex)}", None, ping_ex)
    return passed("200, and the new session answers /ping", 200, ex)


@check(
    "session.starting_503",
    severity=Severity.REQUIRED,
    passive=("starting",),
    title="a session still starting is answered 503 with its headers, and /prompt never blocks past --timeout",
    probe="session",
    spec="§2.3, §11.11",
    remediation='While setup runs past the readiness wait, answer 503 {"detail": "Environment still starting."} with '
    "X-Backend-State: starting and Retry-After: <seconds> (clients retry on exactly that) instead of holding the "
    "request open past the client's read timeout.",
)
def starting_503(ev: Evidence) -> CheckOutcome:
    ex = ev.get("starting")
    if ex is None:
        # No 503 seen. Fine if /prompt answered in time (ors-sdk 0.1.0 waits for setup inside the request);
        # a /prompt held open past --timeout is what a client's read timeout turns into a dead session.
        prompts = [p for p in (ev.get("session.prompt.early"), ev.get("session.prompt")) if p is not None]
        blocked = [p for p in prompts if p.status is None and p.elapsed >= ev.options.timeout * 0.9]
        if blocked:
            return failed(
                f"GET /prompt blocked {blocked[0].elapsed:.1f} s (past --timeout {ev.options.timeout:g} s) while the "
                f"session was starting, with no 503: {blocked[0].error or 'no answer'}",
                round(blocked[0].elapsed, 3),
                blocked[0],
            )
        if not prompts:
            return skipped("no /prompt was sent", depends_on="session.create")
        slowest = max(p.elapsed for p in prompts)
        return passed(f"no 503 needed: /prompt answered within {slowest:.2f} s", round(slowest, 3), *prompts)
    problems = []
    state = ex.headers.get(protocol.BACKEND_STATE_HEADER.lower())
    retry = ex.headers.get(protocol.RETRY_AFTER_HEADER.lower())
    if state != protocol.BACKEND_STARTING:
        problems.append(f"{protocol.BACKEND_STATE_HEADER} is {state!r}, not {protocol.BACKEND_STARTING!r}")
    if retry is None or not retry.strip().isdigit():
        problems.append(f"{protocol.RETRY_AFTER_HEADER} is {retry!r}, not delta-seconds")
    if problems:
        return failed("; ".join(problems), {"x-backend-state": state, "retry-after": retry}, ex)
    return passed(f"503 starting, Retry-After {retry}", {"x-backend-state": state, "retry-after": retry}, ex)


@check(
    "session.ttl_reap",
    severity=Severity.RECOMMENDED,
    title="an idle session is reaped after the TTL; a pinged one survives",
    probe="timing",
    spec="§8, §11.13",
    remediation="Reap sessions idle (no request, no ping) for longer than the TTL (900 s in the reference); every /ping must refresh it.",
    requires=("session.ping",),
)
def ttl_reap(ev: Evidence) -> CheckOutcome:
    idle, kept = ev.get("timing.ttl.idle.ping"), ev.get("timing.ttl.kept.ping")
    if idle is None or kept is None:
        return skipped(ev.facts.ttl_skip or "not probed")
    waited = ev.facts.ttl_waited
    unpinged = ev.get("timing.ttl.idle.ping.unpinged")
    reaped = idle.status == 404 or (unpinged is not None and unpinged.status == 404)
    problems = []
    if not reaped:
        shown = f"; {waited} s more with nothing pinged: {answer(unpinged)}" if unpinged is not None else ""
        problems.append(f"idle for {waited} s, the session still answers /ping with {answer(idle)}{shown}")
    if kept.status != 200:
        problems.append(f"pinged throughout, the session answers {answer(kept)}")
    if problems:
        return failed("; ".join(problems), {"idle": idle.status, "kept": kept.status, "waited_s": waited}, idle, unpinged, kept)
    if idle.status != 404:
        return passed(
            f"the idle session was reaped only once no session was pinged (isolation.ttl_per_session); pinged one kept",
            {"waited_s": waited},
            unpinged,
            kept,
        )
    return passed(f"idle session reaped within {waited} s; pinged one kept", {"waited_s": waited}, idle, kept)


@check(
    "score_group.contract",
    severity=Severity.RECOMMENDED,
    passive=("session.score_group",),
    title="score_group is 404 when unsupported, else streams one score per candidate",
    probe="session",
    spec="§2.4, §11.16",
    remediation="If the environment does not score groups answer POST /{env}/score_group with 404 before streaming; "
    'otherwise stream task_id then end {"scores": [{"reward": float}, ...]} with one score per candidate.',
    requires=("session.create",),
)
def score_group(ev: Evidence) -> CheckOutcome:
    ex = ev.get("session.score_group")
    _, listing = json_of(ev.get("tools"))
    claims = listing.get("supports_score_group") if isinstance(listing, dict) else None
    if ex is None:
        return skipped("not probed")
    if ex.status == 404:
        if claims is True:
            return failed("tools says supports_score_group: true, yet /score_group answers 404", claims, ex)
        return passed("404: not supported", 404, ex)
    stream = stream_of(ex)
    if stream is None:
        return failed(f"expected 404 or a 200 event stream, got {answer(ex)}", ex.status, ex)
    kind, body = result_of(ex)
    if kind != "result" or not isinstance(body.get("scores"), list):
        return failed(f'expected end {{"scores": [...]}}, got {kind}: {short(body, 80)}', kind, ex)
    if len(body["scores"]) != 2:
        return failed(f"2 candidates, {len(body['scores'])} scores", len(body["scores"]), ex)
    return passed("2 scores for 2 candidates", body["scores"], ex)
