"""One ranking of configurations, defined once: which configuration is "the cheapest".

Every surface that names a cheapest configuration ranks with :func:`rank` (or its shortcuts
:func:`cheapest` and :func:`cheapest_per`): :func:`planner.sweep.sweep` (its ``rank`` column, the sweep
CSV), the CLI (``planner sweep``'s table, the configuration ``planner size`` / ``planner report`` choose when
no ``--gpu`` is given), :mod:`planner.plan_report`, and the dashboard's Cost view (:mod:`planner.dashboard.views`).

**The key** — :data:`RANK_KEY`, *all-in $ per million output tokens*: the price of all the GPU time a
replica spends, prefill included (prefilling the prompts *and* decoding the outputs), divided by the
generated tokens, × 10⁶.  A replica of ``g`` GPUs at ``p`` $/GPU-hour that serves ``B`` requests of ``N`` output
tokens per cycle of ``prefill_busy_s + decode_busy_s`` seconds costs
``p × g / 3600 × (prefill_busy_s + decode_busy_s) / (B × N) × 10⁶`` (:class:`planner.cost.TokenCost`).
One H200 at $4.54/h, 64 requests of 512 output tokens per 9.2 s cycle: 4.54 / 3600 × 9.2 / 32,768 × 10⁶
≈ $0.35 per million output tokens.  (The decode-share cost, ``cost_usd_per_million_output_tokens``,
leaves the prefill time out and can therefore favour a configuration that prefills slowly.)

**The order** (each step breaks the previous step's ties):

1. the tier: rows that **meet every target** first (:func:`meets_targets`: the batch fits in the KV pool
   and ``max_num_seqs``, TTFT and TPOT meet their targets, prompt + output stays within the model's
   context limit, and no replica holds more requests than there are users); then rows that fit but miss
   a target; then rows that do not fit or that vLLM would not start (:mod:`planner.startup`);
2. the key, cheapest first (NaN last);
3. fewer GPUs per replica, lower TPOT, lower TTFT;
4. the ids alphabetically (GPU, weight dtype, KV dtype), then TP, prompt tokens, batch — so the order
   never depends on the order the rows came in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["RANK_DEFINITION", "RANK_KEY", "RANK_LABEL", "TIE_BREAK", "batch_grid", "cheapest", "cheapest_per",
           "config_key", "describe", "meets_targets", "rank", "tier"]

#: The column every ranking sorts by (after the tier).
RANK_KEY = "cost_usd_per_million_output_tokens_all_in"
#: How tables and reports label the key.
RANK_LABEL = "$/M output tokens (all-in)"
#: The key in one sentence, for help texts, reports and captions.
RANK_DEFINITION = ("all-in $ per million output tokens = the price of all the GPU time (prefill included) "
                   "divided by the generated tokens; configurations that meet every target come first")
#: Tie-breaks after the key, in order (lower first; strings alphabetically).
TIE_BREAK = ("num_gpus", "tpot_s", "ttft_s", "gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel",
             "prompt_tokens", "batch_size")
#: Columns that name one configuration (what "the same configuration" means).
CONFIG_COLUMNS = ("gpu_id", "tensor_parallel", "weight_dtype", "kv_cache_dtype", "prompt_tokens", "batch_size")

#: Largest batch a question searches (vLLM serve's largest default max_num_seqs).
MAX_BATCH = 1024


def meets_targets(df: pd.DataFrame, users: int | None = None) -> pd.Series:
    """Rows that meet every target: ``meets_slo`` (fits, TTFT and TPOT targets), the request within the
    model's context limit and, when ``users`` is given, a batch of at most ``users`` requests in flight."""
    ok = df["meets_slo"].astype(bool)
    if "context_exceeds_model_limit" in df:
        ok = ok & ~df["context_exceeds_model_limit"].astype(bool)
    if users is not None:
        ok = ok & (df["batch_size"] <= users)
    return ok


def tier(df: pd.DataFrame, users: int | None = None) -> np.ndarray:
    """0 for rows that meet every target, 1 for rows that start and fit but miss one, 2 for rows that do not
    fit or that vLLM would not start (``starts``, where the frame has it)."""
    ok = meets_targets(df, users).to_numpy()
    fits = df["fits"].astype(bool).to_numpy()
    if "starts" in df:
        fits = fits & df["starts"].astype(bool).to_numpy()
    return np.where(ok, 0, np.where(fits, 1, 2))


def _sort_codes(col: pd.Series) -> np.ndarray:
    """Integer codes that sort like the column (strings alphabetically, numbers by value)."""
    if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
        return col.to_numpy(dtype=float)
    return pd.factorize(col.astype(str), sort=True)[0]


def rank(df: pd.DataFrame, users: int | None = None) -> pd.DataFrame:
    """``df`` in ranking order (module docstring) with ``rank`` 1 … n as its first column (replacing any)."""
    body = df.drop(columns=["rank"]) if "rank" in df.columns else df
    if body.empty:
        return body.assign(rank=pd.Series(dtype=np.int64))[["rank", *body.columns]]
    keys = [_sort_codes(body[c]) for c in reversed(TIE_BREAK) if c in body.columns]
    key = body[RANK_KEY].to_numpy(dtype=float)
    order = np.lexsort((*keys, np.where(np.isnan(key), np.inf, key), np.isnan(key), tier(body, users)))
    out = body.iloc[order].reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    return out


def cheapest(df: pd.DataFrame, users: int | None = None) -> pd.Series | None:
    """The first row of :func:`rank` if it meets every target, else None (nothing does)."""
    ok = df[meets_targets(df, users)]
    return None if ok.empty else rank(ok, users).iloc[0]


def cheapest_per(df: pd.DataFrame, by: str = "gpu_id", users: int | None = None) -> pd.DataFrame:
    """Per value of ``by`` (e.g. each GPU type), its cheapest row meeting every target; rows in rank order."""
    ok = df[meets_targets(df, users)]
    if ok.empty:
        return rank(ok, users)
    best = rank(ok, users).groupby(by, observed=True, sort=False).head(1)
    return rank(best, users)


def batch_grid(users: int | None = None) -> tuple[int, ...]:
    """Batch sizes a "cheapest configuration" question searches: every size from 1 to the users (at most
    :data:`MAX_BATCH`), or to :data:`MAX_BATCH` without a users target.  Every size, because the cheapest
    batch of a configuration is the largest that meets the targets (the all-in cost never rises with the
    batch): a coarser grid can miss it and so name another configuration than :func:`planner.plan.plan`."""
    top = MAX_BATCH if users is None else max(1, min(int(users), MAX_BATCH))
    return tuple(range(1, top + 1))


def config_key(row) -> tuple:
    """The configuration a row names: (gpu_id, tensor_parallel, weight_dtype, kv_cache_dtype, prompt_tokens,
    batch_size), plain Python values."""
    return tuple(str(row[c]) if c in ("gpu_id", "weight_dtype", "kv_cache_dtype") else int(row[c])
                 for c in CONFIG_COLUMNS)


def describe(row) -> str:
    """One line naming a row's configuration, e.g. ``h200-sxm × TP 4, bf16 weights, KV bf16, batch 13``."""
    return (f"{row['gpu_id']} × TP {int(row['tensor_parallel'])}, {row['weight_dtype']} weights, "
            f"KV {row['kv_cache_dtype']}, batch {int(row['batch_size']):,}")
