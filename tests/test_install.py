"""`pip install orsbench` with no extra is enough to check and serve (README, "Install").

The extras' packages are made unimportable in the child processes (a
``sitecustomize`` on ``PYTHONPATH``), which is what a base install looks like
to orsbench; the check then starts its own mock server the usual way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orsbench import protocol

#: Import names of what only the extras install (pyproject.toml's optional-dependencies).
EXTRAS_ONLY = (
    "openreward", "fastapi", "trl", "torch", "transformers", "datasets", "aiohttp", "locust",
    "hypothesis", "hypothesis_jsonschema", "syrupy", "jmespath", "psutil", "vllm",
)

BLOCKER = f"""
import sys
BLOCKED = set({list(EXTRAS_ONLY)!r})
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Block())
"""


def base_install(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{root}", protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    return subprocess.run([sys.executable, "-m", "orsbench", *argv], env=env, capture_output=True, text=True, timeout=120)


def test_the_blocker_blocks(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import openreward"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "No module named 'openreward'" in done.stderr


def test_check_and_serve_need_no_extra(tmp_path: Path) -> None:
    done = base_install(tmp_path, "check", "--scenario", "echo")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verdict: PASS" in done.stdout


def test_the_sdk_twin_without_its_extra_names_the_extra(tmp_path: Path) -> None:
    done = base_install(tmp_path, "serve", "echo", "--impl", "sdk", "--port", "0")
    assert done.returncode == 2, done.stderr[-2000:]
    assert 'pip install "orsbench[sdk]"' in done.stderr and "Traceback" not in done.stderr


def test_every_core_module_exists_and_imports_no_extra() -> None:
    """The core tests (tests/conftest.py CORE) are real modules, and none imports an extra at module level:
    ``pytest -m core tests`` collects them on a base install (tox -e py312-core, .ci/run)."""
    import ast

    from orsbench.extras import EXTRAS
    from tests.conftest import CORE

    extras = {module for modules in EXTRAS.values() for module in modules}
    for name in CORE:
        path = Path(__file__).parent / name
        assert path.is_file(), name
        for node in ast.parse(path.read_text()).body:  # module level only: a test may import an extra inside itself
            if isinstance(node, ast.Import | ast.ImportFrom):
                top = {(alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] for alias in node.names}
                assert not top & extras, (name, top & extras)
