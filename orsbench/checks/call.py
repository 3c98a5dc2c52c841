"""Tool-call checks: the SSE stream of /call, its result, reasons, the finish latch, resume, keep-alives."""

from __future__ import annotations

import re
from typing import Any

from orsbench import protocol
from orsbench.checks import verdicts
from orsbench.checks.evidence import (
    Evidence,
    answer,
    call_label,
    call_results,
    call_streams,
    result_of,
    short,
    stream_of,
    task_id_of,
)
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.checks.registry import CALLS, FINISHER, check
from orsbench.wire.evidence import Exchange

EXPECTED_REASONS = verdicts.EXPECTED_REASONS


Finding = tuple[str, Exchange | None, str]


def _findings(found: list[Finding], prefix: str = "") -> CheckOutcome:
    """Fail with per-exchange findings: the first three in the message, all of them in ``measured``."""
    return failed(
        prefix + "; ".join(f"{call_label(n)}: {why}" for n, _, why in found[:3]),
        {call_label(n): why for n, _, why in found},
        *(ex for _, ex, _ in found[:3]),
    )


@check(
    "call.tool_inputs",
    severity=Severity.RECOMMENDED,
    passive=(CALLS,),
    title="a valid input can be built for at least one tool from its JSON Schema",
    probe="call",
    spec="§2.1, §4",
    remediation="Give each tool an input_schema from which a valid input can be derived (local $refs, satisfiable bounds and patterns).",
    requires=("session.create",),
)
def tool_inputs(ev: Evidence) -> CheckOutcome:
    if ev.facts.call_blocked:
        return skipped(ev.facts.call_blocked, depends_on="session.create")
    plan = ev.facts.call_plan
    unbuildable = ev.facts.unbuildable
    if not plan:
        detail = "; ".join(f"{k}: {v}" for k, v in list(unbuildable.items())[:3]) or "the session has no tools"
        return failed(f"no tool input could be built ({detail}); the call checks cannot run", unbuildable)
    measured = {"inputs": {name: value for name, value in plan}, "unbuildable": unbuildable}
    note = f"; no input for {sorted(unbuildable)}" if unbuildable else ""
    return passed(f"{len(plan)} callable tool(s), e.g. {plan[0][0]}({short(plan[0][1], 60)}){note}", measured)


@check(
    "call.sse_content_type",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="/call answers 200 text/event-stream",
    probe="call",
    spec="§3",
    remediation="Answer POST /{env}/call with status 200 and Content-Type: text/event-stream, for failures too (ok:false or an error event).",
    requires=("call.tool_inputs",),
)
def sse_content_type(ev: Evidence) -> CheckOutcome:
    fresh = list(ev.facts.fresh_calls)
    valid = [n for n in fresh if n == "call.primary" or n.startswith("play.")]
    answered = [(n, ev.get(n)) for n in fresh + ["call.resume", "call.unknown_task_id"] if ev.get(n) is not None]
    refused = [(n, ev.get(n), answer(ev.get(n))) for n in valid if ev.get(n) is not None and verdicts.call_refused(n, ev.get(n))]
    if refused:
        return _findings(refused, "valid calls were refused: ")
    if not answered and not ev.folded.counts["call.sse_content_type"]:
        return skipped("no /call was answered")
    bad_type = [(n, ex, why) for n, ex in answered if (why := verdicts.not_event_stream(ex))]
    if bad_type:
        return _findings(bad_type)
    count = len(answered) + ev.folded.counts["call.sse_content_type"]
    return passed(f"{count} answer(s); every 200 is text/event-stream", count)


@check(
    "call.sse_no_buffering",
    severity=Severity.ADVISORY,
    passive=("call.primary",),
    title="/call streams are marked not to be buffered or cached",
    probe="call",
    spec="§2.2, §8",
    remediation="Send Cache-Control: no-cache and X-Accel-Buffering: no with event streams so proxies pass keep-alives through.",
    requires=("call.tool_inputs",),
)
def sse_no_buffering(ev: Evidence) -> CheckOutcome:
    ex = ev.get("call.primary")
    if ex is None or ex.status != 200:
        return skipped("no successful call to inspect", depends_on="call.sse_content_type")
    problems = []
    if "no-cache" not in ex.headers.get("cache-control", ""):
        problems.append(f"Cache-Control is {ex.headers.get('cache-control')!r}")
    if ex.headers.get("x-accel-buffering", "").lower() != "no":
        problems.append(f"X-Accel-Buffering is {ex.headers.get('x-accel-buffering')!r}")
    if problems:
        return warned("; ".join(problems), problems, ex)
    return passed("no-cache, X-Accel-Buffering: no", None, ex)


