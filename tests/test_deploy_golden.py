"""Golden numbers of the deploy plan, the arithmetic in each docstring: replica count, disaggregated pool sizes,
KV hand-off time, probe timing, the layout chosen for models larger than a node."""

from __future__ import annotations

import math

import pytest

from planner.io import catalog
from planner.cost import fleet_for
from planner.deploy import deployment_bundle
from planner.deploy.disagg import (
    NETWORK_BYTES_PER_S_PER_GPU,
    KvTransfer,
    largest_decode_batch,
    md1_wait_s,
    size_decode_pool,
    size_prefill_pool,
)
from planner.deploy.layout import boot_estimate_s, probe_times, replica_layout
from planner.memory import kv_bytes_per_request
from planner.specs import Deployment, Workload


def test_replica_count_golden():
    """20 req/s at 5.482 req/s per 1-GPU replica: ceil(20 / 5.482) = ceil(3.648) = 4 replicas = 4 GPUs;
    300 in flight at a batch of 172: ceil(300 / 172) = ceil(1.744) = 2."""
    assert fleet_for(20, 5.482, 1, 140).replicas == 4
    assert fleet_for(None, 1.0, 16, 172, concurrency=300).replicas == 2
    assert fleet_for(None, 1.0, 16, 172, concurrency=300).num_gpus == 32


def test_bundle_replicas_are_the_plans_fleet():
    """The bundle deploys ceil(rate ÷ the replica's requests/s) replicas — the plan's fleet answer."""
    g = catalog.gpu("h200-sxm")
    wl = Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=20, ttft_slo_s=0.5, tpot_slo_s=0.05)
    b = deployment_bundle(catalog.model("llama-3.1-8b"), g, Deployment.for_gpu(g), wl)
    rps = float(b.report.throughput.requests_per_s)
    assert b.replicas == math.ceil(20 / rps) == b.predictions["replicas"]
    assert b.predictions["usd_per_hour"] == pytest.approx(b.replicas * g.price_usd_per_hour)


def test_a_fleet_the_engine_sized_is_written_where_the_steady_state_finds_no_batch():
    """The fleet engine sizes on the simulator's tails; the steady-state formula may find no batch under a target the
    simulation meets.  Without the engine's replicas the bundle is refused (naming the flag); with them it is written
    at the replica's limits, and a note says why (not a second answer)."""
    from planner.deploy import DeployRefused

    g, m = catalog.gpu("h200-sxm"), catalog.model("llama-3.1-8b")
    wl = Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=2, ttft_slo_s=0.001, tpot_slo_s=0.05)
    with pytest.raises(DeployRefused) as e:
        deployment_bundle(m, g, Deployment.for_gpu(g), wl)
    assert e.value.field == "--ttft-slo-ms"
    b = deployment_bundle(m, g, Deployment.for_gpu(g), wl, replicas=3)
    assert b.replicas == 3 and b.report.slo.batch_size > 0 and b.report.workload.ttft_slo_s is None
    assert b.notes[0].startswith("the steady-state formula finds no batch under the targets")
    assert b.predictions["operating_point"] is None


def test_md1_wait_golden():
    """ρ = 0.5, s = 0.1 s: 0.5 × 0.1 / (2 × 0.5) = 0.05 s; ρ = 2/3: (2/3 × 0.1) / (2/3) = 0.1 s; ρ ≥ 1: ∞."""
    assert md1_wait_s(0.5, 0.1) == pytest.approx(0.05)
    assert md1_wait_s(2 / 3, 0.1) == pytest.approx(0.1)
    assert md1_wait_s(1.0, 0.1) == math.inf


def test_prefill_pool_golden():
    """20 prompts/s × 0.1 s = 2.0 replicas' worth of prefill.
    No TTFT target: at most 80 % busy: ceil(2.0 / 0.8) = ceil(2.5) = 3 replicas, ρ = 2/3, wait 0.1 s.
    Budget 0.16 s: n = 3 gives 0.1 + 0.1 = 0.2 s > 0.16; n = 4: ρ = 0.5, 0.05 + 0.1 = 0.15 s ≤ 0.16 → 4.
    Budget 0.05 s < one prefill (0.1 s): refused, naming --ttft-slo-ms."""
    p = size_prefill_pool(20, 0.1)
    assert (p.replicas, p.utilization, p.queue_wait_s) == (3, pytest.approx(2 / 3), pytest.approx(0.1))
    assert size_prefill_pool(20, 0.1, ttft_budget_s=0.16).replicas == 4
    with pytest.raises(ValueError, match="--ttft-slo-ms"):
        size_prefill_pool(20, 0.1, ttft_budget_s=0.05)


def test_decode_pool_golden():
    """20 req/s × 512 tokens × 0.030 s = 307.2 requests in decode (Little's law); 256 per replica:
    ceil(307.2 / 256) = ceil(1.2) = 2 replicas.  A TPOT target of 40 ms over steps 10, 20, 30, 50 ms at
    batches 1, 64, 128, 256 keeps batch 128."""
    d = size_decode_pool(20, 512, 256, 0.030)
    assert (d.replicas, d.in_flight) == (2, pytest.approx(307.2))
    assert largest_decode_batch([1, 64, 128, 256], [0.01, 0.02, 0.03, 0.05], 0.040) == 128
    assert largest_decode_batch([1, 64], [0.05, 0.06], 0.040) == 0


