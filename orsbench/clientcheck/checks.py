"""The client checks: named rules a client follows, graded from both ends of one case.

Server side, from the request log and ``/_orsbench/stats`` (:mod:`.traffic`):
each scripted tool runs once, the session is deleted, ``Retry-After`` is
honoured, a 4xx is not retried, a cut stream is resumed by its ``task_id``, no
call follows ``finished``, ``env_name`` and the secrets are sent, requests stay
within a budget. Adapter side, from ``ORSBENCH_OUT`` (:mod:`.contract`): every
text byte-identical to what the environment returned, rewards and
``finished`` as sent, failures reported as errors. And the process: it ended
in time, and a non-zero exit came with a reported error (not a crash).

Each check is a :class:`ClientCheck` in :data:`CLIENT_CHECKS` (a
:class:`~orsbench.registry.Registry`): id, title, severity, the section of
``docs/protocol.md`` §12 it enforces, a fix line, and the checks it
``requires`` — when one of those *failed*, this one is skipped naming it, so
one fault makes one failure (a client that never resumes is told so once, not
again as "the tool ran twice" and "the episode did not finish"). Two more facts
on each entry say where it can be judged and what its failure means:

* ``role`` (:class:`Role`): what it reads — the traffic only (so it grades any
  client whose requests orsbench sees: a proxy, hosted cases), the client's own
  report (``ORSBENCH_OUT``), or the client's process (its exit, its deadline);
* ``effect`` (:class:`~orsbench.verdict.Effect`): what a failure does to the
  episode's verdict (:func:`orsbench.verdict.verdict_of`) — a hang, wrong data
  handed on, the server left worse off, or a rule broken without changing the
  episode (listed beside the verdict, never deciding it).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from orsbench import protocol
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.clientcheck.contract import OutLine
from orsbench.clientcheck.traffic import Call, Traffic, body_json, from_log, group, session_of, text_of
from orsbench.registry import Registry
from orsbench.upstream import defects
from orsbench.verdict import Effect

if TYPE_CHECKING:
    from orsbench.clientcheck.runner import CaseRun
    from orsbench.wire.evidence import Exchange

R, REC, ADV = Severity.REQUIRED, Severity.RECOMMENDED, Severity.ADVISORY

#: Statuses a client may retry (after Retry-After); any other 4xx is final.
RETRYABLE_4XX = frozenset({408, 425, 429})
#: Slack on Retry-After: a retry this much sooner still counts as having waited (clock and scheduling).
RETRY_AFTER_SLACK_S = 0.1
#: Requests a case may take: a fixed allowance for the session, plus this many per scripted call.
BUDGET_BASE, BUDGET_PER_CALL = 20, 10


@dataclass
class Context:
    """What every check reads: the run, its traffic grouped, and the adapter's lines aligned to the calls.

    ``run`` is ``None`` for a live client session behind ``orsbench proxy``: no case, no script, no
    process and no report of the client's — only its traffic. A check that needs what is missing
    answers ``None`` (not judged); the traffic checks judge what the traffic shows.
    """

    run: CaseRun | None
    traffic: Traffic

    @property
    def lines(self) -> list[OutLine]:
        return self.run.out.entries if self.run is not None else []

    def successes(self) -> list[tuple[Call, dict[str, Any], OutLine]]:
        """``(call, output, line)`` for each call that succeeded and that the adapter reported as a success."""
        return [
            (call, output, line)
            for call, line in self.aligned()
            if (output := call.output) is not None and line is not None and line.is_call
        ]

    def aligned(self) -> list[tuple[Call, OutLine | None]]:
        """Each call made before ``finished``, with the adapter's line for it (by position)."""
        lines = self.lines
        # A leading error line with no call behind it (the session did not open) is not a call's line.
        return [(call, lines[i] if i < len(lines) else None) for i, call in enumerate(self.traffic.made)]


#: A check's verdict, or ``None`` when its case does not provoke what it judges (left out of the report).
CheckFn = Callable[[Context], "CheckOutcome | None"]


class Role(StrEnum):
    """What a client check needs in order to be judged (the least; it reads more where there is more)."""

    #: The requests the server saw (and its counters): judged for any client whose traffic orsbench sees —
    #: an adapter run, a client playing hosted cases, a trainer behind ``orsbench proxy``.
    TRAFFIC = "traffic"
    #: The client's own report of each call (``ORSBENCH_OUT``, the adapter contract's lines).
    REPORT = "report"
    #: The client's process: its exit status, whether it ended within its deadline.
    PROCESS = "process"


@dataclass(frozen=True)
class ClientCheck:
    id: str
    title: str
    severity: Severity
    #: The section of ``docs/protocol.md`` it enforces, e.g. ``"§12.5"``.
    spec: str
    remediation: str
    fn: CheckFn
    requires: tuple[str, ...] = ()
    #: What it reads: the traffic only, the client's report, or the client's process.
    role: Role = Role.TRAFFIC
    #: What its failure does to the episode's verdict (:func:`orsbench.verdict.verdict_of`).
    effect: Effect = Effect.RULE
    #: A client stopped at its deadline that kept trying fails this check too: beside a hang it says nothing
    #: new, so a verdict does not list it among the rules broken.
    fails_with_a_hang: bool = False
    #: Where it fails, the figure the client's user reads hides the failure the client reported elsewhere (an
    #: aggregate over episodes that leaves the failed one out): the verdict is a silent failure, error or not.
    unreported: bool = False


CLIENT_CHECKS: Registry[ClientCheck] = Registry("client check", modules=("orsbench.clientcheck.checks",), key=lambda c: c.id)


