"""Hazard scenarios: the cases real ORS clients get wrong, one scenario each (docs/protocol.md §13).

Each is an ordinary scenario — served by ``orsbench serve``, checked by
``orsbench check --scenario``, played by the client matrix and the conformance
suite — whose environment is correct but provokes one mistake a client can
make. The two hazards that are server trouble rather than environment content
(``402`` on ``/create_session``, a ``/call`` stream cut before its
``task_id``) are fault profiles (:mod:`orsbench.servers.faults.profiles`).

* ``images`` — image blocks in the prompt and in tool results;
* ``schema-keywords`` — tool parameters named ``title``, ``default`` and
  ``examples`` (schema sanitisers delete keys with those names);
* ``dense-reward`` — a reward on most calls, where their sum and the last
  non-null reward differ (:func:`reward_conventions` gives both);
* ``two-envs`` — two environments on one server; the default one is a decoy;
* ``secrets`` — a secret that must arrive as ``X-Secrets``;
* ``recover`` — an ``ok:false`` answer, then a good call in the same session;
* ``reward-range`` — rewards above 1 and below 0, and ``null`` on the finishing call.

Every scenario is deterministic given its task, and every answer a correct
client must reproduce is derivable from the task spec (the client episodes'
scripts read it there).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orsbench.scenarios import register
from orsbench.scenarios.base import JSON, Episode, Scenario, SessionRefused, Split, ToolResult, image, text, tool

#: Tasks per split of every hazard scenario (small: a hazard is one episode, not a dataset).
TASKS = 4


class _Hazard(Scenario):
    """What every hazard scenario shares: a train and a test split of :data:`TASKS` tasks each."""

    def splits(self) -> list[Split]:
        return [Split("train", "train"), Split("test", "test")]


# -- images ------------------------------------------------------------------------------
#: The colours an ``images`` task may show, name → RGB.
COLOURS: dict[str, tuple[int, int, int]] = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 70, 220), "yellow": (240, 210, 40)}
IMAGE_SIDE = 4


def png(rgb: tuple[int, int, int], side: int = IMAGE_SIDE) -> bytes:
    """A valid ``side``×``side`` PNG of one colour (8-bit RGB), written here so no imaging library is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes(rgb) * side for _ in range(side))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def png_b64(colour: str) -> str:
    """The base64 ``data`` of the image block showing ``colour``."""
    return base64.b64encode(png(COLOURS[colour])).decode()


class AnswerColour(BaseModel):
    colour: str = Field(description="The colour's name, lower case (red, green, blue or yellow).")


class ColourTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    colour: str


@register
class Images(_Hazard):
    """The prompt carries an image block; ``look()`` answers text and an image; ``answer(colour)`` wins."""

    name = "images"
    task_model = ColourTask
    summary = "an image block in the prompt and first in look()'s result; answer(colour) names the colour (reward 1, finished)"

    def list_tasks(self, split: str) -> list[JSON]:
        names = list(COLOURS)
        offset = 0 if split == "train" else 1
        return [{"id": f"images-{split}-{i}", "colour": names[(i + offset) % len(names)]} for i in range(TASKS)]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text("What colour is this image? Call look() for another view, then answer(colour)."), image(png_b64(episode.task["colour"]))]

    @tool()
    def look(self, episode: Episode, args: None) -> ToolResult:
        """Show the image again, then its caption (a screenshot tool's answer: the image comes first)."""
        return ToolResult([image(png_b64(episode.task["colour"])), text(look_text())], metadata={"side": IMAGE_SIDE})

    @tool(AnswerColour)
    def answer(self, episode: Episode, args: AnswerColour) -> ToolResult:
        """Name the image's colour. Reward 1 and finished when right, else reward 0."""
        right = args.colour.strip().lower() == episode.task["colour"]
        return ToolResult([text("correct" if right else "wrong")], reward=1.0 if right else 0.0, finished=right)


def look_text() -> str:
    """The caption, the text block after the image in ``look()``'s result."""
    return f"the {IMAGE_SIDE}x{IMAGE_SIDE} image above"


# -- schema-keywords ---------------------------------------------------------------------
class RecordParams(BaseModel):
    """Three required parameters named like JSON-Schema annotation keywords."""

    title: str = Field(description="The entry's title.")
    default: str = Field(description="The value to fall back to.")
    examples: list[str] = Field(description="Sample values.")


class KeywordTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    title: str
    default: str
    examples: list[str]


def record_text(title: str, default: str, examples: list[str]) -> str:
    """What ``record`` answers for these arguments (a client must show it verbatim)."""
    return f"recorded title={title!r} default={default!r} examples={examples!r}"


