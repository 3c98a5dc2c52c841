"""orsbench.clientcheck.process.Fork: the child freezes the heap it inherits; the parent's own freezing stays as it was."""

from __future__ import annotations

import gc
from pathlib import Path

from orsbench.clientcheck.process import Fork


def _child_freeze_count(workdir: Path) -> int:
    def body(workdir: Path) -> int:
        (workdir / "frozen").write_text(str(gc.get_freeze_count()))
        return 0

    child = Fork("python -c pass", body).start({}, workdir / "out", workdir / "err", workdir)
    assert child.wait(30) == 0, (workdir / "err").read_text()
    return int((workdir / "frozen").read_text())


def test_the_child_freezes_what_it_inherits_and_the_parents_freeze_is_left_alone(tmp_path: Path) -> None:
    host_froze = gc.get_freeze_count() > 0  # conformance/conftest.py freezes a worker's heap after collection
    try:
        gc.unfreeze()
        tracked = len(gc.get_objects())
        assert _child_freeze_count(tmp_path) > tracked // 2  # its collections skip what it inherited

        gc.freeze()  # a host that froze its heap for good
        frozen = gc.get_freeze_count()
        _child_freeze_count(tmp_path)
        assert gc.get_freeze_count() == frozen  # a freeze-fork-unfreeze around the fork thawed it all
    finally:
        (gc.freeze if host_froze else gc.unfreeze)()
