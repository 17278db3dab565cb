"""vLLM 0.26.0's ``vllm serve`` option strings, pinned, and a parser built from them.

``planner/data/vllm_serve_flags_0.26.0.json`` holds every option string of vLLM 0.26.0's ``vllm serve``
parser (372, dumped on the GPU machine on 2026-11-30; the file says how).  :func:`parse_serve_args`
parses a generated command's arguments with an :mod:`argparse` parser that knows exactly those
options (no abbreviations: ``--kv-cache-memory`` is not ``--kv-cache-memory-bytes``), so a misspelt or
retired flag fails here, without vLLM installed.  The pinned list does not say which options take a
value, so every option accepts one optional value; vLLM's own parser (tests, where vLLM is installed)
checks the values.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

VLLM_VERSION = "0.26.0"
FLAGS_FILE = Path(__file__).resolve().parent.parent / "data" / f"vllm_serve_flags_{VLLM_VERSION}.json"


class UnknownServeFlag(ValueError):
    """A ``vllm serve`` argument that vLLM 0.26.0's parser does not define."""


@functools.lru_cache(maxsize=1)
def pinned_option_strings() -> frozenset[str]:
    """Every option string of vLLM 0.26.0's ``vllm serve`` (``--port``, ``-tp``, ...)."""
    doc = json.loads(FLAGS_FILE.read_text(encoding="utf-8"))
    opts = doc["option_strings"]
    if len(opts) != doc["count"]:
        raise ValueError(f"{FLAGS_FILE.name}: count: {doc['count']} but {len(opts)} option strings")
    return frozenset(opts)


def normalize_underscores(args: list[str]) -> list[str]:
    """``--gpu_memory_utilization`` → ``--gpu-memory-utilization`` (the part before any ``=``), as
    vLLM's FlexibleArgumentParser does before parsing (the production-stack chart writes two such flags)."""
    out = []
    for a in args:
        if a.startswith("--"):
            key, eq, val = a.partition("=")
            a = "--" + key[2:].replace("_", "-") + eq + val
        out.append(a)
    return out


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=False, add_help=False, exit_on_error=False)
    p.add_argument("model_tag", nargs="?")
    for opt in sorted(pinned_option_strings()):
        p.add_argument(opt, dest=opt, nargs="?", const=True, default=None)
    return p


def parse_serve_args(args: list[str] | tuple[str, ...]) -> dict[str, object]:
    """The arguments after ``vllm serve`` as ``{option string: value}`` (``True`` for a bare flag;
    ``'model_tag'``: the positional model).  Raises :class:`UnknownServeFlag` naming every argument
    vLLM 0.26.0 does not define."""
    ns, unknown = _parser().parse_known_args(normalize_underscores(list(args)))
    if unknown:
        raise UnknownServeFlag(f"vllm serve: not a vLLM {VLLM_VERSION} argument: {' '.join(unknown)}")
    return {k: v for k, v in vars(ns).items() if v is not None}
