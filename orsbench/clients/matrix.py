"""Run the compatibility matrix into a typed result (:class:`~orsbench.clientcheck.results.MatrixResult`).

Cells sharing a server configuration play on one server, client after
client (so the server's stats deltas belong to one episode); up to
``parallel`` servers play at once, since most of a cell is waiting. A global
budget bounds the run: cells not reached in time are reported ``not run``.
:mod:`orsbench.reports.clients` writes the result (JSON, Markdown, the
terminal's summary; the HTML page in :mod:`orsbench.reports.html`).

JSON contract (``MatrixResult.to_json``)::

    {"clients": {name: {"version", "title", "defects": [{"id", "summary"}, ...]}},
     "servers": [names], "server_defects": {name: [{"id", "summary"}]},
     "cells": [{"client", "server", "scenario", "profile", "verdict", "expected",
     "defects": [ids], "rule_defects": {check: id}, "elapsed", "problems", "rules", "error"}, ...]}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from orsbench.clientcheck.results import NOT_RUN, ClientInfo, MatrixCell, MatrixResult, PinnedDefect
from orsbench.clients import cells as C
from orsbench.clientcheck.runner import POLL_S
from orsbench.clients.run import ClientOutcome, ClientRun, preload
from orsbench.clients.targets import CLIENT_TARGETS, ELSEWHERE
from orsbench.config import ServerConfig
from orsbench.scenarios import suite_params
from orsbench.servers.launch import ServerStartError, start
from orsbench.upstream import defects as D
from orsbench.upstream.since import load as recorded_since
from orsbench.verdict import Verdict

def _hangs(cell: C.Cell) -> bool:
    """Whether the pinned defects predict ``cell`` to hang (it waits out its whole deadline)."""
    return C.predicted(cell) == Verdict.HANGS


def _server_key(cell: C.Cell) -> tuple[str, str, str, str]:
    """The server a cell plays on: cells with the same key share one, client after client.

    A cell gets a server of its own where its profile says so (a seeded fault must meet each client
    afresh), and where it is predicted to hang: a hang lasts its whole deadline (plus the client's
    start-up), and seven of them client after client on one server made a 2-minute lane of waiting.
    """
    own = cell.client if _hangs(cell) else ""
    if cell.profile is None:
        return (cell.server, cell.scenario, "", own)
    per_client = C.profile_of(cell).per_client
    return (cell.server, cell.scenario, cell.profile, cell.client if per_client else own)


def _defects(defects: list[D.Defect]) -> tuple[PinnedDefect, ...]:
    return tuple(PinnedDefect(d.id, d.summary) for d in defects)


def header(clients: list[str], servers: list[str]) -> MatrixResult:
    """A result with the clients and servers of a matrix, and no cell yet; each client with since when its pinned defects
    fail, as recorded (:mod:`orsbench.upstream.since`)."""
    since = recorded_since()
    infos = {
        name: ClientInfo(
            CLIENT_TARGETS[name].version,
            CLIENT_TARGETS[name].title,
            _defects(C.client_defects(name)),
            CLIENT_TARGETS[name].consumer.summary(),
            since.get(name, {}),
        )
        for name in clients
    }
    return MatrixResult(infos, list(servers), {name: list(_defects(C.server_defects(name))) for name in servers}, elsewhere=list(ELSEWHERE))


def cell_result(cell: C.Cell, verdict: Verdict | str, outcome: ClientOutcome | None = None, *, error: str | None = None) -> MatrixCell:
    """One cell of the result: its verdict (live or predicted), what a correct client gets, the defects that explain it.

    A live cell carries its run's judgement as it is (:attr:`MatrixCell.judgement`).
    """
    shown = MatrixCell(
        cell.client,
        cell.server,
        cell.scenario,
        cell.profile,
        outcome.verdict if outcome is not None else verdict,
        C.expected(cell),
        [d.id for d in C.cell_defects(cell)],
        {check: d.id for check, d in C.rule_defects(cell).items()},
    )
    if outcome is not None:
        shown.elapsed, shown.judgement, shown.error = round(outcome.elapsed, 2), outcome.judgement, outcome.error
    elif error is not None:
        shown.error = error
    return shown


def predicted(cells: list[C.Cell], clients: list[str], servers: list[str]) -> MatrixResult:
    """The matrix the pinned defects predict (no run): what ``docs/compatibility.md`` shows."""
    result = header(clients, servers)
    result.cells = [cell_result(c, C.predicted(c)) for c in cells]
    return result


def run(
    cells: list[C.Cell],
    clients: list[str],
    servers: list[str],
    *,
    budget: float = 900.0,
    parallel: int = 3,
    progress: Callable[[str], None] = lambda line: None,
    on_outcome: Callable[[C.Cell, ClientOutcome], None] = lambda cell, outcome: None,
) -> MatrixResult:
    """Play ``cells``: one server per configuration, ``parallel`` servers at once, client after client on each.

    Everything happens on the calling thread: episodes are forked children (check-client's runner with a
    :class:`~orsbench.clientcheck.process.Fork` launch), and a fork taken while another thread holds a lock
    (an import, a connection pool) can leave the child waiting forever.
    A client's :attr:`~orsbench.clients.targets.ClientTarget.concurrency` caps how many of its episodes
    play at once (Inspect evals starve each other on two cores). A cell that hangs although no
    defect predicts it is played once more: on a loaded machine a child can miss its deadline.
    """
    preload(clients)
    queues: dict[tuple[str, str, str, str], list[C.Cell]] = {}
    for cell in cells:
        queues.setdefault(_server_key(cell), []).append(cell)
    # The lanes that wait longest start first, so their waiting overlaps the rest instead of trailing it.
    pending = sorted(queues, key=lambda key: not any(map(_hangs, queues[key])))
    lanes: dict[tuple[str, str, str, str], Any] = {}  # key -> RunningServer
    active: dict[tuple[str, str, str, str], tuple[C.Cell, ClientRun, bool]] = {}
    results: dict[C.Cell, MatrixCell] = {}
    deadline = time.monotonic() + budget
    busy = {name: 0 for name in CLIENT_TARGETS}

    def limit_of(cell: C.Cell) -> float:
        return C.profile_of(cell).deadline if cell.profile else 30.0

    def launch(key: tuple[str, str, str, str], cell: C.Cell, replay: bool = False) -> None:
        busy[cell.client] += 1
        expect = "error" if C.facts(cell).expects_error else "finish"
        played = C.profile_of(cell) if cell.profile else None
        sdk_urls = played.sdk_urls if played is not None else True
        terminate_on = played.terminate_on if played is not None else None
        run = ClientRun(
            cell.client,
            lanes[key],
            cell.script,
            limit_of(cell),
            expect=expect,
            sdk_urls=sdk_urls,
            terminate_on=terminate_on,
            runs=cell.runs,
            episodes=cell.episodes,
        )
        active[key] = (cell, run, replay)

    def close(key: tuple[str, str, str, str]) -> None:
        lanes.pop(key).stop()

    try:
        while pending or lanes:
            while pending and len(lanes) < parallel and time.monotonic() < deadline:
                key = pending.pop(0)
                impl, scenario, profile, _ = key
                config = C.profile_of(queues[key][0]).config() if profile else ServerConfig(request_log=True)
                try:
                    lanes[key] = start(scenario, impl=impl, config=config, params=None if profile else suite_params(scenario))
                except ServerStartError as exc:  # on a starved machine a server can miss its start-up: its cells are not run
                    first = str(exc).splitlines()[0]
                    progress(f"{impl}:{profile or scenario}: its server did not start ({first}); {len(queues[key])} cell(s) not run")
                    for cell in queues.pop(key):
                        results[cell] = cell_result(cell, NOT_RUN, error=f"the server did not start: {first}")
            if time.monotonic() >= deadline:
                pending.clear()
            for key in list(lanes):
                if key in active:
                    continue
                queue = queues[key]
                if not queue or time.monotonic() + limit_of(queue[0]) > deadline:
                    queue.clear()
                    close(key)
                    continue
                if busy[queue[0].client] < CLIENT_TARGETS[queue[0].client].concurrency:
                    launch(key, queue.pop(0))
            if not active:
                continue
            time.sleep(POLL_S)
            for key, (cell, run, replayed) in list(active.items()):
                if not run.done():
                    continue
                outcome = run.finish()
                del active[key]
                busy[cell.client] -= 1
                if outcome.hung and not replayed and not _hangs(cell):
                    progress(f"{cell.id}: hung at {run.deadline:g} s; playing it once more to confirm")
                    launch(key, cell, replay=True)
                    continue
                results[cell] = cell_result(cell, outcome.verdict, outcome)
                on_outcome(cell, outcome)
                flag = "" if outcome.verdict == C.predicted(cell) else f"  (predicted: {C.predicted(cell)})"
                progress(f"[{len(results)}/{len(cells)}] {cell.id}: {outcome.verdict}{flag} {outcome.elapsed:.1f}s")
    finally:
        for key in list(lanes):
            close(key)
    result = header(clients, servers)
    result.cells = [results.get(c) or cell_result(c, NOT_RUN) for c in cells]
    return result
