"""planner.ranking: the one ranking (rows meeting every target first, then all-in $/M output tokens, then a
deterministic tie-break), and the surfaces that use it (sweep, the Cost view's cheapest per GPU)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import make_gpu, mistral_7b

from planner import ranking
from planner.dashboard import views
from planner.ranking import RANK_KEY, batch_grid, cheapest, cheapest_per, meets_targets, rank
from planner.specs import Workload
from planner.sweep import sweep


def frame(rows: list[dict]) -> pd.DataFrame:
    base = {"gpu_id": "a", "weight_dtype": "bf16", "kv_cache_dtype": "bf16", "tensor_parallel": 1, "num_gpus": 1,
            "prompt_tokens": 1024, "batch_size": 8, "fits": True, "meets_slo": True,
            "context_exceeds_model_limit": False, "tpot_s": 0.02, "ttft_s": 0.2, RANK_KEY: 1.0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_rows_that_miss_a_target_never_rank_above_rows_that_meet_them():
    """A cheaper row that misses a target — the SLO, the model's context limit, or more requests in flight
    than there are users — ranks after every row that meets them all; rows that do not fit come last."""
    df = frame([
        {"gpu_id": "ok", RANK_KEY: 3.0},
        {"gpu_id": "slo", "meets_slo": False, RANK_KEY: 1.0},
        {"gpu_id": "context", "context_exceeds_model_limit": True, RANK_KEY: 0.5},
        {"gpu_id": "users", "batch_size": 64, RANK_KEY: 0.1},
        {"gpu_id": "nofit", "fits": False, "meets_slo": False, RANK_KEY: 0.01},
        {"gpu_id": "ok2", RANK_KEY: 2.0},
    ])
    out = rank(df, users=32)
    assert list(out["gpu_id"]) == ["ok2", "ok", "users", "context", "slo", "nofit"]
    assert list(out["rank"]) == [1, 2, 3, 4, 5, 6]
    assert cheapest(df, users=32)["gpu_id"] == "ok2"
    assert list(meets_targets(df, users=32)) == [True, False, False, False, False, True]
    assert cheapest(df[df["gpu_id"].isin(["slo", "nofit"])]) is None


def test_ties_are_broken_the_same_way_whatever_the_input_order():
    """Equal keys: fewer GPUs, lower TPOT, lower TTFT, then ids alphabetically — independent of row order."""
    df = frame([{"gpu_id": g, "num_gpus": n, "tpot_s": t} for g, n, t in
                (("b", 1, 0.02), ("a", 1, 0.02), ("c", 2, 0.01), ("d", 1, 0.01), ("a", 1, 0.03))])
    want = [("d", 1, 0.01), ("a", 1, 0.02), ("b", 1, 0.02), ("a", 1, 0.03), ("c", 2, 0.01)]
    for seed in range(5):
        shuffled = df.sample(frac=1, random_state=seed)
        got = rank(shuffled)
        assert list(zip(got["gpu_id"], got["num_gpus"], got["tpot_s"])) == want
    nan = frame([{"gpu_id": "x", RANK_KEY: np.nan}, {"gpu_id": "y", RANK_KEY: 5.0}])
    assert list(rank(nan)["gpu_id"]) == ["y", "x"]


def test_cheapest_per_group_in_rank_order():
    df = frame([{"gpu_id": "a", RANK_KEY: 2.0}, {"gpu_id": "a", RANK_KEY: 1.5}, {"gpu_id": "b", RANK_KEY: 1.0},
                {"gpu_id": "b", "meets_slo": False, RANK_KEY: 0.1}])
    best = cheapest_per(df)
    assert list(best["gpu_id"]) == ["b", "a"] and list(best[RANK_KEY]) == [1.0, 1.5]


def test_batch_grid_is_every_size_to_the_users():
    assert batch_grid(5) == (1, 2, 3, 4, 5)
    assert batch_grid(5000)[-1] == 1024 and len(batch_grid(None)) == 1024


def test_sweep_ranks_with_the_users_as_a_target():
    """`sweep` with workload.concurrency (the dashboard's users, `planner sweep --users`): rank 1 holds no more
    requests than there are users (it was batch 1,024, 32 times the users, before the ranking knew them)."""
    m, g = mistral_7b(), make_gpu()
    df = sweep(m, Workload(prompt_tokens=1024, output_tokens=256, concurrency=32), gpus=[g], weight_dtypes=["bf16"],
               kv_dtypes=["bf16"], tensor_parallels=[1])
    assert df.loc[0, "batch_size"] <= 32
    ok = meets_targets(df, 32)
    assert ok.iloc[: ok.sum()].all() and not ok.iloc[ok.sum():].any()
    assert df.loc[ok, RANK_KEY].is_monotonic_increasing


def test_sweep_ranks_requests_beyond_the_model_context_after_the_rest():
    """A 40,000-token prompt exceeds Mistral's 32,768-token context: on a GPU at half the price it is cheaper per
    output token than a 1,024-token prompt on the dear one, yet it ranks after every row within the context
    (it used to rank among them: the old order looked at meets_slo and fits only)."""
    m = mistral_7b()
    cheap, dear = make_gpu(id="cheap-gpu", price_usd_per_hour=2.0), make_gpu(id="dear-gpu", price_usd_per_hour=4.0)
    df = sweep(m, Workload(prompt_tokens=1024, output_tokens=8192), gpus=[cheap, dear], weight_dtypes=["bf16"],
               kv_dtypes=["bf16"], tensor_parallels=[1], contexts=[1024, 40_000], batch_sizes=[1])
    over = df["context_exceeds_model_limit"].to_numpy()
    assert over.any() and not over[: (~over).sum()].any()
    assert df.loc[over, RANK_KEY].min() < df.loc[~over, RANK_KEY].max()  # the case that used to interleave


def test_cost_view_ranks_by_the_all_in_key(monkeypatch):
    """The Cost view's cheapest per GPU follows the ranking key (all-in), not the decode-share cost: with the
    two disagreeing, its first row is ranking.cheapest's."""
    df = frame([{"gpu_id": "a", RANK_KEY: 1.0, "cost_usd_per_million_output_tokens": 0.9},
                {"gpu_id": "b", RANK_KEY: 2.0, "cost_usd_per_million_output_tokens": 0.5}])
    best = views.cheapest_per_gpu(df, 100)
    assert list(best["gpu_id"]) == ["a", "b"]
    assert best.iloc[0]["gpu_id"] == cheapest(df, 100)["gpu_id"]
    for c in ("cost_usd_per_million_tokens_blended", "price_usd_per_hour"):
        best[c] = 1.0
    best["price_source"], best["price_date"] = "x", "2026-01-01"
    table = views.cost_table(best)
    assert list(table.columns[:2]) == ["rank in CSV", "configuration"]  # the rank first, then the ranking key
    assert list(table.columns[5:7]) == ["batch", ranking.RANK_LABEL]  # first among the money columns


@pytest.mark.parametrize("text", [ranking.RANK_DEFINITION, ranking.__doc__])
def test_the_key_is_defined_in_words(text):
    assert "prefill included" in text and "generated tokens" in text
