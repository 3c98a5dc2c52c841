"""The registry of named checks.

A check is a plain function over :class:`~orsbench.checks.evidence.Evidence`
returning an :class:`~orsbench.checks.model.Outcome`. Its registration says
which probe collects the evidence it reads, which checks must pass before its
verdict means anything (``requires``: when one did not pass, the runner skips
this check and names that one), the section of the wire-protocol notes it
enforces (a section of ``docs/protocol.md``: ``§N``), and a one-line remediation. Severity is *not* here: it lives in
:mod:`orsbench.checks.policy`, so a check never decides how much it matters.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orsbench.checks.collector import PROBES  # re-exported: a check names the probe that collects its evidence
from orsbench.registry import load_modules

if TYPE_CHECKING:
    from orsbench.checks.evidence import Evidence
    from orsbench.checks.model import Outcome

CheckFn = Callable[["Evidence"], "Outcome"]

#: Where the section references point: the protocol as the reference speaks it, shipped with orsbench.
SPEC_DOCUMENT = "docs/protocol.md"


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    probe: str
    spec: str
    remediation: str
    requires: tuple[str, ...]
    fn: CheckFn

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]


CHECKS: dict[str, Check] = {}
#: Where each check was defined: (its module, the order it was registered in) — the catalogue-order key.
_ORIGIN: dict[str, tuple[str, int]] = {}

#: The modules that register checks, in catalogue order (see :mod:`orsbench.registry`).
MODULES = (
    "orsbench.checks.discovery",
    "orsbench.checks.dataset",
    "orsbench.checks.session",
    "orsbench.checks.call",
    "orsbench.checks.reward",
    "orsbench.checks.http",
    "orsbench.checks.tools",
    "orsbench.checks.quality",
    "orsbench.checks.binding",
)


def check(
    id: str,
    *,
    title: str,
    probe: str,
    spec: str,
    remediation: str,
    requires: Iterable[str] = (),
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the check ``id`` (decorator)."""
    if probe not in PROBES:
        raise ValueError(f"check {id!r}: unknown probe {probe!r}")

    def decorate(fn: CheckFn) -> CheckFn:
        if id in CHECKS:
            raise ValueError(f"check {id!r} registered twice")
        CHECKS[id] = Check(id, title, probe, spec, remediation, tuple(requires), fn)
        _ORIGIN[id] = (fn.__module__, len(_ORIGIN))
        return fn

    return decorate


def load_checks() -> dict[str, Check]:
    """Import every check module (idempotent) and return the registry in catalogue order.

    Catalogue order is :data:`MODULES` order, then definition order within a module — not import order,
    which depends on what a process happened to import first (a test, the zygote, the proxy), so that
    ``orsbench check``, the passive grader and every report list the checks the same way.
    """
    load_modules(MODULES)
    rank = {module: index for index, module in enumerate(MODULES)}
    last = (len(rank), len(_ORIGIN))
    origin = {check_id: (rank.get(module, len(rank)), seq) for check_id, (module, seq) in _ORIGIN.items()}
    order = sorted(CHECKS, key=lambda check_id: origin.get(check_id, last))
    if list(CHECKS) != order:
        ordered = {check_id: CHECKS[check_id] for check_id in order}
        CHECKS.clear()
        CHECKS.update(ordered)
    return CHECKS


def select(patterns: Iterable[str] | None) -> list[Check]:
    """The checks whose id matches any glob in ``patterns`` (all when none are given)."""
    checks = list(load_checks().values())
    wanted = [p for p in (patterns or ()) if p]
    if not wanted:
        return checks
    return [c for c in checks if any(fnmatch.fnmatchcase(c.id, p) for p in wanted)]


def closure(selected: Iterable[Check]) -> list[Check]:
    """``selected`` plus every check they require, transitively, in registration order."""
    registry = load_checks()
    needed: set[str] = set()
    stack = [c.id for c in selected]
    while stack:
        check_id = stack.pop()
        if check_id in needed:
            continue
        needed.add(check_id)
        stack.extend(registry[check_id].requires)
    return [c for c in registry.values() if c.id in needed]
