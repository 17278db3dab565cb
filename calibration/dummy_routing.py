"""How many distinct experts a batch's routing reaches on a dummy-weight engine (issue #21; pure numpy).

vLLM's dummy loader fills every floating-point parameter uniform in [-1e-3, 1e-3]: embeddings, norm weights, router
weights and router biases alike.  A router input is then RMSNorm(embedding) × a 1e-3 norm weight, and its logits are
~1e-5; a router bias (gpt-oss's ``router.bias``, DeepSeek-V3's ``e_score_correction_bias``) is ~1e-3 and picks the same
few experts for every token.  Without a bias (Qwen3-MoE, Mixtral, DeepSeek-V2) each token's own logits pick, and a
batch spreads as uniform routing does.  This replays that arithmetic for one layer; the MoE probes' fitted touch
shares agree in kind (calibration/data/README.md, 2026-12-03): the bf16 Qwen3 engine's 1.0, the MXFP4 (gpt-oss) one's
0.14.  A model served with its trained weights routes as it was trained (load balancing spreads it), so the profile's
touch share is the dummy engines', not a deployment's.

    python -m calibration.dummy_routing      # distinct experts per batch size for the catalog's MoE models
"""

from __future__ import annotations

import numpy as np

#: architectures whose router adds a bias to its logits before the top-k (vLLM 0.26 gpt_oss.py, deepseek_v2.py noaux_tc)
ROUTER_BIAS_ARCHITECTURES = frozenset({"GptOssForCausalLM", "DeepseekV3ForCausalLM"})
DUMMY_HIGH = 1e-3  # vLLM's dummy weights: uniform(-1e-3, 1e-3)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def distinct_experts(num_experts: int, top_k: int, hidden: int, batch: int, router_bias: bool, trials: int = 16,
                     seed: int = 0) -> float:
    """Mean number of distinct experts ``batch`` tokens (distinct random embeddings) reach in one dummy layer."""
    rng = np.random.default_rng(seed)
    counts = []
    for _ in range(trials):
        w = rng.uniform(-DUMMY_HIGH, DUMMY_HIGH, (num_experts, hidden))
        b = rng.uniform(-DUMMY_HIGH, DUMMY_HIGH, num_experts) if router_bias else np.zeros(num_experts)
        g = rng.uniform(-DUMMY_HIGH, DUMMY_HIGH, hidden)
        x = rng.uniform(-DUMMY_HIGH, DUMMY_HIGH, (batch, hidden))
        x = x / np.sqrt((x * x).mean(axis=1, keepdims=True)) * g  # RMSNorm with its dummy weight
        top = np.argpartition(-(x @ w.T + b), top_k - 1, axis=1)[:, :top_k]
        counts.append(np.unique(top).size)
    return float(np.mean(counts))


def main() -> int:
    from planner.io import catalog
    from planner.kernel_families import experts_touched

    print("distinct experts per MoE layer on a dummy-weight engine / under uniform routing, by batch size")
    for mid in catalog.models():
        m = catalog.model(mid)
        if m.moe is None:
            continue
        e, k, bias = m.moe.num_experts, m.moe.experts_per_token, m.architecture in ROUTER_BIAS_ARCHITECTURES
        cells = [f"{b}:{distinct_experts(e, k, m.hidden_size, b, bias, trials=4):.0f}/{experts_touched(e, k, b):.0f}"
                 for b in BATCHES]
        print(f"  {mid:18s} {'bias' if bias else '    '} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
