"""``python -m orsbench.versions.servable IMPL SCENARIO[,SCENARIO…]``: which scenarios a server release can serve.

Run inside a release's environment (:mod:`orsbench.versions.envs`) before its checks, so a scenario that needs what
the release lacks (openreward 0.1.33 has no task-scoped tools) becomes a clear ``not served`` row with the reason,
instead of a server that exits at start and a checker that says only "the server did not start". Prints one JSON
object::

    {"version": "0.1.33", "left_out": {"task-tool": "the openreward SDK 0.1.33 has no task-scoped tools …"}}

or ``{"version", "error"}`` where the twin cannot be imported at this release at all.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import sys

__all__ = ["TWIN_MODULES", "main"]

#: ``--impl`` name → the twin module (its ``SDK``: what the installed release is made of, and what it lacks), and
#: the distribution whose release it serves.
TWIN_MODULES: dict[str, tuple[str, str]] = {
    "sdk": ("orsbench.servers.sdk_twin", "openreward"),
    "ors-sdk": ("orsbench.servers.ors_sdk_twin", "ors-sdk"),
}


def main(argv: list[str] | None = None) -> int:
    impl, names = (argv if argv is not None else sys.argv[1:])[:2]
    os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    module_name, package = TWIN_MODULES[impl]
    out: dict[str, object] = {}
    try:
        out["version"] = importlib.metadata.version(package)
        from orsbench.scenarios import get_scenario
        from orsbench.servers.twin_support import left_out

        twin = importlib.import_module(module_name)
        out["left_out"] = left_out([get_scenario(n) for n in names.split(",")], twin.SDK)
    except Exception as exc:  # an SDK release the twin cannot read at all: the row says so, not a traceback
        out["error"] = f"the {impl} twin cannot be built on {package} {out.get('version', '?')}: {type(exc).__name__}: {exc}"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
