"""What a user may point the checker at, and how it is brought up.

One target, five spellings, one resolver shared by ``orsbench check``, the
Python API (:func:`orsbench.check`) and the pytest plugin:

=======================  ==================================================================
``http://host:port``     a running server: nothing is started
``echo``                 a built-in scenario, served by orsbench (mock engine or SDK twin)
``my_env.py:MyEnv``      the environment author's own openreward ``Environment`` class(es),
``pkg.mod:MyEnv,Other``  served unchanged by the SDK ``Server`` (also spelled ``app:...``)
a class object           the same, for a class the caller has imported
``"python s.py {port}"`` any server command; ``{port}`` becomes a free port on 127.0.0.1
=======================  ==================================================================

Every server started here binds 127.0.0.1 and is stopped by its PID when the
``with`` block ends (:mod:`orsbench.servers.launch`).
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orsbench.config import ServerConfig
from orsbench.servers import launch
from orsbench.servers.launch import RunningServer
from orsbench.servers.user_app import PREFIX, AppTarget

Kind = Literal["url", "scenario", "app", "command"]
#: ``Class`` or ``ClassA,ClassB`` after the last colon of ``FILE.py:Class`` / ``module:Class``.
_CLASS_NAMES = re.compile(r"[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class CheckTarget:
    """A resolved target of a check: its kind and what to start (``value``, typed by kind).

    ``url`` and ``scenario``: the text; ``command``: the text or the argument list; ``app``: the
    :class:`~orsbench.servers.user_app.AppTarget` the launcher starts as it is.
    """

    kind: Kind
    value: str | tuple[str, ...] | AppTarget

    def __str__(self) -> str:
        if isinstance(self.value, AppTarget):
            return PREFIX + str(self.value)
        return " ".join(self.value) if isinstance(self.value, tuple) else self.value


def app_target(cls: type) -> CheckTarget:
    """The app target serving ``cls``, importable in the server process as it is in this one."""
    qualname, module = cls.__qualname__, cls.__module__
    if "<locals>" in qualname or "." in qualname:
        raise TypeError(f"{qualname} is not defined at module level: a server process cannot import it")
    source = inspect.getsourcefile(cls)
    if module == "__main__" or source is None:
        if source is None:
            raise TypeError(f"{cls!r} has no source file to serve it from")
        return CheckTarget("app", AppTarget(str(Path(source).resolve()), (qualname,)))
    # The directory the module was imported from: its file, up one level per package.
    root = Path(source).resolve().parents[module.count(".")]
    return CheckTarget("app", AppTarget(module, (qualname,), (str(root),)))


def resolve(target: Any) -> CheckTarget:
    """Say what ``target`` is (see the module docstring); ``ValueError`` names the spellings when unsure."""
    if isinstance(target, CheckTarget):
        return target
    if isinstance(target, AppTarget):
        return CheckTarget("app", target)
    if isinstance(target, type):
        return app_target(target)
    if isinstance(target, (list, tuple)):
        return CheckTarget("command", tuple(str(a) for a in target))
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"cannot check {target!r}: give a URL, a scenario name, FILE.py:Class, module:Class, a class or a command")
    text = target.strip()
    if "://" in text:
        return CheckTarget("url", text)
    if launch.PORT_PLACEHOLDER in text:
        return CheckTarget("command", text)
    if text.startswith(PREFIX):
        return CheckTarget("app", AppTarget.parse(text))  # AppTargetError (a ValueError) names the spelling
    source, colon, names = text.rpartition(":")
    if colon and source and _CLASS_NAMES.fullmatch(names):
        return CheckTarget("app", AppTarget.parse(text))
    if colon:  # host:port without a scheme: a URL, which the caller's check says how to fix
        return CheckTarget("url", text)
    return CheckTarget("scenario", text)


def start(
    target: CheckTarget, *, impl: str = "mock", config: ServerConfig | None = None, wait: float = 60.0
) -> RunningServer:
    """Start a scenario, an app or a command target on 127.0.0.1 (the caller stops it: ``server.stop()``)."""
    if target.kind == "url":
        raise ValueError(f"{target} is a URL: it is already running")
    if isinstance(target.value, AppTarget):
        return launch.start(target.value, config=config, timeout=wait)
    if target.kind == "command":
        return launch.start_command(target.value, wait=wait)
    return launch.start(str(target.value), impl=impl, config=config, timeout=wait)


@contextlib.contextmanager
def running(
    target: CheckTarget, *, impl: str = "mock", config: ServerConfig | None = None, wait: float = 60.0
) -> Iterator[RunningServer | None]:
    """Bring ``target`` up for the ``with`` block (``None`` for a URL: it is already up); stop it after."""
    if target.kind == "url":
        yield None
        return
    server = start(target, impl=impl, config=config, wait=wait)
    try:
        yield server
    finally:
        server.stop()


__all__ = ["CheckTarget", "app_target", "resolve", "running", "start"]