@check(
    "call.first_event_task_id",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="every /call stream starts with a task_id event",
    probe="call",
    spec="§3.1",
    remediation="Emit `event: task_id` with a non-empty id as the first event of every /call stream, before waiting for the tool.",
    requires=("call.tool_inputs",),
)
def first_event_task_id(ev: Evidence) -> CheckOutcome:
    streams = call_streams(ev)
    if not streams:
        return skipped("no /call answered 200", depends_on="call.sse_content_type")
    wrong = [(name, ex, why) for name, ex in streams if (why := verdicts.task_id_first(ex))]
    if wrong:
        return _findings(wrong)
    count = len(streams) + ev.folded.counts["call.first_event_task_id"]
    return passed(f"{count} stream(s) start with task_id", count)


@check(
    "call.end_event",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="every /call stream ends with exactly one end or error event",
    probe="call",
    spec="§3.1, §11.18",
    remediation="Finish every /call stream with `event: end` (the result) or `event: error`, as its last event, then close it; "
    "a 200 stream without end makes the reference client retry forever.",
    requires=("call.tool_inputs",),
)
def end_event(ev: Evidence) -> CheckOutcome:
    streams = call_streams(ev, resumes=True)
    if not streams:
        return skipped("no /call answered 200", depends_on="call.sse_content_type")
    wrong = [(name, ex, why) for name, ex in streams if (why := verdicts.end_event(ex))]
    if wrong:
        return _findings(wrong)
    count = len(streams) + ev.folded.counts["call.end_event"]
    return passed(f"{count} stream(s) end with one terminal event", count)


@check(
    "call.end_json",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="end carries a JSON object with a boolean ok (RunToolOutput)",
    probe="call",
    spec="§3.1, §4",
    remediation='Send the result as compact JSON: {"ok": true, "output": {...}} or {"ok": false, "error": str, "reason": str}.',
    requires=("call.end_event",),
)
def end_json(ev: Evidence) -> CheckOutcome:
    wrong = []
    count = ev.folded.counts["call.end_json"]
    for name, ex in call_streams(ev, resumes=True):
        why = verdicts.end_json(ex)
        if why is None:
            continue
        count += 1
        if why:
            wrong.append((name, ex, why))
    if wrong:
        return _findings(wrong)
    if not count:
        return skipped("every call ended with an error event")
    return passed(f"{count} result(s) are RunToolOutput JSON", count)


@check(
    "call.sse_framing",
    severity=Severity.RECOMMENDED,
    passive=(CALLS,),
    title="SSE framing: known events and fields, `name: value`, one line-ending style",
    probe="call",
    spec="§3, §11.6",
    remediation="Write each field as `name: value` (one space), lines ending consistently in CRLF (the reference) or LF, "
    "only the events task_id, chunk, end, error, and an empty line after each event.",
    requires=("call.tool_inputs",),
)
def sse_framing(ev: Evidence) -> CheckOutcome:
    streams = call_streams(ev)
    if not streams:
        return skipped("no /call answered 200", depends_on="call.sse_content_type")
    wrong: list[Finding] = []
    endings: set[str] = set(ev.folded.line_endings)
    for name, ex in streams:
        why = verdicts.sse_framing(ex)
        if why is None:
            continue
        endings |= stream_of(ex).line_endings
        if why:
            wrong.append((name, ex, why))
    if wrong:
        return _findings(wrong)
    style = "CRLF" if endings == {"\r\n"} else "LF" if endings == {"\n"} else sorted(repr(e) for e in endings)
    count = len(streams) + ev.folded.counts["call.sse_framing"]
    return passed(f"{count} stream(s), {style} line endings", style)


