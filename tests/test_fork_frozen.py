"""orsbench.clientcheck.process.Fork: the child freezes the heap it inherits; the parent's own freezing stays as it was."""

from __future__ import annotations

import gc
from pathlib import Path

from orsbench.clientcheck.process import Fork


def test_the_child_freezes_what_it_inherits_and_the_parents_freeze_is_left_alone(tmp_path: Path) -> None:
    def body(workdir: Path) -> int:
        (workdir / "frozen").write_text(str(gc.get_freeze_count()))
        return 0

    gc.collect()
    gc.freeze()  # a host that froze its heap for good (conformance's workers do, after collection)
    try:
        frozen = gc.get_freeze_count()
        child = Fork("python -c pass", body).start({}, tmp_path / "out", tmp_path / "err", tmp_path)
        assert gc.get_freeze_count() == frozen  # a freeze-fork-unfreeze around the fork thawed it all
        assert child.wait(30) == 0, (tmp_path / "err").read_text()
    finally:
        gc.unfreeze()
    assert int((tmp_path / "frozen").read_text()) >= frozen  # its collections skip the parent's objects
