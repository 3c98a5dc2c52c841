"""The evidence collector: one object that drives the wire client through the probes, once.

A *probe* is a script of requests registered in :data:`PROBES` (``discovery``,
``dataset``, ``session`` and ``call`` in :mod:`orsbench.checks.probes`;
``play``, ``fuzz`` and ``quality`` in :mod:`orsbench.checks.explore`;
``deployment`` (sessions through a balancer) in :mod:`orsbench.checks.deployment_probe`;
``isolation`` (several sessions at once) in :mod:`orsbench.checks.isolation_probe`;
``timing`` in :mod:`orsbench.checks.timing`). Each records every
:class:`~orsbench.wire.evidence.Exchange` under a stable name in the
:class:`~orsbench.checks.evidence.Evidence`. Probes adapt only where the
protocol forces them to — which environment, which split, which tool and with
what input — and never judge: judging is the checks' job.

Why probes are functions over a :class:`Collector` and not its methods: the
collector is the plumbing every probe shares (sessions it opened, calls bounded
by ``--timeout``, keep-alive pings); a probe is one extension point among the
others, registered where it is written, found by name, run in catalogue order.
Nothing here imports a probe module; the registry loads them by name.

Sessions the collector opens are deleted when it closes, so a check run leaves
nothing behind on the target.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from orsbench import protocol
from orsbench.checks.evidence import Evidence, json_of, task_id_of
from orsbench.registry import Registry
from orsbench.wire.client import WireClient
from orsbench.wire.evidence import Exchange


@dataclass(frozen=True)
class Probe:
    """One registered probe: its name (what a check's ``probe=`` names) and the function that runs it."""

    name: str
    run: Callable[[Collector], None]
    doc: str = ""
    #: No later probe reads what this one finds: a run none of whose checks grades it skips it (``--only`` without
    #: its group saves its time), where any other probe runs whenever a later one does.
    leaf: bool = False


#: The probes, in the order they run (catalogue order: module order below, then definition order);
#: a probe may use what every earlier probe found (the call probe needs the tools and a task).
PROBES: Registry[Probe] = Registry(
    "probe",
    modules=("orsbench.checks.probes", "orsbench.checks.deployment_probe", "orsbench.checks.explore", "orsbench.checks.isolation_probe", "orsbench.checks.timing"),
)


def probe(name: str, *, leaf: bool = False) -> Callable[[Callable[[Collector], None]], Callable[[Collector], None]]:
    """Register the decorated function as the probe ``name`` (the function is returned unchanged)."""

    def decorate(fn: Callable[[Collector], None]) -> Callable[[Collector], None]:
        PROBES.register(Probe(name, fn, (fn.__doc__ or "").strip().split("\n")[0], leaf), origin=fn.__module__)
        return fn

    return decorate


def probe_names() -> tuple[str, ...]:
    """The probe names in the order they run."""
    return tuple(PROBES.names())


def probes_for(needed: set[str]) -> list[str]:
    """The probes a run whose checks grade the probes ``needed`` runs, in order: every probe up to the last needed
    one (a probe may use what an earlier one found), less the leaves none of them needs."""
    names = probe_names()
    last = max((names.index(n) for n in needed), default=-1)
    return [n for n in names[: last + 1] if n in needed or not PROBES.get(n).leaf]


class Collector:
    """Runs probes against one target and records what came back."""

    def __init__(self, client: WireClient, evidence: Evidence) -> None:
        self.client = client
        self.ev = evidence
        self.options = evidence.options
        self._open_sids: list[str] = []
        self._used_sids: set[str] = set()

    # -- running probes ----------------------------------------------------------------------
    def run(self, name: str) -> None:
        """Run the probe ``name`` (:class:`~orsbench.registry.UnknownName` for one not registered)."""
        PROBES.get(name).run(self)
        self.ev.probes_run.append(name)

    def close(self) -> None:
        """Delete every session this collector opened (best effort)."""
        for sid in self._open_sids:
            self.client.delete(sid)
        self._open_sids.clear()

    # -- recording ---------------------------------------------------------------------------
    def rec(self, name: str, exchange: Exchange) -> Exchange:
        return self.ev.record(name, exchange)

    def fresh(self, name: str, exchange: Exchange) -> Exchange:
        """Record a ``/call`` that started a new tool call (what the per-call checks grade)."""
        self.ev.facts.fresh_calls.append(name)
        return self.rec(name, exchange)

    def ready(self, send: Callable[[], Exchange]) -> Exchange:
        """Repeat ``send`` while the server answers 503 (setup still running), within ``--timeout``.

        The first 503 is kept as evidence for ``session.starting_503``.
        """
        exchange = send()
        deadline = time.monotonic() + self.options.timeout
        while exchange.status == 503 and time.monotonic() < deadline:
            self.ev.exchanges.setdefault("starting", exchange)
            time.sleep(0.05)
            exchange = send()
        return exchange

    def wait_setup(self, sid: str) -> float:
        """Wait until ``sid``'s ``setup()`` has run, as a client waits for its first prompt; the seconds waited.

        ``/prompt`` (not recorded) until it answers anything but 503 "starting", each request and the whole wait
        bounded by the longer of ``--timeout`` and the reference server's own setup wait (25 s): a server that holds
        the prompt while setup runs would otherwise time out under a short ``--timeout``, and the first tool call
        would carry the setup's seconds — a 9 s setup read as a tool that hangs on the first input it was sent.
        """
        bound = max(self.options.timeout, protocol.SETUP_WAIT_TIMEOUT_S)
        path = protocol.env_path(self.ev.env or "", protocol.PROMPT)
        started = time.monotonic()
        deadline = started + bound
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            exchange = self.client.request("GET", path, sid=sid, read_timeout=left)
            if exchange.status != 503:
                break
            time.sleep(0.05)
        return time.monotonic() - started

    # -- sessions ----------------------------------------------------------------------------
    def new_sid(self) -> str:
        """A fresh session id: from ``/create_session`` when the server gives new ones, else a local uuid4."""
        if self.ev.facts.create_session_works:
            sid = task_id_of(self.client.create_session())
            if sid and sid not in self._used_sids:
                self._used_sids.add(sid)
                return sid
        return f"orsbench-{uuid.uuid4()}"

    def seen_sid(self, sid: str) -> None:
        """Remember a session id the server handed out, so :meth:`new_sid` never reuses it."""
        self._used_sids.add(sid)

    def adopt(self, sid: str) -> None:
        """Delete ``sid`` when the collector closes (a session a probe created itself)."""
        self._open_sids.append(sid)

    def task_source(self) -> dict[str, Any]:
        """The body fields of ``/create`` for the task under test."""
        if self.ev.split is not None and self.ev.index is not None:
            return {"split": self.ev.split, "index": self.ev.index}
        return {"task_spec": self.ev.facts.task0 or {}}

    def open_session(self, name: str | None = None) -> str | None:
        """``/create`` a session on the task under test; ``None`` when the server refuses."""
        sid = self.new_sid()
        exchange = self.client.create(sid, env_name=self.ev.env, **self.task_source())
        if name:
            self.rec(name, exchange)
        if exchange.status != 200:
            return None
        self._open_sids.append(sid)
        return sid

    def still_open(self, sid: str) -> str | None:
        """``sid`` if the server still holds it, else a new session on the task under test (``None`` if refused).

        Sessions opened early (so a slow ``setup()`` runs while other probes do) sit idle until used;
        under a short TTL, or on a busy machine, the server may have reaped one by then.
        """
        if self.client.ping(sid).status != 404:
            return sid
        self.end_session(sid)
        return self.open_session()

    def open_on(self, index: int | None) -> str | None:
        """``/create`` a session on task ``index`` of the split under test (the task under test for ``None``)."""
        if index is None or self.ev.split is None:
            return self.open_session()
        sid = self.new_sid()
        exchange = self.client.create(sid, env_name=self.ev.env, split=self.ev.split, index=index)
        if exchange.status != 200:
            return None
        self._open_sids.append(sid)
        return sid

    def end_session(self, sid: str) -> Exchange:
        """``/delete`` a session this collector opened (it is not deleted again on close); the exchange."""
        exchange = self.client.delete(sid)
        if sid in self._open_sids:
            self._open_sids.remove(sid)
        return exchange

    def task_at(self, index: int | None) -> Any:
        """Task ``index`` of the split under test, as listed or fetched (the task under test otherwise)."""
        tasks = self.ev.facts.tasks
        if index is not None and isinstance(tasks, list) and 0 <= index < len(tasks):
            return tasks[index]
        if index is not None and self.ev.split is not None:
            exchange = self.client.task(self.ev.env or "", self.ev.split, index)
            try:
                body = json.loads(exchange.body)
            except ValueError:
                body = None
            if exchange.status == 200 and isinstance(body, dict) and isinstance(body.get("task"), dict):
                return body["task"]
        return self.ev.facts.task0 or {}

    def session_tools(self, sid: str) -> list[dict[str, Any]]:
        """Tools callable in ``sid``: the shared listing merged with ``task_tools`` (task_tools wins)."""
        merged: dict[str, dict[str, Any]] = {t["name"]: t for t in self.ev.facts.tools}
        exchange = self.client.task_tools(self.ev.env or "", sid)
        ok, body = json_of(exchange)
        if exchange.status == 200 and ok and isinstance(body, dict) and isinstance(body.get("tools"), list):
            for spec in body["tools"]:
                if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                    merged[spec["name"]] = spec
        return list(merged.values())

    def ttl(self) -> tuple[float | None, float]:
        """The TTL and reaper interval: from ``--ttl``, else as an orsbench server reports them."""
        config = (self.ev.facts.orsbench_stats or {}).get("config") or {}
        ttl = self.options.ttl if self.options.ttl is not None else config.get("ttl")
        if not isinstance(ttl, (int, float)):
            return None, 0.0
        reaper = config.get("reaper_interval")
        if not isinstance(reaper, (int, float)):
            reaper = max(0.05, min(protocol.REAPER_INTERVAL_S, ttl / 4))
        return float(ttl), float(reaper)

    # -- calls -------------------------------------------------------------------------------
    def call(
        self, sid: str, name: str, tool_input: Any, *, task_id: str | None = None, max_stream_seconds: float | None = None
    ) -> Exchange:
        """A ``/call``, bounded by ``--timeout``, retried while the session is still starting."""
        env = self.ev.env or ""
        bound = self.options.timeout if max_stream_seconds is None else max_stream_seconds
        return self.ready(
            lambda: self.client.call(
                env, sid, name, tool_input, task_id=task_id, read_timeout=self.options.timeout, max_stream_seconds=bound
            )
        )

    @contextlib.contextmanager
    def keepalive(self, sid: str) -> Iterator[None]:
        """Ping ``sid`` in the background while the block runs (every TTL/3 when known, else every 5 s)."""
        ttl, _ = self.ttl()
        interval = max(0.2, min(5.0, ttl / 3)) if ttl else 5.0
        stop = threading.Event()

        def ping() -> None:
            while not stop.wait(interval):
                self.client.ping(sid)

        thread = threading.Thread(target=ping, name=f"orsbench-ping-{sid[:8]}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=interval + 1)

    def kept_call(self, sid: str, tool: str, tool_input: Any, timeout: float | None = None) -> Exchange:
        """A :meth:`call` during which the session is pinged, so a short TTL cannot reap it mid-call."""
        with self.keepalive(sid):
            return self.call(sid, tool, tool_input, max_stream_seconds=timeout)
