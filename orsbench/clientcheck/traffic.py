"""What the server saw, as an episode: sessions, logical tool calls and their attempts.

The request log is a flat list of exchanges; the client checks reason about
*calls* — "reveal(position=0), which took a 429, a cut stream and a resume" —
so this module groups the log once, the same way for every check:

* a fresh ``/call`` (no ``task_id`` in its body) starts a new logical call,
  unless it repeats the tool and input of the session's last call and that
  call has no answer yet (a 429, a 5xx, a cut stream): then it is another
  attempt of the same call (a retry, or a re-run after a cut);
* a ``/call`` carrying a ``task_id`` is a resume, filed under the call whose
  stream handed out that ``task_id``.

Both sources of traffic give the same typed view: a request-log entry read back
(``check-client``, ``matrix``: :func:`from_log`) and an exchange a live server
or proxy told its observers of (``check-client --hosted``, ``orsbench proxy``: :func:`seen_of`)
each become a :class:`Seen` — an :class:`~orsbench.wire.evidence.Exchange` built the one way
(:meth:`~orsbench.wire.evidence.Exchange.recorded` for a log entry), its
route, whether its answer ended normally and the secret names it carried — so
the checker's own readers (``result_of``, ``task_id_of``) classify the answers,
every client check reads one shape, and reports show the exchanges as evidence
exactly as ``orsbench check`` does.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench.checks.evidence import request_json, result_of, task_id_of
from orsbench.servers.request_log import Entry
from orsbench.wire.evidence import Exchange

_SECRETS = protocol.SECRETS_HEADER.lower()


def session_of(exchange: Exchange) -> str | None:
    """The session a request was sent in (its session header), or None.

    Header names come lower-cased from every server and proxy (ASGI says so); the protocol's own
    spelling is looked up too, for exchanges built by hand.
    """
    return session_in(exchange.request_headers)


def session_in(headers: dict[str, str]) -> str | None:
    """:func:`session_of` from a request's headers alone (as a request starts, before there is an exchange)."""
    return protocol.session_in(headers)


@dataclass(slots=True)
class Seen:
    """One request a client sent and the answer it got, as every client check reads it."""

    exchange: Exchange
    #: The route (the URL's path; on a hosted case, less the case's prefix).
    path: str
    #: The answer ended normally (``False``: cut, or never answered).
    complete: bool
    #: The names ``X-Secrets`` carried (never the values); ``None`` without a readable header.
    secret_names: tuple[str, ...] | None = None
    #: The session it was sent in (its ``X-Session-ID``), read once.
    sid: str | None = None


def from_log(entries: Iterable[dict[str, Any]]) -> list[Seen]:
    """The request log's entries (:mod:`orsbench.servers.request_log`) as :class:`Seen` requests."""
    out = []
    for data in entries:
        entry = Entry.from_json(data)
        names = entry.secret_names
        exchange = entry.exchange()
        out.append(Seen(exchange, entry.path, entry.complete, tuple(names) if names is not None else None, session_of(exchange)))
    return out


def secret_names(header: str | None) -> tuple[str, ...] | None:
    """The names a raw ``X-Secrets`` header carries, sorted (``None`` when absent or unreadable)."""
    if not header:
        return None
    try:
        decoded = json.loads(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError, RecursionError):
        return None
    return tuple(sorted(decoded)) if isinstance(decoded, dict) else None


def seen_of(exchange: Exchange, path: str | None = None) -> Seen:
    """An exchange a live server or proxy told its observers of as a :class:`Seen` (``path``: its route, else the
    URL's path). Its request headers are as the client sent them, so the secret names are read from ``X-Secrets`` here."""
    headers = exchange.request_headers
    header = headers.get(_SECRETS) or headers.get(protocol.SECRETS_HEADER)
    return Seen(
        exchange,
        path if path is not None else urlsplit(exchange.url).path,
        exchange.error is None and exchange.status is not None,
        secret_names(header) if header else None,
        session_of(exchange),
    )


def body_json(exchange: Exchange) -> dict[str, Any]:
    try:
        value = request_json(exchange)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class Attempt:
    """One ``/call`` request of a logical call."""

    exchange: Exchange
    #: A resume (the body named a ``task_id``) rather than a fresh call.
    resume: bool
    #: The task this attempt's stream is about (handed out, or asked for).
    task_id: str | None
    #: ``result_of``'s classification: ``result``, ``error``, ``bad-json``, ``no-end``, ``http``.
    kind: str
    value: Any
    #: The response ended normally (``False``: the connection was cut).
    complete: bool

    @property
    def answered(self) -> bool:
        """Whether this attempt carried the call's answer (a result or an error event)."""
        return self.kind in ("result", "error", "bad-json")

    @property
    def cut_after_task_id(self) -> bool:
        """A 200 stream that handed out its ``task_id`` and then stopped without an answer."""
        return self.exchange.status == 200 and self.task_id is not None and not self.answered


