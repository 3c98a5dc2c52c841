"""pytest plugin (entry point ``pytest11``): ORS servers as fixtures.

Environment authors adopt it in one line::

    def test_my_client(ors_server):            # an echo mock on 127.0.0.1
        spec = OpenRewardSpec(ors_server.url, env_name=ors_server.env_name)

    @pytest.mark.ors_server("sparse-reward", impl="sdk", ttl=5)
    def test_sparse(ors_server): ...

Servers are started once per worker process and per distinct configuration
(session scope), each in a subprocess on a free port, and stopped by PID when
the session ends. While a test uses ``ors_server``, ``OPENREWARD_API_URL``,
``OPENREWARD_SESSION_URL`` and ``OPENREWARD_DISABLE_UPDATE_CHECK`` point the
openreward SDK (and TRL) at it; they are restored afterwards.

Options: ``--ors-url URL`` targets an external server instead (the wire checks
parametrise over it), with ``--ors-env`` and ``--ors-split``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

import pytest

from orsbench.config import ServerConfig
from orsbench.servers.launch import RunningServer, start

ServerFactory = Callable[..., RunningServer]
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(ServerConfig)}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orsbench", "ORS servers (orsbench)")
    group.addoption("--ors-url", default=None, help="run the wire checks against this ORS server instead of embedded mocks")
    group.addoption("--ors-env", default=None, help="environment name on --ors-url (default: its first environment)")
    group.addoption("--ors-split", default=None, help="split to use on --ors-url (default: the first train split)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ors_server(scenario='echo', impl='mock', params=None, **config): configure the ors_server fixture "
        "(config keys are ServerConfig fields such as ttl, ping_interval, latency)",
    )


def server_key(scenario: str, impl: str, config: ServerConfig) -> str:
    return f"{scenario}|{impl}|{config.to_json()}"


@pytest.fixture(scope="session")
def ors_server_factory() -> Iterator[ServerFactory]:
    """``factory(scenario, impl="mock", config=None, params=None, **knobs)`` → a shared running server."""
    servers: dict[str, RunningServer] = {}

    def get(
        scenario: str = "echo",
        impl: str = "mock",
        config: ServerConfig | None = None,
        params: dict[str, Any] | None = None,
        **knobs: Any,
    ) -> RunningServer:
        unknown = set(knobs) - _CONFIG_FIELDS
        if unknown:
            raise TypeError(f"unknown ServerConfig field(s) {sorted(unknown)}")
        config = (config or ServerConfig()).replace(**knobs)
        if params:
            config = config.replace(params={**config.params, **params})
        key = server_key(scenario, impl, config)
        server = servers.get(key)
        if server is None or not server.alive():
            server = servers[key] = start(scenario, impl=impl, config=config)
        return server

    try:
        yield get
    finally:
        for server in servers.values():
            server.stop()


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
