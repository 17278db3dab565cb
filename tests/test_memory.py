"""Memory: weight bytes per dtype, KV sharding, the vLLM-style budget and max concurrency."""

from __future__ import annotations

import pytest
from conftest import deepseek_v3, llama_31_70b, make_gpu, mistral_7b

from planner.dtypes import WEIGHT_BITS
from planner.memory import (
    DEFAULT_NON_TORCH_BYTES,
    activation_peak_bytes,
    kv_bytes_per_request,
    kv_pool_concurrency,
    kv_shard_fraction,
    max_concurrency,
    memory_budget,
    request_kv_bytes_per_gpu,
    rope_cache_bytes,
    weight_bytes,
)
from planner.specs import Deployment, count_params


def test_scale_overheads():
    """int4 group 128 with a 16-bit scale: 4 + 16/128 = 4.125 bits; MXFP4: 4 + 8/32 = 4.25 bits."""
    assert WEIGHT_BITS["int4"] == 4.125
    assert WEIGHT_BITS["mxfp4"] == 4.25
    assert WEIGHT_BITS["nf4"] == pytest.approx(4.127, abs=1e-3)


def test_weight_bytes_split():
    """Quantised linear layers + 16-bit embeddings/lm_head/norms add up to the total; bf16 = params × 2."""
    m = mistral_7b()
    p = count_params(m)
    wb = weight_bytes(m, "int8")
    assert wb.quantized_params + wb.kept_16bit_params == pytest.approx(p.total)
    assert wb.kept_16bit_params == pytest.approx(2 * 32768 * 4096 + (2 * 32 + 1) * 4096)
    assert weight_bytes(m, "bf16").total_bytes == pytest.approx(p.total * 2)


def test_weight_bytes_order_follows_bits():
    m = mistral_7b()
    sizes = {d: weight_bytes(m, d).total_bytes for d in WEIGHT_BITS}
    assert sizes["bf16"] == sizes["fp16"] > sizes["fp8"] == sizes["int8"] > sizes["mxfp4"] > sizes["int4"]


def test_unknown_dtype_names_the_field():
    with pytest.raises(ValueError, match="weight_dtype"):
        weight_bytes(mistral_7b(), "int3")
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        kv_bytes_per_request(mistral_7b(), "int4", 10)


def test_kv_sharding_under_tensor_parallel():
    """Llama 70B has 8 KV heads: TP 4 → 2 heads per GPU (1/4 of the cache); TP 16 → 1 head, replicated
    (1/8, not 1/16).  MLA's single latent is replicated on every rank (fraction 1)."""
    m = llama_31_70b()
    assert kv_shard_fraction(m, 4) == 0.25
    assert kv_shard_fraction(m, 16) == 1 / 8
    assert kv_shard_fraction(m, 2, pipeline_parallel=2) == 0.25
    assert kv_shard_fraction(deepseek_v3(), 8) == 1.0


def test_block_rounding():
    """vLLM allocates whole 16-token blocks: 4,097 tokens occupy 4,112."""
    kv = kv_bytes_per_request(mistral_7b(), "bf16", 4097, block_size_tokens=16)
    assert kv.full_layer_tokens == 4112
    assert kv.total_bytes == 4112 * 131_072


