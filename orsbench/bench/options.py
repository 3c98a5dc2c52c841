"""What a bench run plays and for how long: one options object for every mode of ``orsbench bench``.

The throughput bench on servers orsbench starts (:func:`orsbench.bench.runner.run_bench`), the same
on the user's server (:func:`orsbench.bench.remote.run_url_bench`) and the held-session bench
(:func:`orsbench.bench.sessions.run_held_bench`) read their knobs from one :class:`BenchOptions`,
which the command line builds once from its flags; a knob is spelt, documented and defaulted here
and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BenchOptions"]


@dataclass(frozen=True)
class BenchOptions:
    """Every knob of a bench run (``orsbench bench``'s flags, one field each)."""

    # -- the episode ---------------------------------------------------------------------------
    #: The environment (``None``: the server's first).
    env: str | None = None
    #: Tool calls per episode of one tool (``None``, with no tool or input named: play the learned episode).
    calls: int | None = None
    #: Seconds before create, prompt and each call.
    think_time: float = 0.0
    #: The tool to call (``None``: the learned episode's tools; held sessions: the first with a numeric ``seconds``).
    tool: str | None = None
    #: Its input (``None``: an example from its schema).
    tool_input: dict[str, Any] | None = None
    #: The split tasks are drawn from (``None``: the first train split).
    split: str | None = None
    #: Secrets sent to ``/create`` (the user's server) and the API key sent with every request.
    secrets: Mapping[str, str] | None = None
    api_key: str | None = None

    # -- throughput (episodes per second) ------------------------------------------------------
    #: Episodes in flight at once: the load measured, not orsbench's own parallelism.
    concurrency: int = 32
    #: Seconds per measured window, windows per server (alternating between servers), seconds of load first.
    window_seconds: float = 5.0
    rounds: int = 2
    warmup_seconds: float = 1.0
    #: Also end a window after this many episodes.
    max_episodes_per_window: int | None = None
    #: The servers orsbench starts (``None``: every implementation registered as benched) and the scenario's parameters.
    impls: tuple[str, ...] | None = None
    params: dict[str, Any] | None = None
    #: Seconds of one headless Locust process against the mock (0: none), and its users (``None``: ``concurrency``).
    locust_seconds: float = 0.0
    locust_users: int | None = None

    # -- held sessions -------------------------------------------------------------------------
    #: Seconds every stream is held open together.
    hold: float = 10.0
    #: Keep-alive interval of the servers started to hold sessions.
    ping_interval: float = 5.0
    #: Opens, call starts and deletes in flight at once.
    ramp_concurrency: int = 128
    #: Held sessions played first, unmeasured.
    hold_warmup: int = 20
    #: How a session is held: ``call`` (one long streaming call of a tool taking ``seconds``), ``ping`` (open and pinged
    #: at the reference cadence: any environment), ``auto`` (``call`` where such a tool exists, else ``ping``).
    held_by: str = "auto"