@dataclass
class Call:
    """One logical tool call: the attempts a client made to get one answer."""

    sid: str | None
    tool: str
    input: Any
    attempts: list[Attempt] = field(default_factory=list)
    #: Made after an earlier call of the session had answered ``finished: true``.
    after_finish: bool = False

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    @property
    def answer(self) -> Attempt | None:
        """The attempt that carried the answer (the last one that did), if any."""
        return next((a for a in reversed(self.attempts) if a.answered), None)

    @property
    def output(self) -> dict[str, Any] | None:
        """The ``output`` of an ``ok: true`` answer (``None``: the call did not succeed)."""
        answer = self.answer
        if answer is None or answer.kind != "result" or answer.value.get("ok") is not True:
            return None
        output = answer.value.get("output")
        return output if isinstance(output, dict) else None

    @property
    def failure(self) -> str | None:
        """How the call failed, in words (``None``: it succeeded)."""
        if self.output is not None:
            return None
        answer = self.answer
        if answer is None:
            final = self.final
            if final.kind == "http":
                return f"HTTP {final.value}" if final.value is not None else "no answer"
            return "the stream ended without a result"
        if answer.kind == "error":
            return f"an error event: {str(answer.value)[:200]}"
        if answer.kind == "bad-json":
            return "a result that is not a JSON object"
        return f"ok:false ({answer.value.get('reason')}): {str(answer.value.get('error'))[:200]}"

    @property
    def finished(self) -> bool:
        output = self.output
        return bool(output is not None and output.get("finished") is True)

    @property
    def fresh_runs(self) -> int:
        return sum(1 for a in self.attempts if not a.resume and a.exchange.status == 200)


def text_of(output: dict[str, Any]) -> str:
    """The text an output shows a model: its text blocks' ``text``, concatenated in order."""
    blocks = output.get("blocks") or []
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")


@dataclass
class Traffic:
    """The traffic of one client (a case's whole log, or one live session's requests), grouped."""

    seen: list[Seen]
    exchanges: list[Exchange]
    calls: list[Call]
    #: Session ids the server created (``/create`` answered 200), in order.
    created: list[str]
    #: Session ids a ``/delete`` was sent for.
    deleted: set[str]
    creates: list[Exchange]
    #: Requests seen but not kept (a live session past its bound: a storm is counted, not stored).
    dropped: int = 0

    @property
    def made(self) -> list[Call]:
        """The calls that count for the episode (those made before ``finished``)."""
        return [c for c in self.calls if not c.after_finish]


def group(seen: list[Seen], dropped: int = 0) -> Traffic:
    """Group one client's requests, in the order they were sent, into sessions and logical calls."""
    exchanges = [s.exchange for s in seen]
    calls: list[Call] = []
    by_task: dict[str, Call] = {}
    last_in_session: dict[str | None, Call] = {}
    finished_sessions: set[str | None] = set()
    created: list[str] = []
    deleted: set[str] = set()
    creates: list[Exchange] = []
    for request in seen:
        exchange, path, sid = request.exchange, request.path, request.sid
        if exchange.method == "POST" and path == protocol.CREATE:
            creates.append(exchange)
            if exchange.status == 200 and sid:
                created.append(sid)
            continue
        if exchange.method == "POST" and path == protocol.DELETE:
            if sid:
                deleted.add(sid)
            continue
        if not (exchange.method == "POST" and protocol.is_call(path)):
            continue
        body = body_json(exchange)
        asked = body.get("task_id")
        kind, value = result_of(exchange)
        task_id = asked if asked is not None else task_id_of(exchange)
        attempt = Attempt(exchange, asked is not None, task_id, kind, value, request.complete)
        if asked is not None and asked in by_task:
            call = by_task[asked]
        else:
            previous = last_in_session.get(sid)
            same = previous is not None and previous.tool == body.get("name") and previous.input == body.get("input")
            if same and previous is not None and previous.answer is None and not asked:
                call = previous
            else:
                call = Call(sid, str(body.get("name")), body.get("input"), after_finish=sid in finished_sessions)
                calls.append(call)
                last_in_session[sid] = call
        call.attempts.append(attempt)
        if task_id is not None and not attempt.resume:
            by_task[task_id] = call
        if call.finished and not call.after_finish:
            finished_sessions.add(sid)
    return Traffic(seen, exchanges, calls, created, deleted, creates, dropped)
