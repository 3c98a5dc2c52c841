"""Serve a user's own ``Environment`` class(es) with their SDK's ``Server`` (openreward, or ors-sdk).

Environment authors check *their* code, not a scenario of ours: a target
``path/to/file.py:Class`` or ``package.module:Class[,Class2]`` names the
classes; this module imports them, hands them to the reference
``openreward.environments.Server`` unchanged (with the same timing patches the
SDK twin uses, so ``--ttl`` and ``--ping-interval`` still apply) and serves the
app on 127.0.0.1 with :func:`orsbench.servers.app.serve_forever`.

Run as ``python -m orsbench.servers.user_app TARGET --ready-file F`` by
:func:`orsbench.servers.launch.start` (given an :class:`AppTarget`); it writes its URL
to the ready file like every other orsbench server, and is stopped by its PID.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbench import protocol
from orsbench.config import ServerConfig, read_config_file

#: How a user spells an app where a scenario could be meant too: ``app:`` + :class:`AppTarget` text.
PREFIX = "app:"
#: Directories (``os.pathsep``-separated) to import the target's module from, ahead of
#: ``sys.path``: how a class importable in the caller's process is importable here too.
APP_PATH_ENV = "ORSBENCH_APP_PATH"


class AppTargetError(ValueError):
    """The target cannot be loaded; the message says what to fix."""


@dataclass(frozen=True)
class AppTarget:
    """``FILE.py:Class[,Class2]`` or ``module:Class[,Class2]``: the typed target the launcher starts."""

    source: str
    classes: tuple[str, ...]
    #: Directories the module is imported from, ahead of ``sys.path`` (a class the caller imported).
    path: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "AppTarget":
        text = text.removeprefix(PREFIX)
        source, sep, names = text.rpartition(":")
        classes = tuple(n.strip() for n in names.split(",") if n.strip())
        if not sep or not source or not classes:
            raise AppTargetError(
                f"{text!r} is not FILE.py:Class or module:Class (e.g. my_env.py:MyEnv, mypkg.env:MyEnv,Other)"
            )
        return cls(source, classes)

    @property
    def is_file(self) -> bool:
        return self.source.endswith(".py") or os.sep in self.source or "/" in self.source

    def __str__(self) -> str:
        return f"{self.source}:{','.join(self.classes)}"


def _import_source(target: AppTarget) -> Any:
    if target.is_file:
        path = Path(target.source).resolve()
        if not path.is_file():
            raise AppTargetError(f"no such file {target.source!r}")
        # A unique module name per file, so two apps named env.py do not collide in sys.modules.
        name = f"orsbench_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise AppTargetError(f"cannot import {target.source!r} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))  # its sibling imports work as when run as a script
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target.source)
    except ModuleNotFoundError as exc:
        raise AppTargetError(f"cannot import module {target.source!r}: {exc}") from exc


def _environment_bases() -> tuple[type, ...]:
    """The Environment base classes a target may use: openreward's, and ors-sdk's where installed."""
    from openreward.environments import Environment

    bases: list[type] = [Environment]
    try:
        import ors

        bases.append(ors.Environment)
    except ImportError:
        pass
    return tuple(bases)


def load_classes(target: AppTarget | str) -> list[type]:
    """Import the target and return its Environment classes, in the order named."""
    Environment = _environment_bases()

    if isinstance(target, str):
        target = AppTarget.parse(target)
    module = _import_source(target)
    classes = []
    for name in target.classes:
        value = getattr(module, name, None)
        if value is None:
            found = sorted(
                k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, Environment) and v not in Environment
            )
            raise AppTargetError(f"{target.source} has no {name!r}; Environment classes there: {', '.join(found) or 'none'}")
        if not (isinstance(value, type) and issubclass(value, Environment)):
            raise AppTargetError(f"{target.source}:{name} is not an Environment subclass (openreward.environments or ors)")
        classes.append(value)
    return classes


def env_names(classes: list[type]) -> list[str]:
    """The names the SDK routes these classes under (``cls.name().lower()``)."""
    return [c.name().lower() for c in classes]


def build_app(target: AppTarget | str, config: ServerConfig) -> Any:
    """The ``Server`` app for the target's classes (openreward's, or ors-sdk's for ``ors`` classes), plus the stats route.

    The openreward server gets the SDK twin's timing patches (TTL, keep-alive
    cadence, ...); ors-sdk is served exactly as it ships.
    """
    os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")
    from openreward.environments import Environment, Server

    from orsbench.servers.twin_support import stats_for, twin_app

    classes = load_classes(target)
    if all(issubclass(c, Environment) for c in classes):
        from orsbench.servers.sdk_twin import apply_config

        server = Server(classes)
        apply_config(server, config)
        impl = "sdk"
    else:
        import ors

        if not all(issubclass(c, ors.Environment) for c in classes):
            raise AppTargetError("serve openreward and ors-sdk Environment classes separately: one Server each")
        server = ors.Server(classes)
        impl = "ors-sdk"
    return twin_app(server, stats_for(impl, config))


def main(argv: list[str] | None = None) -> int:
    from orsbench.servers.app import announce_ready, serve_forever

    parser = argparse.ArgumentParser(prog="python -m orsbench.servers.user_app", description=__doc__)
    parser.add_argument("target", help="FILE.py:Class[,Class2] or module:Class[,Class2]")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--config-json", help="a ServerConfig as JSON")
    parser.add_argument("--config-file", help="a ServerConfig as JSON, in a file (how orsbench passes one: 0600)")
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    given = read_config_file(args.config_file) if args.config_file else args.config_json
    config = ServerConfig.from_json(given) if given else ServerConfig()
    sys.path[:0] = [p for p in os.environ.get(APP_PATH_ENV, "").split(os.pathsep) if p and p not in sys.path]
    try:
        app = build_app(args.target, config)
    except (AppTargetError, ValueError, TypeError, ImportError, SyntaxError) as exc:
        print(f"orsbench: cannot serve {args.target}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2

    on_ready = announce_ready(lambda url: f"orsbench: serving {args.target} (openreward Server) at {url}", args.ready_file)

    serve_forever(app, host=args.host, port=args.port, on_ready=on_ready)
    return 0


if __name__ == "__main__":
    sys.exit(main())
