"""Which releases of a client to judge: release specs, each client's default set, and the package index's full list.

A :class:`Release` is one installable combination: the client target's package (or another package the series
varies, ``--vary``) at one version, plus companion pins held fixed across the series (``--with``: TRL at each of its
releases *with* the openreward SDK floor it allows). Releases of one :class:`Series` are ordered by version
(:mod:`packaging.version`) and bisected along that order.

The default set per client (:data:`DEFAULTS`) is data, chosen by hand from the consumers' pins and the changelogs:
the floors other projects pin, the releases where behaviour changed and the one before each, and the newest. The
full list of a package's releases (what bisection walks between two tested ones) comes from the package index
through pip's own client (``pip index versions``), cached beside the environments for a day.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

__all__ = ["DEFAULTS", "PACKAGES", "Release", "Series", "index_versions", "package_of", "parse_release", "sort_versions"]

#: The distribution each client target's releases are of (what ``--releases`` versions name by default).
PACKAGES: dict[str, str] = {
    "openreward": "openreward",
    "trl": "trl",
    "inspect": "inspect-openreward",
    "firehorse": "firehorse-cli",
    "ors": "ors-sdk",
    "platoon": "platoon",
    "benchflow": "benchflow",
}

#: Consumers' floors of the openreward SDK (docs/versions.md cites where each is pinned).
SDK_FLOORS = {"platoon": "0.1.33", "trl": "0.1.109", "inspect-openreward": "0.1.115", "verifiers": "0.1.123", "firehorse-cli": "0.1.127"}

#: Each client's default release set: ``version`` or ``version+pkg==v`` (a companion pin). About 30 in all.
DEFAULTS: dict[str, tuple[str, ...]] = {
    # The consumers' floors; 0.1.126/0.1.127 either side of the typed errors (ToolFailed, a dead session after a
    # tool failure); a release every ~10 since; the newest.
    "openreward": ("0.1.33", "0.1.80", "0.1.109", "0.1.115", "0.1.123", "0.1.126", "0.1.127", "0.1.140", "0.1.150", "0.1.160", "0.1.167"),
    # The adapter's changes (1.5.0 task tools, 1.8.0 environment-owned reward, 1.9.0 environment-owned dataset) and
    # the release before each, the newest; with the newest SDK and with the SDK floor TRL's extra allows.
    "trl": ("1.4.0", "1.5.0", "1.7.1", "1.8.0", "1.9.0", "1.12.0", "1.16.0", "1.9.0+openreward==0.1.109", "1.16.0+openreward==0.1.109"),
    "inspect": ("0.1.0", "0.1.1", "0.2.0", "0.3.0"),
    "firehorse": ("0.1.0", "0.1.2", "0.1.3", "0.1.4"),
    # Python 3.12 clients (each release its own 3.12 environment): platoon's every release from its first (0.2.0; its
    # ``platoon.envs.ors`` is the same in 0.2.1 and 0.3.0); benchflow's ORS reward seam, every few releases of the 0.7
    # line to the newest.
    "platoon": ("0.2.0", "0.3.0", "0.4.0"),
    "benchflow": ("0.7.0", "0.7.5", "0.7.11"),
}


def package_of(client: str) -> str:
    """The package a client's releases are of; a server series (``server:openreward``) is its own package's."""
    return PACKAGES.get(client) or client.removeprefix("server:")


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Versions oldest first by PEP 440 (an unparsable one sorts first, as text)."""

    def key(v: str) -> tuple[int, Version | str]:
        try:
            return (1, Version(v))
        except InvalidVersion:
            return (0, v)

    return sorted(set(versions), key=key)


@dataclass(frozen=True, order=True)
class Series:
    """Releases judged together: one client, the package whose versions change, the pins that do not."""

    client: str
    package: str
    pins: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``trl``, ``trl+openreward==0.1.109``; ``trl over openreward+trl==1.16.0`` where another package varies."""
        varied = "" if package_of(self.client) == self.package else f" over {self.package}"
        return self.client + varied + "".join(f"+{pin}" for pin in self.pins)

    def release(self, version: str) -> Release:
        return Release(self, version)


@dataclass(frozen=True, order=True)
class Release:
    """One release of a series: what gets installed into its own environment."""

    series: Series
    version: str

    @property
    def requirements(self) -> tuple[str, ...]:
        return (f"{self.series.package}=={self.version}", *self.series.pins)

    @property
    def label(self) -> str:
        """How reports name it: ``1.16.0`` or ``1.16.0+openreward==0.1.109``."""
        return self.version + "".join(f"+{pin}" for pin in self.series.pins)

    @property
    def key(self) -> str:
        """A file-name-safe key of what is installed (the environment's folder)."""
        return "_".join(r.replace("==", "-") for r in self.requirements)


def parse_release(client: str, spec: str, *, package: str | None = None, pins: tuple[str, ...] = ()) -> Release:
    """``1.16.0`` or ``1.16.0+openreward==0.1.109`` of ``client`` (its package unless ``package``); ValueError if malformed."""
    version, *extra = spec.strip().split("+")
    if not version or any("==" not in pin for pin in extra):
        raise ValueError(f"{spec!r}: a release is VERSION or VERSION+PACKAGE==VERSION (e.g. 1.16.0+openreward==0.1.109)")
    try:
        Version(version)
    except InvalidVersion:
        raise ValueError(f"{spec!r}: {version!r} is not a version") from None
    return Release(Series(client, package or package_of(client), tuple(sorted({*pins, *extra}))), version)


#: Seconds a cached list of a package's releases is trusted.
INDEX_TTL_S = 24 * 3600

#: Reads a package's releases from the index, as a Python version is offered them (None: this one); tests inject a
#: fake, nothing else reaches the network.
Lister = Callable[[str, str | None], list[str]]


def pip_index(package: str, python: str | None = None) -> list[str]:
    """``pip index versions PACKAGE``: the index's releases of ``package`` (raises RuntimeError when it cannot tell).

    ``python``: as that Python version is offered them (``3.12``: platoon requires it, so this Python's pip lists none).
    """
    wanted = ["--python-version", python] if python else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check", *wanted],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("Available versions:"):
            return sort_versions(v.strip() for v in line.split(":", 1)[1].split(","))
    raise RuntimeError(f"pip index versions {package} said: {(done.stderr or done.stdout).strip()[-300:] or 'nothing'}")


@dataclass
class Index:
    """The package index's release lists, cached in ``folder`` (one JSON file per package)."""

    folder: Path
    lister: Lister = pip_index
    asked: list[str] = field(default_factory=list)

    def versions(self, package: str, *, python: str | None = None) -> list[str]:
        """``package``'s releases on the index, oldest first, as ``python`` (None: this one) is offered them."""
        path = self.folder / f"index-{package}{'-py' + python if python else ''}.json"
        try:
            cached = json.loads(path.read_text())
            if time.time() - cached["at"] < INDEX_TTL_S:
                return list(cached["versions"])
        except (OSError, ValueError, KeyError):
            pass
        self.asked.append(package)
        versions = sort_versions(self.lister(package, python))
        self.folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"at": time.time(), "versions": versions}))
        return versions


def index_versions(folder: Path, package: str, python: str | None = None) -> list[str]:
    return Index(folder).versions(package, python=python)
