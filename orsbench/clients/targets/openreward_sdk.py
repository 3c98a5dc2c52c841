"""The openreward SDK client (``OpenReward().environments``), sync, given the server's URL.

``environments.get(name, base_url=URL)`` is the SDK's way to an environment
server that is not openreward.ai (``OpenReward(base_url=...)`` is the web host,
from which it derives ``api.<host>`` and ``sessions.<host>``); the SDK's own
``OPENREWARD_SESSION_URL``, where set, points at the same server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register, sync_session

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode


def play(episode: AdapterEpisode) -> None:
    import openreward

    sync_session.play(openreward.OpenReward().environments.get(episode.env, base_url=episode.url), episode)


register(
    ClientTarget(
        "openreward",
        "openreward",
        "openreward SDK client",
        play,
        modules=("openreward",),
        extra="sdk",
        consumer=Consumer("per-call", source="openreward 0.1.167: Session.call_tool returns ToolOutput(blocks, reward, finished), raises on failure"),
    ),
    origin=__name__,
)
