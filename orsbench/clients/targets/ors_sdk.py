"""ors-sdk's client (``ors.ORS``, aiohttp under a sync API), given the server's URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register, sync_session

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode


def play(episode: AdapterEpisode) -> None:
    from ors.client import ORS

    client = ORS(base_url=episode.url)
    try:
        sync_session.play(client.environments.get(episode.env), episode)
    finally:
        client.close()


register(
    ClientTarget(
        "ors",
        "ors-sdk",
        "ors-sdk client (ors.ORS)",
        play,
        modules=("ors.client",),
        extra="ors-sdk",
        consumer=Consumer("per-call", source="ors-sdk 0.1.0: Session.call_tool returns the ToolOutput, raises on failure"),
    ),
    origin=__name__,
)
