"""Every pinned defect names the package whose code does it, and the file and line there — read from the install.

The pin is on the package that does it: the client, the SDK it inherits, or the server it talks to
(``firehorse-get-task-env-name`` is the openreward client's KeyError on ors-sdk's /task answer; ``inspect-mean-over-scored``
is inspect_ai's scoring under a flag orsbench's inspect target passes). Its text — the strict xfail's reason, the docs'
line — says ``<package> <version>, <file>:<line>``, and that line of the installed file holds what the pin says.
"""

from __future__ import annotations

import glob
import importlib.metadata
import re
from pathlib import Path

import pytest

from orsbench.clients.targets import CLIENT_TARGETS, CLIENT_VARIANTS
from orsbench.upstream.defects import DEFECTS, UPSTREAM_CLIENTS, Defect, Source

#: Distributions of other Pythons: the command targets' virtual environment (platoon and benchflow need 3.12).
_COMMAND_VENVS = {t.package: t.command.venv for t in (*CLIENT_TARGETS.values(), *CLIENT_VARIANTS.values()) if t.command is not None}
#: Distributions a command target's environment installs beside its client (tasksets' harness, verifiers from its commit).
_BESIDE = {"verifiers": "tasksets"}
#: The distribution each upstream label names (its first word; the SDK's client is the ``openreward`` package).
_PACKAGES = {"openreward": "openreward", "ors-sdk": "ors-sdk", "trl": "trl", "inspect-openreward": "inspect-openreward",
             "inspect_ai": "inspect_ai", "firehorse-cli": "firehorse-cli", "platoon": "platoon", "benchflow": "benchflow", "tasksets": "tasksets", "verifiers": "verifiers"}  # fmt: skip


def _installed_file(source: Source) -> Path | None:
    try:
        root = Path(str(importlib.metadata.distribution(source.package).locate_file("")))
    except importlib.metadata.PackageNotFoundError:
        venv = _COMMAND_VENVS.get(_BESIDE.get(source.package, source.package))
        found = glob.glob(str(venv.path / "lib" / "python3*" / "site-packages")) if venv is not None else []
        if not found:
            return None
        root = Path(found[0])
    path = root / source.path
    return path if path.is_file() else None


def _installed_version(package: str, path: Path) -> str:
    """The version of ``package`` where ``path`` (its file) is installed: this Python's, or a command environment's."""
    if package in _COMMAND_VENVS:
        return _COMMAND_VENVS[package].version_of(package)
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        site = next(parent for parent in path.parents if parent.name == "site-packages")
        return next(importlib.metadata.distributions(name=package, path=[str(site)])).version


@pytest.mark.parametrize("defect", list(DEFECTS.values()), ids=list(DEFECTS))
def test_the_pin_names_its_package_and_file_and_line(defect: Defect) -> None:
    assert defect.at is not None, f"[{defect.id}] say where: at=Source(package, path, line, words on that line)"
    reason = defect.mark().kwargs["reason"]
    assert f"{defect.at.path}:{defect.at.line}" in reason and defect.upstream in reason, reason
    assert re.search(r"\.py:\d+", reason), reason
    assert _PACKAGES[defect.upstream.split()[0]] == defect.at.package, f"[{defect.id}] {defect.upstream} is not {defect.at.package}"
    assert defect.upstream in UPSTREAM_CLIENTS


@pytest.mark.parametrize("defect", list(DEFECTS.values()), ids=list(DEFECTS))
def test_the_named_line_does_what_the_pin_says(defect: Defect) -> None:
    assert defect.at is not None
    path = _installed_file(defect.at)
    if path is None:
        pytest.skip(f"{defect.at.package} is not installed here (nor in a command target's environment)")
    version = defect.upstream.split()[1]
    installed = _installed_version(defect.at.package, path)
    assert installed == version, f"[{defect.id}] pinned against {defect.upstream}, {installed} is installed"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert defect.at.line <= len(lines), f"{path} has {len(lines)} lines"
    assert defect.at.shows in lines[defect.at.line - 1], f"{defect.at}: {lines[defect.at.line - 1]!r}"


def test_the_get_task_keyerror_is_the_sdks_and_ors_sdks_task_answer_has_no_env_name() -> None:
    """The mechanism on both ends, read from the installed code: the SDK reads res['env_name'], ors-sdk's /task omits it."""
    defect = DEFECTS["firehorse-get-task-env-name"]
    assert defect.upstream.startswith("openreward ") and "ors/server.py:364" in defect.behaviour
    server = _installed_file(Source("ors-sdk", "ors/server.py", 364, ""))
    if server is None:
        pytest.skip("ors-sdk is not installed")
    assert server.read_text().splitlines()[363].strip() == 'return {"task": task}'


def test_inspect_mean_over_scored_is_inspect_ais_and_says_orsbench_passes_the_flag() -> None:
    import inspect

    from orsbench.clients.targets.inspect_eval import command_line

    defect = DEFECTS["inspect-mean-over-scored"]
    assert defect.upstream.startswith("inspect_ai ") and "--no-fail-on-error" in defect.behaviour and "orsbench's choice" in defect.behaviour
    assert '"--no-fail-on-error"' in inspect.getsource(command_line)  # the flag the pin says orsbench passes
