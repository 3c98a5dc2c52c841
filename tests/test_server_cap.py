"""The shared-server factory keeps at most ``MAX_LIVE_SERVERS`` servers that only tests asked for.

A suite that serves every scenario under many configurations used to keep every server for the
whole session; two workers then ran a 24 GB machine out of memory. What must hold: a server asked
for during the current test is never stopped under it, and neither is one a module-scoped fixture
holds; the oldest of the rest are stopped, and a later test asking again gets a fresh one.
"""

from __future__ import annotations

import pytest

from orsbench import pytest_plugin as plugin


@pytest.fixture(scope="module")
def held(ors_server_factory):
    return ors_server_factory("echo", ttl=77)


def test_the_oldest_servers_only_tests_asked_for_are_stopped_and_come_back(ors_server_factory, held, monkeypatch):
    monkeypatch.setattr(plugin, "MAX_LIVE_SERVERS", 2)
    first = [ors_server_factory("echo", ttl=ttl) for ttl in (101, 102, 103)]
    assert [s.alive() for s in first] == [True, True, True]  # all asked for by this test: none stopped
    monkeypatch.setattr(plugin, "_TEST_GENERATION", plugin._TEST_GENERATION + 1)  # as if the next test began
    newer = ors_server_factory("echo", ttl=104)
    assert newer.alive()
    assert [s.alive() for s in first] == [False, False, True]  # the two asked for longest ago, over a cap of two
    assert held.alive()  # a module-scoped fixture's server lives for the session
    again = ors_server_factory("echo", ttl=101)
    assert again.alive() and again.url != first[0].url  # asked again: started afresh