@register
class SchemaKeywords(_Hazard):
    """``record(title, default, examples)``: all three required; a client that strips them fails validation."""

    name = "schema-keywords"
    task_model = KeywordTask
    summary = "record(title, default, examples): parameters named like schema keywords, all required (a stripping sanitiser is caught)"

    def list_tasks(self, split: str) -> list[JSON]:
        return [
            {"id": f"keywords-{split}-{i}", "title": f"entry {i}", "default": f"fallback-{i}", "examples": [f"e{i}", f"e{i + 1}"]}
            for i in range(TASKS)
        ]

    def prompt(self, episode: Episode) -> list[JSON]:
        t = episode.task
        return [text(f"Call record with title={t['title']!r}, default={t['default']!r}, examples={t['examples']!r}.")]

    @tool(RecordParams)
    def record(self, episode: Episode, args: RecordParams) -> ToolResult:
        """Record an entry and finish. Reward 1 when every field matches the task, else reward 0."""
        t = episode.task
        right = (args.title, args.default, args.examples) == (t["title"], t["default"], t["examples"])
        return ToolResult([text(record_text(args.title, args.default, args.examples))], reward=1.0 if right else 0.0, finished=True)


# -- dense-reward ------------------------------------------------------------------------
class DenseTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    rewards: list[float | None] = Field(min_length=2, max_length=16)


def reward_conventions(rewards: list[float | None]) -> dict[str, float | None]:
    """The two documented ways to make one episode reward of per-call rewards (docs/protocol.md §13.3).

    ``sum``: the total of the non-null rewards (a return); ``last``: the last non-null reward (an outcome).
    """
    present = [r for r in rewards if r is not None]
    return {"sum": float(sum(present)) if present else None, "last": present[-1] if present else None}


@register
class DenseReward(_Hazard):
    """``step()`` pays the task's next reward (some null); the last step finishes. Sum ≠ last non-null reward."""

    name = "dense-reward"
    task_model = DenseTask
    summary = "step() pays a reward on most calls (some null); the sum and the last non-null reward differ (both in the final metadata)"

    def list_tasks(self, split: str) -> list[JSON]:
        tasks = []
        for i in range(TASKS):
            base = 0.25 * (i + 1)
            rewards: list[float | None] = [0.5, None, -0.25, base]  # sum = base + 0.25 ≠ last = base
            tasks.append({"id": f"dense-{split}-{i}", "rewards": rewards})
        return tasks

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Call step() {len(episode.task['rewards'])} times; each call may pay a reward.")]

    @tool()
    def step(self, episode: Episode, args: None) -> ToolResult:
        """Take the next step. Pays the task's next reward (possibly null); the last step finishes the episode."""
        rewards = episode.task["rewards"]
        n = episode.state["steps"] = episode.state.get("steps", 0) + 1
        reward = rewards[n - 1] if n <= len(rewards) else None
        last = n >= len(rewards)
        metadata: JSON = {"step": n}
        if last:
            metadata["conventions"] = reward_conventions(rewards)
        return ToolResult([text(step_text(n, reward))], reward=reward, finished=last, metadata=metadata)


def step_text(n: int, reward: float | None) -> str:
    """What ``step`` answers on its ``n``-th call."""
    return f"step {n}: reward {reward}"


# -- two-envs ----------------------------------------------------------------------------
class SignParams(BaseModel):
    word: str = Field(description="The word to sign the guest book with.")


class WordTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    word: str


_WORDS = ("harbor", "meadow", "quartz", "lantern")


class _GuestBook(_Hazard):
    """Both environments of the ``two-envs`` server: the same tasks (a word to sign with) and tool name."""

    task_model = WordTask

    def list_tasks(self, split: str) -> list[JSON]:
        offset = 0 if split == "train" else 2
        return [{"id": f"{self.name}-{split}-{i}", "word": _WORDS[(i + offset) % len(_WORDS)]} for i in range(TASKS)]


@register
class TwoEnvsDecoy(_GuestBook):
    """The default environment of the ``two-envs`` server: the one a client that drops ``env_name`` lands in."""

    name = "two-envs-decoy"
    summary = "the decoy default environment of `serve two-envs`: same tool and tasks, every answer says it is the wrong one"
    dedicated = "served as the default environment beside two-envs, where the hazard is; on its own it is a plain environment"

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"This is {self.name!r}, the default environment. Sign with sign(word).")]

    @tool(SignParams)
    def sign(self, episode: Episode, args: SignParams) -> ToolResult:
        """Sign the guest book. Here it always answers that this is the wrong environment (reward 0)."""
        return ToolResult([text(wrong_env_text(self.name))], reward=0.0, finished=True, metadata={"env": self.name})


def wrong_env_text(env: str) -> str:
    return f"wrong environment: this is {env!r}; send env_name in /create to reach {TwoEnvs.name!r}"


@register
class TwoEnvs(_GuestBook):
    """Served *after* a decoy default environment: a client must name this one in ``/create`` and in its paths."""

    name = "two-envs"
    companions = ("two-envs-decoy",)
    summary = "two environments on one server; the default is a decoy, so a client that drops env_name lands there (stats: sessions_by_env)"

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"This is {self.name!r}. Sign with sign(word={episode.task['word']!r}).")]

    @tool(SignParams)
    def sign(self, episode: Episode, args: SignParams) -> ToolResult:
        """Sign the guest book with the task's word. Reward 1 and finished when right, else reward 0."""
        right = args.word == episode.task["word"]
        return ToolResult([text(sign_text(self.name, right))], reward=1.0 if right else 0.0, finished=right, metadata={"env": self.name})


