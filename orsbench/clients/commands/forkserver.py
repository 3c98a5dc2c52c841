"""A fork server for a command adapter, run by the adapter's own Python: import the client once, fork per episode.

    <venv>/bin/python forkserver.py SOCKET ADAPTER.py [MODULE ...]

Why: a command adapter in another interpreter (``platoon_ors.py``) pays for ``import openreward`` — seconds — on
every episode. This server imports the given modules and the adapter once, then, for each connection on the Unix
socket ``SOCKET``, forks a child that runs the adapter's ``main()`` with the episode's environment, as platoon's
own rollout workers are forked ready from a fork server. It imports nothing of orsbench
(:mod:`orsbench.clients.interpreters` starts and stops it).

One episode per connection: the request is one JSON line ``{"environ": {...}}`` sent with two file descriptors
(the episode's stdout and stderr, ``SCM_RIGHTS``); the answers are ``{"pid": N}`` and, when the child ends,
``{"exit": STATUS}``. A connection closed before its child ends kills the child (the caller gave up: its
deadline). The server is single-threaded (a fork never copies a lock another thread holds), prints ``ready``
once listening, and exits when its stdin closes (its orsbench process is gone) or on SIGTERM.
"""

from __future__ import annotations

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
    spec = importlib.util.spec_from_file_location("orsbench_command_adapter", path)
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


def serve(path: str, adapter: Any) -> None:
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
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _child(adapter, dict(request.get("environ") or {}), list(fds))
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
                _send(conn, {"pid": pid})
            else:  # the caller's connection: closed (it gave up) before the child ended
                pid = key.data
                try:
                    data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if not data and pid in children:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
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
    if len(sys.argv) < 3:
        print("usage: forkserver.py SOCKET ADAPTER.py [MODULE ...]", file=sys.stderr)
        return 2
    path, script, preload = sys.argv[1], sys.argv[2], sys.argv[3:]
    for module in preload:
        importlib.import_module(module)
    adapter = _load_adapter(script)
    serve(path, adapter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
