"""A synthetic tokenizer for dummy-weight models, so the text API of ``vllm serve`` and the load
generators that need a tokenizer (``vllm bench serve``, GuideLLM) work offline.

The vocabulary is ``UNK <s> </s>`` then one word per id (``w3``, ``w4``, ...), a Hugging Face
``tokenizers`` WordLevel model with whitespace splitting: decoding ids gives the words joined by spaces
and encoding that text gives the same ids back, so a prompt's token count is exact on both sides (what
a benchmark of prompt lengths needs).  Nothing is downloaded.  Pure Python (writes JSON)."""

from __future__ import annotations

import json
from pathlib import Path

# The unknown token's text is long on purpose: vLLM's OpenAI server refuses (HTTP 400) a prompt whose text is
# longer than max_input_tokens × the longest token text in the vocabulary (vllm/renderers/params.py
# _text_len_check).  With "<unk>" the longest was "w128255" (7 characters) while each word costs 8 in a prompt
# (its space), so a 1,024-word prompt of ids >= 100,000 was refused under --max-model-len 1216: a quarter of
# the requests of the first `planner verify` run on the H200 (2026-12-01) failed that way.
UNK = "<unk:synthetic-word-tokenizer>"
SPECIAL = (UNK, "<s>", "</s>")


def word(token_id: int) -> str:
    return SPECIAL[token_id] if token_id < len(SPECIAL) else f"w{token_id}"


def tokenizer_json(vocab_size: int) -> dict:
    if vocab_size <= len(SPECIAL):
        raise ValueError(f"vocab_size: must be > {len(SPECIAL)}, got {vocab_size}")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(SPECIAL)],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {word(i): i for i in range(vocab_size)}, "unk_token": UNK},
    }


def write_tokenizer(directory: Path, vocab_size: int, max_length: int = 1 << 20) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``; returns it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer_json(vocab_size)))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": UNK, "pad_token": UNK, "model_max_length": max_length, "add_bos_token": False,
        "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
    }, indent=2))
    return directory
