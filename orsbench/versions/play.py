"""``python -m orsbench.versions.play CLIENT --cases A,B --out FILE``: one release's cells, run inside its environment.

The environment's Python (:mod:`orsbench.versions.envs`) imports the client at that release and orsbench from
``PYTHONPATH``; this module then plays the chosen cells exactly as ``orsbench matrix`` does — the matrix's runner
(:func:`orsbench.clients.matrix.run`: a server per configuration through the launcher, each episode forked ready,
graded by check-client's checks, judged by the one judgement) — and writes what it saw as JSON::

    {"version": "0.1.109", "cells": [{"case", "verdict", "error", "elapsed", "problems"}, ...]}

or ``{"version", "error"}`` where the client target cannot be imported at this release (an SDK before the module
its adapter drives existed): the driver turns that into a clear row, not a verdict on the client.
A case is a matrix cell's id without its client: ``mock:basic`` (a scenario on a server), ``mock:flaky-5xx`` (a
fault profile on the mock).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

__all__ = ["case_of", "main"]


def case_of(cell_id: str) -> str:
    """``openreward@mock:basic`` → ``mock:basic``."""
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
    report: dict[str, object] = {"version": target.version}
    if not target.installed:
        missing = [m for m in target.modules if not _imports(m)]
        report["error"] = f"{target.package} {target.version} has no {', '.join(missing)} (the module orsbench's adapter drives)"
        args.out.write_text(json.dumps(report))
        return 0
    servers = sorted({case.split(":", 1)[0] for case in wanted})
    cells = [c for c in C.plan([args.client], servers, None) if case_of(c.id) in wanted]
    unknown = sorted(set(wanted) - {case_of(c.id) for c in cells})
    if unknown:
        report["error"] = f"no such case here: {', '.join(unknown)}"
        args.out.write_text(json.dumps(report))
        return 0
    from orsbench.servers import launch

    launch.use_zygote()
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    result = M.run(cells, [args.client], servers, budget=args.budget, parallel=2, progress=progress)
    report["cells"] = [
        {"case": f"{c.server}:{c.profile or c.scenario}", "verdict": c.verdict, "error": c.error, "elapsed": c.elapsed, "problems": c.problems}
        for c in result.cells
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
