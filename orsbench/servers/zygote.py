"""A preloaded server spawner: pay the imports once, fork one server per request.

``import openreward`` costs about 4.5 s of CPU (it pulls in anthropic, openai and
google-genai), and a test session that starts a dozen SDK twins would pay it a
dozen times. The zygote is a plain child process that imports everything a
server needs, starts no thread, and then forks a fresh server for each request
it reads on stdin. The forked child runs ``orsbench serve`` (``orsbench.cli.main``)
exactly as a fresh interpreter would, with its output in its own log file.

Children are reaped by the kernel (``SIGCHLD`` ignored), so a caller that is not
their parent still stops them by PID and sees them gone. Used by the pytest
plugin; :func:`orsbench.servers.launch.start` falls back to a fresh interpreter
whenever the zygote is unavailable.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback


def preload() -> None:
    """Import what ``orsbench serve`` needs for every implementation."""
    import uvicorn  # noqa: F401

    import orsbench.cli  # noqa: F401
    import orsbench.cli.serve  # noqa: F401
    import orsbench.servers.engine  # noqa: F401
    import orsbench.servers.faults  # noqa: F401

    orsbench.servers.faults.load_all()
    try:
        import orsbench.servers.sdk_twin  # noqa: F401  (imports openreward: the slow part)
    except ImportError:
        pass  # no SDK installed: mock servers still fork
    try:
        import orsbench.servers.ors_sdk_twin  # noqa: F401  (ors-sdk: cheap once fastapi is in)
    except ImportError:
        pass


def _child(request: dict) -> None:
    """In the forked child: become ``orsbench serve ARGV`` with output to the request's log."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        from orsbench.cli import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then leave without running the parent's atexit
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    preload()
    if threading.active_count() != 1:
        # Forking a process with threads is unsafe; tell the launcher to start servers afresh.
        print(json.dumps({"error": f"{threading.active_count()} threads after preload"}), flush=True)
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    while True:
        line = sys.stdin.readline()
        if not line:
            return  # the launcher went away: leave; servers already forked live on until stopped
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
