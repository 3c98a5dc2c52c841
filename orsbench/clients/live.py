"""``orsbench clients URL``: which installed clients can use *your* environment, played live and judged as everywhere.

The checker's own player (:func:`orsbench.checks.explore.play_one`) plays one
episode on the user's server — a winning one where it finds one, else a valid
one — and the calls it made become the script every installed client target
(and each ``--cmd`` adapter command) then plays, each in a fresh session,
through an ``orsbench proxy`` with a request log in front of the server. Each
client runs under the one runner every client goes through
(:class:`~orsbench.clientcheck.runner.RunningCase`: a built-in target forked
ready, a command by ``/bin/sh``), is graded by the client checks from both ends
(what it reported, what the proxy saw) and judged by the one function
(:func:`orsbench.clientcheck.judgement.judge`): a row says ``works``,
``fails clearly``, ``fails silently`` or ``hangs`` — the matrix's and
check-client's words — with, for a trainer, whether it would train (a reward to
train on), and beside a failure the pinned upstream defect that explains it
(:func:`orsbench.upstream.defects.shown_in` over what the player learnt of the
server), so a client's known bug is not taken for the environment's. Beside each
row: what the static binding rules (:func:`orsbench.checks.binding.predict`)
predict from the server's ``/tools`` listing.

Only a loopback URL is played (the same rule as ``bench --url``); secrets reach
the clients by their environment (``ORSBENCH_SECRETS``), never a command line,
and appear in no result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orsbench.bench.learn import FAILED_ANSWERS, CannotPlay, player_episode
from orsbench.bench.target import TargetError, local_target
from orsbench.checks import binding
from orsbench.checks.evidence import Episode, Evidence, Options, json_of, short
from orsbench.clientcheck import grade
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.contract import did_not_run, refused_placeholders
from orsbench.clientcheck.episodes import Script, Step
from orsbench.clientcheck.judgement import judge
from orsbench.clientcheck.process import Command, Launch
from orsbench.clientcheck.checks import CLIENT_CHECKS, context
from orsbench.clientcheck.results import NOT_INSTALLED, NOT_PLAYED, LiveResult, LiveRow, PinnedDefect, PlayerEpisode
from orsbench.clientcheck.runner import CaseRun, play
from orsbench.clients.consumers import Consumer, Prediction
from orsbench.clients.run import forked, preload
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.servers.launch import RunningServer, ServerStartError, start_proxy
from orsbench.upstream import defects as D
from orsbench.verdict import SCRIPT, Effect, Judgement, Verdict
from orsbench.wire.redact import scrub

#: Seconds an adapter command may take to start, beyond ``--timeout`` (a built-in target says its own).
COMMAND_STARTUP_S = 10.0
#: A result longer than this (the servers' default SSE chunk) is sent in several chunks.
_CHUNK = 4096


class LiveUsageError(ValueError):
    """The URL or the environment cannot be played; the message names the fix (exit 2)."""


@dataclass(frozen=True)
class _Player:
    """One row's client: an installed target's built-in adapter (forked ready), or the user's own adapter command."""

    name: str
    version: str
    launch: Launch | None
    trainer: bool = False
    #: The user's command as given (a ``--client-cmd`` row), else None.
    command: str | None = None
    #: Why it cannot play (not installed), else None.
    missing: str | None = None
    consumer: Consumer | None = None

    @classmethod
    def of_target(cls, name: str) -> _Player:
        target = CLIENT_TARGETS[name]
        if not target.installed:
            return cls(name, target.version, None, target.trains, missing=target.install_hint, consumer=target.consumer)
        return cls(name, target.version, forked(name), target.trains, consumer=target.consumer)

    @classmethod
    def of_command(cls, number: int, command: str) -> _Player:
        return cls(f"cmd {number}", "—", Command(command, COMMAND_STARTUP_S), command=command)


def check_url(url: str) -> str:
    """``url`` without its trailing slash, when it is http(s) on this machine (the rule of ``bench --url``)."""
    try:
        return local_target(url, command="orsbench clients").url
    except TargetError as exc:
        raise LiveUsageError(str(exc)) from None


def _player_episode(url: str, options: Options) -> tuple[Evidence, Episode, list[dict[str, Any]]]:
    """Play one episode with the checker's player (:func:`orsbench.bench.learn.player_episode`, the load's too)."""
    try:
        return player_episode(url, options)
    except CannotPlay as exc:
        raise LiveUsageError(str(exc)) from None


