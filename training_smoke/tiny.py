"""A tiny Qwen3-style policy built locally: random weights, a BPE tokenizer trained in code.

Nothing comes from a model hub. The tokenizer carries the qwen3 chat template
that TRL ships in its package, read from the installed ``trl`` byte for byte:
GRPOTrainer recognises a template only by exact equality (to pick its
tool-call parser and its prefix-preserving training variant), so a copy that
differs by one character would make it refuse to train with tools.

Building is cheap but not free, so the result is cached on disk under a
directory named by a hash of everything it depends on (the model shape, the
tokenizer corpus, the template text, the library versions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: Tokens the qwen3 template and its tool-call parser treat as units.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Markup tokens Qwen3 declares as added, non-special tokens (kept by ``decode(skip_special_tokens=True)``).
MARKUP_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
TEMPLATE_NAME = "qwen3.jinja"
#: Bump when the way a model or tokenizer is built changes, so stale cache entries are not reused.
BUILD_VERSION = 2
#: File written last into every cache entry (what it was built from).
META = "meta.json"


@dataclass(frozen=True)
class TinyConfig:
    """Shape of the tiny policy. The defaults give about 0.1 M parameters."""

    vocab_size: int = 768
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 1024
    seed: int = 0


def trl_chat_template(name: str = TEMPLATE_NAME) -> str:
    """The chat template ``name`` exactly as the installed TRL ships it."""
    return resources.files("trl").joinpath("chat_templates", name).read_text(encoding="utf-8")


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers
    import trl

    return {
        "tokenizers": tokenizers.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }


def cache_key(config: TinyConfig, corpus: Sequence[str], template: str) -> str:
    """A short hash of everything the built model and tokenizer depend on."""
    h = hashlib.sha256(f"tiny-v{BUILD_VERSION}".encode())
    h.update(json.dumps(dataclasses.asdict(config), sort_keys=True).encode())
    h.update(json.dumps(_versions(), sort_keys=True).encode())
    h.update(template.encode())
    for text in corpus:
        h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()[:16]


def render_corpus(conversations: Iterable[dict], template: str | None = None) -> list[str]:
    """Render ``{"messages", "tools"}`` conversations to text with the template (no tokenizer needed yet).

    The BPE is trained on what the policy will actually read and write, so
    prompts, tool schemas and tool calls compress to few tokens.
    """
    from tokenizers import Tokenizer, models

    untrained = _wrap(Tokenizer(models.BPE()), template or trl_chat_template())
    return [untrained.apply_chat_template(c["messages"], tools=c.get("tools"), tokenize=False) for c in conversations]


def build_tokenizer(corpus: Sequence[str], config: TinyConfig, template: str | None = None):
    """Train a byte-level BPE on ``corpus`` and wrap it as a fast tokenizer carrying TRL's qwen3 template.

    The byte-level pre-tokenizer runs without its word-splitting regex, so merges
    may cross spaces and punctuation: the template's fixed tool boilerplate and
    the JSON of a tool call collapse into a few long tokens. Sequences come out
    about three times shorter than with word-level BPE, and the tiny model
    learns the tool-call format in a fraction of the steps.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer)
    return _wrap(tok, template or trl_chat_template())


def _wrap(tok, template: str):
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, model_max_length=1 << 16)
    tokenizer.chat_template = template
    return tokenizer


def build_model(tokenizer, config: TinyConfig):
    """A Qwen3 causal LM with random weights (seeded) sized to ``tokenizer``."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(config.seed)
    model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def ensure_tiny(corpus: Sequence[str], config: TinyConfig, cache_dir: Path) -> Path:
    """Directory holding the tiny model and tokenizer for ``corpus``; built once, then reused."""
    template = trl_chat_template()
    path = Path(cache_dir) / f"tiny-{cache_key(config, corpus, template)}"
    if path.exists():
        return path
    tokenizer = build_tokenizer(corpus, config, template)
    model = build_model(tokenizer, config)
    with building(path) as tmp:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        (tmp / META).write_text(json.dumps({"config": dataclasses.asdict(config), **_versions()}))
    return path


def load(path: Path):
    """Load ``(model, tokenizer)`` saved by :func:`ensure_tiny` (or a warm-up checkpoint)."""
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = Qwen3ForCausalLM.from_pretrained(path)
    return model, tokenizer


@contextlib.contextmanager
def building(path: Path) -> Iterator[Path]:
    """A private scratch directory that becomes ``path`` in one rename when the block succeeds.

    Readers test ``path.exists()`` and never see a half-written model; when two
    processes build the same entry at once, the first rename wins and the other
    build is dropped.
    """
    tmp = path.with_name(f"{path.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        with contextlib.suppress(OSError):
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
