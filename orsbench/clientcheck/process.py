"""How a client under test is started: a command through ``/bin/sh``, or a built-in client forked ready.

Both kinds of :class:`Launch` give the runner (:mod:`.runner`) the same thing —
a :class:`ClientProcess` in a process group of its own, its stdout and stderr in
files, the adapter contract's variables in its environment — so every client
is watched, bounded, stopped and graded the same way:

* :class:`Command` runs a user's adapter command (``check-client --cmd``,
  ``orsbench clients URL --cmd``) by ``/bin/sh -c``;
* :class:`Fork` forks this process and runs a function in the child: a built-in
  client target whose library the parent imported once, so an episode starts in
  milliseconds instead of seconds (the matrix plays hundreds).

Why files and not pipes: no reader threads, so the parent may fork at any moment
(a fork taken while another thread holds a lock can leave the child waiting
forever), and a killed client still leaves what it printed.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orsbench.clientcheck import contract

#: Seconds between SIGTERM and SIGKILL of a client's process group.
GRACE_S = 1.0
#: Seconds a client ended mid-episode on purpose (a case's ``terminate_on``) gets between SIGTERM and SIGKILL to
#: delete its session and exit: a scheduler's or a ``timeout``'s grace is longer, a delete takes milliseconds.
TERMINATE_GRACE_S = 3.0

__all__ = ["GRACE_S", "TERMINATE_GRACE_S", "ClientProcess", "Command", "Fork", "Launch"]


class ClientProcess:
    """A started client: the leader of its own process group; :meth:`stop` ends the whole group."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self._popen = popen
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once the leader ended (negative: killed by that signal), else ``None``."""
        if self.returncode is not None:
            return self.returncode
        if self._popen is not None:
            self.returncode = self._popen.poll()
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.returncode = self.returncode if self.returncode is not None else -signal.SIGKILL
            return self.returncode
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        return self.returncode

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after :data:`GRACE_S`; reap the leader.

        Also when the leader already ended: children it left in the group (a wrapper script's client,
        an SDK's helper process) are killed too.
        """
        if self.poll() is None:
            self._signal(signal.SIGTERM)
            self.wait(GRACE_S)
        self._signal(signal.SIGKILL)
        if self.poll() is None:
            self.wait(5.0)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the client's whole process group (gone already: nothing happens)."""
        self._signal(sig)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def environment(variables: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with ``variables`` added — a ``None`` value takes that variable out
    (a case that withholds the openreward SDK's URL variables, inherited ones too)."""
    merged: dict[str, str | None] = {**os.environ, **variables}
    return {name: value for name, value in merged.items() if value is not None}


class Launch(Protocol):
    """One way to start a client with the contract's variables; the runner does the rest."""

    #: Seconds added to a case's deadline for the client's own start-up (a forked client is ready: 0 unless said).
    startup_s: float

    def shown(self, variables: Mapping[str, str | None]) -> str:
        """The command as reports show it (placeholders filled in; never a secret)."""
        ...

    def start(self, variables: Mapping[str, str | None], stdout: Path, stderr: Path, workdir: Path) -> ClientProcess:
        """Start the client with ``variables`` added to this environment (``None``: taken out), its output in ``stdout``/``stderr``."""
        ...


@dataclass(frozen=True)
class Command:
    """A client given as a command (the adapter contract, ``docs/clients.md``), run by ``/bin/sh -c``."""

    command: str
    startup_s: float = 0.0

    def shown(self, variables: Mapping[str, str | None]) -> str:
        return contract.expand(self.command, variables)

    def start(self, variables: Mapping[str, str | None], stdout: Path, stderr: Path, workdir: Path) -> ClientProcess:
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            process = subprocess.Popen(
                ["/bin/sh", "-c", self.shown(variables)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=environment(variables),
                start_new_session=True,  # its own process group: stopped as one
            )
        return ClientProcess(process.pid, process)


def _fork_frozen() -> int:
    """``os.fork()`` with this process's objects frozen out of the child's garbage collections.

    Why: a forked child shares the parent's memory until it writes to it, and a full collection in the
    child writes to the header of every object it traverses — the whole heap of a parent that imported
    the clients (openreward alone brings 4,700 modules), copied page by page in each of the hundreds of
    episodes the matrix forks. Frozen (``gc.freeze``), those objects are never traversed in the child.
    Measured on the 98 cells of conformance's ``clients-sdk`` batch, alternated under the same load: the
    forked clients' CPU 29.0 and 30.7 s without, 20.0 and 23.4 s with.

    The child freezes them itself, first thing (a freeze splices one list onto another: it writes to the
    two objects at the join, not to the heap), and the parent's own freezing is left alone: a host that
    froze its heap for good (conformance's workers, after collection) keeps it frozen — a freeze around
    the fork would end with ``gc.unfreeze()``, which thaws everything.
    """
    pid = os.fork()
    if pid == 0:
        gc.freeze()
    return pid


#: What a forked client runs: ``body(workdir) -> exit status``, with the contract's variables in ``os.environ``.
ForkBody = Callable[[Path], int]


@dataclass(frozen=True)
class Fork:
    """A client played by ``body`` in a child forked from this process (which already imported the client).

    ``label`` is the command line that plays the same client outside a fork (reports show it).
    The parent must not hold a lock another thread could need in the child: fork from one thread.
    """

    label: str
    body: ForkBody
    startup_s: float = 0.0

    def shown(self, variables: Mapping[str, str | None]) -> str:
        return self.label

    def start(self, variables: Mapping[str, str | None], stdout: Path, stderr: Path, workdir: Path) -> ClientProcess:
        out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = _fork_frozen()
        if pid:
            os.close(out)
            os.close(err)
            return ClientProcess(pid)
        code = 70  # EX_SOFTWARE: the body itself fell over
        try:
            os.setsid()  # its own process group, as a command's: stopped as one
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)  # not the parent's handlers (a CLI's, pytest's)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.close(out)
            os.close(err)
            # Python's own streams too, where a host (pytest's capture) had pointed them somewhere other than fds 1 and 2.
            sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            for name, value in variables.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            code = self.body(workdir)
        except BaseException:  # noqa: BLE001 - the child must end here, never return into the parent's code
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)  # skip atexit: an SDK's loop threads would otherwise delay the exit
