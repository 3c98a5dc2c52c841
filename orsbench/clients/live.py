"""``orsbench matrix --url``: which installed clients can use *your* environment, played live.

The checker's own player (:func:`orsbench.checks.explore.play_one`) plays one
episode on the user's server — a winning one where it finds one, else a valid
one — and the calls it made become the script every installed client target
then plays through its built-in adapter (``python -m orsbench.clients.adapter
NAME``, the contract of ``docs/clients.md``), each in a fresh session. A client
*trains* (TRL, the trainer target) or *evaluates* (the others) when its
episode ran to the end showing the model the texts the player saw and
reporting the same reward; otherwise it *fails — because* its first error
line or the first difference. Beside each verdict: what the static binding
rules (:func:`orsbench.checks.binding.predict`) predict from the server's
``/tools`` listing.

Only a loopback URL is played (the same rule as ``bench --url``); secrets reach
the adapters by their environment (``ORSBENCH_SECRETS``), never a command line,
and appear in no result.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbench.bench.target import TargetError, local_target
from orsbench.checks import binding
from orsbench.checks.collector import Collector
from orsbench.checks.evidence import Episode, Evidence, Options, json_of
from orsbench.checks.explore import play_one
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.contract import did_not_run, expand, refused_placeholders
from orsbench.clientcheck.runner import case_environment, execute
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.wire.client import WireClient

#: The client targets that train (their episodes feed a trainer, so they need a reward); the others evaluate.
TRAINERS = frozenset({"trl"})
#: Seconds an adapter command may take to start, beyond ``--timeout`` (a built-in target says its own).
COMMAND_STARTUP_S = 10.0
#: Probes the player needs first: the tools listing and environment, then the splits and the task to play.
_PROBES = ("discovery", "dataset")
#: What :func:`explore._answer_of` writes for a call that did not answer (not scripted for the clients).
_FAILED_ANSWERS = ("raise", "hang", "stream", "http", "reaped")


class LiveUsageError(ValueError):
    """The URL or the environment cannot be played; the message names the fix (exit 2)."""


@dataclass(frozen=True)
class _Player:
    """One row's client: an installed target's built-in adapter, or the user's own adapter command."""

    name: str
    version: str
    #: The command run once (placeholders expanded); the target's adapter module for a built-in target.
    run: str
    startup_s: float
    #: The user's command as given (a ``--client-cmd`` row), else None.
    command: str | None = None
    #: Why it cannot play (not installed), else None.
    missing: str | None = None

    @classmethod
    def of_target(cls, name: str) -> _Player:
        target = CLIENT_TARGETS[name]
        missing = None if target.installed else f'pip install "orsbench[{target.extra}]"'
        run = f"{shlex.quote(sys.executable)} -m orsbench.clients.adapter {shlex.quote(name)}"
        return cls(name, target.version, run, target.startup_s, missing=missing)

    @classmethod
    def of_command(cls, number: int, command: str) -> _Player:
        return cls(f"cmd {number}", "—", command, COMMAND_STARTUP_S, command=command)


def check_url(url: str) -> str:
    """``url`` without its trailing slash, when it is http(s) on this machine (the rule of ``bench --url``)."""
    try:
        return local_target(url, command="orsbench matrix").url
    except TargetError as exc:
        raise LiveUsageError(str(exc)) from None


def _player_episode(url: str, options: Options) -> tuple[Evidence, Episode, list[dict[str, Any]]]:
    """Play one episode with the checker's player; the evidence, the episode and the ``/tools`` listing."""
    evidence = Evidence(url, options)
    client = WireClient(url, timeout=options.timeout, api_key=options.api_key, secrets=options.secrets)
    collector = Collector(client, evidence)
    try:
        for name in _PROBES:
            collector.run(name)
            problem = evidence.unreachable or evidence.not_ors or evidence.usage_error
            if problem:
                raise LiveUsageError(f"cannot play {url}: {problem}")
        sid = collector.open_session()
        if sid is None:
            raise LiveUsageError(f"cannot play {url}: /create refused a session on {evidence.split}[{evidence.index}] (missing --secret?)")
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


def _script(episode: Episode) -> tuple[list[dict[str, Any]], list[str]]:
    """The calls (and what each answered) the clients replay: those that answered, in the player's order."""
    calls, answers = [], []
    for (tool, value), answer in zip(episode.calls, episode.answers):
        if answer in _FAILED_ANSWERS or answer.startswith("ok:false"):
            continue  # a call the server refused or failed on: no client is judged by it
        calls.append({"tool": tool, "input": value})
        answers.append(answer)
    return calls, answers


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _client_error(run: Any) -> str | None:
    """The first error the client reported (its error line, else the last line of its stderr)."""
    for line in run.out.lines:
        if line.is_error:
            return _first_line(str(line.get("error")))
    if run.exit_code not in (0, None):
        tail = [line.strip() for line in run.stderr.splitlines() if line.strip()]
        return f"exit {run.exit_code}: {tail[-1][:300]}" if tail else f"exit {run.exit_code}"
    return None


def judge(client: str, run: Any, answers: list[str], reward: float | None, timeout: float) -> tuple[str, str]:
    """``("trains" | "evaluates" | "fails", why)`` for one client's run of the player's script."""
    if run.stopped_for is not None:
        return "fails", f"orsbench stopped it ({run.stopped_for}, {timeout:g} s)"
    error = _client_error(run)
    if error:
        return "fails", error
    shown = [line for line in run.out.lines if line.is_call]
    if len(shown) != len(answers):
        return "fails", f"it reported {len(shown)} of the {len(answers)} scripted calls"
    for n, (line, answer) in enumerate(zip(shown, answers)):
        if line.get("text") != answer:
            return "fails", f"call {n} ({line.get('tool')}) showed {str(line.get('text'))[:80]!r}, the server answered {answer[:80]!r}"
    rewards = [line.get("reward") for line in shown if line.get("reward") is not None]
    got = rewards[-1] if rewards else None
    if got != reward:
        return "fails", f"its episode reward is {got!r}, the server gave {reward!r}"
    if client in TRAINERS:
        return ("trains", f"reward {reward!r}") if reward is not None else ("fails", "the episode gave no reward to train on")
    return "evaluates", f"reward {reward!r}" if reward is not None else "no reward (a valid, unrewarded episode)"


