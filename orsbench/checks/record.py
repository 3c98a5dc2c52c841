"""``orsbench record``: play an environment the way ``orsbench check`` does, and keep what it answered.

The recording is made by the checker's own evidence collector
(:class:`~orsbench.checks.collector.Collector`) — the same discovery, dataset,
session, call and play probes, so a replay can be checked with the same
probes and answer them from the recording — plus the task listing of every
split and one played episode per selected task. Every exchange the collector's
client makes is handed to a :class:`~orsbench.wire.cassette.CassetteRecorder`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orsbench.checks.evidence import Evidence, Options, json_of, parse_tasks
from orsbench.checks.collector import Collector
from orsbench.checks.explore import play_one
from orsbench.wire.cassette import CassetteRecorder
from orsbench.wire.client import WireClient
from orsbench.wire.evidence import Exchange

#: The probes a recording runs (``timing`` waits out TTLs and cuts streams: nothing to replay).
RECORD_PROBES = ("discovery", "dataset", "session", "call", "play")


class RecordingWireClient(WireClient):
    """A :class:`WireClient` that also hands every exchange to ``observer``."""

    def __init__(self, base_url: str, observer: Callable[[Exchange], None], **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self.observer = observer

    def request(self, method: str, path: str, **kwargs: Any) -> Exchange:  # type: ignore[override]
        exchange = super().request(method, path, **kwargs)
        self.observer(exchange)
        return exchange


@dataclass
class RecordResult:
    cassette: dict[str, Any]
    env: str | None
    episodes: int
    calls: int
    problem: str | None = None


def record(
    url: str,
    *,
    options: Options | None = None,
    tasks: str | None = None,
    episodes: int = 1,
    on_progress: Callable[[str], None] | None = None,
) -> RecordResult:
    """Play ``url`` and return the cassette (see :func:`parse_tasks` for ``tasks``)."""
    options = options or Options()
    recorder = CassetteRecorder(url, "orsbench record")
    evidence = Evidence(url, options)
    client = RecordingWireClient(url, recorder, timeout=options.timeout, api_key=options.api_key, secrets=options.secrets)
    collector = Collector(client, evidence)
    say = on_progress or (lambda _text: None)
    played = 0
    try:
        for probe in RECORD_PROBES:
            say(f"probe {probe}")
            collector.run(probe)
            if evidence.unreachable or evidence.not_ors or evidence.usage_error:
                problem = evidence.unreachable or evidence.not_ors or evidence.usage_error
                return RecordResult(recorder.cassette(), None, 0, 0, f"cannot record {url}: {problem}")
        env = evidence.env or ""
        splits_ok, splits = json_of(evidence.get("splits"))
        names = [s["name"] for s in splits if isinstance(s, dict) and isinstance(s.get("name"), str)] if splits_ok and isinstance(splits, list) else []
        listings: dict[str, list[Any]] = {}
        for split in names:
            say(f"tasks of split {split}")
            ok, body = json_of(client.tasks(env, split))
            if ok and isinstance(body, dict) and isinstance(body.get("tasks"), list):
                listings[split] = body["tasks"]
        split, indices = parse_tasks(tasks) if tasks else (None, [])
        split = split or evidence.split
        if any(i < 0 for i in indices):  # from the end of the split: its listing says how long it is
            count = len(listings.get(split or "", []))
            if not count:
                return RecordResult(recorder.cassette(), None, 0, 0, f"--tasks {tasks}: a negative index counts from the end, but split {split!r} lists no tasks")
            indices = [i % count if i < 0 else i for i in indices if i >= -count]
        if split is not None and not indices:
            indices = list(range(min(episodes, len(listings.get(split, [])) or episodes)))
        wanted = [indices[i % len(indices)] for i in range(max(episodes, len(indices)))] if indices else []
        for n, index in enumerate(wanted):
            if split is None:
                break
            say(f"episode {n + 1}/{len(wanted)}: {split}[{index}]")
            evidence.split, evidence.index = split, index
            if split in listings:
                evidence.facts.tasks = listings[split]  # what the player reads the task from
            # One session per recorded episode, played by the checker's own player on exactly this task
            # (its task tools and prompt are recorded too).
            sid = collector.open_session()
            if sid is None:
                continue
            client.task_tools(env, sid)
            play_one(collector, sid, index, f"record.{n}.")
            collector.end_session(sid)
            played += 1
    finally:
        try:
            collector.close()
        finally:
            client.close()
    data = recorder.cassette()
    calls = sum(len(e["calls"]) for env_record in data["environments"].values() for e in env_record["episodes"])
    return RecordResult(data, evidence.env, played, calls)
