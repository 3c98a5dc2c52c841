"""One typed configuration object for a served environment.

The engine's knobs (TTL, keep-alive cadence, setup delay, latency, chunk size,
body limit, ...) are read from a single :class:`ServerConfig` that the CLI, the
launcher and the pytest plugin build and pass down. Nothing in the servers
reads environment variables or module globals for these values.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from collections.abc import Mapping, Set
from typing import Any, Protocol

from orsbench import protocol

#: ``orsbench proxy --evidence-limit``: exchanges of the families that grow with traffic (unnamed, played
#: calls, cut calls) the passive grader keeps before it folds the rest into counts. About 1.4 KiB each
#: on echo episodes, so the default bounds kept evidence near 30 MiB whatever the traffic.
DEFAULT_EVIDENCE_LIMIT = 20_000

#: The environment variable every front end that talks to a server reads its API key from (``orsbench
#: check``, ``record``, ``proxy``, ``bench --url``, the Locust file, the pytest wire checks; ``serve`` requires
#: it): a key in the environment does not show in ``ps`` the way a command-line flag does.
API_KEY_ENV = "ORSBENCH_API_KEY"


@dataclass(frozen=True)
class ServerConfig:
    """Knobs of a served ORS environment. Defaults equal the reference server's."""

    #: Seconds without a request or ping after which a session is reaped.
    ttl: float = protocol.SESSION_TTL_S
    #: Seconds between ``: ping`` comments on a running ``/call`` stream.
    ping_interval: float = protocol.PING_INTERVAL_S
    #: How often the reaper looks for idle sessions (``None``: min(5 s, ttl / 4)).
    reaper_interval: float | None = None
    #: Extra seconds every session's ``setup()`` takes, on top of the scenario's own.
    setup_delay: float = 0.0
    #: How long ``/prompt`` and ``/call`` wait for setup before answering 503.
    setup_wait_timeout: float = protocol.SETUP_WAIT_TIMEOUT_S
    #: Extra seconds every tool call takes before it runs.
    latency: float = 0.0
    #: Characters per SSE ``chunk`` event.
    chunk_size: int = protocol.CHUNK_SIZE
    #: Seconds a finished tool-call result stays resumable by ``task_id``.
    linger: float = protocol.RESUME_LINGER_S
    #: Largest accepted request body in bytes; larger bodies get 413.
    max_body: int = 1 << 20
    #: When set, every route but ``/health`` requires this key (``X-API-Key`` or Bearer).
    api_key: str | None = None
    #: Named fault profiles to apply (see ``orsbench.servers.faults``).
    faults: tuple[str, ...] = ()
    #: Seed for any randomness in fault profiles.
    seed: int = 0
    #: Log one line per request (off by default: it costs more than the work).
    access_log: bool = False
    #: Record every request and answer for ``GET /_orsbench/requests`` (``orsbench check-client`` grades
    #: a client from it); off by default: it costs a copy of every body.
    request_log: bool = False
    #: This server's name as one replica of several (``orsbench serve --replicas N``): sent on every answer as
    #: ``X-ORSBench-Replica`` (:data:`orsbench.protocol.REPLICA_HEADER`), so load figures can show the spread.
    replica: str | None = None
    #: Scenario parameters (``--param key=value``), passed to the scenario factory.
    params: dict[str, Any] = field(default_factory=dict)
    #: Fields set on purpose, even to their default value: a scenario's own defaults never override them
    #: (``orsbench check --scenario slow --ping-interval 10`` serves keep-alives every 10 s, not slow's 0.25 s).
    explicit: tuple[str, ...] = ()

    @property
    def effective_reaper_interval(self) -> float:
        if self.reaper_interval is not None:
            return self.reaper_interval
        return max(0.05, min(protocol.REAPER_INTERVAL_S, self.ttl / 4))

    def replace(self, **changes: Any) -> "ServerConfig":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["faults"] = list(self.faults)
        data["explicit"] = list(self.explicit)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "ServerConfig":
        data = json.loads(text)
        data["faults"] = tuple(data.get("faults", ()))
        data["explicit"] = tuple(data.get("explicit", ()))
        return cls(**data)


class HasConfigDefaults(Protocol):
    """What :func:`effective_config` reads of a scenario (kept structural: config sits below scenarios)."""

    config_defaults: Mapping[str, Any]


def effective_config(scenario: HasConfigDefaults, config: ServerConfig, explicit: Set[str] = frozenset()) -> ServerConfig:
    """Apply the scenario's own config defaults to fields the user did not set explicitly."""
    changes = {k: v for k, v in scenario.config_defaults.items() if k not in explicit}
    return config.replace(**changes) if changes else config
def write_private(path: str | os.PathLike[str], text: str) -> str:
    """Write ``text`` to a new file only its owner may read or write (0600); returns the path.

    How a server orsbench starts gets its API key or a proxy its secrets: never
    on a command line (``/proc/PID/cmdline`` and ``ps`` show those to every user;
    docs/protocol.md §14). The file must not exist yet, so nothing else can
    have opened it with wider rights first.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return os.fspath(path)


def read_config_file(path: str | os.PathLike[str]) -> str:
    """The JSON of a config file written by :func:`write_private` (the launcher's ``--config-file``)."""
    with open(path, encoding="utf-8") as handle:
        return handle.read()
