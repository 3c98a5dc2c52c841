"""HTTP hygiene checks across every exchange: content types, 4xx for bad input, 405, no 5xx, error details."""

from __future__ import annotations

from orsbench.checks import verdicts
from orsbench.checks.evidence import Evidence, answer, expect_status
from orsbench.checks.model import CheckOutcome, Severity, failed, passed, skipped
from orsbench.checks.registry import ANY, check

_path = verdicts.path_of


@check(
    "http.json_content_type",
    severity=Severity.RECOMMENDED,
    passive=(ANY,),
    title="JSON answers are labelled application/json",
    probe="timing",
    spec="§1.1",
    remediation="Send Content-Type: application/json with every JSON body (success and error alike).",
)
def json_content_type(ev: Evidence) -> CheckOutcome:
    wrong = []
    count = ev.folded.counts["http.json_content_type"]
    for name, ex in ev.exchanges.items():
        verdict = verdicts.json_label(name, ex)
        if verdict is None:
            continue
        count += 1
        if verdict:
            wrong.append(ex)
    if wrong:
        return failed(
            "; ".join(f"{e.method} {_path(e)} → {e.content_type or 'none'}" for e in wrong[:3]),
            {f"{e.method} {_path(e)}": e.content_type for e in wrong},
            *wrong[:3],
        )
    if not count:
        return skipped("no JSON answer was seen")
    return passed(f"{count} JSON answer(s) labelled application/json", count)


@check(
    "http.malformed_body_4xx",
    severity=Severity.RECOMMENDED,
    title="a body that is not JSON is answered 4xx, not 5xx",
    probe="call",
    spec="§1.1",
    remediation="Reject unparseable or incomplete request bodies with 422 (or 400) and a detail, before they reach environment code.",
)
def malformed_body_4xx(ev: Evidence) -> CheckOutcome:
    names = ("http.malformed.tasks", "http.malformed.create", "http.malformed.call")
    shown = [(n, ev.get(n)) for n in names if ev.get(n) is not None]
    if not shown:
        return skipped("not probed")
    wrong = [(n, ex) for n, ex in shown if ex.status is None or not 400 <= ex.status < 500]
    measured = {n.rsplit(".", 1)[1]: ex.status for n, ex in shown}
    if wrong:
        return failed("; ".join(f"{n.rsplit('.', 1)[1]}: {answer(ex)}" for n, ex in wrong), measured, *(ex for _, ex in wrong))
    return passed(f"{measured}", measured)


@check(
    "http.wrong_method_405",
    severity=Severity.ADVISORY,
    title="a wrong method is answered 405",
    probe="discovery",
    spec="§1",
    remediation="Answer a known path with the wrong method (GET /create) with 405 and an Allow header.",
)
def wrong_method_405(ev: Evidence) -> CheckOutcome:
    return expect_status(ev.get("http.wrong_method"), 405, "GET /create")


@check(
    "http.no_server_errors",
    severity=Severity.ADVISORY,
    passive=(ANY,),
    title="no request of the run was answered 5xx (besides 503 starting)",
    probe="timing",
    spec="§1.1",
    remediation="Answer bad input with 4xx and a detail; a 5xx tells clients the server is broken (and some retry it).",
)
def no_server_errors(ev: Evidence) -> CheckOutcome:
    errors = [ex for ex in ev.exchanges.values() if verdicts.server_error(ex)]
    if errors:
        return failed(
            "; ".join(f"{e.method} {_path(e)} → {answer(e)}" for e in errors[:3]),
            [f"{e.method} {_path(e)} {e.status}" for e in errors],
            *errors[:3],
        )
    total = len(ev.exchanges) + ev.folded.exchanges
    return passed(f"{total} exchange(s), no 5xx", total)


@check(
    "http.error_detail",
    severity=Severity.ADVISORY,
    passive=(ANY,),
    title="4xx answers carry a JSON detail",
    probe="timing",
    spec="§1.1",
    remediation='Send every error as JSON {"detail": <message>} so clients can show what went wrong.',
)
def error_detail(ev: Evidence) -> CheckOutcome:
    wrong = []
    count = ev.folded.counts["http.error_detail"]
    for ex in ev.exchanges.values():
        verdict = verdicts.error_detail(ex)
        if verdict is None:
            continue
        count += 1
        if verdict:
            wrong.append(ex)
    if wrong:
        measured = len(wrong) + ev.folded.offending["http.error_detail"]
        return failed("; ".join(f"{e.method} {_path(e)} → {answer(e)}" for e in wrong[:3]), measured, *wrong[:3])
    if not count:
        return skipped("no 4xx answer was seen")
    return passed(f"{count} 4xx answer(s) carry a detail", count)
