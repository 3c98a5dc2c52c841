"""``python -m training_smoke``: GRPO through OpenRewardSpec against an orsbench server, with a JSON verdict."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from orsbench.cli import types
from orsbench.extras import MissingExtra, require
from training_smoke import stop
from training_smoke.config import DEFAULT_CACHE_DIR, PROFILES, SmokeConfig
from training_smoke.sabotage import SABOTAGES

EPILOG = """\
profiles:
  cpu  (CI)       a tiny Qwen3-style model with random weights and a BPE tokenizer built
                  in code, warmed up on the scenario's tool-call format, then a few GRPO
                  steps on the CPU with plain transformers generate. No model hub.
  learn           does the reward drive learning? The tiny policy, warmed up on the tool-call
                  format with uniformly random answers, then 50 GRPO steps (SGD) on `pick` (a room's
                  winning door, fixed per task, never in the prompt: chance 0.25). Verdict:
                  the server's rollout rewards of the last 5 steps against the first 5
                  (one-sided Mann-Whitney U): learned = p <= 0.01 and delta >= 0.25. Writes a
                  reward curve (PNG) beside --output. Exit 0 when learned, 1 when not.
  gpu  (nightly)  --model (a local path or a hub name in the local cache) in bf16 on CUDA,
                  vLLM colocate when vllm is installed, more steps on echo; also checks
                  that the mean reward of the last steps beats the first steps'. Without a
                  GPU it prints why and exits 0 (or 2 with --require-gpu). --model tiny
                  builds a self-made ~3 M-parameter Qwen3-style model here instead (no hub)
                  and trains it on `pick` like the learn profile.

negative controls (--sabotage NAME): a client bug planted between OpenRewardSpec and
the trainer; the server and the evidence are untouched, and the learn verdict must come
out false: reward-shift (each rollout gets its neighbour's reward), reward-sign,
reward-none, reward-constant (always 1.0).

output: one JSON summary on stdout (and in --output): the server trained against (url, env,
impl), tool_calls (calls the server executed), "environment" (sessions opened, tool calls
answered or failed, rewards seen: null and numbers), per-step rewards and losses, parameter
change, sessions left open, wall time, peak RSS, and two verdicts:
  plumbing   "GRPO ran through your environment: N sessions, M tool calls, rewards seen
             (x null, y numbers)": passes on a correct environment whatever its rewards
             (a tiny policy that never earns one included); fails when no tool call is
             answered, counts disagree, sessions stay open, or rewards that differed
             never reached the loss.
  learning   "the policy learned": judged only with at least 2 x the reward window steps
             (10 by default); with fewer it says how many it needs. It fails the run on
             the learn and gpu profiles; on cpu it is reported beside the plumbing verdict.
"failures" lists what failed the run. Exit status 1 when any did.

examples:
  python -m training_smoke --profile cpu
  python -m training_smoke --profile cpu --scenario sparse-reward --steps 5
  python -m training_smoke --profile learn --seed 1 --output out/learn.json   # + out/learn.png
  python -m training_smoke --profile learn --sabotage reward-shift --output out/shift.json
  python -m training_smoke --profile gpu --model Qwen/Qwen3-0.6B --steps 40
  python -m training_smoke --profile gpu --model tiny --require-gpu
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m training_smoke",
        description="Train a policy with TRL's GRPOTrainer whose tool calls reach an ORS server through "
        "OpenRewardSpec, and check that reward flows back into the loss.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--profile", choices=PROFILES, default="cpu", help="cpu (CI, default), learn or gpu (nightly)")
    parser.add_argument(
        "--scenario", default=None, help="orsbench scenario to serve: echo (cpu default), pick (learn default), sparse-reward, task-tool"
    )
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (cpu: 3, learn: 50, gpu: 40)")
    parser.add_argument("--model", default=None, help="gpu profile: model path or cached hub name (e.g. Qwen/Qwen3-0.6B)")
    parser.add_argument("--num-generations", type=int, default=None, help="completions per prompt (cpu: 4, learn: 8, gpu: 8)")
    parser.add_argument("--prompts-per-step", type=int, default=None, help="distinct prompts per step (cpu: 2, gpu: 4)")
    parser.add_argument("--num-tasks", type=int, default=None, help="train on the first N tasks of the split (cpu: 4, gpu: 48)")
    parser.add_argument("--learning-rate", type=float, default=None, help="GRPO learning rate (cpu: 1e-4 AdamW, learn: 0.1 SGD, gpu: 5e-6)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (learn: 1; others: torch's default)")
    parser.add_argument("--seed", type=int, default=None, help="seed for the model, warm-up, sampling and data order (0)")
    parser.add_argument(
        "--impl",
        default=None,
        help="server implementation: mock (orsbench engine, default), sdk (the openreward Server twin) "
        "or ors-sdk (the ors-sdk Server twin)",
    )
    parser.add_argument(
        "--param", type=types.param, action="append", default=[], metavar="KEY=VALUE", help="scenario parameter (repeatable)"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help=f"where tiny models are cached (default {DEFAULT_CACHE_DIR})"
    )
    parser.add_argument("--no-cache", action="store_true", help="build the tiny model and warm-up afresh in a temp dir")
    parser.add_argument(
        "--grpo-arg",
        action="append",
        default=[],
        type=_grpo_arg,
        metavar="KEY=VALUE",
        help="extra GRPOConfig argument, VALUE as JSON (repeatable), e.g. --grpo-arg beta=0.04",
    )
    parser.add_argument("--url", default=None, help="train against your own ORS server at URL instead of serving a scenario")
    parser.add_argument("--env", default=None, help="with --url: the environment to train on (default: the only one listed)")
    parser.add_argument(
        "--sabotage", choices=sorted(SABOTAGES), default=None, help="plant a client bug between OpenRewardSpec and the trainer"
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="also write the JSON summary to this file (and the reward curve to its .png)"
    )
    parser.add_argument("--require-gpu", action="store_true", help="gpu profile: exit 2 instead of 0 when no GPU is present")
    return parser


