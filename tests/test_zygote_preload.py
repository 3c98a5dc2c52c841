"""The server zygote loads the registries of the modules it preloads, so a forked server's parser imports nothing."""

from __future__ import annotations

import types

from orsbench.registry import Registry
from orsbench.servers import zygote


def test_the_registries_a_preloaded_module_holds_are_loaded() -> None:
    loaded: list[str] = []
    module = types.ModuleType("fake_front_end")

    class Recording(Registry[object]):
        def load(self) -> None:
            loaded.append(self.kind)

    module.COMMANDS = Recording("command")  # type: ignore[attr-defined]
    module.SCENARIOS = Recording("scenario")  # type: ignore[attr-defined]
    module.other = object()  # type: ignore[attr-defined]
    zygote.load_registries(module)
    assert sorted(loaded) == ["command", "scenario"]
