"""The ``violation-router`` test harness: every violation served at once, each on its own engine.

Not a fault a user meets: it exists so the checker's tests can reach all the
violations of :mod:`.violations` through one server process.
"""

from __future__ import annotations

import random
from typing import Any

from orsbench.config import ServerConfig, effective_config
from orsbench.scenarios import get_scenario
from orsbench.servers.engine import Engine
from orsbench.servers.faults import apply_faults, fault
from orsbench.servers.faults.violations import ROUTER_PREFIX, VIOLATIONS
from orsbench.servers.http import Receive, Scope, Send, send_detail


class ViolationRouter:
    """Serves each registered violation on its own engine under ``/_violations/<name>/``.

    Why: the checker's tests need one broken server per violation, and starting
    fifty server processes costs more than the checks. Behind each prefix is a
    separate :class:`~orsbench.servers.engine.Engine` — its own scenario (the
    violation's), config (scenario defaults plus the violation's knobs),
    sessions, tasks, reaper and stats — with exactly that one violation
    applied, as ``orsbench serve <scenario> --fault <name>`` would build it.
    Only the process and the event loop are shared. Redirect ``Location``
    headers are not rewritten (the engine's are relative to its own root).
    """

    def __init__(self, app: Any, seed: int) -> None:
        self.app, self.seed = app, seed
        self.engines: dict[str, Any] = {}

    def _build(self, name: str) -> Any:
        spec = VIOLATIONS[name]
        scenario = get_scenario(spec.scenario, **spec.knobs.get("params", {}))
        config = effective_config(scenario, ServerConfig(**spec.knobs, seed=self.seed), set(spec.knobs)).replace(faults=(name,))
        engine = Engine([scenario], config)
        app = apply_faults(engine, (name,), self.seed)
        engine.start_background()
        return engine, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_shutdown(receive), send)
            return
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(ROUTER_PREFIX):
            await self.app(scope, receive, send)
            return
        name, _, rest = path[len(ROUTER_PREFIX) :].partition("/")
        if name not in VIOLATIONS:
            await send_detail(send, 404, f"unknown violation {name!r}; known: {', '.join(sorted(VIOLATIONS))}")
            return
        if name not in self.engines:
            self.engines[name] = self._build(name)
        inner_path = "/" + rest
        inner = {
            **scope,
            "path": inner_path,
            "raw_path": inner_path.encode(),
            "root_path": scope.get("root_path", "") + ROUTER_PREFIX + name,
        }
        await self.engines[name][1](inner, receive, send)

    def _watch_shutdown(self, receive: Receive) -> Receive:
        async def watched() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                for engine, _app in self.engines.values():
                    await engine.shutdown()
            return message

        return watched


@fault(
    "violation-router",
    f"test harness: serves every violation, each on its own engine, under {ROUTER_PREFIX}<name>/ (one process for all)",
    kind="violation",
)
def violation_router(engine: Engine, app: Any, rng: random.Random) -> Any:
    return ViolationRouter(app, engine.config.seed)
