"""The sync session API the openreward SDK client and ors-sdk's client share: session → prompt → each call.

Not a target itself: the two SDK targets play through it, as their users write it —
open the session for (split, index) with the secrets, read the prompt, make each
call, stop at ``finished``, leave the ``with`` block (which deletes the session).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode


def text_of(blocks: Any) -> str:
    """The text blocks of a result, joined as a model would read them."""
    return "".join(getattr(b, "text", "") or "" for b in blocks)


def play(environment: Any, episode: AdapterEpisode) -> None:
    episode.stage = "session"
    secrets = episode.secrets or None  # the SDK checks secret names even for an empty dict
    with environment.session(split=episode.split, index=episode.index, secrets=secrets) as session:
        episode.stage = "prompt"
        session.get_prompt()
        episode.stage = "call"
        for call in episode.steps():
            result = session.call_tool(call.tool, call.input)
            episode.record(call.tool, text_of(result.blocks), result.reward, bool(result.finished))
            if result.finished:
                break
        episode.stage = "delete"
    episode.stage = None