def test_kv_transfer_golden():
    """Llama 3.1 8B: 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token; a 1,024-token prompt
    = 134,217,728 B.  From 1 GPU at 400 Gb/s = 50e9 B/s: 134,217,728 / 50e9 = 2.684 ms; from TP 2 (two NICs):
    1.342 ms; over NVLink at 450e9 B/s: 0.298 ms."""
    b = kv_bytes_per_request(catalog.model("llama-3.1-8b"), "bf16", 1024, 16).total_bytes
    assert b == 2 * 32 * 8 * 128 * 2 * 1024 == 134_217_728
    assert NETWORK_BYTES_PER_S_PER_GPU == 50e9
    assert KvTransfer(b, 1, "network", 50e9).time_s == pytest.approx(2.684e-3, rel=1e-3)
    assert KvTransfer(b, 2, "network", 50e9).time_s == pytest.approx(1.342e-3, rel=1e-3)
    assert KvTransfer(b, 1, "nvlink", 450e9).time_s == pytest.approx(0.2983e-3, rel=1e-3)


def test_disaggregated_plan_uses_the_pieces():
    """End to end on Llama 3.1 8B / H200: pools from the same formulas, TTFT = wait + prefill + hand-off + 3.5 steps,
    both sides costed at the GPU's price."""
    g = catalog.gpu("h200-sxm")
    wl = Workload(prompt_tokens=1024, output_tokens=256, request_rate_per_s=20, ttft_slo_s=0.5, tpot_slo_s=0.05)
    b = deployment_bundle(catalog.model("llama-3.1-8b"), g, Deployment.for_gpu(g), wl, disaggregated=True)
    d = b.disaggregated
    assert d.kv_network.bytes_per_request == 134_217_728
    assert d.prefill.prefill_s == pytest.approx(float(b.report.ttft.time_s))
    assert d.decode.replicas == math.ceil(20 * 256 * d.decode.step_s / d.decode.batch_per_replica)
    assert d.decode.step_s <= 0.05
    assert d.kv_network.time_s <= d.tpot_s  # the 2.7 ms hand-off fits in the one decode step it is posted in
    assert d.ttft_s == pytest.approx(d.prefill.queue_wait_s + d.prefill.prefill_s + (3.5 + 1) * d.tpot_s)
    assert d.ttft_s <= 0.5
    dis = d.disaggregated
    assert dis.gpus == d.prefill.replicas + d.decode.replicas
    assert dis.usd_per_hour == pytest.approx(dis.gpus * g.price_usd_per_hour)
    assert d.colocated.gpus == b.report.fleet.num_gpus


def test_probe_times_golden():
    """Llama 3.1 8B: 120 s + 16.06e9 B / 1e9 B/s = 136.06 s to /health.  Startup probes from 60 s every 10 s,
    ceil((3 × 136.06 − 60) / 10) = ceil(34.8) = 35 failures: 60 + 350 = 410 s allowed; liveness from 137 s."""
    g = catalog.gpu("h200-sxm")
    boot = boot_estimate_s(catalog.model("llama-3.1-8b"), replica_layout(g, 1, 1))
    assert boot == pytest.approx(136.06, abs=0.01)
    t = probe_times(boot)
    assert (t.startup_initial_delay_s, t.startup_failure_threshold, t.startup_budget_s, t.liveness_initial_delay_s) == \
        (60, 35, 410, 137)


@pytest.mark.parametrize("model, layout", [
    ("llama-3.1-8b", (1, 1, 1)),      # 16 GB fits one 80 GB GPU
    ("llama-3.1-70b", (2, 1, 1)),     # 141 GB > 78 GB usable of one GPU: TP 2
    ("llama-3.1-405b", (8, 2, 2)),    # 811 GB > one 8 × 80 GB node: TP 8 inside, PP 2 across nodes
    ("deepseek-v3", (8, 2, 2)),       # fp8 checkpoint: 84 GB per GPU at TP 8 > 78 GB usable
])
def test_layout_chosen_on_h100_nodes(model, layout):
    """The smallest layout that starts (4,608-token requests, no SLO): TP inside a node, then TP = 8, PP = nodes."""
    g = catalog.gpu("h100-sxm")
    m = catalog.model(model)
    b = deployment_bundle(m, g, Deployment.for_gpu(g, weight_dtype=m.native_dtype),
                          Workload(prompt_tokens=4096, output_tokens=512))
    assert (b.layout.tensor_parallel, b.layout.pipeline_parallel, b.layout.nodes) == layout


def test_replica_across_nodes_takes_whole_nodes():
    g = catalog.gpu("h100-sxm")
    assert replica_layout(g, 8, 3).nodes == 3
    with pytest.raises(ValueError, match="--pp"):
        replica_layout(g, 4, 3)  # 12 GPUs on 8-GPU nodes
