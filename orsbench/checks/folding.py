"""Folding: judge an exchange on arrival and keep only the tallies, so evidence stays bounded.

A proxy in front of a trainer sees millions of exchanges. Past ``--evidence-limit``
the passive grader stops storing the families that grow with traffic (unnamed
``traffic.N``, played calls ``play.N``, cut calls ``cut.N``) and hands each such
exchange to a :class:`Folder` instead. The folder applies the per-exchange rules
of every check that counts all traffic (:mod:`orsbench.checks.verdicts`, the
same functions the checks call) and adds the outcome to
:class:`~orsbench.checks.evidence.Folded`, which those checks add to what they
count. An exchange that offends a check is kept rather than folded while that
check has fewer than :data:`EXAMPLES` kept past the limit — a message shows
three — so a failure that arrives late still fails, with its exchange as evidence.
"""

from __future__ import annotations

from collections import Counter

from orsbench.checks import verdicts
from orsbench.checks.evidence import REWARD_SAMPLE, Folded, Options, result_of, stream_of
from orsbench.wire.evidence import Exchange

#: Offending exchanges kept per check past the limit: the three a failure message shows.
EXAMPLES = 3

Judged = list[tuple[str, verdicts.Verdict]]


def http_verdicts(name: str, ex: Exchange) -> Judged:
    """What the ``http.*`` checks over every exchange judge of ``ex``."""
    return [
        ("http.json_content_type", verdicts.json_label(name, ex)),
        ("http.no_server_errors", verdicts.server_error(ex)),
        ("http.error_detail", verdicts.error_detail(ex)),
    ]


def call_verdicts(name: str, ex: Exchange) -> Judged:
    """What the per-call checks (over ``fresh_calls``) judge of a fresh call ``ex`` filed as ``name``."""
    refused = "refused" if verdicts.call_refused(name, ex) else ""
    judged: Judged = [("call.sse_content_type", refused or verdicts.not_event_stream(ex))]
    if ex.status != 200:
        return judged
    end_json = verdicts.end_json(ex)
    judged += [
        ("call.first_event_task_id", verdicts.task_id_first(ex)),
        ("call.end_event", verdicts.end_event(ex)),
        ("call.end_json", end_json),
        ("call.sse_framing", verdicts.sse_framing(ex)),
    ]
    if end_json != "":  # an error event, or a result that is no RunToolOutput: the result checks wait on end_json
        return judged
    _, body = result_of(ex)
    judged += [("call.tool_output_shape", verdicts.output_shape(body)), ("call.error_reason", verdicts.error_reason(name, body))]
    for _, output in verdicts.outputs_of([(name, body)]):
        finished = verdicts.finished_flag(output)
        judged += [("reward.well_formed", verdicts.reward(output)), ("reward.finished_bool", finished)]
        if finished is None:
            judged.append((verdicts.MISSING_FINISHED, ""))
    return judged


class Folder:
    """Folds exchanges into a :class:`Folded` digest, or says which must be kept as examples."""

    def __init__(self, folded: Folded, options: Options) -> None:
        self.folded = folded
        self.interval, self.allowed = verdicts.keepalive_allowed(options, None)
        self._examples: Counter[str] = Counter()

    def fold(self, name: str, ex: Exchange, *, call: bool = False) -> bool:
        """Tally ``ex`` (a fresh call when ``call``) and answer True; False when it must be kept instead."""
        judged = http_verdicts(name, ex) + (call_verdicts(name, ex) if call else [])
        offended = [check for check, verdict in judged if verdict]
        if any(self._examples[check] < EXAMPLES for check in offended):
            self._examples.update(offended)
            return False
        folded = self.folded
        folded.exchanges += 1
        folded.counts.update(check for check, verdict in judged if verdict is not None)
        folded.offending.update(offended)
        if call:
            self._stream(name, ex)
        return True

    def _stream(self, name: str, ex: Exchange) -> None:
        """The tallies of a folded call that are not counts: line endings, a reward sample, keep-alives."""
        folded = self.folded
        stream = stream_of(ex)
        if stream is None:
            return
        folded.line_endings |= stream.line_endings
        kind, body = result_of(ex)
        if kind == "result" and len(folded.rewards) < REWARD_SAMPLE:
            folded.rewards += [output.get("reward") for _, output in verdicts.outputs_of([(name, body)])]
        folded.longest = max(folded.longest, ex.elapsed)
        folded.comments += len(stream.comments)
        if ex.elapsed > self.allowed:
            folded.long_calls += 1
            gap = verdicts.longest_gap(ex)
            if folded.slowest is None or gap > folded.slowest[1]:
                folded.slowest = (name, gap, ex)

