"""The adapter contract, from inside an adapter: the episode a client plays and the JSON lines it leaves.

``orsbench check-client`` and ``orsbench matrix`` run an adapter with the
contract's variables set (their names: :mod:`orsbench.clientcheck.contract`;
the prose: ``docs/clients.md``); an :class:`AdapterEpisode` reads them and
appends one JSON line per call to ``ORSBENCH_OUT``::

    {"tool": NAME, "text": "...", "reward": 1.0, "finished": true}
    {"error": "ToolFailed: ...", "raised": true, "stage": "call"}

Lines are flushed as they are written, so a client killed at its deadline
still leaves what it did. ``stage`` (an extra key the contract allows) says
where a built-in client was when it failed; ``raised`` whether the client raised
or reported the failure its own way (TRL's ``"Error: ..."`` text).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from orsbench.clientcheck.contract import ENV, INDEX, MODEL_URL, OUT, SCRIPT, SECRETS, SPLIT, URL, aggregate_line, episodes, runs, unsurfaced_line

JSON = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One scripted call. ``pause_s``: seconds to sit idle before it (an optional key of ours; a TTL test)."""

    tool: str
    input: JSON = field(default_factory=dict)
    pause_s: float = 0.0


class UsageError(ValueError):
    """A contract variable missing or malformed."""


class ClientReported(RuntimeError):
    """A failure the client reported its own way (TRL's ``"Error: ..."`` text, an MCP ``isError`` result).

    A target raises it to end the episode as an error with the client's own words.
    """


class ClientExited(RuntimeError):
    """A command adapter (a client in another interpreter) ended with this exit status, having written its own lines.

    A command target raises it from ``play`` for a non-zero status: the episode ends with that status and no
    line of orsbench's own beside the client's.
    """

    def __init__(self, code: int) -> None:
        super().__init__(f"the client's adapter exited {code}")
        self.code = code


class AdapterEpisode:
    """One episode as a client target's ``play`` sees it, writing the contract's JSON lines as it goes.

    ``stage`` says where the client is (``session``, ``prompt``, ``call``, ...): an error line names it.
    ``extras`` carries what a target observed beyond the contract. ``model_url`` is the scripted model
    an agent harness plays the script through (``ORSBENCH_MODEL_URL``; empty when none was given).
    """

    def __init__(
        self,
        url: str,
        env: str,
        split: str,
        index: int,
        calls: Sequence[Call],
        secrets: Mapping[str, str],
        out: IO[str],
        model_url: str = "",
        runs: int = 1,
        episodes: int = 1,
    ) -> None:
        self.url, self.env, self.split, self.index, self.model_url = url, env, split, index, model_url
        #: Times the target plays the script in this process (``ORSBENCH_RUNS``, §13.16): :func:`orsbench.clients.adapter.play` loops.
        self.runs = runs
        #: Episodes each run plays, tasks ``index`` .. ``index + episodes - 1`` (``ORSBENCH_EPISODES``, §13.15).
        self.episodes = episodes
        self.calls = tuple(calls)
        self.secrets = dict(secrets)
        self.stage: str | None = None
        self.extras: JSON = {}
        self.finished = False
        self._out = out

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], out: IO[str] | None = None) -> AdapterEpisode:
        """Read the contract's variables; :class:`UsageError` naming the first one missing or malformed."""
        missing = [name for name in (URL, ENV, SCRIPT, OUT) if not environ.get(name)]
        if missing:
            raise UsageError(f"{', '.join(missing)} not set: an adapter runs under orsbench check-client or matrix")
        try:
            index = int(environ.get(INDEX) or 0)
            raw = json.loads(open(environ[SCRIPT], encoding="utf-8").read())
            calls = [Call(c["tool"], dict(c.get("input") or {}), float(c.get("pause_s") or 0)) for c in raw["calls"]]
            secrets = json.loads(environ.get(SECRETS) or "{}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read the episode: {type(exc).__name__}: {exc}") from None
        if not isinstance(secrets, dict):
            raise UsageError(f"{SECRETS} must be a JSON object")
        stream = out if out is not None else open(environ[OUT], "a", encoding="utf-8")
        return cls(
            environ[URL], environ[ENV], environ.get(SPLIT) or "train", index, calls, secrets, stream, environ.get(MODEL_URL, ""), runs(environ), episodes(environ)
        )

    def steps(self) -> Iterator[Call]:
        """The script's calls in order, each after its pause; the target makes each call, then :meth:`record`."""
        for call in self.calls:
            if call.pause_s:
                time.sleep(call.pause_s)
            yield call

    def _write(self, line: JSON) -> None:
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()  # a client killed at its deadline still leaves what it did

    def record(self, tool: str, text: str, reward: Any, finished: bool, **beside: Any) -> None:
        """What the client returned for one call, as it would hand it on (to a model, to a trainer); ``beside``: what
        else the client put on it, untranslated (an agent's ``is_error`` flag), as extra keys the contract allows."""
        self.finished = self.finished or bool(finished)
        self._write({"tool": tool, "text": text, "reward": reward, "finished": bool(finished), **beside})

    def after_finished(self, tool: str, text: str, reward: Any = None, finished: bool = False, **beside: Any) -> None:
        """A call the client made after the episode had finished, refused, and the text it showed the model for it.

        The episode's reward is settled at ``finished`` (a trainer reads it, an eval scored it), so a refusal of a
        later call is no error of the episode's: the line says what the model was shown, marked ``after_finished``
        (an extra key the contract allows), with the reward and ``finished`` the client itself gave it, untranslated.
        That the call was made at all is ``client.stops_at_finished``'s to judge from the server's side (§13.14).
        """
        self._write({"tool": tool, "text": text, "reward": reward, "finished": bool(finished), **beside, "after_finished": True})

    def error(self, message: str, *, raised: bool = True) -> None:
        """The client raised (``raised``) or reported a failure its own way (``raised=False``): the episode ends here."""
        self._write({"error": message[:2000], "raised": raised, **({"stage": self.stage} if self.stage else {})})

    def unsurfaced(self, fields: Mapping[str, str]) -> None:
        """Say once which per-call fields the client never shows its user, each with why (its consumer profile's
        :attr:`~orsbench.clients.consumers.Consumer.unsurfaced`): the per-call checks of those are then not applicable."""
        if fields:
            self._write(unsurfaced_line(fields))

    def aggregate(self, reward: Any, episodes: int, **extra: Any) -> None:
        """The client's own aggregate over the episodes it played: its figure, and how many episodes it is over."""
        self._write(aggregate_line(reward, episodes, **extra))

    def close(self) -> None:
        self._out.close()