def client_check(
    id: str,
    *,
    title: str,
    severity: Severity,
    spec: str,
    remediation: str,
    role: Role,
    effect: Effect,
    requires: tuple[str, ...] = (),
    fails_with_a_hang: bool = False,
    unreported: bool = False,
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the client check ``id`` (decorator); ``role`` and ``effect`` are said for every check."""

    def decorate(fn: CheckFn) -> CheckFn:
        CLIENT_CHECKS.register(ClientCheck(id, title, severity, spec, remediation, fn, requires, role, effect, fails_with_a_hang, unreported))
        return fn

    return decorate


def context(run: CaseRun) -> Context:
    """The run's traffic grouped; in a case orsbench ended mid-call, without the call it ended (:func:`held_calls`).

    That call never got its answer because orsbench killed the client, not because the client gave up on it: no
    check of resuming or of failures judges it; ``client.deletes_on_sigterm`` reports its fate.
    """
    log = run.log
    if run.terminated is not None:
        held = {id(entry) for entry in held_calls(run)}
        log = [entry for entry in log if id(entry) not in held]
    return Context(run, group(from_log(log)))


def held_calls(run: CaseRun) -> list[dict[str, Any]]:
    """The request log's ``/call`` entries still unanswered when orsbench sent the client SIGTERM."""
    if run.terminated is None:
        return []
    at = run.terminated.sigterm_at
    calls = [e for e in run.log if e.get("method") == "POST" and protocol.is_call(str(e.get("path", "")))]
    held = [
        e
        for e in calls
        if float(e.get("started_at") or 0.0) < at and not (e.get("complete") and float(e.get("ended_at") or 0.0) <= at)
    ]
    # The redirects that led to a held call (the openreward SDK's bare /call, 308 to /{env}/call) are that call too.
    bodies = {(e.get("request_body"), protocol.session_in(e.get("request_headers") or {})) for e in held}
    led = [
        e
        for e in calls
        if 300 <= int(e.get("status") or 0) < 400
        and (e.get("request_body"), protocol.session_in(e.get("request_headers") or {})) in bodies
    ]
    return [e for e in calls if any(e is x for x in (*led, *held))]


#: 402 Payment Required: a refusal no retry and no wait changes (§13.4, §13.12).
PAYMENT_REQUIRED = 402


def expects_error(run: CaseRun) -> bool:
    """Whether a correct client ends ``run`` on an error it reports: the case says so, or the server refused one of
    the client's requests 402 (§13.4, §13.12). Under ``credits-402-discovery`` only a client that reads a listing
    meets the refusal; one that reads none plays its episode, as it should."""
    return run.case.expect == "error" or any(entry.get("status") == PAYMENT_REQUIRED for entry in run.log)


def _in_its_words(run: CaseRun) -> str:
    """``; the client reported: …`` (its first error line), else ``; its stderr ends: …``, else nothing."""
    errors = run.reported_errors()
    if errors:
        return f"; the client reported: {_short(errors[0], 200)}"
    last = next((line.strip() for line in reversed(run.stderr.splitlines()) if line.strip()), "")
    return f"; its stderr ends: {_short(last, 200)}" if last else ""


#: Characters of context a text difference keeps before the first differing character, and from it on.
DIFF_BEFORE, DIFF_AFTER = 80, 120


def difference(expected: str, actual: str, expected_is: str, actual_is: str) -> dict[str, Any]:
    """Where two texts first differ, with context: ``{"at", "before", "expected", "actual", ...}``.

    The shape every report draws as a difference (:mod:`orsbench.reports.html`): ``before`` is the
    common text just before position ``at``, ``expected``/``actual`` each text from there on — so a
    reader sees *around* the difference, not a cut that starts exactly where the texts part.
    """
    at = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    return {
        "at": at,
        "before": expected[max(0, at - DIFF_BEFORE) : at],
        "expected": expected[at : at + DIFF_AFTER],
        "actual": actual[at : at + DIFF_AFTER],
        "expected_is": expected_is,
        "actual_is": actual_is,
        "expected_chars": len(expected),
        "actual_chars": len(actual),
    }


def _tail(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _spaced(text: str) -> str:
    """``text`` quoted with a run of spaces counted (``'a⟨39 spaces⟩b'``): in a one-line message spaces are invisible."""
    return repr(re.sub(r" {3,}", lambda m: f"⟨{len(m.group())} spaces⟩", text))


def _short(text: Any, limit: int = 120) -> str:
    shown = text if isinstance(text, str) else json.dumps(text, default=repr)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


# == the process ================================================================================

_PROCESS = ("client.exits_in_time", "client.exit_status")
_ADAPTER = (*_PROCESS, "client.out_valid")


@client_check(
    "client.exits_in_time",
    title="The command ends by itself, within the case's deadline and bounds",
    severity=R,
    spec="§12.1",
    remediation="Bound every wait (a read timeout on each stream, a cap on retries and resumes) and exit when the script is played.",
    role=Role.PROCESS,
    effect=Effect.HANGS,
)
def exits_in_time(ctx: Context) -> CheckOutcome | None:
    run = ctx.run
    if run.stopped_for == "deadline":
        return failed(
            f"still running at its {run.deadline:g} s deadline: orsbench stopped its process group (a hang)",
            {"deadline_s": run.deadline, "stdout_tail": run.stdout[-1000:], "stderr_tail": run.stderr[-1000:]},
        )
    if run.stopped_for is not None:
        return failed(f"stopped by orsbench for {run.stopped_for} after {run.duration_s:.1f} s", {"stopped_for": run.stopped_for})
    return passed(f"ended after {run.duration_s:.2f} s", {"duration_s": round(run.duration_s, 3)})


@client_check(
    "client.exit_status",
    title="A non-zero exit comes with a reported error (not a crash); an episode ending on an error exits non-zero",
    severity=R,
    spec="§12.1",
    remediation="Catch your client's exceptions in the adapter, write {\"error\": ...} for the call, and exit 1; exit 0 only when every call succeeded.",
    role=Role.PROCESS,
    effect=Effect.REPORTS_ERROR,
    requires=("client.exits_in_time",),
)
def exit_status(ctx: Context) -> CheckOutcome | None:
    run = ctx.run
    if run.terminated is not None:
        return None  # orsbench ended it with SIGTERM: what it did then is client.deletes_on_sigterm's
    errors = [line for line in run.out.lines if line.is_error]
    tail = " ".join(run.stderr.strip().splitlines()[-3:])
    if run.exit_code not in (0, None) and not errors:
        return failed(
            f"exited with status {run.exit_code} without reporting an error (a crash)" + (f": {_short(tail, 300)}" if tail else ""),
            {"exit_code": run.exit_code, "stderr_tail": run.stderr[-2000:]},
        )
    last = run.out.entries[-1] if run.out.entries else None
    if run.exit_code == 0 and last is not None and last.is_error:
        return warned(f"exited 0 although the episode ended on a reported error: {_short(last.get('error'))}", {"exit_code": 0})
    return passed(f"exit status {run.exit_code}" + (f" with {len(errors)} reported error(s)" if errors else ""), {"exit_code": run.exit_code})


# == the adapter's output =========================================================================


@client_check(
    "client.out_valid",
    title="ORSBENCH_OUT holds contract lines: {tool, text, reward, finished} or {error}",
    severity=R,
    spec="§12.1",
    remediation='Append one JSON object per call to $ORSBENCH_OUT: {"tool", "text", "reward": number|null, "finished": bool}, or {"error": "..."}.',
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
)
def out_valid(ctx: Context) -> CheckOutcome | None:
    out = ctx.run.out
    if not out.lines and not out.truncated:
        return skipped("ORSBENCH_OUT is empty: no line to hold to the contract")
    if out.truncated:
        return failed(f"ORSBENCH_OUT is larger than {out.size - 1} bytes; only its head was read", {"size": out.size})
    bad = out.invalid
    if bad:
        shown = "; ".join(f"line {line.number}: {', '.join(line.problems)} ({_short(line.raw, 60)!r})" for line in bad[:3])
        return failed(f"{len(bad)} of {len(out.lines)} line(s) break the contract — {shown}", {"invalid": len(bad), "lines": len(out.lines)})
    return passed(f"{len(out.lines)} line(s), all in the contract's shape", {"lines": len(out.lines)})


# == the session ==================================================================================


@client_check(
    "client.env_name",
    title="POST /create names the environment (env_name)",
    severity=R,
    spec="§12.2",
    remediation="Send env_name in the /create body: a server with several environments otherwise serves its default one.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
)
def env_name(ctx: Context) -> CheckOutcome | None:
    """One rule on every front end (check-client, hosted, the proxy, the matrix, ``clients URL``): a ``/create``
    without ``env_name`` is a warning where the server's default environment is the one played — the same episode,
    exit 0, the pinned upstream defects that do it named — and a failure where the default is another environment
    (the episode ran in the wrong one). Behind the proxy, where no case says which environment was meant, a warning."""
    creates = ctx.traffic.creates
    if not creates:
        return None  # not provoked: the client never sent POST /create
    bare = [c for c in creates if not body_json(c).get("env_name")]
    if ctx.run is None:  # no case: which environment the client meant is unknown, but it must name one
        if bare:
            return _no_env_name(bare, creates, "the same episode on a server with one environment; on one with several, the wrong one")
        return passed(f"every /create named an environment ({body_json(creates[0]).get('env_name')!r})", {"creates": len(creates)})
    wanted = ctx.run.env.lower()
    named = [(c, body_json(c).get("env_name")) for c in creates if body_json(c).get("env_name")]
    wrong = [(c, sent) for c, sent in named if str(sent).lower() != wanted]
    if bare and not wrong and ctx.run.default_env.lower() == wanted:
        return _no_env_name(bare, creates, f"it is {ctx.run.env!r}, the environment this case plays: the same episode")
    wrong = [(c, None) for c in bare] + wrong
    if wrong:
        exchange, sent = wrong[0]
        what = "no env_name" if sent is None else f"env_name {sent!r}"
        return failed(f"{len(wrong)} of {len(creates)} /create request(s) sent {what}; the case's environment is {ctx.run.env!r}", {"sent": sent}, exchange)
    return passed(f"every /create named {ctx.run.env!r}", {"creates": len(creates)})


def _no_env_name(bare: list[Exchange], creates: list[Exchange], episode: str) -> CheckOutcome:
    """A missing ``env_name`` that did not change the episode: a rule broken beside the verdict (as the matrix and
    ``orsbench clients URL`` hold it), named with the pinned upstream defects that break it — a warning."""
    pinned = [d for d in defects.DEFECTS.values() if any(check == "client.env_name" for check, _ in d.breaks)]
    named = "; ".join(f"{d.id} ({d.upstream}: {', '.join(d.clients)})" for d in pinned)
    return warned(
        f"{len(bare)} of {len(creates)} /create request(s) sent no env_name: the server's default environment answered "
        f"({episode})" + (f"; pinned upstream defects that do this: {named}" if named else ""),
        {"sent": None, "pinned": [d.id for d in pinned]},
        bare[0],
    )


@client_check(
    "client.secrets",
    title="The secrets given reach the session as X-Secrets",
    severity=R,
    spec="§12.2",
    remediation="Send ORSBENCH_SECRETS to the session as the X-Secrets header of /create: base64 of {name: {\"value\": ...}}.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
)
def secrets(ctx: Context) -> CheckOutcome | None:
    if ctx.run is None:
        return _secrets_refused(ctx)
    wanted = sorted(name for name, _ in ctx.run.case.secrets)
    if not wanted:
        return None  # not provoked: this case gives no secrets
    creates = [s for s in ctx.traffic.seen if s.exchange.method == "POST" and s.path == protocol.CREATE]
    if not creates:
        return None  # not provoked: the client never sent POST /create
    missing = [(s.exchange, sorted(set(wanted) - set(s.secret_names or ()))) for s in creates]
    missing = [(e, names) for e, names in missing if names]
    if missing:
        exchange, names = missing[0]
        return failed(f"/create came without the secret(s) {', '.join(names)} in X-Secrets", {"missing": names}, exchange)
    # The environment shows what it received (a fingerprint, never the value): the script knows what to expect.
    for call, step in zip(ctx.traffic.made, ctx.run.script.steps):
        output = call.output
        if output is not None and step.expect is not None and call.tool == step.tool and text_of(output) != step.expect:
            return failed(f"the secrets arrived under the right names, but the environment saw other values: {_short(text_of(output))}", {"names": wanted})
    return passed(f"every /create carried X-Secrets with {', '.join(wanted)}", {"names": wanted})


@client_check(
    "client.secret_not_on_cmdline",
    title="No process of the client carries a secret on its command line",
    severity=R,
    spec="§14.4",
    remediation="Hand a secret to a helper process in its environment, a file only you can read (0600) or its stdin — never as an "
    "argument: /proc/PID/cmdline, what ps shows, is readable by every user of the machine.",
    role=Role.PROCESS,
    effect=Effect.RULE,
)
def secret_not_on_cmdline(ctx: Context) -> CheckOutcome | None:
    run = ctx.run
    seen = run.argv if run is not None else None
    if seen is None:
        return None  # not provoked: this case gives no secret (or no process of the client was watched)
    if seen.unavailable:
        return skipped(f"not judged: {seen.unavailable}")
    if seen.leaks:
        first = seen.leaks[0]
        shown = _short(" ".join(first["argv"]), 300)
        return failed(
            f"the secret {first['secret']} was on the command line of {len(seen.leaks)} of the client's process(es), "
            f"readable by every user: pid {first['pid']}: {shown}",
            {"leaks": seen.leaks, "samples": seen.samples, "processes": seen.processes},
        )
    return passed(
        f"{seen.samples} reading(s) of {seen.processes} process(es) of the client: no secret on a command line",
        {"samples": seen.samples, "processes": seen.processes},
    )


def _secrets_refused(ctx: Context) -> CheckOutcome | None:
    """With no case to say which secrets the session needs: did the environment refuse one for a missing secret?"""
    refused = [
        s.exchange
        for s in ctx.traffic.seen
        if s.path == protocol.CREATE and 400 <= (s.exchange.status or 0) < 500 and "secret" in str(s.exchange.detail).lower()
    ]
    if refused:
        exchange = refused[0]
        sent = ", ".join(next(s.secret_names or () for s in ctx.traffic.seen if s.exchange is exchange)) or "none"
        return failed(
            f"the environment refused /create for a secret it needs ({exchange.status}: {_short(exchange.detail, 200)}); "
            f"X-Secrets carried: {sent}",
            {"status": exchange.status},
            exchange,
        )
    return None  # not provoked: no /create was refused for a secret


@client_check(
    "client.session_deleted",
    title="Every session the client created is deleted (POST /delete)",
    severity=R,
    spec="§12.3",
    remediation="Delete the session when the episode ends, also after a failure (try/finally): an open session holds the environment until its TTL.",
    role=Role.TRAFFIC,
    effect=Effect.HARMS_SERVER,
    requires=_PROCESS,
)
def session_deleted(ctx: Context) -> CheckOutcome | None:
    created = ctx.traffic.created
    if not created:
        return None  # not provoked: no session was created
    if ctx.run is not None and ctx.run.terminated is not None:
        return None  # orsbench ended the client mid-episode: client.deletes_on_sigterm judges what it left
    left = [sid for sid in created if sid not in ctx.traffic.deleted]
    if left:
        return failed(f"{len(left)} of {len(created)} session(s) never deleted: {', '.join(left[:3])}", {"left_open": len(left)})
    return passed(f"{len(created)} session(s) created, all deleted", {"sessions": len(created)})


@client_check(
    "client.deletes_on_sigterm",
    title="Ended with SIGTERM mid-call, the client deletes its session before it exits",
    severity=REC,
    spec="§13.17",
    remediation="Handle SIGTERM: stop the episode (Python: signal.signal(SIGTERM, lambda *_: sys.exit(143)), so finally blocks "
    "and context managers run), POST /delete for every open session, then exit; Python's default SIGTERM skips them all.",
    role=Role.PROCESS,
    effect=Effect.RULE,
)
def deletes_on_sigterm(ctx: Context) -> CheckOutcome | None:
    run = ctx.run
    ended = run.terminated if run is not None else None
    if ended is None:
        return None  # not provoked: orsbench did not end this client mid-episode
    created = ctx.traffic.created
    if not created:
        return None  # not provoked: it had no session open when it was ended
    left = [sid for sid in created if sid not in ctx.traffic.deleted]
    held = held_calls(run)
    if held:
        entry = held[-1]
        try:
            tool = json.loads(entry.get("request_body") or "{}").get("name", "?")
        except (ValueError, AttributeError):
            tool = "?"
        stream = "still open on the server" if entry.get("ended_at") is None else "cut when the client went away"
        running = "; the tool was still running" if (ended.tasks_running or 0) > 0 else ""
        fate = f"the call in flight ({tool}) got no answer: its stream was {stream}{running}"
    else:
        fate = "no call was in flight"
    how = (
        f"it was still running {ended.grace_s:g} s after SIGTERM and was killed (SIGKILL)"
        if ended.killed
        else f"it exited {ended.exited_after_s:.2f} s after SIGTERM"
    )
    measured = {
        "sessions": len(created),
        "left_open": len(left),
        "sigterm_after_s": round(ended.after_s, 3),
        "exited_after_s": None if ended.exited_after_s is None else round(ended.exited_after_s, 3),
        "killed": ended.killed,
        "held_calls": len(held),
        "ttl_s": ended.ttl_s,
    }
    if left:
        ttl = f"its TTL reaps it ({ended.ttl_s:g} s idle)" if ended.ttl_s else "its TTL reaps it"
        return warned(
            f"SIGTERM mid-call: {how} and left {len(left)} of {len(created)} session(s) open — the server holds "
            f"{'it' if len(left) == 1 else 'them'} until {ttl}; {fate}",
            measured,
        )
    return passed(f"SIGTERM mid-call: {how}, having deleted its {len(created)} session(s); {fate}", measured)


@client_check(
    "client.session_per_run",
    title="Each run (and each episode) of the script in one process opens a session of its own and plays it",
    severity=R,
    spec="§13.16",
    remediation="Build the client (its HTTP pool, its event loop, its session, its episode state) per run, or reset it: "
    "a second run must create, play and delete a session of its own, never reuse or skip on the first run's state.",
    role=Role.TRAFFIC,
    effect=Effect.WRONG_DATA,
    requires=_PROCESS,
)
def session_per_run(ctx: Context) -> CheckOutcome | None:
    if ctx.run is None or ctx.run.script.runs < 2:
        return None  # not provoked: the script is played once
    runs = ctx.run.script.runs  # every play of the script: each run's episodes (ORSBENCH_RUNS × ORSBENCH_EPISODES)
    created = ctx.traffic.created
    played = [sid for sid in created if any(call.sid == sid for call in ctx.traffic.calls)]
    if len(played) >= runs:
        return passed(f"{runs} plays of the script in one process, {len(played)} sessions created and played", {"runs": runs, "sessions": len(played)})
    if ctx.run.reported_errors():
        # A run that failed and said so is a clear failure (judged by the outcome), not a run silently skipped.
        return passed(
            f"{runs} plays, {len(played)} session(s) played; the client reported an error for the rest{_in_its_words(ctx.run)}",
            {"runs": runs, "sessions": len(played)},
        )
    per_session = Counter(call.sid for call in ctx.traffic.calls)
    reused = next((sid for sid in played if per_session[sid] > len(ctx.run.script.one_run)), None)
    stray = sorted({str(call.sid) for call in ctx.traffic.calls if call.sid not in created})
    if reused is not None:
        how = f"a later run made its calls in the session an earlier run had played ({reused})"
    elif stray:
        how = f"calls went to session(s) the server never created for them: {', '.join(stray[:2])}"
    else:
        how = f"play {len(played) + 1} opened no session and made no call, and reported nothing"
    return failed(
        f"{runs} plays of the script in one process, but the server saw {len(played)} session(s) played: {how}",
        {"runs": runs, "sessions": len(played), "created": len(created)},
    )


# == retries =========================================================================================


def _retry_after(headers: dict[str, str]) -> float | None:
    value = headers.get(protocol.RETRY_AFTER_HEADER.lower())
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _same_request(a: Exchange, b: Exchange) -> bool:
    """Whether ``a`` repeats ``b``: same method, URL, body and session.

    The session header matters: two sessions' pings (or calls with one body) are different requests,
    and one sent 20 ms after the other's 503 is not a retry of it.
    """
    return (
        a.method == b.method
        and a.url == b.url
        and a.request_body == b.request_body
        and session_of(a) == session_of(b)
    )


@client_check(
    "client.retry_after",
    title="A request answered with Retry-After is not retried sooner",
    severity=R,
    spec="§12.4",
    remediation="On 429/503 (and 502/504) wait the Retry-After seconds before retrying; retrying at once only adds to the overload.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
)
def retry_after(ctx: Context) -> CheckOutcome | None:
    exchanges = ctx.traffic.exchanges
    asked = [(i, e, wait) for i, e in enumerate(exchanges) if (wait := _retry_after(e.headers)) is not None and (e.status or 0) >= 400]
    if not asked:
        return None  # not provoked: no answer in this case carried Retry-After
    early = []
    retried = 0
    for i, exchange, wait in asked:
        retry = next((e for e in exchanges[i + 1 :] if _same_request(e, exchange)), None)
        if retry is None:
            continue
        retried += 1
        gap = retry.started_at - (exchange.started_at + exchange.elapsed)
        if gap + RETRY_AFTER_SLACK_S < wait:
            early.append((exchange, retry, gap, wait))
    if early:
        exchange, retry, gap, wait = early[0]
        return failed(
            f"{len(early)} of {len(asked)} retr(ies) came too soon: {exchange.method} {exchange.url} was answered "
            f"{exchange.status} with Retry-After: {wait:g} and retried after {gap:.2f} s",
            {"early": len(early), "gap_s": round(gap, 3), "retry_after_s": wait},
            exchange,
            retry,
        )
    if not retried:
        # Nothing was retried, so nothing was retried too soon — and nothing was shown either (issue 27).
        return skipped(
            f"{len(asked)} answer(s) carried Retry-After and the client never sent the request again: no retry to judge"
        )
    return passed(f"{retried} retr(ies) after {len(asked)} answer(s) with Retry-After, each waited out", {"answers": len(asked), "retried": retried})


@client_check(
    "client.no_4xx_retry",
    title="A request refused with a 4xx (other than 408/425/429) is not sent again unchanged",
    severity=R,
    spec="§12.4",
    remediation="Treat 4xx answers as final: report the error (its detail says what is wrong) instead of repeating the request.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
)
def no_4xx_retry(ctx: Context) -> CheckOutcome | None:
    exchanges = ctx.traffic.exchanges
    refused = [(i, e) for i, e in enumerate(exchanges) if e.status is not None and 400 <= e.status < 500 and e.status not in RETRYABLE_4XX]
    if not refused:
        return None  # not provoked: no request in this case was refused with a final 4xx

    repeated = []
    for i, exchange in refused:
        again = [e for e in exchanges[i + 1 :] if _same_request(e, exchange)]
        if again:
            repeated.append((exchange, len(again)))
    if repeated:
        exchange, times = repeated[0]
        return failed(
            f"{exchange.method} {exchange.url} was refused {exchange.status} and sent again unchanged {times} time(s)",
            {"repeated": times, "status": exchange.status},
            exchange,
        )
    return passed(f"{len(refused)} final 4xx answer(s), none repeated", {"refused": len(refused)})


# == tool calls =======================================================================================


@client_check(
    "client.resume_by_task_id",
    title="A /call stream cut after its task_id is resumed by that task_id, not run again",
    severity=R,
    spec="§12.5",
    remediation="When a /call stream ends without end/error, POST /call again with the same body plus \"task_id\": the tool already ran.",
    role=Role.TRAFFIC,
    effect=Effect.HARMS_SERVER,
)
def resume_by_task_id(ctx: Context) -> CheckOutcome | None:
    cuts = 0
    problems = []
    for call in ctx.traffic.calls:
        for index, attempt in enumerate(call.attempts):
            if not attempt.cut_after_task_id or attempt.resume:
                continue
            cuts += 1
            following = call.attempts[index + 1] if index + 1 < len(call.attempts) else None
            if following is None:
                problems.append((call, attempt, None, "gave up without resuming"))
            elif not following.resume:
                problems.append((call, attempt, following, "called the tool afresh"))
            elif following.task_id != attempt.task_id:
                problems.append((call, attempt, following, f"resumed another task_id ({following.task_id})"))
    if not cuts:
        return None  # not provoked: no /call stream was cut after its task_id in this case
    if problems:
        call, attempt, following, what = problems[0]
        # The evidence is the cut stream and, where there was one, the request the client sent instead of a resume.
        shown = [attempt.exchange] + ([following.exchange] if following is not None else [])
        return failed(
            f"{len(problems)} of {cuts} cut stream(s) not resumed: after {call.tool}'s stream was cut "
            f"(task_id {attempt.task_id}) the client {what}",
            {"cuts": cuts, "not_resumed": len(problems)},
            *shown,
        )
    return passed(f"{cuts} cut stream(s), each resumed by its task_id", {"cuts": cuts})


@client_check(
    "client.tool_runs",
    title="Each scripted tool runs on the server no more often than the script calls it",
    severity=R,
    spec="§12.5",
    remediation="Never repeat a /call whose stream may have started the tool (a cut, a timeout): resume it by task_id, or report the failure.",
    role=Role.TRAFFIC,
    effect=Effect.HARMS_SERVER,
    requires=("client.resume_by_task_id",),
)
def tool_runs(ctx: Context) -> CheckOutcome | None:
    if ctx.run is None:
        return None  # no script to count against (cut streams re-run are client.resume_by_task_id's)
    if "calls" not in ctx.run.stats:
        return None  # not judged: the server keeps no counters of its tool runs (the user's own server, behind a proxy)
    ran = Counter({k: int(v) for k, v in (ctx.run.stats.get("calls") or {}).items()})
    if not sum(ran.values()):
        return None  # not provoked: no tool ran on the server in this case
    wanted = ctx.run.script.calls
    extra = {tool: (count, wanted.get(tool, 0)) for tool, count in ran.items() if count > wanted.get(tool, 0)}
    if extra:
        tool, (count, script) = next(iter(extra.items()))
        return failed(f"{tool} ran {count} time(s) on the server; the script calls it {script} time(s)", {"ran": dict(ran), "script": wanted})
    return passed(f"{sum(ran.values())} tool run(s), none beyond the script", {"ran": dict(ran)})


@client_check(
    "client.stops_at_finished",
    title="No tool call follows an answer with finished: true",
    severity=R,
    spec="§12.6",
    remediation="End the episode loop as soon as a tool answers finished: true; the server refuses later calls (episode_finished).",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
    requires=("client.session_per_run",),  # a second run in the first run's finished session is that check's
)
def stops_at_finished(ctx: Context) -> CheckOutcome | None:
    late = [c for c in ctx.traffic.calls if c.after_finish]
    finished = [c for c in ctx.traffic.calls if c.finished and not c.after_finish]
    if not finished:
        return None  # not provoked: no call answered finished: true in this case
    if late:
        return failed(f"{len(late)} call(s) after finished: true, the first {late[0].tool}", {"late_calls": len(late)}, late[0].attempts[0].exchange)
    return passed("the episode loop stopped at finished: true")


@client_check(
    "client.script_followed",
    title="The client makes the script's calls in order and stops only at finished or a reported failure",
    severity=R,
    spec="§12.6",
    remediation="Make exactly the calls of $ORSBENCH_SCRIPT, in order, with their inputs; stop only when the client reports finished or fails.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
    requires=_PROCESS,
)
def script_followed(ctx: Context) -> CheckOutcome | None:
    if ctx.run is None:
        return None  # no script
    steps = ctx.run.script.steps
    made = ctx.traffic.made
    for i, call in enumerate(made):
        if i >= len(steps):
            return failed(f"call {i + 1} ({call.tool}) is beyond the script's {len(steps)} call(s)", {"calls": len(made)})
        step = steps[i]
        if call.tool != step.tool or call.input != step.args:
            return failed(
                f"call {i + 1} was {call.tool}({_short(call.input, 60)}); the script says {step.tool}({_short(step.args, 60)})",
                {"call": i + 1},
                call.attempts[0].exchange,
            )
    if len(made) < len(steps):
        last = made[-1] if made else None
        opened = bool(ctx.traffic.created)
        reported = any(line.is_error for line in ctx.run.out.lines)
        failed_first = last is None and any((e.status or 0) >= 500 for e in ctx.traffic.exchanges)
        if ctx.run.terminated is not None:
            if not made:
                return None  # orsbench ended it before its first call: nothing of the script was its to play
        elif last is not None and (last.finished or last.failure is not None):
            pass  # stopped at finished or at a failure: as it should
        elif not made and not ctx.run.watched and not ctx.run.out.exists:
            # Seen on the wire only (a hosted case with no report posted): why it made no call is unknown.
            if expects_error(ctx.run) or not opened:
                # No session (its /create refused, or never sent): what it did about that is the outcome's to judge.
                return skipped(f"not judged: the client made none of the {len(steps)} scripted call(s) and posted no report saying why")
            seen = ctx.traffic.exchanges[-1] if ctx.traffic.exchanges else None
            why = f"; its last request, {seen.method} {seen.url}, was answered {seen.status}" if seen is not None else ""
            return failed(
                f"0 of {len(steps)} scripted call(s) made in a case a correct client plays to its end{why}; no report posted",
                {"calls": 0},
                seen,
            )
        elif not made and (not opened or reported or failed_first):
            # The session did not open, the server failed it before its first call, or the client said why it made no
            # call: the outcome's checks judge that (client.failure_as_error, client.episode_completed); no call to hold
            # to the script, so no pass either.
            return None
        else:
            return failed(f"stopped after {len(made)} of {len(steps)} call(s) with no failure and no finished", {"calls": len(made)})
    return passed(f"{len(made)} of {len(steps)} scripted call(s) made in order", {"calls": len(made)})


@client_check(
    "client.request_budget",
    title="The client stays within a request budget (no request storm)",
    severity=R,
    spec="§12.7",
    remediation="Cap retries and resumes (a handful each, with back-off); a loop of requests against a failing server is a denial of service.",
    role=Role.TRAFFIC,
    effect=Effect.RULE,
    fails_with_a_hang=True,
)
def request_budget(ctx: Context) -> CheckOutcome | None:
    run, exchanges = ctx.run, ctx.traffic.exchanges
    # A live session has no script: its budget follows the calls it made (a storm of retries is one call).
    calls = len(run.script.steps) if run is not None else max(1, len(ctx.traffic.calls))
    what = f"a {calls}-call script" if run is not None else f"a session of {calls} call(s)"
    # A session's allowance per play of the script (each run's episodes, §13.15-16), and one per scripted call.
    budget = BUDGET_BASE * (run.script.runs if run is not None else 1) + BUDGET_PER_CALL * calls
    total = max(run.requests_total if run is not None else 0, len(exchanges) + ctx.traffic.dropped)
    if (run is not None and run.stopped_for == "request storm") or total > budget:
        span = (exchanges[-1].started_at - exchanges[0].started_at) if len(exchanges) > 1 else 0.0
        rate = f", {total / span:.0f}/s" if span > 0 else ""
        return failed(f"{total} requests for {what} (budget {budget}{rate})", {"requests": total, "budget": budget})
    return passed(f"{total} request(s) (budget {budget})", {"requests": total, "budget": budget})


# == what the adapter reported ==========================================================================


@client_check(
    "client.text_verbatim",
    title="The text the client returns is byte-identical to what the environment sent",
    severity=R,
    spec="§12.8",
    remediation="Concatenate chunk data and end data exactly as sent (strip one space after 'data:', never more) and join text blocks unchanged.",
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
    requires=_ADAPTER,
)
def text_verbatim(ctx: Context) -> CheckOutcome | None:
    compared = ctx.successes()
    for call, output, line in compared:
        sent, shown = text_of(output), line.get("text")
        if shown != sent:
            diff = difference(sent, shown, "the environment sent", "the client returned")
            at = diff["at"]
            return failed(
                f"{call.tool}: the text differs at character {at} (sent {len(sent)} chars, returned {len(shown)}): "
                f"after {_spaced(_tail(diff['before']))} the environment sent {_spaced(_short(diff['expected'], 40))}, "
                f"the client returned {_spaced(_short(diff['actual'], 40))}",
                {"tool": call.tool, "sent_chars": len(sent), "returned_chars": len(shown), "first_difference": at, "difference": diff},
                call.answer.exchange if call.answer else None,
            )
    if not compared:
        return None  # not provoked: no successful call was reported
    return passed(f"{len(compared)} text(s) identical to what the environment sent", {"compared": len(compared)})


def _reward_matches(sent: Any, shown: Any) -> bool:
    """Whether the reported reward is the one sent (``null`` is ``null``, never 0.0; a number, not a boolean)."""
    if sent is None or shown is None:
        return sent is None and shown is None
    return not isinstance(shown, bool) and isinstance(shown, (int, float)) and float(shown) == float(sent)


@client_check(
    "client.reward_as_sent",
    title="Reward and finished are reported as the environment sent them (a JSON boolean is no reward)",
    severity=R,
    spec="§12.8",
    remediation="Report the reward as sent (null stays null, never 0.0; 2.5 and -1 stay 2.5 and -1) and refuse a reward that is not a finite number (true is not 1.0, NaN is not 0.0).",
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
    requires=_ADAPTER,
)
def reward_as_sent(ctx: Context) -> CheckOutcome | None:
    compared = ctx.successes()
    # What the client said it never shows its user call by call (its profile; the contract's ``unsurfaced`` line): a
    # per-call comparison of that field is not applicable, what it does show (the episode's, on a later call) is judged.
    unsurfaced = ctx.run.out.unsurfaced if ctx.run is not None else {}
    held_back = 0
    latest: dict[str, Any] = {}  # each session's last non-null reward sent so far, and whether it has finished
    last_of_session = {call.sid: number for number, (call, _, _) in enumerate(compared)}
    for number, (call, output, line) in enumerate(compared):
        closing = last_of_session[call.sid] == number  # the episode's own values show on its last call, if anywhere
        sent, shown = output.get("reward"), line.get("reward")
        if sent is not None:
            latest[f"reward {call.sid}"] = sent
        latest[f"finished {call.sid}"] = latest.get(f"finished {call.sid}", False) or output.get("finished") is True
        if "reward" in unsurfaced:
            if shown is None and not closing:
                held_back += 1
                continue  # not shown on this call: nothing the client's user reads
            sent = latest.get(f"reward {call.sid}")  # a reward it shows is the episode's so far (the latest non-null)
        if isinstance(sent, bool) or (isinstance(sent, float) and not math.isfinite(sent)):
            what = "a boolean" if isinstance(sent, bool) else "not a finite number"
            return failed(
                f"{call.tool}: the environment sent reward {json.dumps(sent)} ({what}, not a reward) and the client "
                f"reported {json.dumps(shown)} instead of an error",
                {"sent": sent, "reported": shown},
                call.answer.exchange if call.answer else None,
            )
        if not _reward_matches(sent, shown):
            what = "the episode's latest non-null reward" if "reward" in unsurfaced else "reward"
            return failed(f"{call.tool}: {what} sent {json.dumps(sent)}, reported {json.dumps(shown)}", {"sent": sent, "reported": shown})
        finished = output.get("finished") is True
        if "finished" in unsurfaced:
            if line.get("finished") is not True and not closing:
                continue  # not shown on this call
            finished = latest[f"finished {call.sid}"]  # shown once the episode has finished, by any call so far
        if finished != (line.get("finished") is True):
            what = "the episode's finished" if "finished" in unsurfaced else "finished"
            return failed(
                f"{call.tool}: {what} sent {json.dumps(finished)}, reported {json.dumps(line.get('finished'))}",
                {"sent": finished, "reported": line.get("finished")},
            )
    if not compared:
        return None  # not provoked: no successful call was reported
    if unsurfaced:
        why = "; ".join(f"per-call {name}: {reason}" for name, reason in unsurfaced.items())
        return not_applicable(
            f"not applicable call by call — the client never shows its user {' or '.join(unsurfaced)} per call ({why}); "
            f"what it does show was as sent",
            {"compared": len(compared), "unsurfaced": sorted(unsurfaced), "not_shown": held_back},
        )
    return passed(f"{len(compared)} reward(s) and finished flag(s) as sent", {"compared": len(compared)})


@client_check(
    "client.failure_as_error",
    title="A failed call (ok:false, an error event, no result, an HTTP error) is reported as an error, not as tool text",
    severity=R,
    spec="§12.9",
    remediation='Report a failed call as {"error": ...} (raise in your client): handing the failure on as if the tool had answered trains on it.',
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
    requires=_ADAPTER,
)
def failure_as_error(ctx: Context) -> CheckOutcome | None:
    failures = unreported = flagged = 0
    for call, line in ctx.aligned():
        failure = call.failure
        if failure is None:
            continue
        failures += 1
        unreported += line is None
        if line is not None and line.is_call and line.get("is_error") is True:
            flagged += 1  # an error result, flagged by the client itself (an agent's tool_result is_error), untranslated
            continue
        if line is not None and line.is_call:
            return failed(
                f"{call.tool} failed ({failure}) but the client reported it as the tool's answer: text {_short(line.get('text'), 80)!r}",
                {"tool": call.tool, "failure": failure},
                call.final.exchange,
            )
    errors = any(line.is_error for line in ctx.run.out.lines)
    made = ctx.traffic.made
    if flagged and not errors and made and made[-1].failure is not None:
        # An error result tells the model, which may recover (a later call succeeds); an episode that ended on one
        # tells its user nothing: the session was lost and the client's result reads as an episode without a reward.
        last = made[-1]
        return failed(
            f"{flagged} failed call(s) were handed to the model as error results (is_error) and the episode ended on "
            f"one — {last.tool}: {last.failure} — with no error reported to the client's user",
            {"tool": last.tool, "failure": last.failure, "flagged": flagged},
            last.final.exchange,
        )
    reported = errors or flagged > 0
    listings = [s.exchange for s in ctx.traffic.seen if s.exchange.status == PAYMENT_REQUIRED and protocol.is_discovery(s.path)]
    if listings and not reported:
        first = listings[0]
        return failed(
            f"{first.method} {first.url} was refused {first.status} (§13.12) and the client reported no error: it took "
            "the refusal for an answer (an empty listing)",
            {"refused_listings": len(listings)},
            first,
        )
    if not ctx.traffic.created and ctx.run.log and not reported:
        return failed("the session never opened, and the client reported no error", {"opened": False})
    if listings:
        return passed(f"{len(listings)} refused listing request(s) (402), reported as an error", {"refused_listings": len(listings)})
    if not failures and ctx.traffic.created:
        return None  # not provoked: no call failed in this case
    if failures and unreported == failures and not any(line.is_error for line in ctx.run.out.lines):
        return skipped(f"{failures} call(s) failed and the client wrote no line for them, neither text nor error: nothing to judge")
    said = f" ({flagged} as an error result the client flagged, is_error)" if flagged else ""
    return passed(f"{failures} failed call(s), each reported as an error{said}" if failures else "the failure to open the session was reported")


@client_check(
    "client.episode_completed",
    title="In a case a correct client survives, the client plays the script to its end",
    severity=R,
    spec="§12.4",
    remediation="Retry what the server says is transient (429/503 with Retry-After, 502/504) and resume cut streams, so an episode survives them.",
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
    # Only checks whose failure decides the verdict themselves: a broken rule (no env_name, a retry too soon) never
    # hides whether the episode was played to its end.
    requires=(*_ADAPTER, "client.session_per_run", "client.resume_by_task_id"),
)
def episode_completed(ctx: Context) -> CheckOutcome | None:
    run = ctx.run
    if expects_error(run):
        return None  # in this case (or after the 402 this client met) a correct client reports an error instead
    steps = run.script.steps
    made = ctx.traffic.made
    lines = ctx.lines
    if len(made) < len(steps) and not (made and made[-1].finished):
        # The evidence: the last call's answer, else the last request the server answered (a refused /create_session).
        last_seen = ctx.traffic.exchanges[-1] if ctx.traffic.exchanges else None
        shown = made[-1].final.exchange if made else last_seen
        if made and made[-1].failure:
            why = made[-1].failure
        elif last_seen is not None and (last_seen.status or 0) >= 400:
            why = f"its last request, {last_seen.method} {last_seen.url}, was answered {last_seen.status}"
        else:
            why = "no failure the server saw"
        return failed(
            f"the episode stopped after {len(made)} of {len(steps)} call(s) ({why}){_in_its_words(run)}",
            {"calls": len(made), "exit_code": run.exit_code},
            shown,
        )
    last = lines[len(made) - 1] if made and len(lines) >= len(made) else None
    if last is None or not last.is_call:
        return failed(f"the last call has no successful line in ORSBENCH_OUT{_in_its_words(run)}", {"calls": len(made)})
    if run.script.finished and last.get("finished") is not True:
        return failed("the episode ended without finished: true", {"finished": last.get("finished")})
    return passed(f"played {len(made)} call(s) to the end (reward {json.dumps(last.get('reward'))})", {"reward": last.get("reward")})


@client_check(
    "client.reward_convention",
    title="Which episode reward the client reports where the per-call rewards' sum and last differ",
    severity=ADV,
    spec="§12.10",
    remediation="Either convention is valid (§12.10); say which one your client uses, and use it everywhere.",
    role=Role.REPORT,
    effect=Effect.RULE,
    requires=_ADAPTER,
)
def reward_convention(ctx: Context) -> CheckOutcome | None:
    made = ctx.traffic.made
    # One episode's rewards: the last session's (a case of several runs reports each run's episode reward).
    rewards = [c.output.get("reward") for c in made if c.output is not None and c.sid == made[-1].sid]
    numbers = [float(r) for r in rewards if isinstance(r, (int, float)) and not isinstance(r, bool)]
    if len(numbers) < 2 or sum(numbers) == numbers[-1]:
        return None  # not provoked: the sum and the last reward agree
    episode = ctx.run.out.episode_reward
    conventions = {"sum": sum(numbers), "last non-null": numbers[-1]}
    measured = {"episode_reward": episode, **conventions}
    if episode is None:
        return passed(f"the client reports per-call rewards only (sum {sum(numbers):g}, last {numbers[-1]:g}); no episode reward", measured)
    used = [name for name, value in conventions.items() if isinstance(episode, (int, float)) and abs(float(episode) - value) < 1e-9]
    if used:
        return passed(f"episode reward {episode:g}: the {used[0]} convention", {**measured, "convention": used[0]})
    return warned(f"episode reward {episode!r} is neither the sum ({sum(numbers):g}) nor the last non-null reward ({numbers[-1]:g})", measured)


def _episode_rewards(ctx: Context) -> list[float | None]:
    """Each session's episode reward as the server sent it, in order: its last non-null reward, ``None`` where it failed."""
    out: list[float | None] = []
    for sid in ctx.traffic.created:
        calls = [c for c in ctx.traffic.made if c.sid == sid]
        if not calls or calls[-1].output is None:
            out.append(None)  # no call, or it ended on a failure: the episode failed
            continue
        rewards = [c.output.get("reward") for c in calls if c.output is not None and isinstance(c.output.get("reward"), (int, float))]
        out.append(float(rewards[-1]) if rewards else None)
    return out


@client_check(
    "client.aggregate_counts_failures",
    title="The aggregate a client reports over several episodes counts a failed episode (as 0, in its denominator)",
    severity=R,
    spec="§13.15",
    remediation="Average over every episode you ran, a failed one as 0 (or report it as a failure beside a mean over all): "
    "a mean over the scored episodes only reports a failing run as a good one.",
    role=Role.REPORT,
    effect=Effect.WRONG_DATA,
    requires=_ADAPTER,
    unreported=True,
)
def aggregate_counts_failures(ctx: Context) -> CheckOutcome | None:
    asked = ctx.run.case.episodes if ctx.run is not None else 1
    if asked < 2:
        return None  # not provoked: one episode
    aggregate = ctx.run.out.aggregate
    if aggregate is None:
        return skipped(f"the client reported no aggregate over its {asked} episodes (no aggregation of its own): nothing to judge")
    rewards = _episode_rewards(ctx)[:asked]
    scored = [r for r in rewards if r is not None]
    lost = asked - len(scored)
    if not lost:
        return None  # not provoked: no episode failed
    over_all = sum(scored) / asked
    over_scored = sum(scored) / len(scored) if scored else None
    reported, counted = aggregate.get("aggregate_reward"), aggregate.get("episodes")
    measured = {"episodes": asked, "failed": lost, "reported": reported, "counted": counted, "mean_over_all": over_all}
    if counted != asked:
        return failed(
            f"the client's aggregate {json.dumps(reported)} is over {counted} of the {asked} episodes it ran: {lost} failed "
            f"episode(s) left out (over all, failures as 0: {over_all:.4g})",
            measured,
        )
    if not isinstance(reported, (int, float)) or abs(float(reported) - over_all) > 1e-6:
        what = " — the mean over the scored ones only" if over_scored is not None and isinstance(reported, (int, float)) and abs(float(reported) - over_scored) <= 1e-6 else ""
        return failed(f"the client's aggregate is {json.dumps(reported)}{what}; over its {asked} episodes, failures as 0, it is {over_all:.4g}", measured)
    return passed(f"aggregate {over_all:.4g} over {asked} episodes, the {lost} failed one(s) counted as 0", measured)


def checks() -> list[ClientCheck]:
    """Every client check, in catalogue order."""
    return CLIENT_CHECKS.values()
