"""``--fail-under METRIC=VALUE``: a load run that fails CI when a figure falls below its floor.

Every bench report gives :func:`check` the same few figures per server measured
(:data:`METRICS`); a threshold holds when *every* server measured meets it (the
floor app, which plays no environment, is not held to one). A figure a mode does
not measure (the knee outside ``--shape ramp``) is a usage error, said before
anything runs — a CI gate that silently checks nothing would pass forever.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: What a threshold may name, and what it means.
METRICS = {
    "ok": "percent of episodes (held sessions: of sessions) that succeeded",
    "rate": "episodes per second (held sessions: pings per second)",
    "finished": "percent of successful episodes that ended finished: true (the reward path)",
    "knee": "the largest concurrency with >= 99 % of episodes ok (--shape ramp)",
}


@dataclass(frozen=True)
class Threshold:
    metric: str
    floor: float

    def __str__(self) -> str:
        return f"{self.metric}={self.floor:g}"


def parse(text: str) -> Threshold:
    """``METRIC=VALUE`` (an ``argparse`` type): ``ok=99``, ``rate=50``, ``finished=100``, ``knee=64``."""
    metric, sep, value = text.partition("=")
    metric = metric.strip()
    if not sep or metric not in METRICS:
        known = ", ".join(f"{name} ({meaning})" for name, meaning in METRICS.items())
        raise argparse.ArgumentTypeError(f"{text!r}: give METRIC=VALUE with METRIC one of {known}")
    try:
        floor = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None
    return Threshold(metric, floor)


def unmeasured(thresholds: Iterable[Threshold], measured: Iterable[str]) -> list[str]:
    """The thresholds naming a figure this mode does not measure."""
    have = set(measured)
    return [str(t) for t in thresholds if t.metric not in have]


def check(thresholds: Iterable[Threshold], figures: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    """One line per threshold a server missed (``figures``: server → metric → value); empty when all hold."""
    missed = []
    for threshold in thresholds:
        for server, values in figures.items():
            value = values.get(threshold.metric)
            if value is None:
                missed.append(f"{server}: {threshold.metric} was not measured (--fail-under {threshold})")
            elif value < threshold.floor:
                missed.append(f"{server}: {threshold.metric} {value:.4g} is under --fail-under {threshold}")
    return missed
