"""Training smoke: real GRPO training through ``OpenRewardSpec`` against an orsbench server.

The last link of the chain: TRL's ``GRPOTrainer`` trains a policy whose tool
calls reach an ORS server through ``trl.experimental.openreward.OpenRewardSpec``
(``train_dataset``, ``environment_factory`` and ``reward_funcs`` straight from the
spec), and the server's rewards flow back into the loss.

Run it::

    python -m training_smoke --profile cpu [--scenario echo|sparse-reward|task-tool] [--steps N]
    python -m training_smoke --profile gpu --model Qwen/Qwen3-0.6B
    python -m training_smoke.bench            # wall time and peak RSS against the CPU budget
    pytest -m training_smoke tests/test_training_smoke.py

Modules:

* :mod:`training_smoke.tiny`: a tiny Qwen3 with random weights and a BPE tokenizer
  trained in code, carrying TRL's own qwen3 chat template; cached on disk;
* :mod:`training_smoke.warmup`: scripted episodes of the scenario's tools, and the
  short supervised warm-up that teaches the tool-call format;
* :mod:`training_smoke.run`: the run itself, its JSON summary and its verdict;
* :mod:`training_smoke.gpu`: the nightly profile's model loading and settings;
* :mod:`training_smoke.bench`: the CPU profile's wall time and peak RSS.
"""

from training_smoke.run import SmokeConfig, check, run_smoke

__all__ = ["SmokeConfig", "check", "run_smoke"]
