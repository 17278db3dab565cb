"""Predicted vs measured for a recorded 1P1D run (``calibration/disagg_bench.py``), and the "disaggregated
wins / loses" verdict at equal GPUs.

A request's way through the pair, as vLLM 0.26 and the proxy run it (see :mod:`planner.deploy.disagg` for the
source lines):

* prefill leg: the same arrivals and prompts on the prefill engine with ``max_tokens = 1`` — the serving
  simulator (:func:`planner.serving.engine.simulate`, the one step formula, the engine's HTTP frontend
  overhead) gives each request's time to that one token;
* decode leg: a second request (the per-request and HTTP frontend overheads once more), then the decode side
  (:func:`planner.deploy.disagg.decode_side_s`: the NIXL READ of the prompt's blocks over the link and
  :data:`~planner.deploy.disagg.DECODE_SIDE_STEPS` decode steps); the decode engine runs at its operating batch
  (:func:`planner.deploy.disagg.operating_batch`, Little's law with the step at that batch), and every token after
  the first comes one step apart.

So TTFT_i = prefill-leg TTFT_i + request overheads + decode side_i, TPOT_i = the decode step at the operating
batch, E2E_i = TTFT_i + TPOT × (output_i − 1).  The decode engine's TPOT spread (its batch fluctuates) is not
modelled: predicted TPOT p99 = p50.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.deploy.disagg import DECODE_SIDE_STEPS, decode_side_s, operating_batch
from planner.serving.config import EngineConfig
from planner.serving.engine import simulate
from planner.serving.loadtests import LoadTest, LoadTestComparison, stats
from planner.serving.step_cost import StepCost
from planner.serving.workloads import make_requests
from planner.units import cdiv


def decode_step_of_batch(cost: StepCost, context_tokens: float):
    """batch → seconds of one decode step of ``batch`` sequences at ``context_tokens`` each (StepCost's formula:
    layer-weighted attended tokens, sliding layers capped at their window)."""
    per_seq = cost.num_full_layers * context_tokens
    if cost.num_sliding_layers:
        per_seq += cost.num_sliding_layers * min(context_tokens, cost.window_tokens)

    def step(b: float) -> float:
        return float(cost.step_s(b, b, 0.0, per_seq * b, per_seq * b))

    return step


@dataclass(frozen=True)
class PdLink:
    """The KV hand-off: bytes per prompt token as vLLM allocates them (whole blocks), over one link per GPU."""

    kv_bytes_per_token: float
    block_size_tokens: int
    bandwidth_bytes_per_s_per_gpu: float
    sending_gpus: int = 1

    def transfer_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """⌈prompt ÷ block⌉ × block × KV bytes/token ÷ (GPUs × bandwidth): 1,000 tokens of Llama-3.1-8B
        (131,072 B/token) in 63 blocks = 1,008 tokens = 132,120,576 B; over 450e9 B/s NVLink: 0.2936 ms."""
        bs = self.block_size_tokens
        tokens = cdiv(np.asarray(prompt_tokens, dtype=float), bs) * bs
        return tokens * self.kv_bytes_per_token / (self.sending_gpus * self.bandwidth_bytes_per_s_per_gpu)


def predict_pd(test: LoadTest, cost: StepCost, prefill_cfg: EngineConfig, decode_max_num_seqs: int, link: PdLink,
               decode_side_steps: float = DECODE_SIDE_STEPS) -> tuple[dict, dict]:
    """(predicted stats as :func:`planner.serving.loadtests.stats` gives them, the model's parts) for a 1P1D pair
    serving ``test``'s requests."""
    prompt = np.asarray(test.prompt_tokens, dtype=float)
    out = np.asarray(test.output_tokens, dtype=float)
    arrival = np.asarray(test.arrival_s, dtype=float)
    pre = simulate(make_requests(test.prompt_tokens, np.ones_like(test.output_tokens), arrival,
                                 name=f"{test.name}-prefill"), cost, prefill_cfg)
    p_ttft = pre.ttft_s  # with the engine's per-request and HTTP frontend overheads
    span = float(arrival.max() - arrival.min()) if arrival.size > 1 else 0.0
    rate = (arrival.size - 1) / span if span > 0 else 0.0
    step = decode_step_of_batch(cost, float(prompt.mean() + out.mean() / 2.0))
    batch, step_s = operating_batch(rate, float(out.mean()), 1, step, decode_max_num_seqs)
    transfer = link.transfer_s(prompt)
    side = np.array([decode_side_s(float(t), step_s, decode_side_steps) for t in transfer])
    ttft = p_ttft + pre.request_overhead_s + side  # the decode leg is a second request
    tpot = np.where(out > 1, step_s, np.nan)
    e2e = ttft + step_s * (out - 1)
    parts = {"rate_per_s": rate, "decode_operating_batch": batch, "decode_step_s": step_s,
             "prefill_leg_ttft_p50_s": float(np.nanmedian(p_ttft)), "transfer_p50_s": float(np.median(transfer)),
             "decode_side_p50_s": float(np.median(side)), "request_overhead_s": pre.request_overhead_s}
    return stats(arrival, ttft, tpot, e2e, out), parts


def replay_pd(test: LoadTest, cost: StepCost, prefill_cfg: EngineConfig, decode_max_num_seqs: int,
              link: PdLink) -> tuple[LoadTestComparison, dict]:
    """Measured (the run as recorded) vs :func:`predict_pd`, and the model's parts."""
    predicted, parts = predict_pd(test, cost, prefill_cfg, decode_max_num_seqs, link)
    return LoadTestComparison(test.name, test.tool, int(test.arrival_s.size), test.measured(), predicted), parts


def meets(s: dict, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """Both p99 targets held (a missing figure is a miss)."""
    t, p = s.get("ttft_p99_s"), s.get("tpot_p99_s")
    return t is not None and p is not None and t <= ttft_p99_s and p <= tpot_p99_s


def verdict(pd: dict, colocated_half: dict, ttft_p99_s: float, tpot_p99_s: float) -> str:
    """At equal GPUs — the 1P1D pair at rate r against two co-located replicas at r ÷ 2 each:
    'disaggregated wins' if the pair holds both p99 targets and the co-located replicas do not; else
    'disaggregated loses' (both hold: co-located is one pool without a hand-off; neither holds: no win)."""
    if meets(pd, ttft_p99_s, tpot_p99_s) and not meets(colocated_half, ttft_p99_s, tpot_p99_s):
        return "disaggregated wins"
    return "disaggregated loses"
