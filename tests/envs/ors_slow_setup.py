"""Defect (on ors-sdk 0.1.0): setup() takes 8 s and ors waits for it inside /prompt instead of answering 503."""

import asyncio

from tests.envs.ors_echo import OrsEcho


class OrsSlowSetup(OrsEcho):
    async def setup(self) -> None:
        await asyncio.sleep(8)
