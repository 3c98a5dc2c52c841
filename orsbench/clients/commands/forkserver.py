"""A fork server for command adapters, run by their own Python: import the clients once, fork per episode.

    <venv>/bin/python forkserver.py SOCKET [ADAPTER.py [MODULE ...]]

Why: a command adapter in another interpreter (``platoon_ors.py``, ``benchflow_ors.py``) pays for ``import
openreward`` — seconds — on every episode. This server imports the given modules and adapter once, then, for each
connection on the Unix socket ``SOCKET``, forks a child that runs an adapter's ``main()`` with the episode's
environment, as platoon's own rollout workers are forked ready from a fork server. One server serves every adapter
of its environment: a client the server has not loaded yet is loaded into it (its modules imported in the server,
once), so the clients that share a Python share its imports (the openreward SDK) and its process. It imports nothing
of orsbench (:mod:`orsbench.clients.interpreters` starts and stops it).

One request per connection, one JSON line:

* ``{"load": ADAPTER.py, "preload": [MODULE, ...]}`` imports the modules and the adapter in the server; the answer
  is ``{"loaded": ADAPTER.py}``, or ``{"failed": "<why>"}`` (the server goes on without it);
* ``{"environ": {...}, "script": ADAPTER.py}`` (``script`` left out: the adapter given on the command line), sent
  with two file descriptors (the episode's stdout and stderr, ``SCM_RIGHTS``), plays one episode: the answers are
  ``{"pid": N}`` and, when the child ends, ``{"exit": STATUS}``. A connection closed before its child ends kills the
  child (the caller gave up: its deadline); a line ``{"signal": 15}`` on it sends the child SIGTERM (the caller was
  told to stop, and passes it on: the child is in this server's process group, not the caller's).

The server is single-threaded (a fork never copies a lock another thread holds), prints ``ready`` once listening,
and exits when its stdin closes (its orsbench process is gone) or on SIGTERM.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any


def _load_adapter(path: str) -> Any:
    name = "orsbench_command_" + os.path.splitext(os.path.basename(path))[0]  # one module per adapter
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child(adapter: Any, environ: dict[str, str], fds: list[int]) -> None:
    """In the forked child: the episode's environment and output, then the adapter's ``main()``; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(environ)
        code = int(adapter.main() or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a crash is the episode's exit status 1, its traceback on its stderr
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass


def _load(adapters: dict[str, Any], script: str, preload: list[str]) -> dict[str, Any]:
    """Import ``preload`` and the adapter ``script`` into this server (once); the answer to a ``load`` request."""
    try:
        for module in preload:
            importlib.import_module(module)
        if script not in adapters:
            adapters[script] = _load_adapter(script)
    except Exception as exc:  # noqa: BLE001 - the caller learns why; episodes of that adapter then run cold
        return {"failed": f"{type(exc).__name__}: {exc}"}
    return {"loaded": script}


def serve(path: str, adapters: dict[str, Any], default: str | None = None) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    children: dict[int, socket.socket] = {}  # pid -> its connection
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    while not stopping:
        for key, _ in selector.select(timeout=0.05):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    stopping = True  # the orsbench process that started this one is gone
            elif key.data == "accept":
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
                request = json.loads(message.split(b"\n", 1)[0] or b"{}")
                if "load" in request:
                    _send(conn, _load(adapters, str(request["load"]), [str(m) for m in request.get("preload") or ()]))
                    conn.close()
                    continue
                adapter = adapters.get(str(request.get("script") or default))
                if adapter is None:
                    _send(conn, {"exit": 2, "error": f"no adapter {request.get('script') or default!r} loaded"})
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                gc.freeze()  # the episode's collections skip the imported clients, whose pages then stay shared
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _child(adapter, dict(request.get("environ") or {}), list(fds))
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
                _send(conn, {"pid": pid})
            else:  # the caller's connection: a signal to pass on, or closed (it gave up) before the child ended
                pid = key.data
                try:
                    data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if pid not in children:
                    continue
                try:
                    if not data:
                        os.kill(pid, signal.SIGKILL)
                    for line in data.splitlines():
                        signum = json.loads(line or b"{}").get("signal")
                        if signum in (signal.SIGTERM, signal.SIGINT):
                            os.kill(pid, signum)  # the caller was told to stop: the episode is, as if run directly
                except (ProcessLookupError, ValueError):
                    pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
                selector.unregister(conn)
                conn.close()
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: forkserver.py SOCKET [ADAPTER.py [MODULE ...]]", file=sys.stderr)
        return 2
    path, script, preload = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None), sys.argv[3:]
    adapters: dict[str, Any] = {}
    if script is not None:
        for module in preload:
            importlib.import_module(module)
        adapters[script] = _load_adapter(script)
    serve(path, adapters, script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
