"""``python -m orsbench.versions.play CLIENT --cases A,B --out FILE``: one release's cells, run inside its environment.

The environment's Python (:mod:`orsbench.versions.envs`) imports the client at that release and orsbench from
``PYTHONPATH``; this module then plays the chosen cells exactly as ``orsbench matrix`` does — the matrix's runner
(:func:`orsbench.clients.matrix.run`: a server per configuration through the launcher, each episode forked ready,
graded by check-client's checks, judged by the one judgement) — and writes what it saw as JSON::

    {"version": "0.1.109", "cells": [{"case", "verdict", "error", "elapsed", "problems"}, ...]}

or ``{"version", "error"}`` where the client target cannot be imported at this release (an SDK before the module
its adapter drives existed): the driver turns that into a clear row, not a verdict on the client.

orsbench's adapter is written for the pinned release. Where an older one lacks what it calls (TRL 1.4.0 takes no
``task_tools_discovery_index``), every cell would "fail clearly" — a verdict on the adapter, not on the client. So the
client's *plain case* (its first scenario: a correct client and the pinned release both play it to the end) is always
played too; where it ends in an error before the client sent the server a single request, every cell of the release
is :data:`CANNOT_DRIVE`, with that error — a state of its own, which bisection still places between releases.
A case is a matrix cell's id without its client: ``mock:echo`` (a scenario on a server), ``mock:flaky-5xx`` (a fault
profile on the mock).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["CANNOT_DRIVE", "case_of", "main"]

#: The verdict of every cell of a release orsbench's adapter cannot drive (its plain case errs before any request).
CANNOT_DRIVE = "cannot drive"


def case_of(cell_id: str) -> str:
    """``openreward@mock:echo`` → ``mock:echo``."""
    return cell_id.split("@", 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orsbench.versions.play")
    parser.add_argument("client")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--budget", type=float, default=900.0)
    args = parser.parse_args(argv)
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS

    target = CLIENT_TARGETS.get(args.client)
    wanted = args.cases.split(",")
    report: dict[str, Any] = {"version": target.version}
    if not target.installed:
        missing = [m for m in target.modules if not _imports(m)]
        report["error"] = f"{target.package} {target.version} has no {', '.join(missing)} (the module orsbench's adapter drives)"
        args.out.write_text(json.dumps(report))
        return 0
    servers = sorted({case.split(":", 1)[0] for case in wanted} | {"mock"})
    every = C.plan([args.client], servers, None)
    unknown = sorted(set(wanted) - {case_of(c.id) for c in every})
    if unknown:
        report["error"] = f"no such case here: {', '.join(unknown)}"
        args.out.write_text(json.dumps(report))
        return 0
    plain = next(c for c in every if c.server == "mock" and C.expected(c) == C.predicted(c) == "works")
    cells = [c for c in every if case_of(c.id) in wanted or c == plain]
    from orsbench.servers import launch

    launch.use_zygote()
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    requests: dict[str, int] = {}

    def counted(cell: Any, outcome: Any) -> None:
        # What the client asked the server (the harness's own reads of the stats are no part of it).
        requests[case_of(cell.id)] = sum(n for route, n in outcome.requests.items() if "/_orsbench/" not in route)

    result = M.run(cells, [args.client], sorted({c.server for c in cells}), budget=args.budget, parallel=2, progress=progress, on_outcome=counted)
    shown = {f"{c.server}:{c.profile or c.scenario}": c for c in result.cells}
    first = shown[case_of(plain.id)]
    if first.verdict != "works" and first.error and requests.get(case_of(plain.id)) == 0:
        said = f"orsbench's adapter cannot drive {target.package} {target.version}: {case_of(plain.id)} ended before any request: {first.error}"
        report["cells"] = [{"case": case, "verdict": CANNOT_DRIVE, "error": said, "elapsed": shown[case].elapsed, "problems": []} for case in wanted]
    else:
        report["cells"] = [
            {"case": case, "verdict": shown[case].verdict, "error": shown[case].error, "elapsed": shown[case].elapsed, "problems": shown[case].problems}
            for case in wanted
        ]
    args.out.write_text(json.dumps(report))
    return 0


def _imports(module: str) -> bool:
    import importlib

    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - an old release may fail to import in any way; the row says which module
        traceback.print_exc()
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
