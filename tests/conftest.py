import os

import pytest

from orsbench import protocol  # constants only: imports nothing of the SDK

os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


# -- the core tests --------------------------------------------------------------------------------------------
#: The modules that need nothing but ``pip install orsbench`` (and pytest): the engine, the wire, the checker and
#: its command line, the security model. ``pytest -m core tests`` runs them alone — on every supported Python
#: (``tox -e py311-core,py312-core,py313-core``; ``.ci/run`` on 3.12 where it finds one), in a base install. A test
#: in them that needs an extra says so with ``@needs(...)`` (tests/needs.py) and skips there.
CORE = frozenset(
    {
        "test_engine.py",
        "test_sse.py",
        "test_registry.py",
        "test_protocol_doc.py",
        "test_checks.py",
        "test_check_cli.py",
        "test_check_play_cli.py",
        "test_command_line.py",
        "test_install.py",
        "test_security.py",
        "test_launch.py",
        "test_explain.py",
        "test_own_repo.py",
    }
)


def pytest_ignore_collect(collection_path, config):  # type: ignore[no-untyped-def]
    """``-m core``: the other modules are not even imported (several import an extra a base install lacks)."""
    if config.getoption("markexpr") == "core" and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return collection_path.name not in CORE or None
    return None


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        if item.path.name in CORE and item.path.parent.name == "tests":
            item.add_marker(pytest.mark.core)
