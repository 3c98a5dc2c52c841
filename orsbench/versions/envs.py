"""One cached environment per release: built once, shared by parallel runs under a file lock, reused afterwards.

Why a virtual environment *with* the system's site-packages. A release's environment must run the client at that
release and orsbench itself (its servers, its runner, its checks) — and TRL's needs torch and transformers, far too
big to install thirty times. So each release gets ``python -m venv --system-site-packages --without-pip`` and pip
(the system's, run by the environment's Python) installs the release's requirements *into* it, resolving them
against what is already there: the venv's site-packages come first on ``sys.path``, so the release and every
dependency it needs at another version shadow the system's; what the system already satisfies (orsbench's own
needs, torch) is shared, read-only. The caveat, said in docs/versions.md: a dependency the system satisfies is the
system's version, not necessarily what a fresh ``pip install`` of that release would pick today. pip rather than uv:
uv resolves a venv on its own and would install torch again into every TRL release's environment.

A client that runs in a Python of its own (platoon, benchflow: a command target, Python 3.12) gets no such venv: its
release is built as its own environment is (:class:`~orsbench.clients.interpreters.Venv`, on that Python, the
release pinned in place of the pinned one: :meth:`~orsbench.clients.interpreters.Venv.at_release`), and the release's
cases are played by this Python with :attr:`Built.environ` pointing the target at that environment.

The marker (``orsbench-release.json``, written last) says an environment is complete; a failed install leaves a
``failed.json`` with pip's last words instead, so the row says why and a second run does not try again for a day.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from orsbench.versions.releases import Release

if TYPE_CHECKING:
    from orsbench.clients.interpreters import Venv

__all__ = ["MARKER", "Built", "Cache", "Installer", "cache_root", "client_python", "command_venv", "install_release", "pip_installer", "venv_installer"]

MARKER = "orsbench-release.json"
FAILED = "failed.json"
#: Seconds a failed install is remembered (a release the index does not have, a wheel for no Python here).
FAILED_TTL_S = 24 * 3600
#: Where the environments live unless ``ORSBENCH_VERSIONS_CACHE`` says otherwise (outside any checkout).
CACHE_VARIABLE = "ORSBENCH_VERSIONS_CACHE"


def cache_root() -> Path:
    """``$ORSBENCH_VERSIONS_CACHE``, else ``~/.cache/orsbench/versions``."""
    return Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "orsbench" / "versions").expanduser()


class InstallError(Exception):
    """A release that cannot be installed here; the message is what pip said (its last lines)."""


#: Builds an environment for a release in a folder that does not exist yet (tests inject a fake).
Installer = Callable[[Release, Path], None]


def pip_installer(release: Release, path: Path, timeout: float = 900.0) -> None:
    """``venv --system-site-packages --without-pip``, then ``pip install`` of the release's requirements into it."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    argv = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "-q", *release.requirements]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise InstallError(f"pip install {' '.join(release.requirements)} took more than {timeout:g} s") from None
    if done.returncode != 0:
        said = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        raise InstallError(f"pip install {' '.join(release.requirements)} failed: " + " / ".join(said[-3:])[-500:])


def command_venv(client: str) -> Venv | None:
    """The environment a client runs in when orsbench cannot import it (a command target: platoon, benchflow), else None."""
    from orsbench.clients.targets import CLIENT_TARGETS

    if client not in CLIENT_TARGETS:
        return None
    command = CLIENT_TARGETS.get(client).command
    return command.venv if command is not None else None


def client_python(client: str) -> str | None:
    """The Python version a client's releases need when it is not this one (``3.12``), else None: what the package
    index is asked for (a release that requires 3.12 is not listed to this Python's pip)."""
    venv = command_venv(client)
    return venv.python if venv is not None else None


def venv_installer(release: Release, path: Path, venv: Venv) -> None:
    """A command target's release: its own environment (``venv``) with the release pinned, on the environment's Python."""
    from orsbench.clients.interpreters import find_python

    python = find_python(venv.python)
    if python is None:
        raise InstallError(f"{release.series.client} runs on Python {venv.python}, and there is none here (python{venv.python} not on PATH, none under ~/.pyenv)")
    venv.at_release(release.requirements, path).build(python)


