"""The registry of named checks.

A check is a plain function over :class:`~orsbench.checks.evidence.Evidence`
returning a :class:`~orsbench.checks.model.CheckOutcome`. Its registration carries
every fact about it, so a new check is one decorated function:

* which probe collects the evidence it reads;
* which checks must pass before its verdict means anything (``requires``: when
  one did not pass, the runner skips this check and names that one);
* the section of the wire-protocol notes it enforces (``docs/protocol.md §N``)
  and a one-line remediation;
* its **severity** — how much a failure matters. The rule of thumb:
  **required** when the reference client (openreward SDK) or TRL's
  OpenRewardSpec breaks, hangs, retries forever or trains on wrong data;
  **recommended** when the reference server does it and clients benefit but
  cope without it (a fallback, a retry, a default); **advisory** for a
  reference detail or a portability hint. Grades were checked against two
  server implementations (openreward 0.1.167 and ors-sdk 0.1.0): a grade
  follows what a real client does, not what one reference happens to send.
  The check function itself never sees its severity: tightening or relaxing a
  verdict never touches the logic.
* whether its failure **voids the findings on sessions' requests** graded after it (``voids_sessions``: a
  balancer without affinity makes the session and call checks fail for the front's sake, not the code's);
* whether it can be judged **passively** from traffic a proxy saw
  (:mod:`orsbench.checks.passive`): ``passive`` names the evidence it needs
  (any one suffices; ``a+b`` needs both); ``None`` for a check that needs a
  probe no client sends.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orsbench.checks.collector import PROBES  # re-exported: a check names the probe that collects its evidence
from orsbench.checks.model import Severity
from orsbench.registry import Registry

if TYPE_CHECKING:
    from orsbench.checks.evidence import Evidence
    from orsbench.checks.model import CheckOutcome

CheckFn = Callable[["Evidence"], "CheckOutcome"]

#: Where the section references point: the protocol as the reference speaks it, shipped with orsbench.
SPEC_DOCUMENT = "docs/protocol.md"

#: Passive evidence present whenever any fresh tool call went through.
CALLS = "@calls"
#: Present whenever any request went through.
ANY = "@any"
#: Present once an episode was played to ``finished: true``.
FINISHER = "@finisher"


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    probe: str
    spec: str
    remediation: str
    requires: tuple[str, ...]
    fn: CheckFn
    severity: Severity
    #: Evidence names that make it judgeable from observed traffic (``None``: it never is).
    passive: tuple[str, ...] | None = None
    #: What this check's failure says about every session's requests (``deployment.affinity``: "requests of one
    #: session reach different replicas"): a later finding of another group on sessions' requests is then not judged
    #: — a skip naming this check, never a verdict on the environment (:func:`orsbench.checks.runner.grade`).
    voids_sessions: str | None = None

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]


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
    "orsbench.checks.isolation",
    "orsbench.checks.deployment",
)
#: Every check, by id, in catalogue order: :data:`MODULES` order, then definition order within a module —
#: not import order, which depends on what a process happened to import first (a test, the zygote, the
#: proxy), so that ``orsbench check``, the passive grader and every report list the checks the same way.
CHECKS: Registry[Check] = Registry("check", modules=MODULES, key=lambda entry: entry.id)


def check(
    id: str,
    *,
    severity: Severity,
    title: str,
    probe: str,
    spec: str,
    remediation: str,
    requires: Iterable[str] = (),
    passive: tuple[str, ...] | None = None,
    voids_sessions: str | None = None,
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the check ``id`` (decorator); see the module docstring for each fact."""
    if probe not in PROBES:
        raise ValueError(f"check {id!r}: unknown probe {probe!r}")
    if not isinstance(severity, Severity):
        raise TypeError(f"check {id!r}: severity must be a Severity, got {severity!r}")

    def decorate(fn: CheckFn) -> CheckFn:
        CHECKS.register(
            Check(id, title, probe, spec, remediation, tuple(requires), fn, severity, passive, voids_sessions), origin=fn.__module__
        )
        return fn

    return decorate


def load_checks() -> Registry[Check]:
    """Import every check module (idempotent); the registry, in catalogue order."""
    return CHECKS.load()


def select(patterns: Iterable[str] | None) -> list[Check]:
    """The checks whose id matches any glob in ``patterns`` (all when none are given)."""
    checks = CHECKS.values()
    wanted = [p for p in (patterns or ()) if p]
    if not wanted:
        return checks
    return [c for c in checks if any(fnmatch.fnmatchcase(c.id, p) for p in wanted)]


def closure(selected: Iterable[Check]) -> list[Check]:
    """``selected`` plus every check they require, transitively, in registration order."""
    needed: set[str] = set()
    stack = [c.id for c in selected]
    while stack:
        check_id = stack.pop()
        if check_id in needed:
            continue
        needed.add(check_id)
        stack.extend(CHECKS[check_id].requires)
    return CHECKS.select(lambda c: c.id in needed)