def _script(episode: Episode, reward: float | None) -> Script:
    """The calls the clients replay — those that answered, in the player's order — each expecting what it answered."""
    kept = [(call, answer) for call, answer in zip(episode.calls, episode.answers) if not _failed(answer)]
    steps = [Step(tool, dict(value) if isinstance(value, dict) else {}, answer) for (tool, value), answer in kept]
    return Script("url", tuple(steps), reward=reward, finished=episode.finished)


def listed_envs(evidence: Evidence) -> list[str]:
    """The environments the user's server lists, its default (what a ``/create`` without ``env_name`` plays) first."""
    ok, envs = json_of(evidence.get("list_environments"))
    return [e for e in envs if isinstance(e, str)] if ok and isinstance(envs, list) else []


def facts(client: str, evidence: Evidence, tools: list[dict[str, Any]], script: Script, rewards: Sequence[Any] = ()) -> D.CellFacts:
    """What the pinned defects' predicates know of the user's server, from what the player learnt of it."""
    names = listed_envs(evidence)
    listing = evidence.get("dataset.tasks")
    defaults = {t.get("name"): ((t.get("input_schema") or {}).get("properties") or {}) for t in tools}
    omits = any(
        name not in step.args and isinstance(prop, dict) and prop.get("default") is not None
        for step in script.steps
        for name, prop in (defaults.get(step.tool) or {}).items()
    )
    return D.CellFacts(
        client=client,
        server="url",
        scenario=evidence.env or "",
        tools=tuple(tools),
        index_only=listing is not None and listing.status is not None and 400 <= listing.status < 500,
        several_envs=len(names) > 1 and evidence.env not in names[:1],
        finishes=script.finished,
        spaced_long_result=any(s.expect is not None and len(s.expect) > _CHUNK and "  " in s.expect for s in script.steps),
        omits_a_default=omits,
        # A call before the last was rewarded (the player's wrong tries score 0.0): what a client that keeps only the
        # last reward loses — the matrix's fact, from the player's episode.
        rewards_before_the_end=any(reward is not None for reward in list(rewards)[:-1]),
        rewards=tuple(rewards),
    )


def _reward_text(reward: Any) -> str:
    return f"reward {reward!r}" if reward is not None else "no reward (a valid, unrewarded episode)"


def _sent_rewards(episode: Episode) -> list[Any]:
    """Each replayed call's reward exactly as the server sent it (the calls :func:`_script` keeps, in order)."""
    sent = episode.sent_rewards + [None] * (len(episode.answers) - len(episode.sent_rewards))
    return [
        reward
        for answer, reward in zip(episode.answers, sent)
        if not _failed(answer)
    ]


def _nothing_to_replay(evidence: Evidence, episode: Episode) -> str:
    """Why no client is played: the player found no call the server answered — with the environment's own error where
    a tool failed on the server (raised, answered 5xx), so the one note names the environment, not a client."""
    why = f"nothing to replay: the checker's player found no call the server answered ({episode.stopped or 'no call made'})"
    failure = next((f for f in evidence.facts.tool_failures if f.found_by == "play"), None)
    if failure is None:
        return why
    kinds = {"raise": "raised", "http": "answered 5xx", "stream": "broke its stream", "hang": "hung"}
    return f"{why}; the environment's own error: {failure.tool}({short(failure.input, 80)}) {kinds.get(failure.kind, failure.kind)}: {failure.detail[:200]}"


def _failed(answer: str) -> bool:
    """A call the server refused or failed on: no client is judged by it (nor replayed by the load)."""
    return answer in FAILED_ANSWERS or answer.startswith("ok:false")


def _confirm(row: LiveRow, expected: Prediction, run: Any, verdict: Verdict, reported: Any) -> None:
    """Hold the live run to its consumer profile's prediction (:mod:`orsbench.clients.consumers`).

    A predicted refusal is confirmed by a reported failure; a predicted reward by the ``episode_reward`` the client
    reported (docs/clients.md), else by the last reward it reported for a call.
    """
    row.consumer = expected.describe()
    if verdict is Verdict.HANGS:
        return
    if expected.refused:
        row.consumer_confirmed = verdict is not Verdict.WORKS
        return
    if verdict is not Verdict.WORKS:
        return
    took = run.out.episode_reward if any("episode_reward" in (line.data or {}) for line in run.out.lines) else reported
    row.consumer_confirmed = took == expected.reward
    if not row.consumer_confirmed:
        row.why += f"; it took reward {took!r} where its consumer profile predicts {expected.reward!r}"


def _budget_cut(episode: Episode) -> bool:
    """The player stopped at its own call or time budget before the episode finished (not at the environment's end)."""
    return not episode.finished and "budget" in (episode.stopped or "")


