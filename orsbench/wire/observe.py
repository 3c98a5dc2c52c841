"""Observers of live traffic: the one way the proxy, the request log and hosted mode tell graders what passes.

A source of traffic — :class:`~orsbench.servers.proxy.ProxyApp` forwarding, a
:class:`~orsbench.servers.request_log.RequestLog` tap around a server (``check-client --hosted``,
``orsbench proxy --fault``) — builds one :class:`~orsbench.wire.evidence.Exchange` per request and
tells every :class:`Observer` of it twice, with the request's route (its path, as the server
routes it):

* :meth:`Observer.started` as the request arrives, before its answer (``status`` is ``None``): a
  client grader tells a busy client from a quiet one, a session waiting on an answer from an idle one;
* :meth:`Observer.ended` once its answer is over (or never came), the same object completed.

Graders (the server's passive grader, the client grader, hosted mode's case), the cassette recorder,
a session sample and a benchmark's timer are all observers, composed the same way: a list, in the
order they are told. :class:`Observers` is that list as a source calls it — the bound methods
gathered once, and an observer's no-op half (:class:`Observing`'s) left out, so a source's hot path
makes one plain call per listening observer and allocates nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from orsbench.wire.evidence import Exchange

#: One half of an observer: told ``(exchange, path)``.
Hook = Callable[[Exchange, str], None]


@runtime_checkable
class Observer(Protocol):
    """Told of each exchange a source sees: as its request starts, and as its answer ends."""

    def started(self, exchange: Exchange, path: str) -> None:
        """The request arrived (no answer yet); ``path``: its route."""

    def ended(self, exchange: Exchange, path: str) -> None:
        """Its answer is over, or will never come (``exchange.error`` says why): the same exchange, completed."""


class Observing:
    """An observer that listens to neither half: inherit it and define the one you need.

    The half left as it is costs a source nothing (:class:`Observers` leaves it out).
    """

    def started(self, exchange: Exchange, path: str) -> None:
        return None

    def ended(self, exchange: Exchange, path: str) -> None:
        return None


def _listens(hook: Hook, quiet: Hook) -> bool:
    return getattr(hook, "__func__", None) is not quiet


class Observers(Observing):
    """A list of observers as a source tells them: itself an observer (composites nest)."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self.all: tuple[Observer, ...] = tuple(observers)
        on_start: list[Hook] = []
        on_end: list[Hook] = []
        for observer in self.all:
            if isinstance(observer, Observers):  # nested: its own hooks, flat (one call each, not two)
                on_start += observer.on_start
                on_end += observer.on_end
                continue
            if _listens(observer.started, Observing.started):
                on_start.append(observer.started)
            if _listens(observer.ended, Observing.ended):
                on_end.append(observer.ended)
        #: The bound halves that listen, in list order (an :class:`Observing` no-op left out).
        self.on_start: tuple[Hook, ...] = tuple(on_start)
        self.on_end: tuple[Hook, ...] = tuple(on_end)

    def started(self, exchange: Exchange, path: str) -> None:
        for hook in self.on_start:
            hook(exchange, path)

    def ended(self, exchange: Exchange, path: str) -> None:
        for hook in self.on_end:
            hook(exchange, path)

    def __bool__(self) -> bool:
        return bool(self.on_start or self.on_end)

    def __len__(self) -> int:
        return len(self.all)


class Wrapping(Observing):
    """An observer in front of others (a sample's gate, a timer): it listens to exactly the halves they listen to,
    so wrapping a grader that ignores starts adds no call per start. Subclasses define both halves and call
    :attr:`observers` from them."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = Observers(observers)
        if not self.observers.on_start:
            self.started = super().started  # type: ignore[method-assign]  # the quiet half: Observers leaves it out
        if not self.observers.on_end:
            self.ended = super().ended  # type: ignore[method-assign]


def observers(items: Sequence[Observer] | Observers) -> Observers:
    """``items`` as :class:`Observers` (a source's argument: a list, or observers already gathered)."""
    return items if isinstance(items, Observers) else Observers(items)
