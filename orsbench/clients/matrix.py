"""Run the compatibility matrix and render it (JSON and a per-client Markdown report).

Cells sharing a server configuration play on one server, client after
client (so the server's stats deltas belong to one episode); up to
``parallel`` servers play at once, since most of a cell is waiting. A global
budget bounds the run: cells not reached in time are reported ``not run``.

JSON contract::

    {"clients": {name: {"version": ..., "defects": [{"id", "summary"}, ...]}},
     "servers": [names], "cells": [{"client", "server", "scenario", "profile",
     "verdict", "expected", "defects": [ids], "rule_defects": {check: id},
     "elapsed", "problems", "rules", "error"}, ...]}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from orsbench.clientcheck.profiles import profiles
from orsbench.clients import cells as C
from orsbench.clientcheck.runner import POLL_S
from orsbench.clients.run import VERDICTS, ClientOutcome, ClientRun, preload
from orsbench.clients.targets import CLIENT_TARGETS, ELSEWHERE
from orsbench.config import ServerConfig
from orsbench.scenarios import suite_params
from orsbench.servers.launch import ServerStartError, start
from orsbench.verdict import Verdict

NOT_RUN = "not run"
SYMBOL = {
    Verdict.WORKS: "✅ works",
    Verdict.FAILS_CLEARLY: "🟨 fails clearly",
    Verdict.FAILS_SILENTLY: "❌ fails silently",
    Verdict.HANGS: "⛔ hangs",
    NOT_RUN: "· not run",
}
JSON = dict[str, Any]


def _server_key(cell: C.Cell) -> tuple[str, str, str, str]:
    if cell.profile is None:
        return (cell.server, cell.scenario, "", "")
    per_client = C.profile_of(cell).per_client
    return (cell.server, cell.scenario, cell.profile, cell.client if per_client else "")


def header(clients: list[str], servers: list[str]) -> JSON:
    return {
        "clients": {
            name: {
                "version": CLIENT_TARGETS[name].version,
                "title": CLIENT_TARGETS[name].title,
                "consumer": CLIENT_TARGETS[name].consumer.summary(),
                "defects": [{"id": d.id, "summary": d.summary} for d in C.client_defects(name)],
            }
            for name in clients
        },
        "servers": servers,
        "server_defects": {name: [{"id": d.id, "summary": d.summary} for d in C.server_defects(name)] for name in servers},
    }


def cell_json(cell: C.Cell, verdict: str, **extra: Any) -> JSON:
    return {
        "client": cell.client,
        "server": cell.server,
        "scenario": cell.scenario,
        "profile": cell.profile,
        "verdict": verdict,
        "expected": C.expected(cell),
        "defects": [d.id for d in C.cell_defects(cell)],
        "rule_defects": {check: d.id for check, d in C.rule_defects(cell).items()},
        **extra,
    }


def predicted(cells: list[C.Cell], clients: list[str], servers: list[str]) -> JSON:
    """The matrix the pinned defects predict (no run): what ``docs/compatibility.md`` shows."""
    return {**header(clients, servers), "cells": [cell_json(c, C.predicted(c)) for c in cells]}


def run(
    cells: list[C.Cell],
    clients: list[str],
    servers: list[str],
    *,
    budget: float = 900.0,
    parallel: int = 3,
    progress: Callable[[str], None] = lambda line: None,
    on_outcome: Callable[[C.Cell, ClientOutcome], None] = lambda cell, outcome: None,
) -> JSON:
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
    pending = list(queues)
    lanes: dict[tuple[str, str, str, str], Any] = {}  # key -> RunningServer
    active: dict[tuple[str, str, str, str], tuple[C.Cell, ClientRun, bool]] = {}
    results: dict[C.Cell, JSON] = {}
    deadline = time.monotonic() + budget
    busy = {name: 0 for name in CLIENT_TARGETS}

    def limit_of(cell: C.Cell) -> float:
        return C.profile_of(cell).deadline if cell.profile else 30.0

    def launch(key: tuple[str, str, str, str], cell: C.Cell, replay: bool = False) -> None:
        busy[cell.client] += 1
        expect = "error" if C.facts(cell).expects_error else "finish"
        sdk_urls = C.profile_of(cell).sdk_urls if cell.profile else True
        active[key] = (cell, ClientRun(cell.client, lanes[key], cell.script, limit_of(cell), expect=expect, sdk_urls=sdk_urls), replay)

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
                        results[cell] = cell_json(cell, NOT_RUN, error=f"the server did not start: {first}")
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
                if outcome.hung and not replayed and C.predicted(cell) != "hangs":
                    progress(f"{cell.id}: hung at {run.deadline:g} s; playing it once more to confirm")
                    launch(key, cell, replay=True)
                    continue
                results[cell] = cell_json(
                    cell, outcome.verdict, elapsed=round(outcome.elapsed, 2), problems=outcome.problems, rules=outcome.rules, error=outcome.error
                )
                on_outcome(cell, outcome)
                flag = "" if outcome.verdict == C.predicted(cell) else f"  (predicted: {C.predicted(cell)})"
                progress(f"[{len(results)}/{len(cells)}] {cell.id}: {outcome.verdict}{flag} {outcome.elapsed:.1f}s")
    finally:
        for key in list(lanes):
            close(key)
    rows = [results.get(c) or cell_json(c, NOT_RUN) for c in cells]
    return {**header(clients, servers), "cells": rows}


def summary(result: JSON) -> dict[str, dict[str, int]]:
    """Verdict counts per client."""
    out: dict[str, dict[str, int]] = {}
    for row in result["cells"]:
        counts = out.setdefault(row["client"], {v: 0 for v in (*VERDICTS, NOT_RUN)})
        counts[row["verdict"]] += 1
    return out


def markdown(result: JSON, title: str = "Client compatibility") -> str:
    """One table per client (rows: scenarios, then fault profiles on the mock; columns: servers), then its defects."""
    servers = result["servers"]
    lines = [f"# {title}", ""]
    lines += [
        "Which ORS client works with which server. Each cell is one scripted episode (the winning calls of the "
        "scenario's first train task), played by the client's built-in adapter (`python -m orsbench.clients.adapter "
        "NAME`) and graded by the client checks of `orsbench check-client` (docs/clients.md): what the client "
        "reported for each call, and the server's request log (each tool run once, the session deleted). "
        "✅ works · 🟨 fails clearly (an error that says what happened) · ❌ fails silently (wrong data taken as "
        "right, a session left open) · ⛔ hangs. Rules a client breaks without changing the episode (no `env_name` on "
        "`/create`, a retry sooner than `Retry-After`) are pinned defects too, listed under each client. "
        "Fault profiles run on the mock engine (`sparse-reward`); for "
        + ", ".join(f"`{p.name}`" for p in sorted(profiles(), key=lambda p: p.name) if p.expects_error)
        + " failing clearly is the right outcome. The hazard cases are explained in docs/protocol.md §13. "
        "Defect ids link to the list under each table.",
        "",
        "Generated by `orsbench matrix --markdown docs/compatibility.md` from the pinned defects "
        "(`orsbench/clients/`); `conformance/test_clients.py` checks every prediction against live runs.",
        "",
    ]
    counts = summary(result)
    lines += ["| Client | Version | " + " | ".join(SYMBOL[v] for v in (*VERDICTS,)) + " |", "|---|---|" + "---|" * len(VERDICTS)]
    for name, info in result["clients"].items():
        lines.append(f"| {name} | {info['version']} | " + " | ".join(str(counts.get(name, {}).get(v, 0)) for v in VERDICTS) + " |")
    lines.append("")
    for name, info in result["clients"].items():
        rows = [r for r in result["cells"] if r["client"] == name]
        lines += [f"## {info.get('title', name)} ({name} {info['version']})", ""]
        if info.get("consumer"):
            lines += [f"What its user makes of an episode: {info['consumer']}.", ""]
        lines += ["| Scenario / profile | " + " | ".join(servers) + " |", "|---|" + "---|" * len(servers)]
        keys = list(dict.fromkeys((r["profile"] or r["scenario"], r["profile"] is not None) for r in rows))
        for label, is_profile in keys:
            cells = []
            for server in servers:
                match = [r for r in rows if r["server"] == server and (r["profile"] or r["scenario"]) == label and (r["profile"] is not None) == is_profile]
                if not match:
                    cells.append("—")
                    continue
                r = match[0]
                server_ids = {d["id"] for d in result.get("server_defects", {}).get(server, [])}
                ids = " ".join(f"[`{d}`](#{'server' if d in server_ids else name}-{d})" for d in r["defects"])
                right = " (right)" if r["verdict"] == r["expected"] == "fails clearly" else ""
                cells.append(SYMBOL[r["verdict"]] + right + (f" {ids}" if ids else ""))
            lines.append(f"| {'profile ' if is_profile else ''}`{label}` | " + " | ".join(cells) + " |")
        lines.append("")
        if info["defects"]:
            lines += [f"Pinned defects {name} inherits:", ""]
            lines += [f"- <a id=\"{name}-{d['id']}\"></a>`{d['id']}` — {d['summary']}" for d in info["defects"]]
            lines.append("")
    server_defects = [(name, d) for name, ds in result.get("server_defects", {}).items() for d in ds]
    if server_defects:
        lines += ["## Server defects", "", "Every client meets these on that server (cells name them too):", ""]
        lines += [f"- <a id=\"server-{d['id']}\"></a>`{d['id']}` ({name}) — {d['summary']}" for name, d in server_defects]
        lines.append("")
    if ELSEWHERE:
        lines += ["## Trainers that are not client targets", ""]
        lines += [f"- **{name}** — {why}" for name, why in ELSEWHERE]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