def play_on_url(
    url: str,
    env: str | None = None,
    clients: list[str] | None = None,
    secrets: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: Callable[[str], None] | None = None,
    commands: Sequence[str] = (),
    api_key: str | None = None,
) -> dict[str, Any]:
    """Play the player's episode on ``url`` with each client target and each adapter command; one row each.

    ``commands`` are check-client-style adapter commands (``docs/clients.md``): run by ``/bin/sh`` with the
    contract's variables and ``{url}``-style placeholders, judged like the built-in targets. ``api_key`` is
    sent by the player and given to every client (``OPENREWARD_API_KEY``, ``ORSBENCH_API_KEY``). Secrets and
    the key are in no row. A command the shell could not run (exit 126/127, nothing reported) has its row's
    ``did_not_run`` say so: the front end's usage error.
    """
    url = check_url(url)
    for command in commands:
        if not command.strip():
            raise LiveUsageError('--client-cmd is empty: give the adapter command, e.g. --client-cmd "python my_adapter.py"')
        if refused := refused_placeholders(command):
            raise LiveUsageError(f"--client-cmd uses {', '.join(refused)}: secrets never go on a command line; the adapter reads ORSBENCH_SECRETS")
    say = progress or (lambda _line: None)
    secrets = dict(secrets or {})
    options = Options(env=env, secrets=secrets, timeout=min(timeout, 30.0), api_key=api_key)
    say(f"playing {url} with the checker's player")
    evidence, episode, tools = _player_episode(url, options)
    calls, answers = _script(episode)
    reward = episode.reward if episode.finished else (episode.rewards[-1] if episode.rewards else None)
    predictions = binding.predict(tools)
    result: dict[str, Any] = {
        "url": url,
        "env": evidence.env,
        "split": evidence.split,
        "index": evidence.index,
        "episode": {"calls": len(calls), "finished": episode.finished, "reward": reward, "stopped": episode.stopped},
        "rows": [],
    }
    case = Case("url", "", "the user's server", split=evidence.split or "", index=evidence.index or 0, secrets=tuple(secrets.items()))
    players = [_Player.of_target(name) for name in (CLIENT_TARGETS.names() if clients is None else clients)]
    players += [_Player.of_command(n, command) for n, command in enumerate(commands or (), start=1)]
    for player in players:
        row: dict[str, Any] = {"client": player.name, "version": player.version, "predicted": predictions.get(player.name, [])}
        if player.command is not None:
            row["command"] = player.command
        result["rows"].append(row)
        if player.missing is not None:
            row.update(verdict="not installed", why=player.missing)
            continue
        say(f"{player.name}: playing {len(calls)} call(s)")
        workdir = Path(tempfile.mkdtemp(prefix="orsbench-live-"))  # 0700: only this user reads the script
        try:
            script_path, out_path = workdir / "script.json", workdir / "out.jsonl"
            script_path.write_text(json.dumps({"calls": calls}))
            out_path.touch(mode=0o600)
            variables = case_environment(case, url, evidence.env or "", script_path, out_path)
            if api_key:
                variables.update({"OPENREWARD_API_KEY": api_key, "ORSBENCH_API_KEY": api_key})
            deadline = timeout + player.startup_s
            run = execute(expand(player.run, variables), variables, out_path, deadline)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if player.command is not None and (problem := did_not_run(player.command, run.exit_code, len(run.out.lines), run.stderr)):
            row["did_not_run"] = problem
        verdict, why = judge(player.name, run, answers, reward, deadline)
        row.update(verdict=verdict, why=why, seconds=round(run.duration_s, 1))
    return result


def line_of(row: Mapping[str, Any]) -> str:
    """One row as text: ``openreward  evaluates — reward 1.0  (predicted: ...)``."""
    verdict = row["verdict"] if row["verdict"] != "fails" else "fails — because"
    text = f"{row['client']:<11} {verdict} {'' if verdict.endswith('because') else '— '}{row['why']}"
    text += f"\n{'':<11}   command: {row['command']}" if row.get("command") else ""
    return text + (f"\n{'':<11}   predicted: " + "; ".join(row["predicted"]) if row["predicted"] else "")


def markdown(result: Mapping[str, Any]) -> str:
    """The rows as a Markdown table (the predicted binding problems beside each live verdict)."""
    ep = result["episode"]
    head = (
        f"# Which clients can use {result['env']} at {result['url']}\n\n"
        f"The checker's player: {ep['calls']} call(s) on {result['split']}[{result['index']}], "
        f"{'finished' if ep['finished'] else 'not finished'}, reward {ep['reward']!r}.\n\n"
        "| client | version | verdict | because | predicted binding problems |\n|---|---|---|---|---|\n"
    )
    cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731

    def client(row: Mapping[str, Any]) -> str:
        return f"{row['client']}: `{cell(row['command'])}`" if row.get("command") else str(row["client"])

    rows = [
        f"| {client(r)} | {r['version']} | {r['verdict']} | {cell(r['why'])} | {cell('; '.join(r['predicted']) or '—')} |"
        for r in result["rows"]
    ]
    return head + "\n".join(rows) + "\n"
