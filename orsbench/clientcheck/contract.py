"""The adapter contract: how ``orsbench check-client`` talks to any client, in any language.

For each case orsbench runs the user's command with the variables below set
(and the same names as ``{url}``-style placeholders in the command, each
replaced shell-quoted). The adapter plays the script with its client and
appends one JSON line per call to ``ORSBENCH_OUT``. ``docs/clients.md`` says
it in prose; this module is the one definition of the names and of what a
valid output line is.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

URL, ENV, SPLIT, INDEX, SCRIPT, OUT, SECRETS = (
    "ORSBENCH_URL",
    "ORSBENCH_ENV",
    "ORSBENCH_SPLIT",
    "ORSBENCH_INDEX",
    "ORSBENCH_SCRIPT",
    "ORSBENCH_OUT",
    "ORSBENCH_SECRETS",
)
#: How many times the adapter plays the script in its one process (absent or ``1``: once), one run after
#: another, each in a session of its own, each run's lines appended in order (docs/protocol.md §13.16).
RUNS = "ORSBENCH_RUNS"
#: How many episodes the adapter plays in one run (absent or ``1``: one): tasks ``ORSBENCH_INDEX`` up to
#: ``ORSBENCH_INDEX + N - 1``, each with the script, each in a session of its own, going on after one that
#: fails; then one aggregate line as the client reports it (docs/protocol.md §13.15).
EPISODES = "ORSBENCH_EPISODES"
#: The key of the line by which a client says, once, which per-call fields it never shows its user, each with why:
#: ``{"unsurfaced": {"reward": "its log keeps the latest non-null reward only"}}`` (docs/clients.md). The per-call
#: checks of those fields are then not applicable to it (``client.reward_as_sent`` judges what it does show).
UNSURFACED = "unsurfaced"
#: The per-call fields a client may say it never shows.
UNSURFACEABLE = ("reward", "finished")
#: The keys of the aggregate line: the client's aggregate reward over the episodes, and how many episodes it is over.
AGGREGATE_REWARD, AGGREGATE_EPISODES = "aggregate_reward", "episodes"
#: The scripted model's base URL (OpenAI-style, ending ``/v1``): an agent harness's model, offline
#: (:mod:`orsbench.clientcheck.model`). Not a placeholder: a harness reads it from its environment.
MODEL_URL = "ORSBENCH_MODEL_URL"

#: Placeholder name → the variable it stands for. ``{secrets}`` is deliberately not one:
#: a secret never goes on a command line (``ps`` shows command lines to every user).
PLACEHOLDERS: dict[str, str] = {"url": URL, "env": ENV, "split": SPLIT, "index": INDEX, "script": SCRIPT, "out": OUT}

#: The API key the openreward SDK is given for a case server (which checks none): not a secret.
CASE_API_KEY = "orsbench-case-server"

_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def expand(command: str, values: Mapping[str, str | None]) -> str:
    """``command`` with each ``{url}``-style placeholder replaced by its value, shell-quoted.

    Other braces are left alone (``{port}``, a shell ``${VAR}``, JSON in the command).
    """
    return _PLACEHOLDER.sub(lambda m: shlex.quote(values[PLACEHOLDERS[m.group(1)]] or ""), command)


def refused_placeholders(command: str) -> list[str]:
    """Placeholders ``command`` uses that the contract refuses on purpose: ``{secrets}`` (a usage error)."""
    return ["{secrets}"] if "{secrets}" in command else []


#: What ``/bin/sh`` exits with when it cannot find (127) or cannot execute (126) the program.
SHELL_NOT_FOUND, SHELL_NOT_EXECUTABLE = 127, 126
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_SHELL_EXPANDS = set("$`{}()<>|;&*?[]~\\")


def not_runnable(command: str) -> str | None:
    """Why ``/bin/sh`` could not start ``command``'s program — asked before any case runs — or ``None``.

    Only the first program is looked at (after ``NAME=value`` assignments), and only when the shell
    would not expand it; anything else is found out by running (:func:`did_not_run`). A wrong
    command is the user's usage error, never a client that fails every check.
    """
    import os
    import subprocess

    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"the client command is not a valid shell line ({exc}): {command!r}"
    words = words[next((i for i, w in enumerate(words) if not _ASSIGNMENT.fullmatch(w)), len(words)) :]
    if not words or _SHELL_EXPANDS & set(words[0]):
        return None
    program = words[0]
    if "/" in program:
        path = Path(program).expanduser()
        if not path.exists():
            return f"the client command's program {program!r} does not exist (/bin/sh would exit 127): check the path in {command!r}"
        if path.is_dir() or not os.access(path, os.X_OK):
            return (
                f"the client command's program {program!r} is not executable (/bin/sh would exit 126): "
                f"chmod +x {shlex.quote(program)}, or run it with its interpreter, in {command!r}"
            )
        return None
    found = subprocess.run(["/bin/sh", "-c", 'command -v -- "$1"', "sh", program], capture_output=True, timeout=10, check=False)
    if found.returncode != 0:
        return (
            f"the client command's program {program!r} is not found on PATH (/bin/sh would exit 127): "
            f"check the spelling, or give its path, in {command!r}"
        )
    return None


def did_not_run(command: str, exit_code: int | None, requests: int, stderr: str) -> str | None:
    """The usage error when a case's command exited 126/127 before making any request: the shell could not run it."""
    if exit_code not in (SHELL_NOT_FOUND, SHELL_NOT_EXECUTABLE) or requests:
        return None
    what = "could not find a program it runs" if exit_code == SHELL_NOT_FOUND else "could not execute a program it runs"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = f" ({lines[-1][:200]})" if lines else ""
    return f"the client command exited {exit_code} before any request: the shell {what}{said}; check {command!r}"


