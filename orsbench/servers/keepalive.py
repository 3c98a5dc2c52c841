"""One timer for the keep-alives of every held stream.

A ``/call`` stream whose tool is still running writes a ``: ping`` comment
every ``ping_interval`` seconds. Waiting for "the tool finished or the interval
passed" with ``asyncio.wait`` or ``loop.call_later`` costs each held stream a
timer handle (with uvloop, a libuv timer too) and a callback closure — about
1 KiB, multiplied by every session a trainer holds. The clock keeps one
pending future per stream, in a slot per ``tick`` (1/20 of the interval), and
one loop timer for the earliest slot. A stream's ping therefore comes between
``interval`` and ``interval + tick`` after its last byte, never earlier.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from functools import partial
from typing import Any

#: Slots per keep-alive interval: how late a ping may be, as a fraction of the interval.
SLOTS_PER_INTERVAL = 20


class KeepaliveClock:
    """Wakes each waiting stream when its tool finishes or its keep-alive is due."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.tick = max(interval / SLOTS_PER_INTERVAL, 0.001)
        self._slots: dict[int, list[asyncio.Future[None]]] = {}
        self._order: list[int] = []
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None

    async def wait(self, future: asyncio.Future[Any]) -> bool:
        """Wait until ``future`` is done (``True``) or a keep-alive is due (``False``); never cancels it."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        slot = math.ceil((loop.time() + self.interval) / self.tick)
        bucket = self._slots.get(slot)
        if bucket is None:
            bucket = self._slots[slot] = []
            heapq.heappush(self._order, slot)
        bucket.append(waiter)
        self._arm(loop)
        wake = partial(_wake, waiter)
        future.add_done_callback(wake)
        try:
            await waiter
        finally:
            future.remove_done_callback(wake)
        return future.done()

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        first = self._order[0] if self._order else None
        if first is None or first == self._armed_for:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = first
        self._timer = loop.call_at(first * self.tick, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = self._armed_for = None
        now = loop.time()
        order, slots = self._order, self._slots
        while order and order[0] * self.tick <= now:
            for waiter in slots.pop(heapq.heappop(order)):
                _wake(waiter, None)
        self._arm(loop)

    def __len__(self) -> int:
        """Streams waiting (including ones already woken by their tool and not yet due)."""
        return sum(len(bucket) for bucket in self._slots.values())


def _wake(waiter: asyncio.Future[None], _source: Any) -> None:
    if not waiter.done():
        waiter.set_result(None)
