"""Syrupy snapshots of tool bindings: one JSON file per (scenario, tool)."""

from __future__ import annotations

import re
from typing import Any

from syrupy.extensions.json import JSONSnapshotExtension

_IMPL_PREFIX = re.compile(r"\[(?:mock|sdk)-")


class BindingSnapshot(JSONSnapshotExtension):
    """``JSONSnapshotExtension`` whose file name leaves out the implementation.

    ``test_binding_snapshot[mock-schema-zoo-class]`` and
    ``test_binding_snapshot[sdk-schema-zoo-class]`` share
    ``test_binding_snapshot[schema-zoo-class].json``: both servers must make
    TRL generate the same binding. (syrupy sorts keys; ``adapter.normalise``
    removes the per-spec class id.)
    """

    @classmethod
    def get_snapshot_name(cls, *, test_location: Any, index: Any = 0) -> str:
        return _IMPL_PREFIX.sub("[", super().get_snapshot_name(test_location=test_location, index=index), count=1)