def named_defects(judgement: Judgement, cell: D.CellFacts, hung: bool) -> list[D.Defect]:
    """The pinned defects that explain ``judgement``: those the cell's facts predict, each named only where what it does
    shows in this run — a check it makes fail (its ``shown_by``) failed, else a failed check (or the process) had its
    effect. A defect the player's guesses about the server predict (a chunked result) but the run did not show is not named.
    """
    if D.predicted(cell) != judgement.verdict:
        return []
    failed = {p.check for p in judgement.problems}
    effects = {CLIENT_CHECKS.get(check).effect for check in failed if check in CLIENT_CHECKS}
    if judgement.error is not None:
        effects.add(Effect.REPORTS_ERROR)
    if hung:
        effects.add(Effect.HANGS)
    if judgement.problems and judgement.problems[0].check == SCRIPT:
        effects.add(Effect.WRONG_DATA)
    return [d for d in D.shown_in(cell) if (bool(set(d.shown_by) & failed) if d.shown_by else d.effect in effects)]


def _scrubbed(judgement: Judgement, secrets: Sequence[str]) -> Judgement:
    """``judgement`` with no secret value in its words (a client may print what it was given)."""
    problems = tuple(replace(p, message=scrub(p.message, secrets)) for p in judgement.problems)
    error = scrub(judgement.error, secrets) if judgement.error is not None else None
    return replace(judgement, problems=problems, error=error)


def _environment_error(run: CaseRun) -> str | None:
    """The first failure the environment itself answered in ``run``: a 5xx, or a call that failed on the server."""
    for entry in run.log:
        status = entry.get("status")
        if isinstance(status, int) and status >= 500:
            return f"{entry.get('method')} {entry.get('path')} answered {status}"
    failing = next((call for call in context(run).traffic.made if call.failure is not None), None)
    return f"{failing.tool} failed on the server ({failing.failure})" if failing is not None else None


def _row(
    player: _Player,
    proxy: RunningServer,
    case: Case,
    script: Script,
    env: str,
    default_env: str,
    timeout: float,
    cell: D.CellFacts,
    overrides: Mapping[str, str],
    expected: Prediction | None = None,
    budget_cut: str | None = None,
) -> tuple[LiveRow, str | None]:
    """One client's row, and the environment's own error it met (``None``: none)."""
    assert player.launch is not None
    run = play(player.launch, case, proxy, script=script, env=env, default_env=default_env, deadline=timeout, overrides=overrides)
    secrets = [value for _, value in case.secrets]
    judgement = _scrubbed(judge(run, grade(run), subject=player.name), secrets)
    reported = [line.get("reward") for line in run.out.lines if line.is_call and line.get("reward") is not None]
    reward = reported[-1] if reported else None
    # Where the player stopped at its budget, the episode is unfinished because of the player: a user that refuses an
    # unfinished episode (its consumer profile) rightly fails clearly on it, and no client is blamed for that — but only
    # where the refusal is for the missing end: one it makes of the same rewards finished (a reward outside its range,
    # as benchflow refuses mobile-env's -1.0) is the client's own, whatever the player's budget.
    unfinished_only = (
        budget_cut is not None and player.consumer is not None and expected is not None and expected.refused is not None
        and player.consumer.predict(list(cell.rewards), True).refused is None
    )  # fmt: skip
    rightly = Verdict.FAILS_CLEARLY if unfinished_only else Verdict.WORKS
    row = LiveRow(player.name, player.version, judgement.verdict, "", command=player.command, seconds=round(run.duration_s, 1))
    row.expected, row.judgement = rightly, judgement
    if player.command is not None:
        row.did_not_run = did_not_run(player.command, run.exit_code, len(run.log), run.stderr)
    if judgement.verdict is Verdict.WORKS:
        row.why = _reward_text(reward)
        if player.trainer:
            row.trains = reward is not None
            row.why = row.why if row.trains else "the episode gave no reward to train on"
    else:
        if judgement.verdict is Verdict.HANGS:
            row.why = f"orsbench stopped it ({run.stopped_for}, {run.deadline:g} s)"
        elif row.right:
            row.why = f"{budget_cut}: the episode is unfinished, and its user refuses an unfinished episode ({expected.refused})"  # type: ignore[union-attr]
        else:
            row.why = scrub(judgement.because or str(judgement.verdict), secrets)
        if player.command is None and not row.right:
            # A built-in target whose pinned defects explain just what this run showed: name them, so the environment is not blamed.
            row.defects = [PinnedDefect(d.id, d.summary) for d in named_defects(judgement, cell, run.stopped_for is not None)]
        if player.trainer:
            row.trains = False
    if expected is not None:
        _confirm(row, expected, run, judgement.verdict, reward)
    broken = D.broken_rules(cell) if player.command is None else {}
    row.rules = {rule: (broken[rule].id if rule in broken else None) for rule in judgement.rules}
    met = _environment_error(run) if judgement.verdict is not Verdict.WORKS and not row.right else None
    return row, met


