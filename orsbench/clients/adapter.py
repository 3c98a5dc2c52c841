"""The built-in client adapters: ``python -m orsbench.clients.adapter NAME``.

Each built-in client target plays under the same adapter contract as any
user's command (``docs/clients.md``): where and which task from
``ORSBENCH_URL``/``ORSBENCH_ENV``/``ORSBENCH_SPLIT``/``ORSBENCH_INDEX``, the
calls from the ``ORSBENCH_SCRIPT`` file, secrets from ``ORSBENCH_SECRETS``,
and one JSON line per call appended to ``ORSBENCH_OUT``::

    {"tool": NAME, "text": "...", "reward": 1.0, "finished": true}
    {"error": "ToolFailed: ...", "raised": true, "stage": "call"}

Why the built-in clients go through the contract too: the matrix then grades
them by the very checks ``orsbench check-client`` applies to a user's
command — one grading path — and the adapters are the suite's self-test.

Each client is handed the server the way its users hand it one: the base URL
where it takes one (``ORSBENCH_URL``), the openreward SDK's own variables
(``OPENREWARD_API_URL``, ``OPENREWARD_SESSION_URL``, set by every case but
``url-only``) otherwise; an agent harness plays through the scripted model
(``ORSBENCH_MODEL_URL``). The process resolves loopback names only
(:mod:`orsbench.clients.offline`). Exit status: 0 when the client played the script to
its end (or to ``finished``), 1 when it raised, 2 for a usage error.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Sequence
from types import FrameType

from orsbench.clients.offline import loopback_only
from orsbench.clients.targets import ClientTarget, playable, playable_names
from orsbench.clients.transcript import AdapterEpisode, ClientExited, ClientReported, UsageError


#: The exit status of an episode ended by SIGTERM (128 + 15, as a shell reports it).
SIGTERM_EXIT = 128 + signal.SIGTERM


def unwind_on_sigterm() -> None:
    """SIGTERM ends the episode as an exception does (``SystemExit(143)``), once: the client's ``finally`` blocks and
    context managers run — a session opened with ``with`` is deleted — where Python's default would just die.

    What a correct application does (docs/protocol.md §13.17); the adapter is the application around each client,
    so what a target's cell then shows is the client's own: whether its session closes when its episode is unwound.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup it starts is not interrupted again
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def play(name: str, episode: AdapterEpisode) -> int:
    """Run target ``name`` through ``episode``; 0 when it played on, 1 when its client raised.

    Used by the command line below and, in a forked child, by the matrix: both leave the same lines.
    Under ``ORSBENCH_RUNS=N`` (§13.16) the target's own entry point runs N times in this one process, one
    run after another, as a user's loop over runs would call it (a command target loops in its own process);
    a run that raises ends the loop, as it would end the user's.
    """
    target = playable(name)
    episode.unsurfaced(dict(target.consumer.unsurfaced))  # what its user never sees call by call, said once
    if target.command is not None:
        return _play_once(target, episode)  # a command adapter loops its runs and episodes in its own process
    # ORSBENCH_EPISODES (§13.15): a target whose client has a loop over episodes of its own plays them all at once;
    # the others play tasks index .. index+N-1 one by one, going on after one that fails, as a user's loop would.
    episodes = 1 if target.plays_episodes else episode.episodes
    first, code = episode.index, 0
    for _ in range(episode.runs):
        for number in range(episodes):
            episode.index = first + number
            episode.stage, episode.finished = None, False
            played = _play_once(target, episode)
            code = max(code, played)
        if code and episodes == 1:
            break  # a run that failed ends the loop over runs, as it would end the user's
    episode.index = first
    return code


def _play_once(target: ClientTarget, episode: AdapterEpisode) -> int:
    """One call of the target's ``play``: 0, or 1 (the error written) when its client raised."""
    try:
        target.play(episode)
    except ClientExited as exc:  # a command adapter wrote its own lines: only its status is ours to pass on
        return exc.code
    except SystemExit as exc:  # SIGTERM (unwind_on_sigterm): the client's cleanup has run on the way here
        episode.error("ended by SIGTERM before the episode's end")
        return exc.code if isinstance(exc.code, int) else SIGTERM_EXIT
    except Exception as exc:  # noqa: BLE001 - what the client raised is the result
        if isinstance(exc, ClientReported):
            episode.error(str(exc), raised=False)
        else:
            episode.error(f"{type(exc).__name__}: {exc}")
        episode.extras["traceback"] = traceback.format_exc()[-3000:]
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = playable_names()
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(
            "usage: python -m orsbench.clients.adapter NAME\n\n"
            "Play one episode with a built-in ORS client under the adapter contract of docs/clients.md\n"
            f"(run it through `orsbench check-client --client-cmd`). NAME: a client target or variant: {', '.join(names)}",
            file=sys.stderr,
        )
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] not in names:
        print(f"orsbench adapter: error: unknown client target {argv[0]!r}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    target = playable(argv[0])
    if not target.installed:
        print(f"orsbench adapter: error: {target.title} is not installed: {target.install_hint}", file=sys.stderr)
        return 2
    loopback_only()  # the client's code reaches 127.0.0.1 and nothing else (orsbench/clients/offline.py)
    unwind_on_sigterm()
    try:
        episode = AdapterEpisode.from_environment(os.environ)
    except UsageError as exc:
        print(f"orsbench adapter: error: {exc}", file=sys.stderr)
        return 2
    try:
        code = play(argv[0], episode)
        if code:
            print(episode.extras.get("traceback", ""), file=sys.stderr)
        return code
    finally:
        episode.close()


if __name__ == "__main__":
    sys.stdout.flush()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip atexit: the SDK's loop threads would otherwise delay the exit
