"""Grade any ORS client: serve a case, run the client's command on it, judge it from both ends.

The public API (``orsbench check-client``, the pytest option ``--ors-client-cmd``
and ``orsbench matrix`` all use it)::

    from orsbench.clientcheck import cases, get_case, run_case, grade

    run = run_case("python -m my_adapter", get_case("sparse-reward+stream-drop"), timeout=20)
    for result in grade(run):                      # CheckResult, as `orsbench check` reports them
        print(result.id, result.status, result.message)

* :func:`cases` — every case (:class:`Case`: a scenario, optionally under a fault), catalogue order;
* :func:`run_case` — serve one case on 127.0.0.1, run the command under a deadline → :class:`CaseRun`;
* :func:`grade` — the client checks' verdicts on a :class:`CaseRun` (ids like ``client.tool_runs``);
* :func:`check_client` — many cases, one :class:`~orsbench.checks.runner.Report` (ids name the case);
* :data:`CLIENT_CHECKS` — the checks' registry; :mod:`.contract` — the adapter contract's names.

The contract itself is in ``docs/clients.md``; the rules in ``docs/protocol.md`` §12.
"""

from orsbench.clientcheck.cases import CASES, Case, cases, get_case
from orsbench.clientcheck.checks import CLIENT_CHECKS, ClientCheck, Role, checks
from orsbench.clientcheck.runner import CaseRun, run_case
from orsbench.clientcheck.suite import check_client, grade, scoped

__all__ = [
    "CASES",
    "CLIENT_CHECKS",
    "Case",
    "CaseRun",
    "ClientCheck",
    "Role",
    "cases",
    "check_client",
    "checks",
    "get_case",
    "grade",
    "run_case",
    "scoped",
]
