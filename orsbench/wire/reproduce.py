"""A ``curl`` reproducer for a finding: the exchanges that showed it, replayable from a shell.

A reader who has to act on a failure wants the one command that shows it on
their own machine (schemathesis prints one per failure). A reproducer is a
short POSIX shell script:

* ``BASE`` is taken from the environment, defaulting to the URL the run
  checked: a server orsbench started (``--serve``, ``--app``, ``--cmd``) is gone
  when the run ends, so ``BASE=http://127.0.0.1:8080 sh repro.sh`` replays it
  against the one the reader starts;
* a session the exchange needs is opened first, as the run opened it, and its
  id is carried over in a shell variable (``$SID1``): ``/create_session``'s
  ``task_id`` is read back, otherwise a fresh id is made up, since a real
  session id is single-use;
* the session's ``/create`` is replayed before the exchange itself (the
  calls in between are not: see :func:`steps`), and a ``trap`` deletes every
  session the script opened when it exits (``/delete``, and ``/delete_session``
  for one from ``/create_session``), however it exits — a replay leaves no
  session holding the environment;
* secrets are never written out: ``X-Secrets``, ``X-API-Key`` and
  ``Authorization`` become ``$ORS_SECRETS`` / ``$ORS_API_KEY`` references
  the reader sets themselves.

Only the wire layer is involved: the script is built from
:class:`~orsbench.wire.evidence.Exchange` objects, never from a check.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Sequence
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench.wire.evidence import Exchange

#: At most this many of a finding's exchanges are replayed (the first ones; later ones tend to repeat them).
MAX_EVIDENCE = 3

#: Seconds each ``curl`` may take (a stream that never ends cannot hang the script).
TIME_LIMIT = 30

#: Request headers whose values are secrets: the reproducer names an environment variable instead.
SECRET_VARIABLES = {
    protocol.SECRETS_HEADER.lower(): "ORS_SECRETS",
    protocol.API_KEY_HEADER.lower(): "ORS_API_KEY",
    "authorization": "ORS_AUTHORIZATION",
}

#: Headers curl sets by itself, or that would only add noise.
_DROPPED = {"user-agent", "content-length", "host", "accept-encoding", "connection"}


def _base_and_path(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return base, path


def _quote(text: str, sids: dict[str, str]) -> str:
    """Shell-quote ``text``, with every known session id (or other value in ``sids``) replaced by its variable (expanded)."""
    pieces: list[tuple[str, bool]] = [(text, False)]  # (text, is a variable)
    for sid, var in sorted(sids.items(), key=lambda kv: -len(kv[0])):
        spliced: list[tuple[str, bool]] = []
        for piece, is_var in pieces:
            if is_var:
                spliced.append((piece, True))
                continue
            chunks = piece.split(sid)
            for i, chunk in enumerate(chunks):
                if i:
                    spliced.append((f"${var}", True))
                spliced.append((chunk, False))
        pieces = spliced
    out = "".join(f'"{p}"' if is_var else (shlex.quote(p) if p else "") for p, is_var in pieces)
    return out or "''"


def _session_of(exchange: Exchange) -> str | None:
    return protocol.session_in(exchange.request_headers)


def _opened_by(history: Sequence[Exchange], sid: str) -> Exchange | None:
    """The ``/create_session`` exchange whose ``task_id`` was ``sid``, if the run made one."""
    for ex in history:
        if ex.url.endswith(protocol.CREATE_SESSION) and ex.task_id == sid:
            return ex
    return None


def _is_session(history: Sequence[Exchange], sid: str) -> bool:
    """Whether ``sid`` named a session the run itself created (as opposed to a made-up id it probed with)."""
    return any(_session_of(ex) == sid and ex.url.endswith(protocol.CREATE) for ex in history)


def _curl(exchange: Exchange, sids: dict[str, str], *, api_key: bool) -> str:
    _, path = _base_and_path(exchange.url)
    args = [f"curl -sS -i -N -m {TIME_LIMIT:g}", "-X", exchange.method, f'"$BASE"{_quote(path, sids)}']
    seen_key = False
    for name, value in exchange.request_headers.items():
        lower = name.lower()
        if lower in _DROPPED:
            continue
        if lower in SECRET_VARIABLES:
            seen_key = seen_key or lower == protocol.API_KEY_HEADER.lower()
            args += ["-H", f'"{name}: ${SECRET_VARIABLES[lower]}"']
        else:
            args += ["-H", _quote(f"{name}: {value}", sids)]
    if api_key and not seen_key:
        args += ["-H", f'"{protocol.API_KEY_HEADER}: ${SECRET_VARIABLES[protocol.API_KEY_HEADER.lower()]}"']
    if exchange.request_body:
        body = exchange.request_body.decode("utf-8", errors="replace")
        args += ["--data-binary", _body(body, sids)]
    return " ".join(args)


#: A run of one printable ASCII character this long or longer is written as a command that makes it.
_RUN = re.compile(r"([ -~])\1{1023,}")


def _body(text: str, sids: dict[str, str]) -> str:
    """``text`` as one shell word (:func:`_quote`), each long run of one character made by ``head | tr`` instead of
    spelt out: the 2 MiB ``/call`` of ``deployment.body_size`` is a reproducer of a few lines, not of 2 MiB."""
    out: list[str] = []
    last = 0
    for match in _RUN.finditer(text):
        if match.start() > last:
            out.append(_quote(text[last : match.start()], sids))
        out.append(f'"$(head -c {len(match.group(0))} /dev/zero | tr {shlex.quote(chr(92) + "0")} {shlex.quote(match.group(1))})"')
        last = match.end()
    if last < len(text) or not out:
        out.append(_quote(text[last:], sids))
    return "".join(out)


def steps(evidence: Sequence[Exchange], history: Sequence[Exchange]) -> tuple[list[Exchange], dict[str, str]]:
    """The exchanges to replay, in the run's order, and the session ids that become variables.

    A session the evidence used is set up again (its ``/create``); the requests the session made
    in between are not replayed, since the exchange that shows a defect is what a reader wants to
    see and a check that depends on an earlier call (a call after ``finished``) lists that call as
    evidence too.
    """
    order = {id(ex): i for i, ex in enumerate(history)}
    wanted: dict[int, Exchange] = {}
    sids: dict[str, str] = {}
    for target in evidence[:MAX_EVIDENCE]:
        wanted[id(target)] = target
        sid = _session_of(target)
        if sid is None or not _is_session(history, sid):
            continue
        sids.setdefault(sid, f"SID{len(sids) + 1}")
        end = order.get(id(target), len(history))
        create = next((ex for ex in history[:end] if _session_of(ex) == sid and ex.url.endswith(protocol.CREATE)), None)
        if create is not None:
            wanted.setdefault(id(create), create)
    ordered = sorted(wanted.values(), key=lambda ex: order.get(id(ex), len(history)))
    return ordered, sids


def reproducer(
    evidence: Sequence[Exchange],
    history: Sequence[Exchange] = (),
    *,
    api_key: bool = False,
    note: str = "",
    sequence: Sequence[Exchange] | None = None,
) -> str | None:
    """A shell script that sends ``evidence`` again (with the session set-up it needs); ``None`` without evidence.

    ``history`` is every exchange of the run, in order (where the session set-up comes from);
    ``api_key`` says the run sent an API key (the script then sends ``$ORS_API_KEY``).
    ``sequence``, for a finding that involves several sessions, is every request they sent in the
    order sent: the script replays exactly those (see :func:`sequence_steps`) instead of the evidence.
    """
    if not evidence and not sequence:
        return None
    if sequence:
        return _sequence_script(list(sequence), history, api_key=api_key, note=note)
    replayed, sids = steps(evidence, history)
    base, _ = _base_and_path(evidence[0].url)
    lines = []
    if note:
        lines += [f"# {line}" for line in note.splitlines()]
    lines.append("# BASE: the server to send to (default: the one this run checked; a server orsbench started is gone now)")
    lines.append(f'BASE="${{BASE:-{base}}}"' if _plain(base) else f'[ -n "${{BASE:-}}" ] || BASE={shlex.quote(base)}')
    secrets = {var for ex in replayed for name, var in SECRET_VARIABLES.items() if name in {h.lower() for h in ex.request_headers}}
    if api_key:
        secrets.add(SECRET_VARIABLES[protocol.API_KEY_HEADER.lower()])
    for var in sorted(secrets):
        lines.append(f'# set ${var} first (orsbench never writes secrets out): export {var}=...')
    key = f' -H "{protocol.API_KEY_HEADER}: $ORS_API_KEY"' if api_key else ""
    lines += _sessions(sids, history, key)
    rendered = [_curl(ex, sids, api_key=api_key) for ex in replayed]
    for i, line in enumerate(rendered):
        lines.append(line if i == len(rendered) - 1 else line + "; echo")
    return "\n".join(lines)


#: At most this many requests of a multi-session finding are replayed (the first ones). Large enough for the largest
#: isolation scene whole (eight sessions at once, each created, prompted, playing a script of up to 13 calls and
#: deleted: 136): a mix-up on the calls that finish the episodes is only seen in the last round, and a script cut
#: before it would show nothing.
MAX_SEQUENCE = 160
#: A pause of the run at least this long (seconds) is kept in a multi-session script (``sleep``): an idle session
#: waiting out a TTL, a ping sent into a running call.
PAUSE_S = 0.1
#: What each request of a multi-session script prints after its answer: how long it took (a ping that waited shows).
_TOOK = " -w '\\n(took %{time_total} s)\\n'"


def sequence_steps(sequence: Sequence[Exchange]) -> list[list[Exchange]]:
    """``sequence`` cut into batches: one request after another, and requests that were in flight together.

    A batch of several was sent at once (each started before another had finished): the script sends
    them at once too (``&`` and ``wait``), since a race shows only when the requests meet.
    """
    batches: list[list[Exchange]] = []
    end = float("-inf")
    for exchange in sequence[:MAX_SEQUENCE]:
        if batches and exchange.started_at and exchange.started_at < end:
            batches[-1].append(exchange)
        else:
            batches.append([exchange])
        end = max(end if len(batches[-1]) > 1 else float("-inf"), exchange.started_at + exchange.elapsed)
    return batches


def _task_ids(sequence: Sequence[Exchange]) -> tuple[dict[int, str], dict[int, str]]:
    """Calls whose task id a later request of the sequence sends back, and those requests: ``$TASKn`` links them.

    A resume is linked to the last earlier call of its own session that was given that id (else of any
    session): when two sessions were handed the same id (a per-session counter), the script still resumes
    the one the run meant. Returns ``({id(call): var}, {id(resume): var})``.
    """
    calls: dict[int, str] = {}
    resumes: dict[int, str] = {}
    for n, exchange in enumerate(sequence):
        sent = _task_id_sent(exchange)
        if sent is None:
            continue
        earlier = [e for e in sequence[:n] if e.task_id == sent and _task_id_sent(e) is None]
        own = [e for e in earlier if _session_of(e) == _session_of(exchange)]
        source = (own or earlier or [None])[-1]
        if source is None:
            continue
        var = calls.setdefault(id(source), f"TASK{len(calls) + 1}")
        resumes[id(exchange)] = var
    return calls, resumes


def _task_id_sent(exchange: Exchange) -> str | None:
    try:
        body = json.loads(exchange.request_body) if exchange.request_body else None
    except ValueError:
        return None
    value = body.get("task_id") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


def _sequence_script(sequence: list[Exchange], history: Sequence[Exchange], *, api_key: bool, note: str) -> str:
    """The script of a multi-session finding: every request of its sessions, in the order sent, then their deletes."""
    sids: dict[str, str] = {}
    for exchange in sequence:
        sid = _session_of(exchange)
        if sid is not None and sid not in sids and _is_session(history or sequence, sid):
            sids[sid] = f"SID{len(sids) + 1}"
    stores, sends = _task_ids(sequence)
    base, _ = _base_and_path(sequence[0].url)
    lines = [f"# {line}" for line in note.splitlines()] if note else []
    lines.append(
        f"# {len(sequence[:MAX_SEQUENCE])} requests of {len(sids) or 'several'} sessions, in the order they were sent "
        "(requests sent at once are sent at once: & and wait); every session is deleted at the end"
    )
    lines.append("# BASE: the server to send to (default: the one this run checked; a server orsbench started is gone now)")
    lines.append(f'BASE="${{BASE:-{base}}}"' if _plain(base) else f'[ -n "${{BASE:-}}" ] || BASE={shlex.quote(base)}')
    secrets = {var for ex in sequence for name, var in SECRET_VARIABLES.items() if name in {h.lower() for h in ex.request_headers}}
    if api_key:
        secrets.add(SECRET_VARIABLES[protocol.API_KEY_HEADER.lower()])
    for var in sorted(secrets):
        lines.append(f'# set ${var} first (orsbench never writes secrets out): export {var}=...')
    key = f' -H "{protocol.API_KEY_HEADER}: $ORS_API_KEY"' if api_key else ""
    lines += _sessions(sids, history or sequence, key)
    count = 0
    previous: float | None = None
    batches = sequence_steps(sequence)
    if any(len(batch) > 1 for batch in batches):
        lines.append('OUT_DIR=$(mktemp -d)  # what the requests sent at once answer, printed in order once they are all done')
    for batch in batches:
        together = len(batch) > 1
        start = batch[0].started_at
        if previous is not None and start and start - previous >= PAUSE_S:
            lines.append(f"sleep {start - previous:.2f}  # the run waited here")
        shown_after: list[str] = []
        for exchange in batch:
            count += 1
            who = sids.get(_session_of(exchange) or "")
            path = _base_and_path(exchange.url)[1].split("?")[0]
            marker = f"echo '### {count}: {exchange.method} {path}{f' ({who})' if who else ''}{' (at once)' if together else ''}'"
            shown, markers = _marked(exchange, sends.get(id(exchange)))
            curl = _stored(_curl(shown, {**sids, **markers}, api_key=api_key) + _TOOK, stores.get(id(exchange)))
            if together:
                offset = exchange.started_at - start
                pause = f"sleep {offset:.2f}; " if offset >= PAUSE_S / 2 else ""
                lines.append(f'{{ {pause}{curl}; echo; }} > "$OUT_DIR/{count}" 2>&1 &')
                shown_after += [marker, f'cat "$OUT_DIR/{count}"']
            else:
                lines += [marker, f"{curl}; echo"]
        if together:
            lines.append("wait")
            lines += shown_after
        previous = max(e.started_at + e.elapsed for e in batch)
    if any(len(batch) > 1 for batch in batches):
        lines.append('rm -rf "$OUT_DIR"')
    return "\n".join(lines)


#: Stands in a request body for a task id that the script reads back from an earlier answer.
_MARK = "@@orsbench-{}@@"


def _marked(exchange: Exchange, var: str | None) -> tuple[Exchange, dict[str, str]]:
    """``exchange`` with the task id its body sends back replaced by a marker, and ``{marker: var}``."""
    if var is None:
        return exchange, {}
    body = json.loads(exchange.request_body)
    body["task_id"] = _MARK.format(var)
    return dataclasses.replace(exchange, request_body=json.dumps(body).encode()), {_MARK.format(var): var}


def _stored(curl: str, var: str | None) -> str:
    """A call whose task id is resumed later keeps it in ``$var`` as it prints its answer."""
    if var is None:
        return curl
    return (
        f"OUT=$({curl}); printf '%s\\n' \"$OUT\"; "
        f"{var}=$(printf '%s\\n' \"$OUT\" | tr -d '\\r' | sed -n '/^event: task_id/{{n;s/^data: *//p;q;}}')"
    )


def _sessions(sids: dict[str, str], history: Sequence[Exchange], key: str) -> list[str]:
    """The lines that open each session's id (``/create_session`` as the run did, else a made-up one) and the
    ``trap`` that deletes every one of them however the script ends."""
    lines: list[str] = []
    from_sessions = False
    for sid, var in sids.items():
        if _opened_by(history, sid) is not None:
            from_sessions = True
            lines.append(
                f"{var}=$(curl -sS -N -X POST \"$BASE\"{protocol.CREATE_SESSION}{key} "
                "| sed -n 's/^data: *//p' | head -n 1 | tr -d '\\r')"
            )
        else:
            lines.append(f'{var}="orsbench-repro-$$-{var.lower()}"')
    if sids:
        # Set before the first request: the sessions go however the script ends (a failed curl, Ctrl-C).
        routes = (protocol.DELETE, protocol.DELETE_SESSION) if from_sessions else (protocol.DELETE,)
        each = " ".join(f'"${var}"' for var in sids.values())
        lines.append(f"trap 'for sid in {each}; do")
        lines += [f"  {_delete(route, key)}" for route in routes]
        lines.append("done' EXIT")
    return lines


def _plain(text: str) -> bool:
    """Whether ``text`` can stand inside double quotes as it is (a URL almost always can)."""
    return not any(c in text for c in '"$`\\!')


def _delete(route: str, key: str) -> str:
    """One silent cleanup request for ``$sid`` (inside the single-quoted trap: double quotes only)."""
    return f'curl -sS -o /dev/null -m {TIME_LIMIT:g} -X POST "$BASE"{route} -H "{protocol.SESSION_HEADER}: $sid"{key}'