def runs(environ: Mapping[str, str]) -> int:
    """``ORSBENCH_RUNS`` as a count (absent, empty or malformed: 1): how many times to play the script in one process."""
    return _count(environ, RUNS)


def episodes(environ: Mapping[str, str]) -> int:
    """``ORSBENCH_EPISODES`` as a count (absent, empty or malformed: 1): how many episodes to play in one run."""
    return _count(environ, EPISODES)


def _count(environ: Mapping[str, str], name: str) -> int:
    try:
        return max(1, int(environ.get(name) or 1))
    except ValueError:
        return 1


def _is_aggregate(data: Mapping[str, Any]) -> bool:
    """Whether an ``ORSBENCH_OUT`` line is the aggregate line (the client's figure over several episodes), not a call's."""
    return "tool" not in data and AGGREGATE_REWARD in data


def _is_unsurfaced(data: Mapping[str, Any]) -> bool:
    """Whether an ``ORSBENCH_OUT`` line is the ``unsurfaced`` line (what the client never shows), not a call's."""
    return "tool" not in data and "error" not in data and UNSURFACED in data


def unsurfaced_line(fields: Mapping[str, str]) -> dict[str, Any]:
    """The ``unsurfaced`` line: each per-call field the client never shows its user, with why."""
    return {UNSURFACED: dict(fields)}


def aggregate_line(reward: float | None, episodes: int, **extra: Any) -> dict[str, Any]:
    """The aggregate line: ``reward`` as the client aggregates its episodes, over ``episodes`` of them (its denominator)."""
    return {AGGREGATE_REWARD: reward, AGGREGATE_EPISODES: episodes, **extra}