@check(
    "call.tool_output_shape",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="ok:true outputs are ToolOutput objects with valid blocks",
    probe="play",
    spec="§4",
    remediation='Send output as {"blocks": [text|image blocks], "metadata": object|null, "reward": number|null, "finished": bool}.',
    requires=("call.end_json",),
)
def tool_output_shape(ev: Evidence) -> CheckOutcome:
    wrong: list[Finding] = []
    count = ev.folded.counts["call.tool_output_shape"]
    for name, body in call_results(ev):
        why = verdicts.output_shape(body)
        if why is None:
            continue
        count += 1
        if why:
            wrong.append((name, ev.get(name), why))
    if wrong:
        return _findings(wrong)
    if not count:
        return skipped("no call answered ok:true")
    return passed(f"{count} output(s) well-formed", count)


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


@check(
    "call.chunk_reassembly",
    severity=Severity.REQUIRED,
    title="a result longer than one chunk reassembles exactly (chunk boundaries keep every character)",
    probe="call",
    spec="§3.1, §11.7",
    remediation="Cut the result string into 4096-character slices, send each but the last as `chunk` and the last as `end`, "
    "never trimming whitespace or splitting a character; receivers concatenate the data as is.",
    requires=("call.end_json",),
)
def chunk_reassembly(ev: Evidence) -> CheckOutcome:
    ex = ev.get("call.large")
    padding = ev.facts.padding
    if ex is None or not padding:
        return not_applicable("no tool has an input that can carry a large payload, so no answer can be made long enough to chunk")
    stream = stream_of(ex)
    chunks = [e for e in (stream.events if stream else []) if e.event == protocol.EVENT_CHUNK]
    kind, body = result_of(ex)
    if kind != "result":
        return skipped(f"the large invalid input was answered with {kind} ({short(body, 60)}), not a result to reassemble")
    if not chunks:
        text = "".join(_strings(body))
        return not_applicable(
            f"the answer to a large input fit in one event ({len(text)} characters): this environment's answers are never "
            "long enough to be chunked"
        )
    measured = {"chunks": [len(c.data) for c in chunks]}
    unit = ev.facts.padding_unit or padding[:7]
    for text in _strings(body):
        if padding in text:
            return passed(
                f"{len(chunks)} chunk(s) + end reassemble; the {len(padding)}-character payload came back intact", measured, ex
            )
        start, end = text.find(unit), text.rfind(unit[-1])
        if start >= 0 and end - start > len(padding) // 4:
            region = text[start : end + 1]
            if not re.fullmatch(rf"(?:{re.escape(unit)})+", region):
                damage = next((i for i in range(0, len(region), len(unit)) if region[i : i + len(unit)] != unit), 0)
                return failed(
                    f"the echoed payload changed at character {start + damage}: {region[max(0, damage - 4) : damage + 12]!r} "
                    f"(chunks of {measured['chunks']} characters)",
                    measured,
                    ex,
                )
            return passed(f"{len(chunks)} chunk(s) + end reassemble; the echoed part of the payload is intact", measured, ex)
    return skipped("the answer was chunked but does not echo the payload, so its content cannot be verified")


@check(
    "call.chunk_size",
    severity=Severity.ADVISORY,
    title="chunks are 4096 characters (not bytes), as the reference cuts them",
    probe="call",
    spec="§3.1, §11.7",
    remediation="Cut results into slices of 4096 characters (Python string slicing), not bytes.",
    requires=("call.end_json",),
)
def chunk_size(ev: Evidence) -> CheckOutcome:
    sizes: dict[str, list[int]] = {}
    for name, ex in call_streams(ev, resumes=True):
        stream = stream_of(ex)
        chunks = [len(e.data) for e in (stream.events if stream else []) if e.event == protocol.EVENT_CHUNK]
        if chunks:
            sizes[call_label(name)] = chunks
    if not sizes:
        return not_applicable("no result was long enough to be chunked")
    uneven = {k: v for k, v in sizes.items() if len(set(v)) > 1}
    if uneven:
        return failed(f"chunk sizes vary within a stream: {uneven}", sizes, ev.get("call.large"))
    other = {k: v for k, v in sizes.items() if v[0] != protocol.CHUNK_SIZE}
    if other:
        return warned(f"chunks of {next(iter(other.values()))[0]} characters (the reference: {protocol.CHUNK_SIZE})", sizes)
    return passed(f"chunks of {protocol.CHUNK_SIZE} characters", sizes)