def install_release(release: Release, path: Path) -> None:
    """The default installer: a command target's own environment, else a venv beside this Python's packages."""
    venv = command_venv(release.series.client)
    if venv is None:
        pip_installer(release, path)
    else:
        venv_installer(release, path, venv)


@dataclass(frozen=True)
class Built:
    """An environment ready to run (``python``, with ``environ`` added to its variables), or why it is not
    (``error``); ``reused`` when it was there already.

    A command target's release is played by this Python (``python`` is ``sys.executable``), ``environ`` naming the
    release's own environment to the target (:attr:`~orsbench.clients.interpreters.Venv.variable`).
    """

    release: Release
    python: Path | None
    error: str | None = None
    reused: bool = False
    seconds: float = 0.0
    environ: dict[str, str] = field(default_factory=dict)


@dataclass
class Cache:
    """The release environments under ``folder``: :meth:`ensure` builds one at most once, whoever asks."""

    folder: Path
    installer: Installer = install_release
    progress: Callable[[str], None] = lambda line: None

    def path(self, release: Release) -> Path:
        return self.folder / "envs" / release.key

    def _beside(self, release: Release, suffix: str) -> Path:
        """A file beside the release's folder (its lock, its failure): the key plus ``suffix`` (versions hold dots)."""
        return self.path(release).parent / (release.key + suffix)

    def _ready(self, release: Release) -> Path | None:
        path = self.path(release)
        try:
            spec = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return path / "bin" / "python" if spec.get("requirements") == list(release.requirements) else None

    def _built(self, release: Release, python: Path, *, reused: bool = False, seconds: float = 0.0) -> Built:
        """The ready environment as a run uses it: its own Python, or (a command target) this one pointed at it."""
        venv = command_venv(release.series.client)
        if venv is None:
            return Built(release, python, reused=reused, seconds=seconds)
        return Built(release, Path(sys.executable), reused=reused, seconds=seconds, environ={venv.variable: str(python.parent.parent)})

    def _failed(self, release: Release) -> str | None:
        try:
            failed = json.loads(self._beside(release, ".failed.json").read_text())
        except (OSError, ValueError):
            return None
        return str(failed["error"]) if time.time() - failed.get("at", 0) < FAILED_TTL_S else None

    def ensure(self, release: Release) -> Built:
        """The release's environment, built under a lock unless it is ready (or failed within a day)."""
        if (python := self._ready(release)) is not None:
            return self._built(release, python, reused=True)
        path = self.path(release)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._beside(release, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run may be building it: wait, then find it ready
            if (python := self._ready(release)) is not None:
                return self._built(release, python, reused=True)
            if (error := self._failed(release)) is not None:
                return Built(release, None, error, reused=True)
            shutil.rmtree(path, ignore_errors=True)
            started = time.monotonic()
            self.progress(f"installing {' '.join(release.requirements)} into {path}")
            try:
                self.installer(release, path)
            except (InstallError, OSError, subprocess.SubprocessError) as exc:
                error = str(exc) if isinstance(exc, InstallError) else f"building {path} failed: {exc}"
                shutil.rmtree(path, ignore_errors=True)
                self._beside(release, ".failed.json").write_text(json.dumps({"at": time.time(), "error": error}))
                return Built(release, None, error, seconds=time.monotonic() - started)
            (path / MARKER).write_text(json.dumps({"requirements": list(release.requirements), "at": time.time()}))
            seconds = time.monotonic() - started
            self.progress(f"installed {release.label} in {seconds:.0f} s")
            return self._built(release, path / "bin" / "python", seconds=seconds)

    def size(self) -> int:
        """Bytes the environments take on disk (what BENCHMARKS.md records)."""
        total = 0
        for root, _dirs, files in os.walk(self.folder / "envs"):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    continue
        return total
