"""The wheel, installed alone, is a working orsbench (issue 37, item 1).

Built from this checkout (``pip wheel --no-deps --no-build-isolation``: no download), installed
with ``--no-deps --no-index`` into a fresh virtual environment made with
``--system-site-packages`` — so the base dependencies (httpx, pydantic, uvicorn, …) come from this
machine's Python, but orsbench itself only from the wheel (asserted: the venv's copy is the one
imported). Every command runs from an empty directory with no ``PYTHONPATH``, as a user's would:
``orsbench check --scenario echo`` passes, ``orsbench explain`` prints a failing check's protocol
text from the copy the wheel carries, and a report's link to that text opens a file that has it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from orsbench.reports.links import sections_of, slug

ROOT = Path(__file__).resolve().parents[1]

#: Builds a wheel and a virtual environment, then runs five orsbench and pytest processes from it: about 40 s on
#: a quiet 2-core machine, 80 s on this shared one (load average ~20). `pytest -m slow tests/test_wheel.py` runs it.
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORSBENCH_DOCS_URL", "VIRTUAL_ENV")}
    return {**env, "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _run(argv: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the venv's bin folder, an empty working directory) with the wheel installed alone."""
    base = tmp_path_factory.mktemp("wheel")
    # A copy of what the build reads: pip builds in place (a build/ folder), and xdist workers may build at once.
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("orsbench", "training_smoke", "docs"):
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=junk)  # orsbench/docs/*.md stay links to docs/
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(base / "dist"), str(source)], base)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    assert "deprecat" not in (built.stdout + built.stderr).lower(), built.stderr[-3000:]  # project.license is an SPDX string
    [wheel] = (base / "dist").glob("orsbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"orsbench/docs/protocol.md", "orsbench/docs/checks.md"} <= set(names), [n for n in names if "docs" in n]
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], base)
    assert made.returncode == 0, made.stderr
    # This Python's pip installs into the venv (``--python``): no pip of its own to bootstrap there.
    pip = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", "--no-index", str(wheel)], base)
    assert pip.returncode == 0, pip.stderr[-3000:]
    work = base / "empty"
    work.mkdir()
    where = _run([str(venv / "bin" / "python"), "-c", "import orsbench; print(orsbench.__file__)"], work)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # the wheel's copy, not the checkout's
    return venv / "bin", work


def test_the_installed_wheel_checks_a_scenario(installed: tuple[Path, Path]) -> None:
    bin_, work = installed
    done = _run([str(bin_ / "orsbench"), "check", "--scenario", "echo", "-q"], work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "verdict: PASS" in done.stdout


def test_explain_and_a_reports_link_reach_the_protocol_text_once_installed(installed: tuple[Path, Path]) -> None:
    """A failing check (a planted ``reward-bool``): the Markdown report's §4.2 link opens the wheel's copy of
    docs/protocol.md at its heading, names ``orsbench explain``, and that command prints the section's text."""
    bin_, work = installed
    report = work / "report.md"
    done = _run([str(bin_ / "orsbench"), "check", "--scenario", "echo", "--fault", "reward-bool", "--only", "reward.*", "--markdown", str(report)], work)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    [row] = [line for line in report.read_text().splitlines() if "`reward.well_formed`" in line]
    [href] = re.findall(r"\[§4\.2\]\(([^)]+)\)", row)
    link = urlparse(href)
    path = Path(unquote(link.path))
    assert link.scheme == "file" and path.is_file() and str(path).startswith(str(bin_.parent)), href  # inside the venv
    assert link.fragment in {slug(heading) for heading in sections_of(path.read_text()).values()}, href
    assert "`orsbench explain reward.well_formed`" in row
    explained = _run([str(bin_ / "orsbench"), "explain", "reward.well_formed"], work)
    assert explained.returncode == 0, explained.stderr
    text = explained.stdout
    assert "rule: reward is a finite number or null" in text and "fix:" in text and "why it matters: required" in text
    assert "4.2 Rewards" in text and "`reward` is a JSON number or `null`" in text and href in text
    unknown = _run([str(bin_ / "orsbench"), "explain", "reward.wellformed"], work)
    assert unknown.returncode == 2 and "orsbench explain: error: no check 'reward.wellformed'; did you mean reward.well_formed" in unknown.stderr


def test_the_installed_plugin_checks_a_url_from_an_empty_directory(installed: tuple[Path, Path], ors_server_factory) -> None:
    """The wheel's pytest11 entry point: ``pytest --ors-url URL`` in a directory with no tests, one item per check."""
    from orsbench.checks import load_checks

    bin_, work = installed
    server = ors_server_factory("echo")
    done = _run([str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--ors-url", server.url, "-k", "discovery"], work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    discovery = [i for i in load_checks() if "discovery" in i]
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (passed|skipped|deselected)", done.stdout.strip().splitlines()[-1]))
    assert counts.get("passed", 0) + counts.get("skipped", 0) == len(discovery) and counts["deselected"] == len(load_checks()) - len(discovery), done.stdout[-1500:]
