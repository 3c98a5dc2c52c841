"""The severity policy: how much each check's failure matters.

Kept apart from the checks (as OpenEnv RFC 008 does) so that tightening or
relaxing the verdict never touches a check. The rule of thumb:

* **required** — the reference client (openreward SDK) or TRL's OpenRewardSpec
  breaks, hangs, retries forever or trains on wrong data when this fails;
* **recommended** — the reference server does it and clients benefit, but they
  cope without it (a fallback, a retry, a default);
* **advisory** — a reference detail or a portability hint.

Every registered check must have an entry (a test enforces it). Grades were
checked against two server implementations (openreward 0.1.167 and ors-sdk
0.1.0): a grade follows what a real client does, not what one reference
happens to send.
"""

from __future__ import annotations

from orsbench.checks.model import Severity

R, REC, ADV = Severity.REQUIRED, Severity.RECOMMENDED, Severity.ADVISORY

POLICY: dict[str, Severity] = {
    # discovery
    "discovery.health": R,
    "discovery.version": ADV,
    "discovery.list_environments": R,
    "discovery.tools_listing": R,
    "discovery.tools_schema": R,
    "discovery.tool_names_unique": R,
    "discovery.tool_names_format": ADV,
    "discovery.tools_optional_fields": ADV,  # both reference servers omit some; clients default them
    "discovery.splits": R,
    "routing.default_env_redirect": R,
    "routing.env_case_insensitive": ADV,
    "routing.unknown_env": ADV,
    # dataset
    "dataset.num_tasks": R,
    "dataset.tasks_list": R,
    "dataset.num_tasks_matches_list": R,
    "dataset.task_matches_list": R,
    "dataset.task_negative_index": ADV,
    "dataset.task_range_slice": R,
    "dataset.invalid_split_400": R,
    "dataset.invalid_index_400": R,
    "dataset.env_name_echo": R,  # the openreward client reads body["env_name"]: KeyError, and TRL's train_dataset fails
    # sessions
    "session.create_session_sse": R,
    "session.create_session_unique": R,
    "session.create": R,
    "session.sdk_headers_accepted": R,
    "session.missing_sid_400": R,
    "session.duplicate_sid_400": R,
    "session.create_exactly_one_task_source": R,
    "session.create_task_spec": REC,
    "session.create_invalid_task_400": R,
    "session.create_unknown_env_404": REC,
    "session.task_tools_superset": R,
    "session.prompt": R,
    "session.messages": ADV,
    "session.ping": R,
    "session.ping_unknown_404": R,
    "session.unknown_sid_404": R,
    "session.delete": R,
    "session.ping_after_delete_404": R,
    "session.use_after_delete_404": R,
    "session.delete_idempotent": R,
    "session.recreate_deleted_sid": R,
    "session.starting_503": R,
    "session.ttl_reap": REC,
    "score_group.contract": REC,
    # calls
    "call.tool_inputs": REC,
    "call.sse_content_type": R,
    "call.sse_no_buffering": ADV,
    "call.first_event_task_id": R,
    "call.end_event": R,
    "call.end_json": R,
    "call.sse_framing": REC,
    "call.tool_output_shape": R,
    "call.chunk_reassembly": R,
    "call.chunk_size": ADV,
    "call.unknown_tool_ok_false": R,
    "call.input_validation_ok_false": R,
    "call.error_reason": REC,  # the openreward client infers a missing reason from the error text
    "call.episode_finishes": ADV,
    "call.finish_latch": R,
    "call.reason_precedence": REC,
    "call.resume_by_task_id": R,
    "call.unknown_task_id_error": R,
    "call.resume_running": R,
    "call.keepalive_interval": R,
    # rewards
    "reward.well_formed": R,
    "reward.finished_bool": R,
    "reward.terminal_reward": ADV,
    # tools on valid input (a real client breaks: see orsbench/checks/tools.py)
    "tool.no_crash_on_valid_input": R,
    "tool.no_hang": R,
    "tool.exercised": ADV,  # a tool no episode reached: the player may just not have found its use
    # quality beyond the wire (no client breaks; training suffers)
    "quality.reward_hacking": REC,
    "quality.answer_leak": REC,
    "quality.reward_deterministic": REC,
    "quality.descriptions": ADV,
    "quality.prompt_nonempty": REC,
    # http hygiene
    "http.json_content_type": REC,
    "http.malformed_body_4xx": REC,
    "http.wrong_method_405": ADV,
    "http.no_server_errors": ADV,
    "http.error_detail": ADV,
    # binding: what each client shows the model (orsbench/checks/binding.py)
    "binding.trl.crash": REC,
    "binding.trl.dropped_tool": REC,
    "binding.trl.reserved_name": REC,
    "binding.trl.lost_schema": ADV,
    "binding.trl.none_forwarded": REC,
    "binding.inspect.lost_type": ADV,
    "binding.inspect.provider_name": ADV,
}


def severity(check_id: str) -> Severity:
    """The policy's severity for ``check_id``; unknown ids are advisory (and a test flags them)."""
    return POLICY.get(check_id, Severity.ADVISORY)
