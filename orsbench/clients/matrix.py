"""Run the compatibility matrix and render it (JSON and a per-client Markdown report).

Cells sharing a server configuration play on one server, client after
client (so the server's stats deltas belong to one episode); up to
``parallel`` servers play at once, since most of a cell is waiting. A global
budget bounds the run: cells not reached in time are reported ``not run``.

JSON contract::

    {"clients": {name: {"version": ..., "defects": [{"id", "summary"}, ...]}},
     "servers": [names], "cells": [{"client", "server", "scenario", "profile",
     "verdict", "expected", "defects": [ids], "elapsed", "problems", "error"}, ...]}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orsbench.clients import cells as C
from orsbench.clients.drivers import CLIENTS
from orsbench.clients.episodes import SERVE_PARAMS
from orsbench.clients.run import VERDICTS, Outcome, Running
from orsbench.servers.launch import start

NOT_RUN = "not run"
SYMBOL = {"survives": "✅ survives", "fails clearly": "🟨 fails clearly", "fails silently": "❌ fails silently", "hangs": "⛔ hangs", NOT_RUN: "· not run"}
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
                "version": CLIENTS[name].version,
                "title": CLIENTS[name].title,
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
    on_outcome: Callable[[C.Cell, Outcome], None] = lambda cell, outcome: None,
) -> JSON:
    """Play ``cells``: one server per configuration, ``parallel`` servers at once, client after client on each.

    A client's :attr:`~orsbench.clients.drivers.Client.concurrency` caps how many of its episodes play at
    once across servers (Inspect evals starve each other on two cores).
    """
    groups: dict[tuple[str, str, str, str], list[C.Cell]] = {}
    for cell in cells:
        groups.setdefault(_server_key(cell), []).append(cell)
    results: dict[C.Cell, JSON] = {}
    lock = threading.Lock()
    slots = {name: threading.Semaphore(CLIENTS[name].concurrency) for name in CLIENTS}
    deadline = time.monotonic() + budget
    done = [0]

    def play_group(key: tuple[str, str, str, str]) -> None:
        members = groups[key]
        if time.monotonic() > deadline:
            return
        impl, scenario, profile, _ = key
        config = C.profile_of(members[0]).config() if profile else None
        server = start(scenario, impl=impl, config=config, params=None if profile else SERVE_PARAMS.get(scenario))
        try:
            for cell in members:
                limit = C.profile_of(cell).deadline if profile else 30.0
                if time.monotonic() + limit > deadline:
                    break
                with slots[cell.client]:
                    outcome = Running(cell.client, server, cell.script, limit).finish()
                    if outcome.hung and C.predicted(cell) != "hangs":
                        # On a loaded machine a child can starve: a hang counts once it happens twice.
                        progress(f"{cell.id}: hung at {limit:g} s; playing it once more to confirm")
                        outcome = Running(cell.client, server, cell.script, limit).finish()
                row = cell_json(cell, outcome.verdict, elapsed=round(outcome.elapsed, 2), problems=outcome.problems, error=outcome.error)
                with lock:
                    results[cell] = row
                    done[0] += 1
                    on_outcome(cell, outcome)
                    flag = "" if outcome.verdict == C.predicted(cell) else f"  (predicted: {C.predicted(cell)})"
                    progress(f"[{done[0]}/{len(cells)}] {cell.id}: {outcome.verdict}{flag} {outcome.elapsed:.1f}s")
        finally:
            server.stop()

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(play_group, list(groups)))
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
        "Which ORS client survives which server. Each cell is one scripted episode (the winning calls of the "
        "scenario's first train task), judged from both ends: what the client showed the model, and the server's "
        "`/_orsbench/stats` (each tool run once, no session left open). ✅ survives · 🟨 fails clearly (an error "
        "that says what happened) · ❌ fails silently (wrong data taken as right, a session left open) · ⛔ hangs. "
        "Fault profiles run on the mock engine (`sparse-reward`); for `setup-failure`, `tool-raises`, `restart` and "
        "`stream-no-end` failing clearly is the right outcome. Defect ids link to the list under each table.",
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
    return "\n".join(lines).rstrip() + "\n"