def _in_band(ev: Evidence, name: str, situation: str) -> CheckOutcome:
    ex = ev.get(name)
    if ex is None:
        return skipped(f"no {situation} was sent")
    if ex.status != 200:
        return failed(f"{situation}: expected a 200 stream with ok:false, got {answer(ex)}", ex.status, ex)
    kind, body = result_of(ex)
    if kind == "error":
        return failed(
            f"{situation}: an SSE error event ({short(body, 60)}) instead of ok:false in end; the SDK marks the session dead",
            kind,
            ex,
        )
    if kind != "result":
        return failed(f"{situation}: no result ({kind})", kind, ex)
    if body.get("ok") is not False:
        return failed(f"{situation}: ok is {body.get('ok')!r}, expected false", body.get("ok"), ex)
    return passed(f"ok:false, {short(body.get('error'), 60)}", body.get("reason"), ex)


@check(
    "call.unknown_tool_ok_false",
    severity=Severity.REQUIRED,
    passive=("call.unknown_tool",),
    title="calling an unknown tool answers ok:false in end (200, not 4xx/5xx)",
    probe="call",
    spec="§5, §11.8",
    remediation='Answer a /call naming no tool of the session with a 200 stream whose end is {"ok": false, "error": ..., "reason": "not_found"}.',
    requires=("call.end_json",),
)
def unknown_tool_ok_false(ev: Evidence) -> CheckOutcome:
    return _in_band(ev, "call.unknown_tool", "unknown tool")


@check(
    "call.input_validation_ok_false",
    severity=Severity.REQUIRED,
    title="an input that fails the tool's schema answers ok:false in end",
    probe="call",
    spec="§5, §11.8",
    remediation='Validate tool input against the tool\'s model and answer failures in-band: end {"ok": false, "reason": "input_validation"}.',
    requires=("call.end_json",),
)
def input_validation_ok_false(ev: Evidence) -> CheckOutcome:
    if ev.get("call.invalid_input") is None:
        return not_applicable("every tool accepts any input: no input can fail validation")
    return _in_band(ev, "call.invalid_input", "invalid input")


@check(
    "call.error_reason",
    severity=Severity.RECOMMENDED,  # the openreward client infers a missing reason from the error text
    passive=(CALLS,),
    title="every ok:false carries the right reason",
    probe="call",
    spec="§4, §5, §11.10",
    remediation='Add "reason" to every ok:false: not_found (unknown tool), input_validation (bad input), episode_finished '
    "(after finished:true), name_collision.",
    requires=("call.end_json",),
)
def error_reason(ev: Evidence) -> CheckOutcome:
    wrong: list[Finding] = []
    seen = ev.folded.counts["call.error_reason"]
    for name, body in call_results(ev):
        why = verdicts.error_reason(name, body)
        if why is None:
            continue
        seen += 1
        if why:
            wrong.append((name, ev.get(name), why))
    if wrong:
        return _findings(wrong)
    if not seen:
        return skipped("no call answered ok:false")
    return passed(f"{seen} ok:false answer(s) carry the right reason", seen)


@check(
    "call.episode_finishes",
    severity=Severity.ADVISORY,
    passive=(FINISHER,),
    title="playing the task reaches finished:true",
    probe="play",
    spec="§5, §8",
    remediation="Let some tool end the episode with finished:true (a submit/answer tool), so trainers see episodes end.",
    requires=("call.end_json",),
)
def episode_finishes(ev: Evidence) -> CheckOutcome:
    finisher = ev.facts.finisher
    calls = ev.facts.play_calls
    if finisher is None and ev.facts.play_reaped:
        return warned(
            f"the checker's play session was reaped while playing ({ev.facts.play_reaped}) although it was pinged; "
            "the latch checks cannot run",
            calls,
        )
    if finisher is None:
        first = ev.facts.episodes[0] if ev.facts.episodes else None
        why = f" ({first.stopped})" if first is not None and first.stopped else ""
        return warned(
            f"no call answered finished:true within {calls} call(s) of inputs learned from the environment{why}; "
            "the latch checks cannot run",
            calls,
        )
    episodes = ev.facts.episodes
    done = sum(1 for e in episodes if e.finished)
    note = f"; {done}/{len(episodes)} task(s) played to finished" if len(episodes) > 1 else ""
    if ev.facts.tasks_not_played:
        note += f" ({ev.facts.tasks_not_played})"
    return passed(
        f"{finisher[0]}({short(finisher[1], 60)}) finished the episode after {calls} call(s){note}",
        {"calls": calls, "tool": finisher[0], "episodes": [e.to_json() for e in episodes]},
    )


