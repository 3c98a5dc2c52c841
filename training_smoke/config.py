"""What one smoke run depends on: the profiles, their defaults, and :class:`SmokeConfig`.

Kept apart from the run so that the command line (``python -m training_smoke``)
and the tests can build and inspect a configuration without importing torch,
transformers or TRL.
"""

from __future__ import annotations

import tempfile
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbench import protocol
from orsbench.protocol import JSON
from training_smoke.learning import LearningCriteria
from training_smoke.tiny import TinyConfig
from training_smoke.warmup import WarmupConfig
PROFILES = ("cpu", "learn", "gpu")
#: ``--model tiny`` on the GPU profile: a self-made Qwen3-style model, larger than the CPU one (about 3 M parameters).
GPU_TINY = TinyConfig(vocab_size=2048, hidden_size=256, intermediate_size=768, num_layers=4, num_heads=8, num_kv_heads=4, head_dim=32)
#: learn profile defaults (see docs/training.md for how they were chosen).
LEARN_STEPS = 50
#: Plain SGD, not AdamW: Adam scales every parameter's step to about the learning rate, so the near-zero,
#: noisy gradients on the tool-call format tokens (they cancel within a GRPO group) still move the tiny
#: policy off the format, and it stops calling tools within 10-40 steps at any rate that learns (5e-4,
#: 1e-3). SGD moves parameters in proportion to their gradient: the answer token learns, the format stays.
LEARN_OPTIM = "sgd"
LEARN_LR = 0.1
LEARN_WINDOW = 5
LEARN_WARMUP_STEPS = 200
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "orsbench-training-smoke"
#: Environment every run needs: offline hub, quiet SDK and TRL.
QUIET_ENV = {
    protocol.ENV_DISABLE_UPDATE_CHECK: "1",
    "HF_HUB_OFFLINE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class SmokeConfig:
    """Everything one smoke run depends on. ``for_profile`` fills in the profile's defaults."""

    scenario: str = "echo"
    profile: str = "cpu"
    steps: int = 3
    num_generations: int = 4
    prompts_per_step: int = 2
    #: Train on the first ``num_tasks`` tasks of the split (all probed for task-scoped tools).
    num_tasks: int = 4
    max_completion_length: int = 128
    max_tool_calling_iterations: int = 4
    learning_rate: float = 1e-4
    temperature: float = 1.0
    seed: int = 0
    #: GPU profile: a local path or a hub name already in the local cache.
    model: str | None = None
    #: GPU and learn profiles: the number of first and last steps whose rewards are compared.
    reward_window: int = 5
    #: learn profile: the largest one-sided p-value and the smallest mean gain that count as learned.
    alpha: float = 0.01
    min_delta: float = 0.25
    #: A client bug planted between OpenRewardSpec and the trainer (see ``training_smoke.sabotage``), or ``None``.
    sabotage: str | None = None
    #: Where to draw the reward curve (PNG); ``None`` draws none.
    plot: Path | None = None
    #: torch intra-op threads (``None``: torch's default). The learn profile uses 1: the tiny model's matrices
    #: are too small to gain from more, and on a loaded machine OpenMP threads spin-wait for each other.
    torch_threads: int | None = None
    #: Extra GRPOConfig arguments (they win over the profile's), e.g. ``{"beta": 0.04}``.
    grpo_extra: dict[str, Any] = field(default_factory=dict)
    #: Train against this server (the user's own) instead of serving ``scenario``; ``env`` picks its environment.
    url: str | None = None
    env: str | None = None
    #: ``"mock"`` (orsbench's engine) or any other implementation ``orsbench.servers.launch`` knows.
    server_impl: str = "mock"
    #: Scenario parameters, passed to the server (and to the in-process copy the warm-up uses).
    params: dict[str, Any] = field(default_factory=dict)
    tiny: TinyConfig = field(default_factory=TinyConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    #: Where built tiny models and warm-up checkpoints are kept; ``None`` builds afresh in a temporary directory.
    cache_dir: Path | None = DEFAULT_CACHE_DIR

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any) -> SmokeConfig:
        """The defaults of ``profile`` with ``overrides`` (``None`` values mean "keep the default")."""
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        defaults: JSON = {"profile": profile}
        seed = overrides.get("seed") if overrides.get("seed") is not None else cls.seed
        if profile == "learn":
            # Tuned so the tiny policy learns `pick` (4 doors, chance 0.25) in a few minutes of a 2-core CPU;
            # see docs/training.md. The warm-up picks doors uniformly (correct_fraction = 1/doors = 1/num_tasks
            # for echo too), so it teaches the tool-call format and nothing about which answer wins.
            defaults.update(
                scenario="pick",
                steps=LEARN_STEPS,
                num_generations=8,
                prompts_per_step=2,
                num_tasks=4,
                max_completion_length=48,
                max_tool_calling_iterations=2,
                learning_rate=LEARN_LR,
                reward_window=LEARN_WINDOW,
                warmup=WarmupConfig(seed=seed, steps=LEARN_WARMUP_STEPS, correct_fraction=0.25),
                grpo_extra={"optim": LEARN_OPTIM},
                torch_threads=1,
            )
        if profile == "gpu":
            defaults.update(
                steps=40,
                num_generations=8,
                prompts_per_step=4,
                num_tasks=48,
                max_completion_length=256,
                max_tool_calling_iterations=3,
                learning_rate=5e-6,
            )
        extra = {**defaults.get("grpo_extra", {}), **(overrides.pop("grpo_extra", None) or {})}
        defaults.update({k: v for k, v in overrides.items() if v is not None})
        defaults["grpo_extra"] = extra
        if profile == "gpu" and defaults.get("model") == "tiny":
            # No hub: a self-made, larger Qwen3-style model learns `pick` like the learn profile, on the GPU.
            tiny_defaults: JSON = dict(
                scenario="pick",
                steps=LEARN_STEPS,
                num_tasks=8,
                max_completion_length=48,
                max_tool_calling_iterations=2,
                learning_rate=LEARN_LR,
                reward_window=LEARN_WINDOW,
                tiny=dataclasses.replace(GPU_TINY, seed=seed),
                warmup=WarmupConfig(seed=seed, steps=LEARN_WARMUP_STEPS, correct_fraction=0.25),
                grpo_extra={"optim": LEARN_OPTIM},
            )
            defaults.update({k: v for k, v in tiny_defaults.items() if overrides.get(k) is None and k != "grpo_extra"})
            defaults["grpo_extra"] = {**tiny_defaults["grpo_extra"], **extra}
        defaults.setdefault("tiny", TinyConfig(seed=seed))
        defaults.setdefault("warmup", WarmupConfig(seed=seed))
        return cls(**defaults)

    @property
    def rollouts_per_step(self) -> int:
        return self.num_generations * self.prompts_per_step

    @property
    def criteria(self) -> LearningCriteria:
        return LearningCriteria(window=self.reward_window, alpha=self.alpha, min_delta=self.min_delta)

    @property
    def judges_learning(self) -> bool:
        """Whether the run ends with a learning verdict (the learn and GPU profiles)."""
        return self.profile in ("learn", "gpu")