def _grpo_arg(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value  # a bare string, e.g. optim=sgd


def config_from_args(args: argparse.Namespace) -> SmokeConfig:
    config = SmokeConfig.for_profile(
        args.profile,
        scenario=args.scenario,
        steps=args.steps,
        model=args.model,
        num_generations=args.num_generations,
        prompts_per_step=args.prompts_per_step,
        num_tasks=args.num_tasks,
        learning_rate=args.learning_rate,
        seed=args.seed,
        server_impl=args.impl,
        params=dict(args.param) or None,
        cache_dir=args.cache_dir,
        sabotage=args.sabotage,
        torch_threads=args.threads,
        grpo_extra=dict(args.grpo_arg) or None,
        url=args.url,
        env=args.env,
        plot=args.output.with_suffix(".png") if args.output is not None else None,
    )
    return dataclasses.replace(config, cache_dir=None) if args.no_cache else config


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop.install()
    try:
        require("training", "python -m training_smoke")
    except MissingExtra as exc:
        print(f"training_smoke: error: {exc}", file=sys.stderr)
        return 2
    config = config_from_args(args)
    if config.profile == "gpu":
        from training_smoke.gpu import gpu_missing_reason

        reason = gpu_missing_reason()
        if reason:
            print(f"training_smoke: skipping the gpu profile: {reason}", file=sys.stderr)
            _emit({"skipped": True, "reason": reason, "profile": "gpu"}, args.output)
            return 2 if args.require_gpu else 0

    from training_smoke.remote import CannotScript
    from training_smoke.run import run_smoke

    if args.env is not None and args.url is None:
        print("training_smoke: --env needs --url (it names an environment on your server)", file=sys.stderr)
        return 2
    try:
        summary, failures = run_smoke(config)
    except CannotScript as exc:
        print(f"training_smoke: cannot train against {args.url}: {exc}", file=sys.stderr)
        return 2
    stop.raise_if_stopped()  # a SIGTERM swallowed after the last step still ends the run as stopped
    _emit(summary, args.output)
    for failure in failures:
        print(f"training_smoke: FAILED: {failure}", file=sys.stderr)
    for line in verdict_lines(summary, failures):
        print(line, file=sys.stderr)
    return 1 if failures else 0


def verdict_lines(summary: dict, failures: Sequence[str]) -> list[str]:
    """The run in a few lines, last on stderr: the server it trained against, the plumbing verdict, the learning verdict.

    ``training_smoke: plumbing PASSED: GRPO ran through your environment: 16 sessions, 22 tool calls, rewards seen
    (14 null, 8 numbers)`` and ``training_smoke: learning not judged: it needs at least 10 steps ...``.
    """
    wall = f"{summary.get('wall_s', {}).get('total', 0):.0f} s"
    folded = summary.get("library_warnings", {}).get("total", 0)
    tail = f"; {folded} library warnings folded into the JSON's library_warnings" if folded else ""
    server = summary.get("server") or {}
    lines = [f"training_smoke: trained against {server.get('url')} (env {server.get('env')}; server: {server.get('impl')})"]
    verdicts = summary.get("verdicts") or {}
    plumbing, learned = verdicts.get("plumbing"), verdicts.get("learning")
    if plumbing is not None:
        word = "PASSED" if plumbing["passed"] else "FAILED"
        lines.append(f"training_smoke: plumbing {word}: {plumbing['line']}")
    if learned is not None:
        sabotage = f" (under sabotage {summary['sabotage']})" if summary.get("sabotage") else ""
        lines.append(f"training_smoke: {learned['line']}{sabotage}")
    lines.append(f"training_smoke: {'FAILED' if failures else 'passed'} ({len(failures)} failure(s) above, {wall}){tail}"
                 if failures else f"training_smoke: passed ({wall}){tail}")
    return lines


def _emit(summary: dict, output: Path | None) -> None:
    text = json.dumps(summary, indent=2, sort_keys=False)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
