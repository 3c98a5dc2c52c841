"""The one registry pattern (orsbench.registry.Registry): names, order, duplicates, lazy loading."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

import pytest

from orsbench.registry import DuplicateName, Registry, UnknownName


@dataclass(frozen=True)
class Entry:
    name: str
    weight: int = 0


def test_register_get_and_list_in_registration_order() -> None:
    things: Registry[Entry] = Registry("thing")
    a, b = things.register(Entry("a")), things.register(Entry("b"))
    assert things.get("a") is a and things["b"] is b
    assert things.names() == ["a", "b"] and things.values() == [a, b]
    assert "a" in things and "zzz" not in things and len(things) == 2


def test_unknown_name_lists_what_exists_and_is_a_value_and_key_error() -> None:
    things: Registry[Entry] = Registry("thing")
    things.register(Entry("a"))
    with pytest.raises(UnknownName, match=r"unknown thing 'b'; known: a"):
        things.get("b")
    with pytest.raises(ValueError):
        things.get("b")
    with pytest.raises(KeyError):
        things["b"]
    assert str(UnknownName("plain message")) == "plain message"


def test_a_second_entry_under_one_name_is_refused_and_the_same_one_is_idempotent() -> None:
    things: Registry[Entry] = Registry("thing")
    first = things.register(Entry("a"))
    assert things.register(first) is first
    with pytest.raises(DuplicateName, match="thing 'a' registered twice"):
        things.register(Entry("a", weight=1))


def test_decorator_forms_and_explicit_names() -> None:
    funcs: Registry[object] = Registry("function", key=lambda fn: fn.__name__)

    @funcs.register
    def alpha() -> None: ...

    @funcs.register(name="b")
    def beta() -> None: ...

    assert funcs.names() == ["alpha", "b"] and funcs.get("b") is beta


def test_modules_load_lazily_once_and_list_in_catalogue_order(tmp_path, monkeypatch) -> None:
    """Listing order is the modules tuple's order, then definition order — not import order."""
    pkg = tmp_path / "regpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from orsbench.registry import Registry\nTHINGS = Registry('thing', modules=('regpkg.first', 'regpkg.second'),"
        " key=lambda fn: fn.__name__)\n"
    )
    for module, names in (("first", ("f1", "f2")), ("second", ("s1",))):
        body = "from regpkg import THINGS\n" + "".join(f"@THINGS.register\ndef {n}(): pass\n" for n in names)
        (pkg / f"{module}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import regpkg

        import regpkg.second  # imported first, out of catalogue order
        assert "regpkg.first" not in sys.modules
        assert regpkg.THINGS.names() == ["f1", "f2", "s1"]  # the first lookup loaded the rest
        extra = regpkg.THINGS.register(lambda: None, name="late")
        assert regpkg.THINGS.names()[-1] == "late" and regpkg.THINGS.get("late") is extra
    finally:
        for name in [m for m in sys.modules if m == "regpkg" or m.startswith("regpkg.")]:
            del sys.modules[name]


def test_temporarily_registers_for_a_block_only() -> None:
    things: Registry[Entry] = Registry("thing")
    with things.temporarily(Entry("dummy")) as dummy:
        assert things.get("dummy") is dummy
    assert "dummy" not in things
    with pytest.raises(UnknownName):
        things.unregister("dummy")


def test_select_filters_in_order() -> None:
    things: Registry[Entry] = Registry("thing")
    for name, weight in (("a", 1), ("b", 0), ("c", 2)):
        things.register(Entry(name, weight))
    assert [e.name for e in things.select(lambda e: e.weight > 0)] == ["a", "c"]


def test_replaced_stands_in_at_the_same_place_and_restores_the_original() -> None:
    things: Registry[Entry] = Registry("thing")
    a, b = things.register(Entry("a")), things.register(Entry("b"))
    stand_in = Entry("a", weight=9)
    with things.replaced(stand_in):
        assert things.get("a") is stand_in and things.names() == ["a", "b"]
    assert things.get("a") is a and things.values() == [a, b]
    with pytest.raises(UnknownName):
        with things.replaced(Entry("zzz")):
            pass
