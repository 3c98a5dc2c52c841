"""The GPU nightly profile: a real instruct model in bf16, vLLM colocate when vllm is installed.

Nothing here runs on CPU-only machines: :func:`gpu_missing_reason` says why the
profile is skipped, and the CLI and the ``gpu`` pytest marker act on it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from orsbench.protocol import JSON



def gpu_missing_reason() -> str | None:
    """Why the GPU profile cannot run here, or ``None`` when a CUDA device is usable."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device is visible (torch.cuda.is_available() is False)"
    return None


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def grpo_kwargs() -> JSON:
    """GRPOConfig arguments of the GPU profile."""
    kwargs: JSON = {"bf16": True, "use_cpu": False}
    if vllm_available():
        kwargs.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    else:
        kwargs.update(use_vllm=False)
    return kwargs


def pretrained_policy(model_name: str) -> tuple[Any, Any, JSON]:
    """Load ``model_name`` (local path or cached hub name) in bf16 and check TRL can parse its tool calls."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(model_name)
    add_response_schema(tokenizer)  # raises "Unrecognized chat template" now rather than mid-run
    model = AutoModelForCausalLM.from_pretrained(model_name, dtype=torch.bfloat16)
    info = {
        "kind": "pretrained",
        "name": model_name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "generation": "vllm-colocate" if vllm_available() else "transformers-generate",
    }
    return model, tokenizer, info