@dataclass
class OutLine:
    """One line of ``ORSBENCH_OUT`` as the adapter wrote it, checked against the contract."""

    number: int
    raw: str
    #: The decoded object (``None`` when the line is not a JSON object).
    data: dict[str, Any] | None = None
    #: What is wrong with the line (empty: a valid contract line).
    problems: list[str] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.data is not None and "error" in self.data

    @property
    def is_call(self) -> bool:
        return self.data is not None and "error" not in self.data and "tool" in self.data

    @property
    def valid(self) -> bool:
        return not self.problems

    def get(self, key: str, default: Any = None) -> Any:
        return (self.data or {}).get(key, default)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_line(number: int, raw: str) -> OutLine:
    """One output line, with every way it breaks the contract listed in ``problems``."""
    line = OutLine(number, raw)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        line.problems.append("not JSON")
        return line
    if not isinstance(data, dict):
        line.problems.append(f"a JSON {type(data).__name__}, not an object")
        return line
    line.data = data
    if "error" in data:
        if not isinstance(data["error"], str):
            line.problems.append('"error" is not a string')
        return line
    if _is_unsurfaced(data):
        said = data[UNSURFACED]
        if not isinstance(said, dict) or not all(k in UNSURFACEABLE and isinstance(v, str) for k, v in said.items()):
            line.problems.append(f'"{UNSURFACED}" is not an object naming {" or ".join(UNSURFACEABLE)}, each with why (a string)')
        return line
    if _is_aggregate(data):
        if data[AGGREGATE_REWARD] is not None and not _is_number(data[AGGREGATE_REWARD]):
            line.problems.append(f'"{AGGREGATE_REWARD}" is not a finite number or null')
        count = data.get(AGGREGATE_EPISODES)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            line.problems.append(f'"{AGGREGATE_EPISODES}" (how many episodes the aggregate is over) is missing or not a count')
        return line
    if "tool" not in data and "episode_reward" in data:  # an episode line: the reward the client took, after its calls
        if data["episode_reward"] is not None and not _is_number(data["episode_reward"]):
            line.problems.append('"episode_reward" is not a finite number or null')
        return line
    if not isinstance(data.get("tool"), str):
        line.problems.append('no "tool" string (and no "error")')
    if not isinstance(data.get("text"), str):
        line.problems.append('"text" is missing or not a string')
    if "reward" not in data:
        line.problems.append('"reward" is missing (write null for no reward)')
    elif data["reward"] is not None and not _is_number(data["reward"]):
        line.problems.append(f'"reward" is {json.dumps(data["reward"])}, not a finite number or null')
    if not isinstance(data.get("finished"), bool):
        line.problems.append('"finished" is missing or not true/false')
    if "episode_reward" in data and data["episode_reward"] is not None and not _is_number(data["episode_reward"]):
        line.problems.append('"episode_reward" is not a finite number or null')
    return line


@dataclass
class OutFile:
    """What the adapter wrote to ``ORSBENCH_OUT``, read back within a size bound."""

    lines: list[OutLine] = field(default_factory=list)
    size: int = 0
    exists: bool = False
    #: The file was larger than the bound; only its head was read.
    truncated: bool = False

    @property
    def entries(self) -> list[OutLine]:
        """The lines that report a call or an error (the ones graded against the server's log)."""
        return [line for line in self.lines if line.is_call or line.is_error]

    @property
    def invalid(self) -> list[OutLine]:
        return [line for line in self.lines if not line.valid]

    @property
    def aggregate(self) -> dict[str, Any] | None:
        """The last aggregate line an adapter wrote (``ORSBENCH_EPISODES``: its figure over the episodes), or ``None``."""
        found = None
        for line in self.lines:
            if line.data is not None and _is_aggregate(line.data):
                found = line.data
        return found

    @property
    def unsurfaced(self) -> dict[str, str]:
        """The per-call fields the client said it never shows its user (its ``unsurfaced`` lines), each with why."""
        found: dict[str, str] = {}
        for line in self.lines:
            if line.valid and line.data is not None and _is_unsurfaced(line.data):
                found.update(line.data[UNSURFACED])
        return found

    @property
    def episode_reward(self) -> Any:
        """The last ``episode_reward`` an adapter reported (clients that sum or pick one for the episode)."""
        found = None
        for line in self.lines:
            if line.data is not None and "episode_reward" in line.data:
                found = line.data["episode_reward"]
        return found


def read_out(path: str | Path, limit: int) -> OutFile:
    """Read ``path`` (at most ``limit`` bytes) as contract lines; blank lines are ignored."""
    out = OutFile()
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return out
    out.exists = True
    out.size = len(data)
    if len(data) > limit:
        out.truncated = True
        data = data[:limit]
    text = data.decode("utf-8", errors="replace")
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            out.lines.append(parse_line(number, raw))
    return out
