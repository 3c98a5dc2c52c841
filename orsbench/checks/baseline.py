"""The expected-failures baseline (YAML), as MCP's conformance suite keeps one.

A third-party server with known deviations can run ``orsbench check`` in CI
without going red on them, and without hiding new ones::

    # fixtures/expected-failures/ors-sdk.yaml
    expected_failures:
      - id: call.error_reason
        reason: "ors-sdk's RunToolError has no reason field"
      - session.messages            # a bare id works too

A listed check that fails is reported as an *expected* failure and does not
fail the run. A listed check that now **passes** fails the run as *stale*:
the deviation was fixed, so the entry must go (and the check then guards the
fix). Ids must name registered checks; globs are not allowed, because a stale
entry has to be one check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orsbench.checks.model import CheckResult, Status


class BaselineError(ValueError):
    """The baseline file cannot be used; the message says why."""


@dataclass(frozen=True)
class Baseline:
    entries: dict[str, str]  # check id → why it is expected to fail
    source: str = ""

    @classmethod
    def load(cls, path: str | Path, known_ids: set[str]) -> Baseline:
        try:
            data = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise BaselineError(f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise BaselineError(f"{path} is not valid YAML: {exc}") from None
        return cls.parse(data, known_ids, str(path))

    @classmethod
    def parse(cls, data: Any, known_ids: set[str], source: str = "<baseline>") -> Baseline:
        if data is None:
            return cls({}, source)
        items = data.get("expected_failures") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise BaselineError(f"{source}: expected a list under 'expected_failures'")
        entries: dict[str, str] = {}
        for item in items:
            if isinstance(item, str):
                check_id, reason = item, ""
            elif isinstance(item, dict) and isinstance(item.get("id"), str):
                check_id, reason = item["id"], str(item.get("reason") or "")
            else:
                raise BaselineError(f"{source}: each entry is a check id or {{id: ..., reason: ...}}, got {item!r}")
            if check_id not in known_ids:
                raise BaselineError(f"{source}: {check_id!r} is not a check id (see `orsbench check --list`)")
            entries[check_id] = reason
        return cls(entries, source)

    def mark(self, result: CheckResult) -> CheckResult:
        """Mark a listed failure ``expected`` and a listed pass ``stale`` (in place)."""
        if result.id not in self.entries:
            return result
        if result.status in (Status.FAIL, Status.WARN):
            result.baseline = "expected"
        elif result.status is Status.PASS:
            result.baseline = "stale"
            why = self.entries[result.id]
            result.message = (
                f"listed in the expected-failures baseline{f' ({why})' if why else ''} but passed: "
                f"remove it from {self.source or 'the baseline'}. {result.message}"
            )
        return result
