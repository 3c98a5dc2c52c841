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
from dataclasses import dataclass
from pathlib import Path

from orsbench.versions.releases import Release

__all__ = ["MARKER", "Built", "Cache", "Installer", "pip_installer", "cache_root"]

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


@dataclass(frozen=True)
class Built:
    """An environment ready to run (``python``), or why it is not (``error``); ``reused`` when it was there already."""

    release: Release
    python: Path | None
    error: str | None = None
    reused: bool = False
    seconds: float = 0.0


@dataclass
class Cache:
    """The release environments under ``folder``: :meth:`ensure` builds one at most once, whoever asks."""

    folder: Path
    installer: Installer = pip_installer
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

    def _failed(self, release: Release) -> str | None:
        try:
            failed = json.loads(self._beside(release, ".failed.json").read_text())
        except (OSError, ValueError):
            return None
        return str(failed["error"]) if time.time() - failed.get("at", 0) < FAILED_TTL_S else None

    def ensure(self, release: Release) -> Built:
        """The release's environment, built under a lock unless it is ready (or failed within a day)."""
        if (python := self._ready(release)) is not None:
            return Built(release, python, reused=True)
        path = self.path(release)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._beside(release, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run may be building it: wait, then find it ready
            if (python := self._ready(release)) is not None:
                return Built(release, python, reused=True)
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
            return Built(release, path / "bin" / "python", seconds=seconds)

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
