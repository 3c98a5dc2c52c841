"""pytest plugin (entry point ``pytest11``): ORS servers as fixtures.

Environment authors adopt it in one line::

    def test_my_client(ors_server):            # an echo mock on 127.0.0.1
        spec = OpenRewardSpec(ors_server.url, env_name=ors_server.env_name)

    @pytest.mark.ors_server("sparse-reward", impl="sdk", ttl=5)
    def test_sparse(ors_server): ...

    @pytest.mark.ors_server(app=MyEnv)          # your own openreward Environment class
    def test_my_env(ors_server): ...            # (or app="my_env.py:MyEnv", app="pkg.mod:MyEnv",
                                                #  cmd="python my_env.py --port {port}")

    @pytest.mark.ors_server("echo", replicas=3, restart_every=5)   # behind nginx, one replica rolled every 5 s
    def test_my_client_survives_a_rolling_deploy(ors_server): ...

Servers are started once per worker process and per distinct configuration
(session scope), each in a subprocess on a free port, and stopped by PID when
the session ends. While a test uses ``ors_server``, ``OPENREWARD_API_URL``,
``OPENREWARD_SESSION_URL`` and ``OPENREWARD_DISABLE_UPDATE_CHECK`` point the
openreward SDK (and TRL) at it; they are restored afterwards.

Options: ``--ors-url URL`` checks a running server, one test per server check, in any
directory (:mod:`orsbench.checks.pytest_checks`: alone it is the whole run, beside paths it is
added to them), with ``--ors-env``, ``--ors-split`` and, for an environment
whose ``/create`` needs them, ``--ors-secret NAME=VALUE`` / ``--ors-secrets-file F``
(fixture ``ors_secrets``; docs/protocol.md §14).

``--ors-client-cmd "CMD"`` grades an ORS client's adapter command on every
``orsbench check-client`` case, one test per case (``--ors-client-cases A,B``,
``--ors-client-timeout S``; docs/clients.md).

With TRL installed, ``ors_openreward_spec(**kwargs)`` builds a
``trl.experimental.openreward.OpenRewardSpec`` for ``ors_server``::

    def test_dataset(ors_openreward_spec):
        assert ors_openreward_spec(num_tasks=4).train_dataset.num_rows == 4

Snapshot safety: ``--snapshot-update`` (syrupy) together with ``-n`` is
refused, because syrupy loses snapshots written from several xdist workers
(syrupy#1237); update snapshots in a single process.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orsbench.cli import types
from orsbench.config import ServerConfig
from orsbench.servers import launch, targets
from orsbench.servers.launch import RunningServer, start
from orsbench.servers.user_app import AppTarget, AppTargetError

ServerFactory = Callable[..., RunningServer]
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(ServerConfig)}

#: At most this many shared servers that only tests (function-scoped fixtures, test bodies) asked
#: for stay alive in one process; beyond it the one asked for longest ago is stopped, and started
#: again if a later test asks. Why: a suite that serves every scenario under many configurations
#: kept hundreds of servers for the whole session (~45 MB each), and two workers ran the machine out
#: of memory. Servers a module-, class- or session-scoped fixture asked for are never stopped early.
MAX_LIVE_SERVERS = int(os.environ.get("ORSBENCH_MAX_LIVE_SERVERS", "32"))
#: The scope of the fixture being set up right now (None: a test body).
_FIXTURE_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("orsbench_fixture_scope", default=None)
#: Incremented before each test: a server asked for during the current test is never stopped early.
_TEST_GENERATION = 0


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Any:
    token = _FIXTURE_SCOPE.set(fixturedef.scope)
    try:
        return (yield)
    finally:
        _FIXTURE_SCOPE.reset(token)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _TEST_GENERATION
    _TEST_GENERATION += 1


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orsbench", "ORS servers (orsbench)")
    group.addoption(
        "--ors-url", default=None, metavar="URL",
        help="check this running ORS server: one test per server check, in any directory (orsbench explain CHECK_ID for a rule)",
    )  # fmt: skip
    group.addoption("--ors-env", default=None, help="environment name on --ors-url (default: its first environment)")
    group.addoption("--ors-split", default=None, help="split to use on --ors-url (default: the first train split)")
    group.addoption(
        "--ors-client-cmd",
        default=None,
        metavar="COMMAND",
        help="grade this ORS client adapter command on every check-client case, one test per case (docs/clients.md)",
    )
    group.addoption("--ors-client-cases", default=None, metavar="A,B", help="with --ors-client-cmd: only these cases")
    group.addoption(
        "--ors-client-timeout", default=None, type=float, metavar="S", help="with --ors-client-cmd: the command's deadline per case"
    )
    group.addoption("--ors-secret", type=types.secret, action="append", default=[], metavar="NAME=VALUE", help=types.SECRET_HELP)
    group.addoption("--ors-secrets-file", type=types.secrets_file, action="append", default=[], metavar="FILE", help=types.SECRETS_FILE_HELP)


def secrets_option(config: pytest.Config) -> dict[str, str]:
    """The secrets ``--ors-secret``/``--ors-secrets-file`` give (for ``Options(secrets=...)`` on ``--ors-url``)."""
    return types.merge_secrets(config.getoption("--ors-secrets-file") or [], config.getoption("--ors-secret") or [])


@pytest.fixture(scope="session")
def ors_secrets(pytestconfig: pytest.Config) -> dict[str, str]:
    """The secrets given with ``--ors-secret NAME=VALUE`` / ``--ors-secrets-file FILE`` (never printed by orsbench)."""
    return secrets_option(pytestconfig)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ors_server(scenario='echo', impl='mock', params=None, app=None, cmd=None, wait=60, cassette=None, replicas=None, **config): "
        "configure the ors_server fixture (impl: mock, sdk or ors-sdk); app= serves your Environment class (a class, "
        "FILE.py:Class or module:Class), cmd= runs any server command with {port}, cassette= replays a recording, "
        "replicas=N serves N replicas behind nginx or the built-in router (balancer_faults=, restart_every=, balancer=) "
        "(config keys are ServerConfig fields such as ttl, ping_interval, latency)",
    )
    refuse_parallel_snapshot_update(config)
    add_client_cases(config)
    add_server_checks(config)
    if not os.environ.get("ORSBENCH_NO_ZYGOTE"):
        # Servers fork from one preloaded process per worker: an SDK twin starts in ~0.5 s, not ~5 s.
        launch.use_zygote()


def add_client_cases(config: pytest.Config) -> None:
    """With ``--ors-client-cmd``, collect the client cases (:mod:`orsbench.clientcheck.pytest_cases`).

    Alone (``pytest --ors-client-cmd CMD``) they are the whole run; beside paths given on the
    command line, they run with those tests.
    """
    if not config.getoption("ors_client_cmd", None):
        return
    from orsbench.clientcheck import pytest_cases

    add_packaged_tests(config, str(Path(pytest_cases.__file__).resolve()))


def add_packaged_tests(config: pytest.Config, path: str) -> None:
    """Run one of orsbench's packaged test modules: beside the paths given, or — none given — as the run.

    With no paths, not the whole test suite of the directory: only orsbench's modules (the client cases
    and the server checks together when both options are given).
    """
    if config.args_source is pytest.Config.ArgsSource.ARGS or getattr(config, "_orsbench_packaged", False):
        if path not in config.args:
            config.args.append(path)
    else:
        config.args[:] = [path]
        config._orsbench_packaged = True  # type: ignore[attr-defined]


#: A file that already makes every check a pytest item against ``--ors-url`` (the conformance suite's):
#: given on the command line, the packaged checks are not added a second time.
WIRE_CHECK_FILES = ("test_wire_checks.py",)


def add_server_checks(config: pytest.Config) -> None:
    """With ``--ors-url``, collect one test per server check (:mod:`orsbench.checks.pytest_checks`).

    Why: in an environment's own repository ``pytest --ors-url URL`` found no test of its own and ran
    nothing (exit 5, no word why). Alone, the checks are the whole run — not the directory's own suite,
    whatever ``testpaths`` says; beside paths given on the command line, they run with those tests.
    """
    if not config.getoption("ors_url", None):
        return
    from orsbench.checks import pytest_checks

    given = [Path(arg.split("::")[0]).name for arg in config.args] if config.args_source is pytest.Config.ArgsSource.ARGS else []
    if not any(name in WIRE_CHECK_FILES for name in given):
        add_packaged_tests(config, str(Path(pytest_checks.__file__).resolve()))


def refuse_parallel_snapshot_update(config: pytest.Config) -> None:
    """``--snapshot-update`` with ``-n N`` loses snapshots (syrupy#1237): stop before any worker starts."""
    if hasattr(config, "workerinput"):
        return
    updating = getattr(config.option, "update_snapshots", False) or getattr(config.option, "update_new_snapshots_only", False)
    workers = getattr(config.option, "numprocesses", None)
    if updating and workers:
        raise pytest.UsageError(
            "--snapshot-update cannot run with -n/--numprocesses: syrupy loses snapshots written by several "
            "xdist workers (syrupy#1237). Update in one process: pytest conformance/ --snapshot-update"
        )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ``xdist_group`` work again on pytest >= 9.2 (``--dist loadgroup``).

    pytest-xdist 3.8 tags a grouped test by rewriting ``item._nodeid`` to
    ``<nodeid>@<group>``; pytest 9.2 builds ``item.nodeid`` from ``item._id``
    instead, so the tag is lost and every test is scheduled on its own — each
    worker then starts its own copy of every shared server. Tag ``_id`` the
    same way xdist meant to.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9.2: xdist's own tagging works
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
        if groups and not item.nodeid.endswith("@" + "_".join(groups)) and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def server_key(scenario: str, impl: str, config: ServerConfig) -> str:
    return f"{scenario}|{impl}|{config.to_json()}"


def _user_target(app: Any, cmd: Any) -> targets.CheckTarget | None:
    """The target of ``app=`` (a class, ``FILE.py:Class``, ``module:Class``) or ``cmd=``, if one is given."""
    if app is not None and cmd is not None:
        raise TypeError("give app= or cmd=, not both")
    if app is not None:
        try:
            return targets.resolve(app if isinstance(app, type) else AppTarget.parse(str(app)))
        except AppTargetError:
            raise TypeError(f"app={app!r} is not an Environment class, FILE.py:Class or module:Class") from None
    if cmd is not None:
        return targets.CheckTarget("command", cmd if isinstance(cmd, str) else tuple(str(a) for a in cmd))
    return None


def _deployment(replicas: int | None, faults: Any, restart_every: float | None, balancer: str) -> launch.Deployment | None:
    """``replicas=N`` (with ``balancer_faults=``, ``restart_every=``, ``balancer=``) as a :class:`~orsbench.servers.launch.Deployment`."""
    if replicas is None:
        if faults or restart_every or balancer != "auto":
            raise TypeError("balancer_faults=, restart_every= and balancer= need replicas=N")
        return None
    from orsbench.servers.fronts import FRONTS, check_faults

    faults = (faults,) if isinstance(faults, str) else tuple(faults)
    if not isinstance(replicas, int) or replicas < 1:
        raise TypeError(f"replicas= must be a positive int, got {replicas!r}")
    if balancer not in FRONTS:
        raise TypeError(f"balancer= must be one of {', '.join(FRONTS)}, got {balancer!r}")
    try:
        check_faults(faults)
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    return launch.Deployment(replicas, faults, restart_every, balancer)


@pytest.fixture(scope="session")
def ors_server_factory() -> Iterator[ServerFactory]:
    """``factory(scenario, impl="mock", config=None, params=None, app=None, cmd=None, wait=60, cassette=None, **knobs)`` → a shared server.

    ``app=`` serves your own openreward Environment class (the class itself, ``"my_env.py:MyEnv"`` or
    ``"pkg.mod:MyEnv"``) with the SDK Server, as easily as a scenario; ``cmd=`` starts any server
    command with ``{port}`` in it; ``cassette=`` replays a recorded environment (docs/cassettes.md);
    ``replicas=N`` serves the scenario as N replicas behind nginx (or the built-in hashing router where nginx
    is absent), with ``balancer_faults=``, ``restart_every=`` and ``balancer=`` as ``orsbench serve --replicas``
    takes them (docs/deployments.md).
    Knobs (``ttl``, ``ping_interval``, ...) apply to scenarios and apps.
    """
    servers: dict[str, RunningServer] = {}
    #: key -> the test generation that last asked for it, for servers only tests asked for (LRU order).
    evictable: dict[str, int] = {}

    #: Keys a module-, class- or session-scoped fixture asked for: they live for the session.
    pinned: set[str] = set()

    def remember(key: str) -> None:
        evictable.pop(key, None)
        if _FIXTURE_SCOPE.get() not in (None, "function"):
            pinned.add(key)
        if key not in pinned:
            evictable[key] = _TEST_GENERATION
        while len(evictable) > MAX_LIVE_SERVERS:
            oldest, generation = next(iter(evictable.items()))
            if generation >= _TEST_GENERATION:
                break  # every evictable server serves the current test
            del evictable[oldest]
            servers.pop(oldest).stop()

    def get(
        scenario: str = "echo",
        impl: str = "mock",
        config: ServerConfig | None = None,
        params: dict[str, Any] | None = None,
        app: Any = None,
        cmd: Any = None,
        wait: float = 60.0,
        cassette: str | os.PathLike[str] | None = None,
        replicas: int | None = None,
        balancer_faults: tuple[str, ...] = (),
        restart_every: float | None = None,
        balancer: str = "auto",
        **knobs: Any,
    ) -> RunningServer:
        deployment = _deployment(replicas, balancer_faults, restart_every, balancer)
        if cassette is not None:  # replay a recorded environment (docs/cassettes.md)
            scenario, params = "cassette", {**(params or {}), "path": os.fspath(cassette)}
        unknown = set(knobs) - _CONFIG_FIELDS
        if unknown:
            raise TypeError(f"unknown ServerConfig field(s) {sorted(unknown)}")
        config = config or ServerConfig()
        # A knob given is set on purpose, even to its default value (ping_interval=10.0): the scenario's own default
        # (slow's 0.25 s keep-alives) must not replace it, as `orsbench serve --ping-interval 10` keeps it.
        config = config.replace(**knobs, explicit=tuple(sorted({*config.explicit, *knobs}))) if knobs else config
        if params:
            config = config.replace(params={**config.params, **params})
        user = _user_target(app, cmd)
        if user is not None and deployment is not None:
            raise TypeError("replicas= serves a scenario (mock, sdk or ors-sdk), not app= or cmd=")
        key = server_key(str(user) if user else scenario, "user" if user else impl, config) + (f"|{deployment}" if deployment else "")
        server = servers.get(key)
        if server is None or not server.alive():
            if user is not None:
                server = targets.start(user, config=config, wait=wait)
            else:
                server = start(scenario, impl=impl, config=config, timeout=wait, deployment=deployment)
            servers[key] = server
        remember(key)
        return server

    try:
        yield get
    finally:
        launch.stop_all(servers.values())


@pytest.fixture
def ors_server(request: pytest.FixtureRequest, ors_server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> RunningServer:
    """A running ORS server (default: the echo mock), configured by the ``ors_server`` marker or indirect params.

    Indirect parametrisation accepts a scenario name or a dict of the factory's arguments.
    """
    kwargs: dict[str, Any] = {}
    marker = request.node.get_closest_marker("ors_server")
    if marker is not None:
        if marker.args:
            kwargs["scenario"] = marker.args[0]
        kwargs.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, str):
        kwargs["scenario"] = param
    elif isinstance(param, dict):
        kwargs.update(param)
    server = ors_server_factory(**kwargs)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    return server


@pytest.fixture
def ors_openreward_spec(ors_server: RunningServer) -> Callable[..., Any]:
    """``ors_openreward_spec(**kwargs)`` → ``OpenRewardSpec(ors_server.url, **kwargs)`` (needs trl)."""
    openreward = pytest.importorskip("trl.experimental.openreward")

    def make(**kwargs: Any) -> Any:
        return openreward.OpenRewardSpec(ors_server.url, **kwargs)

    return make
