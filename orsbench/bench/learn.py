"""The episode a trainer's rollout plays, learnt once by the checker's player.

A load test that calls one tool N times never reaches an environment's reward
path: the grader, the ``finished: true`` answer, the teardown after a finished
episode. A trainer's rollouts do, every time. So by default the load front ends
(``orsbench bench`` and the Locust user) play the episode the checker's own
player (:func:`orsbench.checks.explore.play_one`, the one ``orsbench clients URL``
plays) finds on the server — a winning one where it finds one, else a valid
one — and replay its calls, in order, in every load episode.

:func:`player_episode` is that play, shared with ``orsbench clients URL``
(:mod:`orsbench.clients.live`); :func:`learn` turns it into the calls a load
episode replays: those the server answered ``ok: true``, on the task the player
played.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orsbench.checks.collector import Collector
from orsbench.checks.evidence import Episode, Evidence, Options, json_of
from orsbench.checks.explore import play_one
from orsbench.wire.client import WireClient

__all__ = ["CannotPlay", "LearnedEpisode", "learn", "player_episode", "replayable_calls"]

#: Probes the player needs first: the tools listing and environment, then the splits and the task to play.
_PROBES = ("discovery", "dataset")
#: What the player writes for a call that did not answer (never replayed).
FAILED_ANSWERS = ("raise", "hang", "stream", "http", "reaped")


class CannotPlay(ValueError):
    """The player could not play an episode on the server; the message says why and names the fix."""


@dataclass(frozen=True)
class LearnedEpisode:
    """What the player played: the environment, split and task, the calls to replay, how it ended."""

    env: str
    split: str
    index: int
    steps: tuple[tuple[str, dict[str, Any]], ...]
    finished: bool
    reward: float | None
    #: Why the player stopped without ``finished`` ("" when it finished).
    stopped: str = ""


def player_episode(url: str, options: Options) -> tuple[Evidence, Episode, list[dict[str, Any]]]:
    """Play one episode with the checker's player; the evidence, the episode and the ``/tools`` listing."""
    evidence = Evidence(url, options)
    client = WireClient(url, timeout=options.timeout, api_key=options.api_key, secrets=options.secrets)
    collector = Collector(client, evidence)
    try:
        for name in _PROBES:
            collector.run(name)
            problem = evidence.unreachable or evidence.not_ors or evidence.usage_error
            if problem:
                raise CannotPlay(f"cannot play {url}: {problem}")
        sid = collector.open_session("live.create")
        if sid is None:
            raise CannotPlay(f"cannot play {url}: {_create_failed(evidence, options)}")
        episode = play_one(collector, sid, evidence.index, "live.")
        collector.end_session(sid)
        ok, body = json_of(evidence.get("tools"))
        tools = [t for t in body["tools"] if isinstance(t, dict)] if ok and isinstance(body, dict) and isinstance(body.get("tools"), list) else []
        return evidence, episode, tools
    finally:
        try:
            collector.close()
        finally:
            client.close()


def _create_failed(evidence: Evidence, options: Options) -> str:
    """Why the player's ``/create`` gave no session, in the words that name the fix: a refusal (with the server's own
    status and detail: a missing secret, a bad task) is not a setup that outlasted ``--timeout`` (a puzzle generated in
    ``__init__``)."""
    where = f"{evidence.split}[{evidence.index}]"
    exchange = evidence.get("live.create")
    if exchange is None or exchange.status is None:
        error = exchange.error if exchange is not None and exchange.error else "no answer"
        return f"/create of a session on {where} did not answer within {options.timeout:g} s ({error}): a slow setup? raise --timeout"
    ok, body = json_of(exchange)
    detail = body.get("detail") if ok and isinstance(body, dict) else None
    said = f": {str(detail)[:200]}" if detail else ""
    return f"/create refused a session on {where} with {exchange.status}{said} (missing --secret?)"


def replayable_calls(episode: Episode) -> list[tuple[str, dict[str, Any]]]:
    """The calls that answered ``ok: true``, in the player's order (a refused or failed call is not replayed)."""
    return [
        (tool, dict(value) if isinstance(value, dict) else {})
        for (tool, value), answer in zip(episode.calls, episode.answers)
        if not (answer in FAILED_ANSWERS or answer.startswith("ok:false"))
    ]


def learn(
    url: str,
    *,
    env: str | None = None,
    split: str | None = None,
    api_key: str | None = None,
    secrets: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> LearnedEpisode:
    """Play one episode on ``url`` with the checker's player and return the calls a load episode replays."""
    options = Options(env=env, split=split, secrets=dict(secrets or {}), timeout=min(timeout, 30.0), api_key=api_key)
    evidence, episode, _tools = player_episode(url, options)
    steps = tuple(replayable_calls(episode))
    if not steps:
        raise CannotPlay(
            f"the checker's player found no call {url} answered ok: true on {evidence.env} {evidence.split}"
            f"[{evidence.index}] ({episode.stopped or 'no call answered'}); name the call with --tool and --args"
        )
    reward = episode.reward if episode.finished else (episode.rewards[-1] if episode.rewards else None)
    return LearnedEpisode(
        evidence.env or "", evidence.split or "", int(episode.index or 0), steps, episode.finished, reward,
        "" if episode.finished else episode.stopped,
    )  # fmt: skip