@check(
    "call.finish_latch",
    severity=Severity.REQUIRED,
    passive=("latch.known",),
    title="after finished:true, further calls answer ok:false (episode_finished)",
    probe="play",
    spec="§5, §8",
    remediation="Once any tool returned finished:true, refuse every further call of a known tool with ok:false, reason episode_finished.",
    requires=("call.episode_finishes",),
)
def finish_latch(ev: Evidence) -> CheckOutcome:
    return _in_band(ev, "latch.known", "a call after finished:true")


@check(
    "call.reason_precedence",
    severity=Severity.RECOMMENDED,
    title="after finish: an unknown tool is not_found, an invalid input is episode_finished",
    probe="play",
    spec="§5, §11.10",
    remediation="Check in this order: unknown tool (not_found), then the finish latch (episode_finished), then input validation.",
    requires=("call.finish_latch", "call.unknown_tool_ok_false", "call.error_reason"),
)
def reason_precedence(ev: Evidence) -> CheckOutcome:
    problems, measured, shown = [], {}, []
    for name, expected in (
        ("latch.unknown_tool", protocol.REASON_NOT_FOUND),
        ("latch.invalid_input", protocol.REASON_EPISODE_FINISHED),
    ):
        ex = ev.get(name)
        if ex is None:
            continue
        kind, body = result_of(ex)
        reason = body.get("reason") if kind == "result" else None
        measured[call_label(name)] = reason
        shown.append(ex)
        if reason != expected:
            problems.append(f"{call_label(name)}: {f'reason {reason!r}' if kind == 'result' else kind}, expected {expected!r}")
    if problems:
        return failed("; ".join(problems), measured, *shown)
    if not measured:
        return skipped("no call was made after finished:true")
    return passed(f"{measured}", measured)


@check(
    "call.resume_by_task_id",
    severity=Severity.REQUIRED,
    passive=("call.resume",),
    title="re-POSTing /call with its task_id replays the same result",
    probe="call",
    spec="§3.2, §11.9",
    remediation="Keep each call's result for 60 s after it completes and replay task_id + the same end to a /call carrying that task_id.",
    requires=("call.first_event_task_id", "call.end_json"),
)
def resume_by_task_id(ev: Evidence) -> CheckOutcome:
    original, replay = ev.get("call.primary"), ev.get("call.resume")
    if original is None or replay is None:
        return skipped("the primary call gave no task_id to resume")
    if replay.status != 200:
        return failed(f"expected a 200 replay, got {answer(replay)}", replay.status, replay)
    first = stream_of(replay)
    events = first.events if first else []
    if not events or events[0].event != protocol.EVENT_TASK_ID or events[0].data != task_id_of(original):
        return failed(
            f"the replay starts with {[(e.event, short(e.data, 40)) for e in events[:2]]}, not task_id {task_id_of(original)}",
            None,
            replay,
        )
    (k1, b1), (k2, b2) = result_of(original), result_of(replay)
    if (k1, b1) != (k2, b2):
        return failed(
            f"the replay differs: {k2} {short(b2, 80)} vs the original {k1} {short(b1, 80)}",
            {"original": k1, "replay": k2},
            original,
            replay,
        )
    return passed(f"task {task_id_of(original)} replayed identically", task_id_of(original), replay)


@check(
    "call.unknown_task_id_error",
    severity=Severity.REQUIRED,
    passive=("call.unknown_task_id",),
    title="/call with an unknown task_id answers 200 with an error event",
    probe="call",
    spec="§3.2, §11.9",
    remediation='Answer a resume with an unknown or expired task_id with a 200 stream holding one `event: error` ("unknown task_id"), not 404.',
    requires=("call.tool_inputs",),
)
def unknown_task_id_error(ev: Evidence) -> CheckOutcome:
    ex = ev.get("call.unknown_task_id")
    if ex is None:
        return skipped("not probed")
    if ex.status != 200:
        return failed(f"expected 200 with an error event, got {answer(ex)}", ex.status, ex)
    stream = stream_of(ex)
    names = stream.names() if stream else []
    if protocol.EVENT_ERROR not in names or protocol.EVENT_END in names:
        return failed(f"expected one error event and no end, got events {names}", names, ex)
    return passed(f"error: {short(ex.error_event or stream.first(protocol.EVENT_ERROR).data, 60)}", names, ex)


