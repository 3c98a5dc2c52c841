"""``orsbench check``: protocol conformance checks for any ORS server.

Evidence first: :mod:`.probes` drives the wire client through fixed probes
once and records every exchange; each check in :mod:`.discovery`,
:mod:`.dataset`, :mod:`.session`, :mod:`.call`, :mod:`.reward` and :mod:`.http`
is a plain function over that evidence;  each registration
(:mod:`.registry`) says how much it matters; :mod:`.runner` ties them together and :mod:`.baseline` applies an
expected-failures file. The catalogue is ``docs/checks.md``.
"""

from orsbench.checks.baseline import Baseline, BaselineError
from orsbench.checks.evidence import Evidence, Options
from orsbench.checks.model import CheckResult, CheckOutcome, Severity, Status
from orsbench.checks.registry import CHECKS, PROBES, Check, load_checks, select
from orsbench.checks.runner import EXIT_FAIL, EXIT_INTERNAL, EXIT_PASS, EXIT_UNREACHABLE, Report, run_checks

__all__ = [
    "CHECKS",
    "EXIT_FAIL",
    "EXIT_INTERNAL",
    "EXIT_PASS",
    "EXIT_UNREACHABLE",
    "PROBES",
    "Baseline",
    "BaselineError",
    "Check",
    "CheckResult",
    "Evidence",
    "Options",
    "CheckOutcome",
    "Report",
    "Severity",
    "Status",
    "load_checks",
    "run_checks",
    "select",
]
