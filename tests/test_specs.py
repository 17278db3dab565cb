"""Data contracts (planner.specs): Deployment.for_gpu and vLLM serve's scheduler defaults, TP candidates."""

from __future__ import annotations

import pytest
from conftest import make_gpu, mistral_7b

from planner.io import catalog
from planner.specs import Deployment, tensor_parallel_candidates


@pytest.mark.parametrize("gpu_id,tokens,seqs", [("h200-sxm", 8192, 1024), ("h100-sxm", 8192, 1024),
                                                ("mi300x", 8192, 1024), ("a100-sxm-80gb", 2048, 256),
                                                ("l4", 2048, 256), ("rtx-4090", 2048, 256)])
def test_unset_scheduler_limits_follow_vllm_serve_defaults(gpu_id, tokens, seqs):
    """vLLM 0.26 get_batch_defaults (OPENAI_API_SERVER): >= 70 GiB and not A100 -> 8192/1024, else 2048/256."""
    d = Deployment.for_gpu(catalog.gpu(gpu_id))
    assert (d.max_num_batched_tokens, d.max_num_seqs) == (tokens, seqs)
    assert Deployment.for_gpu(catalog.gpu(gpu_id), max_num_batched_tokens=4096).max_num_batched_tokens == 4096


def test_a_deployment_without_a_gpu_keeps_8192_and_1024():
    """Built from an id alone (no GpuSpec), the scheduler limits are the H100/H200 defaults."""
    d = Deployment(gpu_id="a100-sxm-80gb")
    assert (d.max_num_batched_tokens, d.max_num_seqs) == (8192, 1024)


def test_for_gpu_takes_the_id_from_the_gpu():
    g = catalog.gpu("l4")
    assert Deployment.for_gpu(g, tensor_parallel=2, num_gpus=2).gpu_id == "l4"
    with pytest.raises(TypeError, match="gpu_id"):
        Deployment.for_gpu(g, gpu_id="h200-sxm")


def test_tensor_parallel_candidates():
    """Mistral 7B has 32 heads: 1, 2, 4, 8 all divide them; a 4-GPU node stops at 4; 28 heads (Qwen2.5-7B)
    refuse TP 8; asked-for sizes are filtered by the same two rules."""
    m = mistral_7b()
    assert tensor_parallel_candidates(m, make_gpu()) == [1, 2, 4, 8]
    assert tensor_parallel_candidates(m, make_gpu(max_gpus_per_node=4)) == [1, 2, 4]
    assert tensor_parallel_candidates(m, make_gpu(), [3, 4, 16]) == [4]
    assert tensor_parallel_candidates(catalog.model("qwen2.5-7b"), make_gpu()) == [1, 2, 4]
