"""Deliberately faulty ORS clients for the check-client tests: ``python faulty.py FAULT``.

Each fault is the reference adapter (``orsbench/clientcheck/reference.py``,
raw httpx) with exactly one rule broken, so a test can assert that
``check-client`` fails exactly the check naming that rule. Four more misbehave
as processes: they hang, crash, flood the server or write garbage.

Loaded by path, like the reference adapter run as a file, so each run starts
without importing the orsbench package.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx

_spec = importlib.util.spec_from_file_location("orsbench_reference", Path(__file__).resolve().parents[2] / "orsbench/clientcheck/reference.py")
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
sys.modules["orsbench_reference"] = reference
_spec.loader.exec_module(reference)
Adapter, protocol = reference.Adapter, reference.protocol


class NoResume(Adapter):
    """A cut stream is called afresh instead of resumed by its task_id (the tool runs again)."""

    def after_cut(self, tool: str, tool_input: dict[str, Any], task_id: str) -> Any:
        return self.stream({"name": tool, "input": tool_input})


class StripChunks(Adapter):
    """Every chunk's data loses its leading whitespace (the openreward SDK's lstrip, §3.3)."""

    def assemble(self, stream: Any) -> str | None:
        parts = []
        for event in stream.events:
            if event.event in (protocol.EVENT_CHUNK, protocol.EVENT_END):
                parts.append(event.data.lstrip())
                if event.event == protocol.EVENT_END:
                    return "".join(parts)
        return None


class Retry4xx(Adapter):
    """Every error status is retried, a 400 included."""

    def should_retry(self, response: Any) -> bool:
        return response.status_code >= 400

    def retry_delay(self, response: Any) -> float:
        return 0.1


class IgnoreRetryAfter(Adapter):
    """Retries at once, whatever Retry-After says."""

    def retry_delay(self, response: Any) -> float:
        return 0.05


class NoDelete(Adapter):
    """Never deletes its session."""

    def close(self) -> None:
        pass


class CallAfterFinished(Adapter):
    """Ignores finished: true and makes one more call (an eager model's)."""

    def should_stop(self, output: dict[str, Any]) -> bool:
        return False

    def play(self) -> int:
        self.calls = [*self.calls, self.calls[-1]]
        return super().play()


class PlaysEveryCall(Adapter):
    """Plays every call of the script, whatever finished says (a loop that never looks at it, §13.14)."""

    def should_stop(self, output: dict[str, Any]) -> bool:
        return False


class WholeReply(Adapter):
    """An agent harness on the scripted model (ORSBENCH_MODEL_URL) that runs every call of a model reply before it
    looks at finished, as firehorse's Anthropic loop does (§13.14); everything else it does right."""

    def play(self) -> int:
        model = os.environ.get("ORSBENCH_MODEL_URL", "")
        if not model:
            self.write({"error": "no model: ORSBENCH_MODEL_URL is not set"})
            return 1
        try:
            self.open()
        except (reference.ClientError, httpx.HTTPError) as exc:
            self.write({"error": f"could not open the session: {exc}"})
            self.close()
            return 1
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Play the task."}]
        try:
            with httpx.Client(timeout=30) as llm:
                for _turn in range(len(self.calls) + 2):
                    reply = llm.post(f"{model}/chat/completions", json={"model": "scripted", "messages": messages}).json()
                    tool_calls = reply["choices"][0]["message"].get("tool_calls") or []
                    if not tool_calls:
                        break
                    messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
                    finished = False
                    for tool_call in tool_calls:  # the fault: finished is looked at once the whole reply has run
                        tool = tool_call["function"]["name"]
                        try:
                            output = self.call(tool, json.loads(tool_call["function"]["arguments"] or "{}"))
                        except (reference.ClientError, httpx.HTTPError) as exc:
                            self.report_failure(tool, exc)
                            messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": f"Error: {exc}"})
                            continue
                        self.write(self.line(tool, output))
                        self.failed = False
                        finished = finished or bool(output.get("finished"))
                        messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": self.text_of(output)})
                    if finished:
                        break
        finally:
            self.close()
            self.http.close()
        return 1 if self.failed else 0


class SkipFirstCall(Adapter):
    """Leaves out the script's first call (a loop that starts one step late) and plays the rest."""

    def play(self) -> int:
        self.calls = self.calls[1:]
        return super().play()


class BoolReward(Adapter):
    """Takes a JSON boolean reward as a number (true → 1.0)."""

    def validate(self, output: dict[str, Any]) -> None:
        if isinstance(output.get("reward"), bool):
            output["reward"] = float(output["reward"])
        super().validate(output)


class DropEnvName(Adapter):
    """Leaves env_name out of /create (the server's default environment answers)."""

    def create_body(self) -> dict[str, Any]:
        body = super().create_body()
        del body["env_name"]
        return body


class ErrorAsText(Adapter):
    """Hands a failed call on as the tool's text ("Error: ...") and carries on, as TRL does."""

    def report_failure(self, tool: str, error: Exception) -> bool:
        self.write({"tool": tool, "text": f"Error: {error}", "reward": None, "finished": False})
        return False


class RerunUncut(Adapter):
    """A stream cut before its task_id is sent again as a fresh call (the tool may already have run)."""

    def stream(self, body: dict[str, Any]) -> Any:
        got = super().stream(body)
        if not got.events and "task_id" not in body:
            return super().stream(body)
        return got


class StopOnRefusal(Adapter):
    """Ends the episode at an ok:false refusal, as if the session were dead."""

    def report_failure(self, tool: str, error: Exception) -> bool:
        super().report_failure(tool, error)
        return True


class NoSecrets(Adapter):
    """Never sends X-Secrets."""

    def secrets_header(self) -> dict[str, str]:
        return {}


class SecretOnArgv(Adapter):
    """Hands its secret to a helper process as an argument (``helper --token VALUE``, as a ``curl -H`` line would):
    readable by every user in /proc/PID/cmdline while the helper runs (§14.4). The episode itself is right."""

    def open(self) -> None:
        import subprocess

        for value in self.secrets.values():
            helper = [sys.executable, "-c", "import time; time.sleep(1.0)", "--token", value]
            subprocess.run(helper, check=True, timeout=30)
        super().open()


class FirstBlockOnly(Adapter):
    """Shows the model only the first block's text (an image first: nothing)."""

    @staticmethod
    def text_of(output: dict[str, Any]) -> str:
        blocks = output.get("blocks") or [{}]
        return str(blocks[0].get("text", ""))


class EpisodeRewardSum(Adapter):
    """Not a fault: reports an episode reward, the sum of the per-call rewards (one of two conventions)."""

    total = 0.0

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        self.total += output.get("reward") or 0.0
        return {**super().line(tool, output), "episode_reward": self.total}


class EpisodeRewardLast(Adapter):
    """Not a fault: reports an episode reward, the last non-null per-call reward (the other convention)."""

    last = None

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        if output.get("reward") is not None:
            self.last = output["reward"]
        return {**super().line(tool, output), "episode_reward": self.last}


class EpisodeRewardMean(Adapter):
    """Reports the mean per-call reward as the episode's: neither convention (§12.10), so a warning."""

    rewards: list[float] = []

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        if output.get("reward") is not None:
            self.rewards = [*self.rewards, output["reward"]]
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else None
        return {**super().line(tool, output), "episode_reward": mean}


class SdkUrlOnly(Adapter):
    """Finds the server by the openreward SDK's OPENREWARD_SESSION_URL, not the URL it was given (ORSBENCH_URL)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        super().__init__({**env, "ORSBENCH_URL": env.get("OPENREWARD_SESSION_URL", "")})

    def play(self) -> int:
        if not self.url:
            self.write({"error": "no server: OPENREWARD_SESSION_URL is not set"})
            return 1
        return super().play()


class DropEnvNameStopEarly(DropEnvName):
    """Leaves env_name out of /create and stops after its first call, reporting nothing (issue 34: read "works" while
    completion was skipped whenever env_name failed)."""

    def should_stop(self, output: dict[str, Any]) -> bool:
        return True


class GiveUp(Adapter):
    """Retries nothing: the first transient answer (a 429 with Retry-After) ends the episode, logged on stderr."""

    def should_retry(self, response: Any) -> bool:
        print(f"give-up client: {response.request.method} {response.request.url.path} answered {response.status_code}", file=sys.stderr)
        print("give-up client: not retrying, giving up on this episode", file=sys.stderr)
        return False


class DropNulls(Adapter):
    """Leaves out every argument whose value is null (a binder that reads None as "not given", §13.9)."""

    def call(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        return super().call(tool, {k: v for k, v in tool_input.items() if v is not None})


class ClampRewards(Adapter):
    """Clamps every reward into [0, 1] (a trainer that "normalises" rewards, §13.10)."""

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        line = super().line(tool, output)
        if isinstance(line["reward"], (int, float)):
            line["reward"] = min(1.0, max(0.0, float(line["reward"])))
        return line


class NullAsZero(Adapter):
    """Reports a null reward as 0.0 (the finishing call's null becomes a score, §13.10)."""

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        line = super().line(tool, output)
        return {**line, "reward": 0.0 if line["reward"] is None else line["reward"]}


class NanAsNull(Adapter):
    """Takes a non-finite reward as no reward (what orjson and pydantic write for NaN) instead of refusing it (§13.11)."""

    def validate(self, output: dict[str, Any]) -> None:
        reward = output.get("reward")
        if isinstance(reward, float) and reward != reward:
            output["reward"] = None
        super().validate(output)


class DieOnSigterm(Adapter):
    """Keeps Python's default SIGTERM: the process dies at once, its finally blocks skipped, its session left open (§13.17)."""

    def on_sigterm(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class IgnoreSigterm(Adapter):
    """Ignores SIGTERM and plays on: it is killed (SIGKILL) when the grace is over, its session left open (§13.17)."""

    def on_sigterm(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class ReadsListings(Adapter):
    """Correct, and reads the environment's tool list (``GET /{env}/tools``, §2.1) before its session, as a trainer
    that shows its model the tools does: a refused listing is reported and ends the run (§13.12)."""

    def list_tools(self) -> list[Any]:
        listed = self.request("GET", protocol.env_path(self.env_name, protocol.TOOLS)).json()
        return list(listed.get("tools") or []) if isinstance(listed, dict) else []

    def open(self) -> None:
        self.tools = self.list_tools()
        super().open()


class EmptyOnRefusedListing(ReadsListings):
    """Takes a refused tool listing (a 402) for an empty one and plays on (§13.12): the refusal never reaches its user."""

    def list_tools(self) -> list[Any]:
        try:
            return super().list_tools()
        except reference.ClientError:
            return []


class RetryRefusedListing(ReadsListings):
    """Retries a refused listing, a 402 included (§13.12): a billing refusal sent again and again."""

    def should_retry(self, response: Any) -> bool:
        return response.status_code >= 400

    def retry_delay(self, response: Any) -> float:
        return 0.1


class StatusFromText(Adapter):
    """Reads the status from the error text, as clients that match "429" in an exception's message do (§13.13): the
    first status-like number in the answer's body wins over the status line — a 429 quoting "400 requests per minute"
    is given up on, a 400 quoting error code 429 is retried."""

    def should_retry(self, response: Any) -> bool:
        quoted = re.search(r"\b([1-5][0-9][0-9])\b", response.text)
        return (int(quoted.group(1)) if quoted else response.status_code) in reference.RETRYABLE


class StaleFinished(Adapter):
    """Keeps its episode state across runs in one process: a later run finds the first's finished and plays nothing (§13.16)."""

    finished_before = False  # process-wide, as a module-level client or a loop variable outliving the run

    def should_stop(self, output: dict[str, Any]) -> bool:
        stop = super().should_stop(output)
        StaleFinished.finished_before = StaleFinished.finished_before or stop
        return stop

    def play(self) -> int:
        if StaleFinished.finished_before:
            self.http.close()
            return 0
        return super().play()


def mean_over_scored() -> int:
    """Plays every episode, then averages the scored ones only: a failed episode is left out of the mean (§13.15)."""
    episodes, first = reference.contract.episodes(os.environ), int(os.environ["ORSBENCH_INDEX"])
    scores, codes = [], []
    for number in range(episodes):
        client = Adapter({**os.environ, "ORSBENCH_INDEX": str(first + number)})
        codes.append(client.play())
        if not codes[-1]:
            scores.append(float(client.reward or 0.0))
    client.write(reference.contract.aggregate_line(sum(scores) / len(scores) if scores else None, len(scores)))
    return max(codes)


class Hang(Adapter):
    """Opens its session, then waits forever."""

    def play(self) -> int:
        self.open()
        time.sleep(3600)
        return 0


class Crash(Adapter):
    """Opens its session, then dies with a traceback and nothing reported."""

    def play(self) -> int:
        self.open()
        raise RuntimeError("the client fell over")


class Flood(Adapter):
    """Asks for the tool list in a tight loop (a polling bug): a request storm."""

    def play(self) -> int:
        while True:
            self.http.get(protocol.env_path(self.env_name, protocol.TOOLS))


class Garbage(Adapter):
    """Plays the episode correctly but writes lines that are not the contract's."""

    def write(self, line: dict[str, Any]) -> None:
        with open(self.out_path, "a", encoding="utf-8") as handle:
            handle.write("OK " + json.dumps(line)[:20] + "\n[1, 2]\n")


class ErrorResultFlagged(Adapter):
    """Not a fault: an agent harness's way (firehorse's react agent) — a failed call is handed to the model as a tool
    result it flags ``is_error`` itself, and the episode goes on; the line is that result, untranslated."""

    def report_failure(self, tool: str, error: Exception) -> bool:
        self.write({"tool": tool, "text": f"Error: {error}", "reward": None, "finished": False, "is_error": True})
        return False


class EpisodeRewardOnly(Adapter):
    """Not a fault: like an eval log (inspect-openreward's), it shows its user no per-call reward and no per-call
    finished — only the episode's, on the last call — and says so once (the contract's ``unsurfaced`` line)."""

    latest: Any = None
    done = False
    held: dict[str, Any] | None = None

    def play(self) -> int:
        super().write({"unsurfaced": {"reward": "its log keeps the latest non-null reward only", "finished": "shown on the score"}})
        code = super().play()
        self.release(last=True)
        return code

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        if output.get("reward") is not None:
            self.latest = output["reward"]
        self.done = self.done or bool(output.get("finished"))
        return super().line(tool, output)

    def episode_reward(self) -> Any:
        return self.latest

    def release(self, last: bool) -> None:
        if self.held is not None:
            shown = {"reward": self.episode_reward(), "finished": self.done} if last else {"reward": None, "finished": False}
            super().write({**self.held, **shown})
            self.held = None

    def write(self, line: dict[str, Any]) -> None:
        if "tool" in line and "error" not in line:
            self.release(last=False)
            self.held = line
            return
        self.release(last=True)
        super().write(line)


class EpisodeRewardOnlyWrong(EpisodeRewardOnly):
    """Shows only the episode's reward, like an eval log, and gets it wrong: the first non-null reward, not the latest."""

    first: Any = None

    def line(self, tool: str, output: dict[str, Any]) -> dict[str, Any]:
        if self.first is None and output.get("reward") is not None:
            self.first = output["reward"]
        return super().line(tool, output)

    def episode_reward(self) -> Any:
        return self.first


class EpisodeRewardOnlyBool(EpisodeRewardOnly, BoolReward):
    """Shows only the episode's reward, like an eval log, and takes a JSON boolean reward for a number (true → 1.0)."""


FAULTS: dict[str, type[Adapter]] = {
    "no-resume": NoResume,
    "strip-chunks": StripChunks,
    "retry-4xx": Retry4xx,
    "ignore-retry-after": IgnoreRetryAfter,
    "no-delete": NoDelete,
    "call-after-finished": CallAfterFinished,
    "plays-every-call": PlaysEveryCall,
    "whole-reply": WholeReply,
    "skip-first-call": SkipFirstCall,
    "bool-reward": BoolReward,
    "drop-env-name": DropEnvName,
    "error-as-text": ErrorAsText,
    "rerun-uncut": RerunUncut,
    "stop-on-refusal": StopOnRefusal,
    "no-secrets": NoSecrets,
    "secret-on-argv": SecretOnArgv,
    "first-block-only": FirstBlockOnly,
    "episode-reward-sum": EpisodeRewardSum,
    "episode-reward-last": EpisodeRewardLast,
    "episode-reward-mean": EpisodeRewardMean,
    "sdk-url-only": SdkUrlOnly,
    "give-up": GiveUp,
    "drop-env-name-stop-early": DropEnvNameStopEarly,
    "drop-nulls": DropNulls,
    "clamp-rewards": ClampRewards,
    "null-as-zero": NullAsZero,
    "nan-as-null": NanAsNull,
    "die-on-sigterm": DieOnSigterm,
    "ignore-sigterm": IgnoreSigterm,
    "reads-listings": ReadsListings,
    "empty-on-402": EmptyOnRefusedListing,
    "retry-listing-402": RetryRefusedListing,
    "status-from-text": StatusFromText,
    "stale-finished": StaleFinished,
    "hang": Hang,
    "crash": Crash,
    "flood": Flood,
    "garbage": Garbage,
    "error-result-flagged": ErrorResultFlagged,
    "episode-reward-only": EpisodeRewardOnly,
    "episode-reward-only-wrong": EpisodeRewardOnlyWrong,
    "episode-reward-only-bool": EpisodeRewardOnlyBool,
}

#: Faults of the run as a whole (how the episodes' results are put together), not of one episode's adapter.
MAINS = {"mean-over-scored": mean_over_scored}

if __name__ == "__main__":
    sys.exit(MAINS[sys.argv[1]]() if sys.argv[1] in MAINS else reference.main(FAULTS[sys.argv[1]]))
