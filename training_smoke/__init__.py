"""Training smoke: real GRPO training through ``OpenRewardSpec`` against an orsbench server.

The last link of the chain: TRL's ``GRPOTrainer`` trains a policy whose tool
calls reach an ORS server through ``trl.experimental.openreward.OpenRewardSpec``
(``train_dataset``, ``environment_factory`` and ``reward_funcs`` straight from the
spec), and the server's rewards flow back into the loss.

Run it::

    python -m training_smoke --profile cpu [--scenario echo|sparse-reward|task-tool] [--steps N]
    python -m training_smoke --profile learn [--sabotage reward-shift] --output out/learn.json
    python -m training_smoke --url http://127.0.0.1:8080 [--env NAME]   # your own server
    python -m training_smoke --profile gpu --model Qwen/Qwen3-0.6B      # or --model tiny (no hub)
    python -m training_smoke.bench            # wall time and peak RSS against the CPU budget
    python -m training_smoke.bench_learn --out out/bench   # clean and sabotaged learn runs over seeds
    pytest -m training_smoke tests/test_training_smoke.py

Modules:

* :mod:`training_smoke.tiny`: a tiny Qwen3 with random weights and a BPE tokenizer
  trained in code, carrying TRL's own qwen3 chat template; cached on disk;
* :mod:`training_smoke.warmup`: scripted episodes of the scenario's tools, and the
  short supervised warm-up that teaches the tool-call format;
* :mod:`training_smoke.config`: the profiles and :class:`SmokeConfig`;
* :mod:`training_smoke.run`: the training loop and its JSON summary;
* :mod:`training_smoke.verdict`: the two verdicts, plumbing (GRPO ran through the environment) and learning;
* :mod:`training_smoke.learning`: the learn profile's statistical verdict and reward curve;
* :mod:`training_smoke.sabotage`: negative controls, client bugs between OpenRewardSpec and the trainer;
* :mod:`training_smoke.stop`: SIGTERM unwinds the run (and stops its server), even where a finalizer swallows it;
* :mod:`training_smoke.remote`: ``--url``, a warm-up derived from a foreign server's prompts and schemas;
* :mod:`orsbench.clients.grpo_tools`: how GRPOTrainer collects tools (shared with ``conformance/``);
* :mod:`training_smoke.gpu`: the nightly profile's model loading and settings;
* :mod:`training_smoke.bench`: the CPU profile's wall time and peak RSS;
* :mod:`training_smoke.bench_learn`: the learn profile's power table (clean and every sabotage, over seeds).
"""

from training_smoke.config import SmokeConfig
from training_smoke.run import run_smoke
from training_smoke.verdict import check

__all__ = ["SmokeConfig", "check", "run_smoke"]
