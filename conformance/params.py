"""Parametrisation of the suite: scenario × implementation (× tool × aspect), with xdist groups and known-defect xfails.

Test modules parametrise the ``target`` or ``case`` fixture (``conftest.py``)
indirectly with :func:`targets` or :func:`tool_cases`. Every parameter carries
an ``xdist_group`` mark naming its server, so all tests of one server run on
one worker, and the ``xfail(strict=True)`` of the known defect it trips, if
any (:mod:`orsbench.upstream.defects`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest

from orsbench.upstream import defects
from conformance.adapter import Binding
from conformance.targets import IMPLS, Declared, SuiteTarget, declared, group, slug
from orsbench.scenarios import generic_scenarios


class TargetParam(NamedTuple):
    scenario: str
    impl: str


class ToolParam(NamedTuple):
    scenario: str
    impl: str
    tool: str
    aspect: str | None = None


def targets(
    scenarios: list[str] | tuple[str, ...] | None = None,
    impls: tuple[str, ...] = IMPLS,
    defect: Callable[[Declared], defects.Defect | None] | None = None,
) -> list[Any]:
    """``pytest.param``s for the ``target`` fixture: scenario × implementation, with group and xfail marks.

    A test that needs the scenario served with another configuration (a short
    TTL, a fault) still takes its ``target``: it then runs on the worker that
    already serves the scenario, and starts only the extra server.
    """
    out = []
    for scenario in scenarios or generic_scenarios():
        for impl in impls:
            marks = [pytest.mark.xdist_group(group(scenario, impl))]
            if defect is not None:
                marks += defects.marks(defect(declared(scenario)))
            out.append(pytest.param(TargetParam(scenario, impl), id=f"{impl}-{scenario}", marks=marks))
    return out


def tool_cases(
    defect: Callable[..., defects.Defect | None] | None = None,
    aspects: tuple[str, ...] | None = None,
    scenarios: list[str] | tuple[str, ...] | None = None,
    impls: tuple[str, ...] = IMPLS,
) -> list[Any]:
    """``pytest.param``s for the ``case`` fixture: every tool a train task can call, per target (and aspect)."""
    out = []
    for scenario in scenarios or generic_scenarios():
        for impl in impls:
            for name, spec in declared(scenario).tools.items():
                for aspect in aspects or (None,):
                    found = None
                    if defect is not None:
                        found = defect(spec, aspect) if aspect is not None else defect(spec)
                    marks = [pytest.mark.xdist_group(group(scenario, impl)), *defects.marks(found)]
                    ident = f"{impl}-{scenario}-{slug(name)}" + (f"-{aspect}" if aspect else "")
                    out.append(pytest.param(ToolParam(scenario, impl, name, aspect), id=ident, marks=marks))
    return out


@dataclass
class ToolCase:
    """One tool of one target, bound alone by TRL (see :func:`conformance.adapter.bind_one`)."""

    target: SuiteTarget
    tool: str
    aspect: str | None
    binding: Binding

    @property
    def spec(self) -> dict[str, Any]:
        return self.binding.spec