@check(
    "call.resume_running",
    severity=Severity.REQUIRED,
    passive=("timing.resume",),
    title="a call cut off while running can be resumed by task_id",
    probe="timing",
    spec="§3.2, §3.3",
    remediation="Keep running tool tasks independent of the client connection and stream them to a /call that resumes their task_id.",
    requires=("call.resume_by_task_id",),
)
def resume_running(ev: Evidence) -> CheckOutcome:
    cut, resumed = ev.get("timing.cut"), ev.get("timing.resume")
    if cut is None:
        longest = max(ev.facts.durations.values(), default=0.0)
        return not_applicable(
            f"every tool answered within {longest:.2f} s: no call runs long enough (≥ 0.5 s) to be cut off while it runs "
            "(resuming a finished call is call.resume_by_task_id)"
        )
    if resumed is None:
        return skipped("the stream sent nothing between task_id and its end, so it could not be cut while the task ran")
    kind, body = result_of(resumed)
    stream = stream_of(resumed)
    first = stream.events[0] if stream and stream.events else None
    if first is None or first.event != protocol.EVENT_TASK_ID or first.data != task_id_of(cut):
        return failed(f"the resume does not start with task_id {task_id_of(cut)}: {answer(resumed)}", None, cut, resumed)
    if kind != "result":
        return failed(f"the resumed call gave {kind} {short(body, 60)}, not the result", kind, cut, resumed)
    return passed(
        f"cut after {cut.elapsed:.2f} s, resumed in {resumed.elapsed:.2f} s", {"cut_s": round(cut.elapsed, 3)}, cut, resumed
    )


@check(
    "call.keepalive_interval",
    severity=Severity.REQUIRED,
    passive=(CALLS,),
    title="long calls send keep-alive comments at the promised cadence",
    probe="timing",
    spec="§3, §3.3, §11.6",
    remediation="While a tool runs, send an SSE comment (`: ping - <time>`) every ping interval (10 s in the reference); "
    "the SDK gives up on a stream silent for 30 s.",
    requires=("call.first_event_task_id",),
)
def keepalive_interval(ev: Evidence) -> CheckOutcome:
    interval, allowed = verdicts.keepalive_allowed(ev.options, ev.facts.orsbench_stats)
    folded = ev.folded
    streams = call_streams(ev) + [
        (n, ev.get(n)) for n in ("timing.cut", "timing.resume") if ev.get(n) is not None and ev.get(n).status == 200
    ]
    longest = max([ex.elapsed for _, ex in streams] + [folded.longest])
    long_calls = [(n, ex) for n, ex in streams if ex.elapsed > allowed]
    comments = sum(len(stream_of(ex).comments) for _, ex in streams if stream_of(ex) is not None) + folded.comments
    gaps = [(n, verdicts.longest_gap(ex), ex) for n, ex in long_calls] + ([folded.slowest] if folded.slowest else [])
    if not gaps:
        return not_applicable(
            f"no call lasted longer than 1.5 × the keep-alive interval ({interval:g} s) + 0.5 s; the longest took {longest:.2f} s: "
            "keep-alives only matter on calls that long"
        )
    worst_name, worst, worst_ex = max(gaps, key=lambda item: item[1])
    measured = {"interval_s": interval, "max_gap_s": round(worst, 3), "comments": comments, "longest_call_s": round(longest, 3)}
    if worst > protocol.CLIENT_READ_TIMEOUT_S:
        return failed(
            f"{call_label(worst_name)} was silent for {worst:.1f} s, past the SDK's {protocol.CLIENT_READ_TIMEOUT_S:g} s read timeout",
            measured,
            worst_ex,
        )
    if worst > allowed:
        return failed(
            f"{call_label(worst_name)} was silent for {worst:.2f} s; keep-alives were promised every {interval:g} s",
            measured,
            worst_ex,
        )
    return passed(f"longest silence {worst:.2f} s over {len(long_calls) + folded.long_calls} long call(s), {comments} comment(s)", measured)