def play_on_url(
    url: str,
    env: str | None = None,
    clients: list[str] | None = None,
    secrets: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: Callable[[str], None] | None = None,
    commands: Sequence[str] = (),
    api_key: str | None = None,
) -> LiveResult:
    """Play the player's episode on ``url`` with each client target and each adapter command; one row each.

    ``commands`` are check-client-style adapter commands (``docs/clients.md``): run by ``/bin/sh`` with the
    contract's variables and ``{url}``-style placeholders, judged like the built-in targets. ``api_key``
    reaches the player and every client (``OPENREWARD_API_KEY``, ``ORSBENCH_API_KEY``). Secrets are in no row.
    """
    url = check_url(url)
    for command in commands:
        if not command.strip():
            raise LiveUsageError('--client-cmd is empty: give the adapter command, e.g. --client-cmd "python my_adapter.py"')
        if refused := refused_placeholders(command):
            raise LiveUsageError(f"--client-cmd uses {', '.join(refused)}: secrets never go on a command line; the adapter reads ORSBENCH_SECRETS")
    say = progress or (lambda _line: None)
    secrets = dict(secrets or {})
    options = Options(env=env, secrets=secrets, timeout=timeout, api_key=api_key)
    say(f"playing {url} with the checker's player")
    evidence, episode, tools = _player_episode(url, options)
    reward = episode.reward if episode.finished else (episode.rewards[-1] if episode.rewards else None)
    script = _script(episode, reward)
    sent = _sent_rewards(episode)
    predictions = binding.predict(tools)
    result = LiveResult(
        url, evidence.env, evidence.split, evidence.index, PlayerEpisode(len(script.steps), episode.finished, reward, episode.stopped)
    )
    nothing = None if script.steps else _nothing_to_replay(evidence, episode)
    budget_cut = f"the player stopped at its budget ({episode.stopped})" if _budget_cut(episode) and script.steps else None
    result.notes += [note for note in (nothing, budget_cut) if note]
    met: dict[str, str | None] = {}
    default = next(iter(listed_envs(evidence)), evidence.env or "")
    case = Case(
        "url", "", "the user's server", split=evidence.split or "", index=evidence.index or 0, secrets=tuple(secrets.items())
    )
    players = [_Player.of_target(name) for name in (CLIENT_TARGETS.names() if clients is None else clients)]
    players += [_Player.of_command(n, command) for n, command in enumerate(commands or (), start=1)]
    preload([p.name for p in players if p.command is None and p.missing is None])
    playable = [p for p in players if p.launch is not None]
    keys = {"OPENREWARD_API_KEY": api_key, "ORSBENCH_API_KEY": api_key} if api_key else {}
    proxy = None
    if playable:
        try:
            # Every client plays through one proxy that keeps the request log the client checks grade from.
            proxy = start_proxy(url, request_log=True)
        except ServerStartError as exc:
            raise LiveUsageError(f"cannot put orsbench's proxy in front of {url}: {exc}") from None
    try:
        for player in players:
            expected = player.consumer.predict(sent, episode.finished) if player.consumer is not None else None
            if player.launch is None:
                result.rows.append(LiveRow(player.name, player.version, NOT_INSTALLED, player.missing or "", command=player.command))
                result.rows[-1].consumer = expected.describe() if expected is not None else None
            elif nothing is not None:  # an empty episode judges no client: said once, not blamed on each
                result.rows.append(LiveRow(player.name, player.version, NOT_PLAYED, nothing, command=player.command))
            else:
                assert proxy is not None
                say(f"{player.name}: playing {len(script.steps)} call(s)")
                cell = facts(player.name, evidence, tools, script, sent)
                row, met[player.name] = _row(player, proxy, case, script, evidence.env or "", default, timeout, cell, keys, expected, budget_cut)
                result.rows.append(row)
            result.rows[-1].predicted = predictions.get(player.name, [])
    finally:
        if proxy is not None:
            proxy.stop()
    shared = set(met.values())
    if len(met) > 1 and len(shared) == 1 and None not in shared:
        result.notes.append(f"every client failed on the same error of the environment: {shared.pop()} — the environment's, not the clients'")
    return result