def sign_text(env: str, right: bool) -> str:
    return f"signed in {env!r}: {'right word' if right else 'wrong word'}"


# -- secrets -----------------------------------------------------------------------------
#: The secret the ``secrets`` scenario needs, by name.
SECRET_NAME = "ORSBENCH_HAZARD_TOKEN"


def fingerprint(value: str) -> str:
    """What the environment shows of a secret it received: a short SHA-256 prefix, never the value."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def missing_secret_detail(name: str = SECRET_NAME) -> str:
    """The ``/create`` detail when the secret is missing (names it, says where it goes)."""
    return (
        f"missing secret {name!r}: send it in the X-Secrets header of /create "
        f"(base64 of JSON {{{name!r}: {{\"value\": ...}}}}), not in the request body"
    )


@register
class Secrets(_Hazard):
    """``/create`` needs secret ``ORSBENCH_HAZARD_TOKEN`` in ``X-Secrets``; ``whoami()`` proves it arrived."""

    name = "secrets"
    summary = f"/create refuses (400) a session without secret {SECRET_NAME} in X-Secrets; whoami() shows its SHA-256 prefix, never the value"
    dedicated = "every session needs its secret in X-Secrets; conformance/test_hazards.py passes it the way each client documents"

    def list_tasks(self, split: str) -> list[JSON]:
        return [{"id": f"secrets-{split}-{i}"} for i in range(TASKS)]

    def admit(self, episode: Episode) -> None:
        if not episode.secrets.get(SECRET_NAME):
            raise SessionRefused(missing_secret_detail())

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Secret {SECRET_NAME} received (sha256 {fingerprint(episode.secrets.get(SECRET_NAME, ''))}). Call whoami().")]

    @tool()
    def whoami(self, episode: Episode, args: None) -> ToolResult:
        """Say which secret the environment received, as a SHA-256 prefix. Reward 1 and finished."""
        value = episode.secrets.get(SECRET_NAME, "")
        return ToolResult(
            [text(secret_text(value))],
            reward=1.0 if value else 0.0,
            finished=True,
            metadata={"secret": SECRET_NAME, "sha256_prefix": fingerprint(value) if value else None},
        )


def secret_text(value: str) -> str:
    """What ``whoami`` answers for a received secret ``value`` (its fingerprint only)."""
    return f"secret {SECRET_NAME} received: sha256 {fingerprint(value)}" if value else f"secret {SECRET_NAME} not received"


# -- recover -----------------------------------------------------------------------------
class GuessParams(BaseModel):
    number: int = Field(ge=1, le=10, description="A whole number from 1 to 10.")


class GuessTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    number: int = Field(ge=1, le=10)


#: The first call of the ``recover`` episode: out of range, so the server answers ok:false input_validation.
BAD_GUESS: dict[str, Any] = {"number": 0}


@register
class Recover(_Hazard):
    """``guess(number)`` in 1..10: the episode's first call is out of range (``ok:false``), the next one wins."""

    name = "recover"
    task_model = GuessTask
    summary = "guess(number) in 1..10: an out-of-range guess answers ok:false (input_validation); the session stays usable for the next"
    dedicated = (
        "its first call is meant to fail, and the scripted drivers stop at a raised error as their users' loops do; "
        "conformance/test_hazards.py plays it per client"
    )

    def list_tasks(self, split: str) -> list[JSON]:
        offset = 0 if split == "train" else 5
        return [{"id": f"recover-{split}-{i}", "number": (i * 3 + offset) % 10 + 1} for i in range(TASKS)]

    def prompt(self, episode: Episode) -> list[JSON]:
        return [text(f"Guess the number: it is {episode.task['number']}. Call guess(number).")]

    @tool(GuessParams)
    def guess(self, episode: Episode, args: GuessParams) -> ToolResult:
        """Guess the number. Reward 1 and finished when right, else reward 0 and another try."""
        right = args.number == episode.task["number"]
        return ToolResult([text("right" if right else "wrong")], reward=1.0 if right else 0.0, finished=right)


# -- reward-range ------------------------------------------------------------------------
def range_rewards(i: int) -> list[float | None]:
    """Task ``i``'s rewards: one above 1, one negative, and ``null`` on the finishing call."""
    return [2.5 + i, -1.0 - i, None]


@register
class RewardRange(DenseReward):
    """``step()`` pays the task's rewards in turn — one above 1, one below 0 — and finishes with reward ``null``."""

    name = "reward-range"
    summary = "step() pays a reward above 1, then a negative one, then finishes with reward null; all three must reach the client as sent"

    def list_tasks(self, split: str) -> list[JSON]:
        return [{"id": f"range-{split}-{i}", "rewards": range_rewards(i)} for i in range(TASKS)]
