"""Client targets that run in a Python of their own: the virtual environment each needs, and a warm fork server in it.

Some clients cannot be imported beside orsbench: platoon 0.4.0 and benchflow 0.7.11 need Python 3.12, orsbench
runs on 3.11 too. Such a target is a *command adapter* (a script under ``orsbench/clients/commands/`` that imports
nothing of orsbench, as ``examples/adapters/adapter.mjs`` is for Node) run by the Python of a :class:`Venv`:

* :meth:`Venv.ensure` builds it on first use — ``python3.12 -m venv``, then the pinned packages — into an
  ignored folder (:func:`root`), under a file lock so parallel test workers build it once; ``.ci/run`` and the
  test fixtures call it (``python -m orsbench.clients.interpreters build`` from a shell). Where no such Python
  exists, :meth:`Venv.missing` says so and the targets are skipped with that reason.
* :meth:`Command.warm` starts, once per orsbench process and environment, a fork server in it
  (``orsbench/clients/commands/forkserver.py``) that has imported the client already: an episode then starts
  in milliseconds instead of the seconds ``import openreward`` takes, as the matrix's forked children do for the
  clients orsbench can import itself (platoon's own rollout workers are forked from a fork server too). The
  commands of one environment share its server (each loaded into it on first use), so platoon and benchflow
  import the openreward SDK once between them.

``orsbench versions`` runs such a target at another release: it builds a :class:`Venv` like this one with the
release pinned instead (:meth:`Venv.at_release`) in its own cache, and names that folder to the process that plays it
in the environment variable :attr:`Venv.variable` (``ORSBENCH_VENV_TRAINERS_3_12``); there the target runs that
build, and reports the version its marker pins.

Nothing here downloads at run time: only :meth:`Venv.build` reaches the package index, as ``pip install`` does.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode

__all__ = ["COMMANDS", "TRAINERS_312", "Command", "Venv", "find_python", "root"]

#: The command adapters (scripts run by another Python): they import nothing of orsbench.
COMMANDS = Path(__file__).resolve().parent / "commands"
#: Where the virtual environments live unless ``ORSBENCH_VENVS`` says otherwise (see :func:`root`).
VENVS_VARIABLE = "ORSBENCH_VENVS"
#: The file in a built environment that says what was installed (a changed pin rebuilds it).
MARKER = "orsbench-venv.json"
#: Seconds a fork server may take to import its client before it counts as broken.
WARM_START_S = 120.0


def root() -> Path:
    """The folder of the virtual environments: ``$ORSBENCH_VENVS``; else ``.venvs/`` of the checkout orsbench
    runs from (ignored by git); else ``~/.cache/orsbench/venvs`` (an installed orsbench)."""
    if given := os.environ.get(VENVS_VARIABLE):
        return Path(given).expanduser()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / ".venvs"
    return Path.home() / ".cache" / "orsbench" / "venvs"


@cache
def find_python(version: str) -> str | None:
    """A ``python<version>`` on this machine that runs and is that version (a pyenv shim may not be), else None."""
    for candidate in (shutil.which(f"python{version}"), *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))):
        if not candidate:
            continue
        try:
            done = subprocess.run(
                [str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.strip() == version:
            return str(candidate)
    return None


@dataclass(frozen=True)
class Venv:
    """A virtual environment some client targets run in: a Python version and the pinned packages.

    ``packages`` install with their dependencies; ``bare`` without (``pip install --no-deps``): a trainer whose
    own requirements pull in a training stack (platoon: wandb, datasets, textual; benchflow: litellm, Vertex AI)
    when the code its ORS path runs needs none of them — the packages that path does import are in ``packages``.
    """

    name: str
    python: str
    packages: tuple[str, ...] = ()
    bare: tuple[str, ...] = ()
    #: Where it is built, when not under :func:`root` (``orsbench versions``: one release's folder in its cache).
    folder: Path | None = None

    @property
    def variable(self) -> str:
        """The environment variable that points this environment at another build of it (one release of its client)."""
        return "ORSBENCH_VENV_" + re.sub(r"\W", "_", self.name.upper())

    @property
    def released(self) -> Path | None:
        """The other build :attr:`variable` names in this process (``orsbench versions`` playing a release), else None."""
        given = os.environ.get(self.variable) if self.folder is None else None
        return Path(given) if given else None

    @property
    def path(self) -> Path:
        return self.folder or self.released or root() / self.name

    @property
    def interpreter(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def spec(self) -> dict[str, Any]:
        return {"python": self.python, "packages": list(self.packages), "bare": list(self.bare)}

    def _built(self) -> dict[str, Any] | None:
        """What the built environment's marker says was installed (None: not built, or half-built)."""
        try:
            spec = json.loads((self.path / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return spec if isinstance(spec, dict) and self.interpreter.exists() else None

    @property
    def ready(self) -> bool:
        """Built, with exactly these pins (another build :attr:`variable` names: built on this Python, its pins its own)."""
        built = self._built()
        if built is None:
            return False
        return built == self.spec or (self.released is not None and built.get("python") == self.python)

    def at_release(self, requirements: tuple[str, ...], folder: Path) -> Venv:
        """This environment with ``requirements`` (``platoon==0.3.0``) in place of the pins of the same packages, built
        in ``folder``: what ``orsbench versions`` installs for one release of a client that runs here."""

        def name(requirement: str) -> str:
            return requirement.partition("==")[0].strip().lower().replace("_", "-")

        given = {name(r): r for r in requirements}
        bare = tuple(given.pop(name(r), r) for r in self.bare)
        packages = tuple(given.pop(name(r), r) for r in self.packages)
        return replace(self, bare=bare, packages=packages + tuple(given.values()), folder=folder)

    def missing(self) -> str | None:
        """Why it cannot be used now (no such Python here, or not built yet and how to build it), else None."""
        if self.ready:
            return None
        if find_python(self.python) is None:
            return f"no Python {self.python} on this machine (python{self.python} not on PATH, none under ~/.pyenv)"
        return f"its Python {self.python} environment is not built: python -m orsbench.clients.interpreters build {self.name}"

    def version_of(self, distribution: str) -> str:
        """The version of ``distribution`` this environment pins (what it runs once built, whether built here or not)."""
        built = self._built() if self.released is not None else None
        pins = [*built.get("bare", []), *built.get("packages", [])] if built is not None else [*self.bare, *self.packages]
        for requirement in pins:
            name, _, version = requirement.partition("==")
            if name.split("[")[0].strip().lower().replace("_", "-") == distribution.lower() and version:
                return version.strip()
        return "not pinned"

    def ensure(self, progress: Callable[[str], None] = lambda line: None) -> str | None:
        """Build it unless it is ready; None when ready, else why it cannot be (no such Python, a failed install)."""
        if self.ready:
            return None
        python = find_python(self.python)
        if python is None:
            return self.missing()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.parent / f"{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it: wait, then find it ready
            if self.ready:
                return None
            try:
                self.build(python, progress)
            except (OSError, subprocess.SubprocessError) as exc:
                return f"building {self.path} failed: {exc}"
        return None

    def build(self, python: str, progress: Callable[[str], None] = lambda line: None) -> None:
        """Make the environment afresh; the marker is written last, so a half-built one is never taken as ready."""
        shutil.rmtree(self.path, ignore_errors=True)
        started = time.monotonic()
        progress(f"building {self.path} with {python}: {', '.join(self.bare + self.packages)}")
        subprocess.run([python, "-m", "venv", str(self.path)], check=True, timeout=300)
        pip = [str(self.interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if self.bare:
            subprocess.run([*pip, "--no-deps", *self.bare], check=True, timeout=900)
        if self.packages:
            subprocess.run([*pip, *self.packages], check=True, timeout=900)
        (self.path / MARKER).write_text(json.dumps(self.spec))
        progress(f"built {self.path} in {time.monotonic() - started:.0f} s")


#: The Python 3.12 environment of the trainers orsbench cannot import (one environment, one build, for all of them):
#: platoon and benchflow without their own requirements (wandb, datasets, textual; litellm, Vertex AI), the openreward
#: SDK that both drive, and what ``import benchflow`` needs beyond it (httpx, which the newest openai no longer brings;
#: agent-client-protocol, tomli-w; its pyyaml and pydantic come with openreward).
TRAINERS_312 = Venv(
    "trainers-3.12",
    "3.12",
    packages=("openreward==0.1.167", "httpx==0.28.1", "agent-client-protocol==0.12.1", "tomli-w==1.2.0"),
    bare=("platoon==0.4.0", "benchflow==0.7.11"),
)

#: verifiers' tasksets (``OpenRewardTaskset``, the ``tasksets`` variant). tasksets 0.1.4 imports ``verifiers.v1.sandbox``,
#: ``verifiers.v1.utils.sandbox_utils`` and ``verifiers.v1.config``, which only the verifiers of its own commit has:
#: pip's resolution (verifiers 0.3.2.dev17: no ``verifiers.v1.utils.sandbox_utils``; 0.4.x: no ``verifiers.utils``) and
#: the index's ``verifiers==0.1.15.dev11`` (an earlier build under the same version: no ``verifiers.v1.sandbox``) all
#: fail ``from tasksets.openreward import OpenRewardTaskset``. So verifiers comes from its repository at the commit that
#: released tasksets 0.1.4 (a079eafa2, 2026-05-29), which needs GitHub at build time: this environment is built only
#: when named (``python -m orsbench.clients.interpreters build tasksets-3.12``), never by a plain ``build``.
TASKSETS_312 = Venv(
    "tasksets-3.12",
    "3.12",
    packages=(
        "verifiers @ https://github.com/PrimeIntellect-ai/verifiers/archive/a079eafa21df1759a630ac9a2c6707f73802f01c.zip",
        "tasksets[openreward]==0.1.4",
        "openreward==0.1.167",
    ),
)

#: Every environment a client target may run in (the targets name theirs; tests/test_platoon.py checks they are listed).
VENVS: tuple[Venv, ...] = (TRAINERS_312,)
#: Environments built only when named (their source is not on the package index alone): the variants that need them skip,
#: saying how to build them, until then.
ON_REQUEST: tuple[Venv, ...] = (TASKSETS_312,)


@dataclass(frozen=True)
class Command:
    """A command adapter (``script``, a file of :data:`COMMANDS`) run by ``venv``'s Python: a client target's play.

    ``preload``: the modules the fork server imports before it forks an episode (the client's heavy imports).
    """

    venv: Venv
    script: str
    preload: tuple[str, ...] = ()

    @property
    def argv(self) -> list[str]:
        return [str(self.venv.interpreter), str(COMMANDS / self.script)]

    @property
    def shell(self) -> str:
        """The command line, for ``orsbench check-client --cmd``."""
        import shlex

        return " ".join(shlex.quote(part) for part in self.argv)

    @property
    def path(self) -> str:
        return str(COMMANDS / self.script)

    def warm(self) -> WarmServer:
        """The fork server of this command's environment, with this command loaded (:meth:`preload` of a target).

        One server per environment in this process, started on first use: the commands of one environment (platoon's
        and benchflow's) share it, so the modules they share (the openreward SDK) are imported once.
        """
        server = _WARM.get(self.venv.name)
        if server is None or not server.alive:
            server = _WARM[self.venv.name] = WarmServer.start(self.venv, self.script, self.preload)
        else:
            server.load(self.script, self.preload)
        return server

    @property
    def warmed(self) -> bool:
        """Whether this process's fork server of its environment runs with this command loaded (:meth:`play` forks there)."""
        server = _WARM.get(self.venv.name)
        return server is not None and self.path in server.loaded and server.reachable

    def play(self, episode: AdapterEpisode) -> None:
        """Run the command on ``episode`` (its variables are this process's environment under the contract).

        Through the fork server a parent process warmed (the matrix forks its children from one), else as a
        child process of its own. The command writes the contract's lines itself; a non-zero exit status is
        passed on as :class:`~orsbench.clients.transcript.ClientExited`.
        """
        from orsbench.clients.transcript import ClientExited

        if self.warmed:
            code = _WARM[self.venv.name].play(dict(os.environ), script=self.script)
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            # The command is in this process's group: a SIGTERM to the group reaches it, and this process waits for
            # it to end (a Python handler, not SIG_IGN: the command starts with the default, which exec restores).
            previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
            try:
                code = subprocess.run(self.argv, stdin=subprocess.DEVNULL, check=False).returncode
            finally:
                signal.signal(signal.SIGTERM, previous)
        if code:
            raise ClientExited(code)


#: The fork server of each environment (by :attr:`Venv.name`) this process started.
_WARM: dict[str, WarmServer] = {}


@dataclass
class WarmServer:
    """A fork server (``commands/forkserver.py``) in a :class:`Venv`, with its adapter scripts imported and ready.

    Started by the orsbench process that plays episodes, stopped by its PID when that process exits (or when its
    stdin closes, should the process die without cleaning up). Forked children of that process (the matrix's)
    ask it for episodes through :meth:`play`; :meth:`load` adds another adapter of the same environment.
    """

    process: subprocess.Popen[bytes]
    socket_path: str
    owner: int = field(default_factory=os.getpid)
    #: The adapter scripts (paths) the server has imported, the first one its default.
    loaded: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, venv: Venv, script: str, preload: tuple[str, ...]) -> WarmServer:
        folder = tempfile.mkdtemp(prefix="orsbench-warm-")  # 0700: only this user reaches the socket
        path = os.path.join(folder, "fork.sock")
        argv = [str(venv.interpreter), str(COMMANDS / "forkserver.py"), path, str(COMMANDS / script), *preload]
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        server = cls(process, path, loaded=[str(COMMANDS / script)])
        atexit.register(server.stop)
        assert process.stdout is not None
        ready = _read_line(process.stdout, WARM_START_S)
        if ready != b"ready\n":
            server.stop()
            raise RuntimeError(f"the fork server in {venv.path} did not start (it said {ready!r}; exit {process.poll()})")
        return server

    @property
    def alive(self) -> bool:
        """Still running (asked by the process that started it)."""
        return self.process.poll() is None

    @property
    def reachable(self) -> bool:
        """Still running, as a forked child of its starter can tell (``poll`` works only in the starter)."""
        try:
            os.kill(self.process.pid, 0)
        except OSError:
            return False
        return os.path.exists(self.socket_path)

    def load(self, script: str, preload: tuple[str, ...] = ()) -> None:
        """Import another adapter script of this environment (and its modules) into the server, once."""
        path = str(COMMANDS / script)
        if path in self.loaded:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(WARM_START_S)
            conn.connect(self.socket_path)
            conn.sendall(json.dumps({"load": path, "preload": list(preload)}).encode() + b"\n")
            answer = json.loads(conn.makefile("rb").readline() or b"{}")
        if answer.get("loaded") != path:
            raise RuntimeError(f"the fork server could not load {script}: {answer.get('failed') or answer!r}")
        self.loaded.append(path)

    def play(self, environ: Mapping[str, str], stdout: int = 1, stderr: int = 2, script: str | None = None) -> int:
        """Run one episode of an adapter script (default: the first loaded) with ``environ`` (its stdout and stderr
        on these fds); its exit status.

        The episode runs until it ends; the caller's deadline is enforced by killing the caller (the matrix kills
        its forked child): the server sees the connection close and kills the episode with it. A SIGTERM to the
        caller is passed on to the episode (it runs in the server's process group, not the caller's), and the caller
        waits for it to end: the episode gets the same chance to clean up as a command run directly.
        """
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.socket_path)
            chosen = {"script": str(COMMANDS / script)} if script is not None else {}
            request = json.dumps({"environ": dict(environ), **chosen}).encode() + b"\n"
            socket.send_fds(conn, [request], [stdout, stderr])

            def relay(signum: int, frame: Any) -> None:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"signal": signum}).encode() + b"\n")

            previous = signal.signal(signal.SIGTERM, relay)
            try:
                reader = conn.makefile("rb")
                for raw in reader:
                    message = json.loads(raw)
                    if "exit" in message:
                        return int(message["exit"])
            finally:
                signal.signal(signal.SIGTERM, previous)
            raise RuntimeError("the fork server closed the episode without its exit status")

    def stop(self) -> None:
        """Stop it by its PID (its process group: an episode still running goes with it)."""
        if os.getpid() != self.owner or self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(2)
                break
            except subprocess.TimeoutExpired:
                continue
        shutil.rmtree(os.path.dirname(self.socket_path), ignore_errors=True)


def _read_line(stream: IO[bytes], timeout: float) -> bytes:
    """One line from ``stream`` within ``timeout`` seconds (b"" when none came)."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            return b""
    return stream.readline()


def main(argv: list[str] | None = None) -> int:
    """``python -m orsbench.clients.interpreters build [NAME ...]``: build the environments the client targets need."""
    args = list(sys.argv[1:] if argv is None else argv)
    venvs = {venv.name: venv for venv in (*VENVS, *ON_REQUEST)}
    if not args or args[0] != "build" or set(args[1:]) - set(venvs):
        print(f"usage: python -m orsbench.clients.interpreters build [{' | '.join(venvs)}]", file=sys.stderr)
        return 2
    status = 0
    for name in args[1:] or [venv.name for venv in VENVS]:
        problem = venvs[name].ensure(progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(f"{name}: {problem or f'ready in {venvs[name].path}'}")
        # No such Python here is not an error (the targets are skipped, saying why); a failed install is.
        status = status or (1 if problem and find_python(venvs[name].python) else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
