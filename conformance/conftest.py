"""Fixtures of the OpenRewardSpec conformance suite (``pytest -n auto conformance/``).

Servers come from the ``orsbench`` pytest plugin's session-scoped
``ors_server_factory``: one per worker per distinct configuration, started
on first use and stopped by PID at the end. Every parametrised test carries
an ``xdist_group`` mark naming its server, and this conftest switches the
default ``-n`` distribution (``load``) to ``loadgroup``, so each server's tests
run on one worker and each server starts once for the whole run; the groups that
mostly wait are handed out first, beside the client batches (:mod:`conformance.scheduling`).

Parametrisation is explicit in each test module through
:func:`conformance.params.targets` and :func:`conformance.params.tool_cases`;
both attach the known-defect ``xfail`` marks from :mod:`orsbench.upstream.defects`; a pinned cell that
fails as pinned is reported in one line, not a traceback (:mod:`conformance.pins`).
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
from pathlib import Path
from unittest import mock

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from orsbench.upstream import defects
from conformance import background
from conformance.adapter import Binding, bind_one, rollout_factory
from conformance.params import TargetParam, ToolCase, ToolParam
from conformance.pins import pytest_runtest_makereport  # noqa: F401 (a hook: pytest finds it here)
from conformance.targets import SuiteTarget
from orsbench.scenarios import suite_params
from orsbench.config import ServerConfig

_LOADGROUP = "orsbench_loadgroup"


def pytest_configure(config: pytest.Config) -> None:
    # `-n auto` distributes test by test ("load"); grouping by server starts each server once.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None and getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadgroup"
    elif workerinput is not None and workerinput.get(_LOADGROUP):
        # Workers re-parse the command line (`-n auto`, no --dist) and would not tag
        # node ids with their group; the controller tells them (pytest_configure_node).
        config.option.loadgroup = True


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Collection runs without the cyclic garbage collector; then one collection, and what it built is frozen.

    Why: collection imports every client the batches fork (inspect, trl, the openreward SDK; ~500k objects).
    Importing them set off ~10 full collections in each worker, and every full collection of the run that
    followed traversed them all again: 14 a run, 5 s of each worker's CPU (BENCHMARKS.md, session 7).
    Frozen, they are skipped; objects made later are collected as before, and these are still freed when
    their last reference goes (reference counting is untouched) — only a cycle formed among them later
    stays until the worker exits. The forked clients freeze the same objects in themselves
    (``orsbench.clientcheck.process``). A session-wide hook: a run of the whole suite freezes the same way;
    under xdist the controller collects nothing and freezes little. A collector someone turned off stays off.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        if enabled:
            gc.enable()
        gc.collect()
        gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Collect garbage once, then freeze the heap: the collections still to come skip what the run made.

    Why: the heap :func:`pytest_collection` froze is only what collection imported; a worker ends holding
    ~320k objects more (its outcomes and reports, the schemas and caches the clients built as they played),
    and every full collection at the end would traverse them. After this one, pytest
    collects again in its own unconfigure and cleanup (to report exceptions raised in finalizers), the
    interpreter at shutdown, and allocations in the exit handlers could trigger more; those now see only
    what was made since. This collection finds the garbage pytest's would have found, so the same
    finalizer exceptions are reported (tryfirst: before pytest's ``unraisableexception`` plugin).
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[_LOADGROUP] = getattr(node.config.option, "dist", None) == "loadgroup"
    node.workerinput[background.KEY] = getattr(node.config, background.KEY, None)


def _runs_wire_checks(config: pytest.Config) -> bool:
    """Whether the paths on the command line take in ``test_wire_checks.py`` (against the embedded mocks)."""
    if config.getoption("--ors-url", None) or config.option.collectonly:
        return False
    wire = Path(__file__).with_name("test_wire_checks.py").resolve()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == wire or path in wire.parents:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The session's first process starts the wire checks that mostly wait (:mod:`conformance.background`)."""
    config = session.config
    if hasattr(config, "workerinput") or not _runs_wire_checks(config):
        return
    directory = tempfile.mkdtemp(prefix="orsbench-wire-")
    setattr(config, background.KEY, directory)
    config._orsbench_background = background.launch(directory, config.rootpath)  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session) -> None:
    processes = getattr(session.config, "_orsbench_background", None)
    if processes is not None:
        background.stop(processes)
        shutil.rmtree(getattr(session.config, background.KEY), ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``loadgroup`` with the groups that mostly wait handed out beside the client batches (:mod:`conformance.scheduling`)."""
    if getattr(config.option, "dist", None) != "loadgroup":
        return None
    from conformance.scheduling import FrontLoadedScheduling

    return FrontLoadedScheduling(config, log)


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def serve(ors_server_factory: Any) -> Callable[..., SuiteTarget]:
    """``serve(scenario, impl, **config)`` → a :class:`SuiteTarget` on a shared server (suite params applied)."""
    cache: dict[str, SuiteTarget] = {}

    def get(scenario: str, impl: str = "mock", **knobs: Any) -> SuiteTarget:
        params = {**suite_params(scenario), **knobs.pop("params", {})}
        server = ors_server_factory(scenario, impl=impl, config=ServerConfig(**knobs), params=params)
        if server.url not in cache:
            cache[server.url] = SuiteTarget(scenario, impl, server)
        return cache[server.url]

    return get


@pytest.fixture
def target(request: pytest.FixtureRequest, serve: Callable[..., SuiteTarget]) -> SuiteTarget:
    param: TargetParam = request.param
    return serve(param.scenario, param.impl)


@pytest.fixture(scope="session")
def _bindings() -> dict[tuple[str, str], Binding]:
    return {}


@pytest.fixture(scope="session")
def _shared_specs() -> Iterator[dict[str, Any]]:
    specs: dict[str, Any] = {}
    yield specs
    # Together, at the end of the session: left to the SDK's exit handlers, they closed one after another.
    for thread in close_sdk_clients(specs.values()):
        thread.join(timeout=10)


def close_sdk_clients(specs: Iterable[Any]) -> list[threading.Thread]:
    """Close the SDK client of each ``OpenRewardSpec`` that built one, each in a daemon thread; the threads.

    Why threads: closing a client joins its event-loop thread (~0.25 s), and the SDK's own exit handler
    closes every client still open one after another (a worker's dozen-odd shared specs kept it 3-5 s
    at exit). Closed side by side, fifteen took 0.3 s.
    """
    threads: list[threading.Thread] = []
    for spec in specs:
        client = spec.__dict__.get("_sdk_client")
        if client is not None and client.__dict__.get("_environments_api") is not None:
            thread = threading.Thread(target=client.environments.close, daemon=True)
            thread.start()
            threads.append(thread)
    return threads


def shared_spec(target: SuiteTarget, cache: dict[str, Any]) -> Any:
    """One ``OpenRewardSpec`` per target, for the SDK client and environment handle its adapters share."""
    if target.url not in cache:
        from trl.experimental.openreward import OpenRewardSpec

        spec = OpenRewardSpec(target.url)
        with mock.patch.dict(os.environ, target.server.env()):
            _ = spec._sdk_env  # builds the SDK client while OPENREWARD_* point at the server
        cache[target.url] = spec
    return cache[target.url]


@pytest.fixture
def case(
    request: pytest.FixtureRequest,
    serve: Callable[..., SuiteTarget],
    _bindings: dict[tuple[str, str], Binding],
    _shared_specs: dict[str, Any],
) -> ToolCase:
    param: ToolParam = request.param
    target = serve(param.scenario, param.impl)
    key = (target.url, param.tool)
    if key not in _bindings:
        served = target.tools
        assert param.tool in served, f"{target}: declared tool {param.tool!r} is not served; served: {sorted(served)}"
        _bindings[key] = bind_one(shared_spec(target, _shared_specs), served[param.tool])
    return ToolCase(target, param.tool, param.aspect, _bindings[key])


@pytest.fixture
def new_spec(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """``new_spec(target, **kwargs)`` → a fresh ``OpenRewardSpec`` for the target; its SDK client is closed afterwards."""
    from trl.experimental.openreward import OpenRewardSpec

    made: list[Any] = []

    def make(target: SuiteTarget, **kwargs: Any) -> Any:
        for name, value in target.server.env().items():
            monkeypatch.setenv(name, value)
        spec = OpenRewardSpec(target.url, **kwargs)
        made.append(spec)
        return spec

    yield make
    close_sdk_clients(made)  # not waited for: the test is over


def unsafe_to_bind(tool: dict[str, Any]) -> bool:
    """Tools whose binding breaks the whole adapter in trl 1.16.0 (a SyntaxError, or a replaced ``reset``)."""
    return defects.factory_defect([tool]) is not None


@pytest.fixture
def make_adapter(adapters: list[Any]) -> Callable[..., Any]:
    """``make_adapter(spec, target)`` → an adapter instance, closed after the test.

    It is ``spec.environment_factory()`` — except where trl 1.16.0 cannot build
    one for the scenario at all (``test_factory_builds_adapter_with_its_own_reset``
    xfails there): then the tools that break binding are left out, so checks
    that are not about binding still run on every scenario.
    """

    def make(spec: Any, target: SuiteTarget) -> Any:
        tools = list(target.tools.values())
        if defects.factory_defect(tools) is None:
            adapter = spec.environment_factory()
        else:
            adapter = rollout_factory(spec, [t for t in tools if not unsafe_to_bind(t)])()
        adapters.append(adapter)
        return adapter

    return make


@pytest.fixture
def adapters(new_spec: Callable[..., Any]) -> Iterator[list[Any]]:
    """Adapters a test appends here are closed (``_close()``) when it ends, pass or fail.

    It depends on ``new_spec`` so that adapters close before their specs' SDK clients do.
    """
    made: list[Any] = []
    yield made
    for adapter in made:
        adapter._close()
