"""Syrupy snapshots of what TRL generates for each tool (P5): one JSON file per scenario and tool.

Each file holds the server's description and ``input_schema``, TRL's binding
outcome and warnings, the generated signature, annotations, docstring and
qualified name, what GRPO collects, and ``get_json_schema(method)``. Mock and
SDK twin share the file (``snapshots.BindingSnapshot``), so they must agree.
Update with ``pytest conformance/ --snapshot-update`` — in one process.

(A module of its own: syrupy matches every snapshot file against every test
of the module that owns it when it looks for unused snapshots.)
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.adapter import document
from conformance.params import ToolCase, tool_cases
from conformance.snapshots import BindingSnapshot


@pytest.mark.parametrize("case", tool_cases(), indirect=True)
def test_binding_snapshot(case: ToolCase, snapshot: Any) -> None:
    assert document(case.binding) == snapshot.use_extension(BindingSnapshot)
