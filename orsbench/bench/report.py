"""What every ``orsbench bench`` report shares: the machine line, the held-sessions envelope, an optional figure.

The episode windows (:mod:`.runner`), the shapes (:mod:`.shapes`), held streaming calls (:mod:`.sessions`) and
pinged sessions (:mod:`.pinged`) each print their own table, but say the machine's load the same way, warn about a
saturated driver at the same share of a core, show a figure that could not be measured the same way, and the two
held-session modes write the same JSON envelope — one definition of each, here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orsbench.servers import stats as server_stats

#: Fraction of one core above which the driver, not the server, is what limits the run.
DRIVER_SATURATED = 0.9


def optional(value: Any, fmt: str = "") -> str:
    """``value`` formatted, or ``n/a`` for a figure that was not measured (no server PID, nothing to divide by)."""
    return "n/a" if value is None else format(value, fmt)


def machine_line(machine: Mapping[str, Any], note: str = "") -> str:
    """``machine: 2 CPUs, load average [..] before, [..] after`` — every timing says the load it was taken under."""
    line = (
        f"machine: {machine.get('cpus')} CPUs, load average {machine.get('loadavg_before')} before, "
        f"{machine.get('loadavg_after')} after"
    )
    return f"{line} ({note})" if note else line


def held_json(
    mode: str, sessions: int, hold_s: float, ping_interval_s: float | None, servers: Mapping[str, Any], machine: Mapping[str, Any]
) -> str:
    """The JSON of a held-sessions report (``mode``: ``sessions`` or ``sessions-pinged``); ``servers``: name → figures."""
    return json.dumps(
        {
            "mode": mode,
            "sessions": sessions,
            "hold_s": hold_s,
            "ping_interval_s": ping_interval_s,
            "servers": dict(servers),
            "machine": dict(machine),
        },
        indent=2,
    )


def sessions_left(url: str, api_key: str | None = None) -> int | None:
    """``active_sessions`` from the server's ``/_orsbench/stats`` after a run (``None`` where it has no such route)."""
    value = (server_stats.read_or_none(url, api_key=api_key) or {}).get("active_sessions")
    return value if isinstance(value, int) else None
