"""``python -m training_smoke``: GRPO through OpenRewardSpec against an orsbench server, with a JSON verdict."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from training_smoke.run import DEFAULT_CACHE_DIR, PROFILES, SmokeConfig

EPILOG = """\
profiles:
  cpu  (CI)       a tiny Qwen3-style model with random weights and a BPE tokenizer built
                  in code, warmed up on the scenario's tool-call format, then a few GRPO
                  steps on the CPU with plain transformers generate. No model hub.
  gpu  (nightly)  --model (a local path or a hub name in the local cache) in bf16 on CUDA,
                  vLLM colocate when vllm is installed, more steps on echo; also checks
                  that the mean reward of the last steps beats the first steps'. Without a
                  GPU it prints why and exits 0 (or 2 with --require-gpu).

output: one JSON summary on stdout (and in --output): tool_calls (calls the server
executed), per-step rewards and losses, parameter change, sessions left open, wall time,
peak RSS, and "failures" (expectations not met). Exit status 1 when any failed.

examples:
  python -m training_smoke --profile cpu
  python -m training_smoke --profile cpu --scenario sparse-reward --steps 5
  python -m training_smoke --profile gpu --model Qwen/Qwen3-0.6B --steps 40
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m training_smoke",
        description="Train a policy with TRL's GRPOTrainer whose tool calls reach an ORS server through "
        "OpenRewardSpec, and check that reward flows back into the loss.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--profile", choices=PROFILES, default="cpu", help="cpu (CI, default) or gpu (nightly)")
    parser.add_argument("--scenario", default=None, help="orsbench scenario to serve: echo (default), sparse-reward, task-tool")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (cpu: 3, gpu: 40)")
    parser.add_argument("--model", default=None, help="gpu profile: model path or cached hub name (e.g. Qwen/Qwen3-0.6B)")
    parser.add_argument("--num-generations", type=int, default=None, help="completions per prompt (cpu: 4, gpu: 8)")
    parser.add_argument("--prompts-per-step", type=int, default=None, help="distinct prompts per step (cpu: 2, gpu: 4)")
    parser.add_argument("--num-tasks", type=int, default=None, help="train on the first N tasks of the split (cpu: 4, gpu: 48)")
    parser.add_argument("--learning-rate", type=float, default=None, help="GRPO learning rate (cpu: 1e-4, gpu: 5e-6)")
    parser.add_argument("--seed", type=int, default=None, help="seed for the model, warm-up, sampling and data order (0)")
    parser.add_argument(
        "--impl",
        default=None,
        help="server implementation: mock (orsbench engine, default), sdk (the openreward Server twin) "
        "or ors-sdk (the ors-sdk Server twin)",
    )
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="scenario parameter (repeatable)")
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help=f"where tiny models are cached (default {DEFAULT_CACHE_DIR})"
    )
    parser.add_argument("--no-cache", action="store_true", help="build the tiny model and warm-up afresh in a temp dir")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON summary to this file")
    parser.add_argument("--require-gpu", action="store_true", help="gpu profile: exit 2 instead of 0 when no GPU is present")
    return parser


def _params(pairs: Sequence[str]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--param expects KEY=VALUE, got {pair!r}")
        params[key] = value
    return params


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
        params=_params(args.param) or None,
        cache_dir=args.cache_dir,
    )
    return dataclasses.replace(config, cache_dir=None) if args.no_cache else config


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    if config.profile == "gpu":
        from training_smoke.gpu import gpu_missing_reason

        reason = gpu_missing_reason()
        if reason:
            print(f"training_smoke: skipping the gpu profile: {reason}", file=sys.stderr)
            _emit({"skipped": True, "reason": reason, "profile": "gpu"}, args.output)
            return 2 if args.require_gpu else 0

    from training_smoke.run import run_smoke

    summary, failures = run_smoke(config)
    _emit(summary, args.output)
    for failure in failures:
        print(f"training_smoke: FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _emit(summary: dict, output: Path | None) -> None:
    text = json.dumps(summary, indent=2, sort_keys=False)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
