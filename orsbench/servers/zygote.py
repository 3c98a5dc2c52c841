"""A preloaded server spawner: pay the imports once, fork one server per request.

``import openreward`` costs about 4.5 s of CPU (it pulls in anthropic, openai and
google-genai), and a test session that starts a dozen SDK twins would pay it a
dozen times. The zygote is a plain child process that imports everything a
server needs, starts no thread, and then forks a fresh server for each request
it reads on stdin. The forked child runs ``python -m MODULE ARGV`` (the launcher
asks for ``-m orsbench serve ...``) through :mod:`runpy`, exactly as a fresh
interpreter would, with its output in its own log file. The zygote itself
imports no front end: the modules to preload beyond the servers' own are named
on its command line by whoever starts it (``python -m orsbench.servers.zygote
orsbench.cli``), so the server layer never depends on the CLI.

Children are reaped by the kernel (``SIGCHLD`` ignored), so a caller that is not
their parent still stops them by PID and sees them gone; they die with the zygote,
which leaves when its launcher does (stdin closed). Used by the pytest
plugin; :func:`orsbench.servers.launch.start` falls back to a fresh interpreter
whenever the zygote is unavailable.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import runpy
import signal
import sys
import threading
import traceback
from types import ModuleType

from orsbench.registry import Registry, warm_modules


#: What a forked server still imported on its own before its first episode was over (read from the servers' own
#: ``sys.modules``): uvicorn's event loop, HTTP, WebSocket and lifespan protocols, which it picks at start-up; the
#: request log; and, in an SDK twin, what FastAPI and anyio import on the first request. About a tenth of a second
#: of CPU in every server, paid once here instead. A best effort: a name a dependency no longer has is skipped.
WARM = (
    "uvloop",
    "uvicorn.loops.auto",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
    "uvicorn.lifespan.on",
    "websockets.server",
    "orsbench.servers.request_log",
    "orsbench.servers.replay",
    "pydantic.v1",
    "anyio._backends._asyncio",
)


def load_registries(module: ModuleType) -> None:
    """Load every :class:`~orsbench.registry.Registry` ``module`` holds: the child's first listing imports nothing.

    Why: ``orsbench serve`` builds the command line's parser first, and that lists every subcommand, scenario and
    implementation — some sixty modules (jsonschema, attrs, the scenario modules), 0.25 s of CPU in each server.
    """
    for value in list(vars(module).values()):
        if isinstance(value, Registry):
            value.load()


def preload(extra: list[str]) -> None:
    """Import what a server needs for every implementation, then the ``extra`` modules and what their registries list."""
    import uvicorn  # noqa: F401

    import orsbench.servers.app  # noqa: F401
    import orsbench.servers.engine  # noqa: F401
    import orsbench.servers.faults  # noqa: F401

    orsbench.servers.faults.FAULTS.load()
    for name in extra:
        load_registries(importlib.import_module(name))
    warm_modules(WARM)
    # The SDK twins where their SDKs are installed (openreward's is the slow part; ors-sdk is cheap once fastapi is
    # in); without them mock servers still fork.
    warm_modules(("orsbench.servers.sdk_twin", "orsbench.servers.ors_sdk_twin"))


def _die_with_parent(parent: int) -> None:
    """Ask the kernel for ``SIGTERM`` when the zygote dies (Linux ``PR_SET_PDEATHSIG``).

    Why: the zygote leaves when its launcher goes away (stdin closes), and the
    launcher is the only one that knows these PIDs. A launcher killed before it
    stopped its servers (a pytest worker that died, a SIGKILL) used to leave
    every forked server running under init — hundreds of them, gigabytes of
    memory, after a few interrupted test runs. The zygote is single-threaded,
    so the signal cannot fire early when some other thread ends.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: the launcher's atexit is the only net
    if os.getppid() != parent:  # the zygote died between fork and prctl
        os._exit(0)


def _child(request: dict, parent: int) -> None:
    """In the forked child: become ``python -m MODULE ARGV`` with output to the request's log."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_parent(parent)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        module = request.get("module", "orsbench")
        sys.argv = [module, *request["argv"]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then leave without running the parent's atexit
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    preload(sys.argv[1:])
    if threading.active_count() != 1:
        # Forking a process with threads is unsafe; tell the launcher to start servers afresh.
        print(json.dumps({"error": f"{threading.active_count()} threads after preload"}), flush=True)
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    while True:
        line = sys.stdin.readline()
        if not line:
            return  # the launcher went away: leave, and the servers it forked go with it (_die_with_parent)
        request = json.loads(line)
        zygote = os.getpid()
        gc.freeze()  # the server's collections skip the preloaded heap, which then stays shared (not copied per server)
        pid = os.fork()
        if pid == 0:
            _child(request, zygote)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