def test_budget_parts_add_up():
    """usable = 0.9 × 80 GiB; pool = usable − weights − activations − non-torch − graphs."""
    m, g = mistral_7b(), make_gpu()
    d = Deployment.for_gpu(g, gpu_memory_utilization=0.9)
    b = memory_budget(m, g, d)
    assert b.usable_bytes == pytest.approx(0.9 * 80 * 2**30)
    # the weights and vLLM's rotary table: 32,768 positions × 128 × 2 B = 8,388,608 B
    assert rope_cache_bytes(m) == 32_768 * 128 * 2 == 8_388_608
    assert b.weight_bytes == pytest.approx(weight_bytes(m, "bf16").total_bytes + 8_388_608)
    assert b.activation_bytes == pytest.approx(activation_peak_bytes(m, d))
    assert b.non_torch_bytes == DEFAULT_NON_TORCH_BYTES
    assert b.kv_pool_bytes == pytest.approx(b.usable_bytes - b.weight_bytes - b.overhead_bytes)
    assert b.kv_capacity_tokens % 16 == 0
    assert b.kv_capacity_tokens == int(b.kv_pool_bytes // 131_072) // 16 * 16
    assert b.fits


def test_weights_split_across_tp():
    m, g = llama_31_70b(), make_gpu()
    one = memory_budget(m, g, Deployment.for_gpu(g, num_gpus=4, tensor_parallel=4))
    # the weights split four ways; the rotary table (131,072 × 128 × 2 B) is on every GPU
    assert one.weight_bytes == pytest.approx(weight_bytes(m, "bf16").total_bytes / 4 + 131_072 * 128 * 2)
    assert one.kv_bytes_per_token == 327_680 / 4


def test_does_not_fit_explains_with_numbers():
    """Llama 70B bf16 (141 GB) on one 80 GiB GPU does not fit; the sentence says how much is needed."""
    m, g = llama_31_70b(), make_gpu()
    b = memory_budget(m, g, Deployment.for_gpu(g))
    assert not b.fits
    msg = b.explain()
    assert msg.startswith("does not fit: needs") and "GiB" in msg and "73.6 GiB usable" in msg
    assert max_concurrency(m, g, Deployment.for_gpu(g), 4096) == 0


def test_max_concurrency_is_pool_over_request():
    m, g = mistral_7b(), make_gpu()
    d = Deployment.for_gpu(g)
    b = memory_budget(m, g, d)
    per = request_kv_bytes_per_gpu(m, d, 4608)
    assert max_concurrency(m, g, d, 4608) == int(b.kv_pool_bytes // per)


def test_kv_pool_concurrency_is_the_floor_of_pool_over_request():
    """A 100 GiB pool, 512 MiB per request (Mistral 7B bf16 at 4,096 tokens: 4,096 × 131,072 B):
    107,374,182,400 // 536,870,912 = 200; one byte short holds 199; a model that does not fit holds 0;
    arrays broadcast to the same numbers."""
    import numpy as np

    pool, per = 100 * 2**30, 4096 * 131_072
    assert kv_pool_concurrency(pool, per) == 200
    assert kv_pool_concurrency(pool - 1, per) == 199
    assert kv_pool_concurrency(pool, per, fits=False) == 0
    assert kv_pool_concurrency(pool, 0.0) == 0
    grid = kv_pool_concurrency(np.array([[pool], [pool - 1]]), np.array([[per, 2 * per]]), np.array([[True], [True]]))
    assert grid.tolist() == [[200, 100], [199, 99]]



def test_the_last_request_in_needs_its_admission_ask_free():
    """vLLM 0.26 admits a request only with its whole prompt's blocks free in every KV group, a sliding group's capped
    at window + the steps in flight (scheduler_reserve_full_isl): 1 + ⌊(pool − ask) ÷ held⌋ requests, not ⌊pool ÷
    held⌋.  A 100-block pool, 7 held and 19 asked a request: 1 + (100 − 19) // 7 = 12 (not 14); 18 blocks: none;
    an ask no larger than what a request holds leaves the plain floor (200 and 199 as above).  Gemma-3-27B on an H200
    at 0.6 of its memory and 16,384 tokens: 7 groups x 1,024 blocks of 16 x 10 x 8,192 B asked, 1,024 + 6 x 65
    held."""
    import numpy as np

    from planner.io import catalog
    from planner.memory import admission_kv_bytes_per_gpu

    assert kv_pool_concurrency(100.0, 7.0, True, 19.0) == 12 and kv_pool_concurrency(18.0, 7.0, True, 19.0) == 0
    pool, per = 100 * 2**30, 4096 * 131_072
    assert kv_pool_concurrency(pool, per, True, per) == 200 and kv_pool_concurrency(pool - 1, per, True, 1.0) == 199
    assert kv_pool_concurrency(np.array([100.0, 18.0]), 7.0, True, np.array([19.0, 19.0])).tolist() == [12, 0]
    gemma, oss, gpu = catalog.model("gemma-3-27b"), catalog.model("gpt-oss-20b"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(gpu, gpu_memory_utilization=0.6)
    page = 16 * 10 * 8192
    assert request_kv_bytes_per_gpu(gemma, dep, 16384) == (1024 + 6 * 65) * page
    assert admission_kv_bytes_per_gpu(gemma, dep, 16384) == 7 * 1024 * page
    pool = memory_budget(gemma, gpu, dep).kv_pool_bytes
    assert max_concurrency(gemma, gpu, dep, 16384) == 1 + (pool - 7 * 1024 * page) // ((1024 + 6 * 65) * page) == 14
    assert int(pool // ((1024 + 6 * 65) * page)) == 18  # what the held blocks alone would promise
    # no sliding layers: the ask is what a request holds
    assert admission_kv_bytes_per_gpu(mistral_7b(), Deployment.for_gpu(make_gpu()), 4096) == 4096 * 131_072
    oss_dep = Deployment.for_gpu(gpu, weight_dtype="mxfp4")
    assert admission_kv_bytes_per_gpu(oss, oss_dep, 4096) > request_kv_bytes_per_gpu(oss, oss_dep, 4096)


def test_rope_tables_count_with_the_weights():
    """vLLM keeps its rotary cos/sin tables with the weights on every GPU.  Gemma-3-12B: a linear ×8 table for its
    global layers and one for its local ones, (8 + 1) × 131,072 rows × 256 × 2 B = 603,979,776 B (the import from
    config.json derives the rows); MLA models' tables are qk_rope_head_dim wide: DeepSeek-V2-Lite 163,840 × 64 × 2."""
    from planner.io import catalog

    gemma = catalog.model("gemma-3-12b")
    assert gemma.rope_cache_positions == 9 * 131_072 and rope_cache_bytes(gemma) == 9 * 131_072 * 256 * 2
    assert rope_cache_bytes(catalog.model("deepseek-v2-lite")) == 163_840 * 64 * 2
    assert rope_cache_bytes(catalog.model("llama-3.1-8b")) == 131_072 * 128 * 2
