"""One registry pattern for every place people add things to orsbench.

Scenarios, checks, fault profiles, server implementations, client targets,
probes and CLI subcommands are each a :class:`Registry` of one type::

    SCENARIOS: Registry[type[Scenario]] = Registry("scenario", modules=(...), key=lambda cls: cls.name)
    register = SCENARIOS.register          # the decorator a scenario module uses

An entry carries its own facts (a check's severity, a scenario's suite
parameters, an implementation's extra) — the registry only names, orders and
finds entries. Why one class: the duplicate guard, the error for an unknown
name (which lists what exists), lazy loading and the order of a listing are
written once, the same for every extension point.

Modules are loaded lazily: the first lookup or listing imports the registry's
``modules`` tuple, in order. Why an explicit tuple and not a directory scan:
the tuple is the list a reader looks for, and an import error in a registered
module is a bug that surfaces, never a silently missing entry.

Listing order is *catalogue order*: the position of the module an entry was
defined in within ``modules``, then definition order within that module — not
import order, which depends on what a process happened to import first.
Entries registered from elsewhere (a test, a user's plugin) come after, in the
order they were registered.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Generic, TypeVar, overload

T = TypeVar("T")


def load_modules(modules: Iterable[str]) -> list[ModuleType]:
    """Import each of ``modules`` (registering what it defines), in order; the module objects.

    Python imports a module once, so calling this again costs a dict lookup per module.
    """
    return [importlib.import_module(name) for name in modules]


def warm_modules(modules: Iterable[str]) -> None:
    """Import each of ``modules`` that can be imported, before forking: what the children would import themselves.

    A best effort: a name a dependency no longer has (its internals moved, an extra not installed) is skipped, and
    each child then imports what it needs on its own.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


class UnknownName(KeyError, ValueError):
    """A name that is not registered; the message lists the names that are.

    A :class:`ValueError` (front ends turn it into a usage error, exit 2) and a
    :class:`KeyError` (code that indexes a registry like a dict keeps working).
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateName(ValueError):
    """Two entries registered under one name: a programming error, raised at import time."""


def _default_key(entry: object) -> str:
    name = getattr(entry, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"cannot tell the name of {entry!r}: give Registry a key= or register(..., name=)")
    return name


class Registry(Generic[T]):
    """Named entries of one kind, loaded from a tuple of modules on first use.

    ``kind`` names the kind in messages (``"unknown scenario 'x'; known: ..."``).
    ``key`` tells an entry's name (default: its ``name`` attribute).
    """

    def __init__(
        self,
        kind: str,
        *,
        modules: Iterable[str] = (),
        key: Callable[[T], str] = _default_key,
    ) -> None:
        self.kind = kind
        self.modules: tuple[str, ...] = tuple(modules)
        self._key = key
        self._entries: dict[str, T] = {}
        #: name → (the module that registered it, registration sequence): the catalogue-order key.
        self._origin: dict[str, tuple[str, int]] = {}
        self._sequence = 0
        self._loaded = False
        self._loading = False
        self._sorted = True

    # -- registering -------------------------------------------------------------------------

    @overload
    def register(self, entry: T, *, name: str | None = None, origin: str | None = None) -> T: ...

    @overload
    def register(self, entry: None = None, *, name: str | None = None, origin: str | None = None) -> Callable[[T], T]: ...

    def register(
        self, entry: T | None = None, *, name: str | None = None, origin: str | None = None
    ) -> T | Callable[[T], T]:
        """Add ``entry`` (returned unchanged, so this works as a decorator, bare or called).

        ``name`` overrides the key; ``origin`` is the module the entry belongs to (default: the
        entry's ``__module__``), which decides its place in a listing.
        """
        if entry is None:
            return lambda item: self.register(item, name=name, origin=origin)
        key = name if name is not None else self._key(entry)
        existing = self._entries.get(key)
        if existing is not None and existing is not entry:
            raise DuplicateName(f"{self.kind} {key!r} registered twice")
        if existing is None:
            self._entries[key] = entry
            module = origin or getattr(entry, "__module__", None) or ""
            self._origin[key] = (module, self._sequence)
            self._sequence += 1
            self._sorted = False
        return entry

    def unregister(self, name: str) -> T:
        """Remove and return the entry ``name`` (tests that add a temporary entry)."""
        self._origin.pop(name, None)
        try:
            return self._entries.pop(name)
        except KeyError:
            raise self._unknown(name) from None

    @contextmanager
    def temporarily(self, entry: T, *, name: str | None = None) -> Iterator[T]:
        """Register ``entry`` for the duration of a ``with`` block (a test's dummy extension)."""
        self.load()
        key = name if name is not None else self._key(entry)
        self.register(entry, name=key, origin="<temporary>")
        try:
            yield entry
        finally:
            self.unregister(key)

    @contextmanager
    def replaced(self, entry: T, *, name: str | None = None) -> Iterator[T]:
        """Stand ``entry`` in for the registered entry of the same name, in its place, for a ``with`` block.

        Why: a test that breaks one existing entry (a check that raises) must see the rest of the
        catalogue, in its order, unchanged — and the original back afterwards, whatever happens.
        """
        key = name if name is not None else self._key(entry)
        original = self.get(key)  # UnknownName when there is nothing to stand in for
        self._entries[key] = entry
        try:
            yield entry
        finally:
            self._entries[key] = original

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> Registry[T]:
        """Import :attr:`modules` once (idempotent; re-entrant while they import)."""
        if not self._loaded and not self._loading:
            self._loading = True
            try:
                load_modules(self.modules)
                self._loaded = True
            finally:
                self._loading = False
        return self

    def _ordered(self) -> dict[str, T]:
        self.load()
        if not self._sorted:
            rank = {module: index for index, module in enumerate(self.modules)}
            beyond = len(rank)
            order = sorted(self._entries, key=lambda n: (rank.get(self._origin[n][0], beyond), self._origin[n][1]))
            self._entries = {n: self._entries[n] for n in order}
            self._sorted = True
        return self._entries

    # -- finding -----------------------------------------------------------------------------

    def get(self, name: str) -> T:
        """The entry called ``name``; :class:`UnknownName` (listing the known names) otherwise."""
        entries = self._ordered()
        try:
            return entries[name]
        except KeyError:
            raise self._unknown(name) from None

    def _unknown(self, name: str) -> UnknownName:
        known = ", ".join(self._entries) or "none"
        return UnknownName(f"unknown {self.kind} {name!r}; known: {known}")

    def names(self) -> list[str]:
        """Every registered name, in catalogue order."""
        return list(self._ordered())

    def values(self) -> list[T]:
        return list(self._ordered().values())

    def items(self) -> list[tuple[str, T]]:
        return list(self._ordered().items())

    def select(self, predicate: Callable[[T], bool]) -> list[T]:
        """The entries for which ``predicate`` holds, in catalogue order."""
        return [entry for entry in self._ordered().values() if predicate(entry)]

    def __contains__(self, name: object) -> bool:
        return name in self._ordered()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._ordered()))

    def __len__(self) -> int:
        return len(self._ordered())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"
