"""Disaggregated prefill/decode (issue #23): what ``planner deploy --disaggregated`` writes, checked against vLLM
0.26.0's own code, and the model's arithmetic by hand.

Source: the released wheel ``vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl`` (sha256 adb1e4c9b46d0dfd…
15006de, the one the GPU machine's bundle installs), line numbers of the files inside it:

* vllm/config/kv_transfer.py 11-13: ``KVRole = kv_producer | kv_consumer | kv_both``; 22-69 the
  ``KVTransferConfig`` fields ``--kv-transfer-config`` takes as JSON; 96-106 ``__post_init__`` refuses another
  role and a connector without one.
* vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py 122-128: ``kv_both`` with NixlConnector is
  deprecated — "set kv_role='kv_producer' for prefill instances and kv_role='kv_consumer' for decode
  instances"; 387 ``NixlConnector = NixlPullConnector``; 277-289 no layer-wise save/load.
* vllm/envs.py 1563-1570: ``VLLM_NIXL_SIDE_CHANNEL_HOST`` (default localhost), ``VLLM_NIXL_SIDE_CHANNEL_PORT``
  (default 5600).
* vllm/v1/core/sched/scheduler.py 927-942 / 979-998: the decode engine allocates every prompt block before the
  transfer (``WAITING_FOR_REMOTE_KVS``); 2579-2582 the last prompt token is recomputed.
* vllm/config/vllm.py 1059-1107: asynchronous scheduling on by default; vllm/v1/engine/core.py 617-705 the batch
  queue.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner.cost import fleet_for
from planner.deploy import deployment_bundle
from planner.deploy.disagg import (
    DECODE_SIDE_STEPS,
    KvTransfer,
    decode_side_s,
    md1_wait_s,
    operating_batch,
    size_decode_pool,
    size_prefill_pool,
)
from planner.deploy.disagg_k8s import KV_ROLE, NIXL_SIDE_CHANNEL_PORT, nixl_kv_transfer_config, proxy_argv
from planner.deploy.flags import parse_serve_args
from planner.io import catalog
from planner.specs import Deployment, Workload

H200 = catalog.gpu("h200-sxm")
#: vLLM 0.26.0 KVTransferConfig's fields (vllm/config/kv_transfer.py lines 26-69)
KV_TRANSFER_FIELDS = {"kv_connector", "engine_id", "kv_buffer_device", "kv_buffer_size", "kv_role", "kv_rank",
                      "kv_parallel_size", "kv_ip", "kv_port", "kv_connector_extra_config", "kv_connector_module_path",
                      "enable_permute_local_kv", "kv_load_failure_policy"}
KV_ROLES_026 = {"kv_producer", "kv_consumer", "kv_both"}  # lines 11-13


@pytest.fixture(scope="module")
def bundle():
    wl = Workload(prompt_tokens=1024, output_tokens=256, request_rate_per_s=20, ttft_slo_s=0.5, tpot_slo_s=0.05)
    return deployment_bundle(catalog.model("llama-3.1-8b"), H200, Deployment.for_gpu(H200), wl, disaggregated=True)


def test_each_pool_gets_its_own_kv_role(bundle):
    """Prefill = kv_producer, decode = kv_consumer (kv_both is deprecated for NixlConnector in 0.26.0); the JSON
    holds only KVTransferConfig fields; nothing else differs between the two commands."""
    assert KV_ROLE == {"prefill": "kv_producer", "decode": "kv_consumer"}
    args = {}
    for role in ("prefill", "decode"):
        cfg = json.loads(parse_serve_args(bundle.pd_serve[role].serve_args())["--kv-transfer-config"])
        assert cfg == {"kv_connector": "NixlConnector", "kv_role": KV_ROLE[role]} == nixl_kv_transfer_config(role)
        assert set(cfg) <= KV_TRANSFER_FIELDS and cfg["kv_role"] in KV_ROLES_026
        args[role] = bundle.pd_serve[role].serve_args()
    i = args["prefill"].index("--kv-transfer-config")
    assert args["prefill"][:i] == args["decode"][:i] and args["prefill"][i + 2:] == args["decode"][i + 2:]
    assert args["prefill"][:i] + args["prefill"][i + 2:] == bundle.serve.serve_args()  # the co-located command
    with pytest.raises(ValueError, match="role"):
        nixl_kv_transfer_config("both")


def test_predictions_carry_both_commands(bundle):
    d = bundle.predictions["disaggregated"]
    for role in ("prefill", "decode"):
        assert d[f"{role}_serve_argv"] == list(bundle.pd_serve[role].argv)
        assert f'"kv_role":"{KV_ROLE[role]}"' in d[f"{role}_serve_command"]
    assert d["verdict"] in ("disaggregated wins", "disaggregated loses") and d["measured"] is False
    readme = bundle.files["README.md"]
    assert "kv_producer" in readme and "kv_consumer" in readme and "VLLM_NIXL_SIDE_CHANNEL_PORT" in readme


def test_manifest_side_channel_and_proxy(bundle):
    """Each engine pod advertises its pod IP on vLLM's default side-channel port; the proxy takes the
    toy_proxy_server.py flags (--prefiller-hosts/--prefiller-ports/--decoder-hosts/--decoder-ports)."""
    docs = list(yaml.safe_load_all(bundle.files["k8s-disaggregated.yaml"]))
    deps = {x["metadata"]["name"]: x for x in docs if x["kind"] == "Deployment"}
    for role in ("prefill", "decode"):
        c = deps[f"vllm-llama-3-1-8b-pd-{role}"]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in c["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == str(NIXL_SIDE_CHANNEL_PORT) == "5600"
        assert json.loads(parse_serve_args(c["args"])["--kv-transfer-config"])["kv_role"] == KV_ROLE[role]
    argv = proxy_argv("p", "d")
    for flag in ("--host", "--port", "--prefiller-hosts", "--prefiller-ports", "--decoder-hosts", "--decoder-ports"):
        assert flag in argv


def test_decode_side_golden():
    """The decode side = (3.5 + ⌈transfer ÷ step⌉, at least 1) steps: 2.7 ms over 10 ms steps: 4.5 × 10 = 45 ms;
    25 ms of transfer: (3.5 + 3) × 10 = 65 ms; exactly one step: 4.5 steps."""
    assert DECODE_SIDE_STEPS == 3.5
    assert decode_side_s(0.0027, 0.010) == pytest.approx(0.045)
    assert decode_side_s(0.025, 0.010) == pytest.approx(0.065)
    assert decode_side_s(0.010, 0.010) == pytest.approx(0.045)


def test_operating_batch_golden():
    """step(b) = 10 ms + 0.1 ms × b; 20 req/s × 256 tokens on 1 replica: b = 5,120 × (0.010 + 0.0001 b)
    = 51.2 + 0.512 b → b = 51.2 ÷ 0.488 = 104.918, step = 0.010 + 0.0104918 = 20.49 ms.  On 2 replicas:
    b = 25.6 + 0.256 b → 34.409, step 13.44 ms.  A cap below the fixed point holds: cap 50 → 50, 15 ms."""
    step = lambda b: 0.010 + 0.0001 * b
    b, s = operating_batch(20, 256, 1, step, 1024)
    assert (b, s) == (pytest.approx(104.918, abs=1e-3), pytest.approx(0.0204918, abs=1e-6))
    b, s = operating_batch(20, 256, 2, step, 1024)
    assert (b, s) == (pytest.approx(34.409, abs=1e-3), pytest.approx(0.0134409, abs=1e-6))
    assert operating_batch(20, 256, 1, step, 50) == (50.0, pytest.approx(0.015))


def test_decode_pool_is_the_fleet_engines():
    """A decode replica at its knee (batch 256, 30 ms step, 512 tokens) serves 256 ÷ (512 × 0.030) = 16.67
    req/s; 20 req/s need fleet_for's ceil(20 ÷ 16.67) = ceil(1.2) = 2 replicas."""
    d = size_decode_pool(20, 512, 256, 0.030)
    f = fleet_for(20, 256 / (512 * 0.030), 1, 256)
    assert d.replicas == f.replicas == 2 and d.in_flight == pytest.approx(307.2)


def test_prefill_pool_hand_arithmetic():
    """100 req/s of 1,024-token prompts = 102,400 prompt tokens/s; one replica prefills 1,024 tokens in 20 ms =
    51,200 tokens/s: 2.0 replicas of work.  Without a TTFT target at most 80 % busy: ceil(2 ÷ 0.8) = 3.  With a
    50 ms budget: n = 3 gives ρ = 2/3, M/D/1 wait (2/3 × 0.02) ÷ (2 × 1/3) = 20 ms, 20 + 20 = 40 ms ≤ 50 ms: 3;
    a 35 ms budget needs n = 4: ρ = 0.5, wait 0.5 × 0.02 ÷ 1 = 10 ms, 30 ms ≤ 35 ms."""
    load = (100 * 1024) / (1024 / 0.020)
    assert load == pytest.approx(2.0)
    assert size_prefill_pool(100, 0.020).replicas == 3
    p = size_prefill_pool(100, 0.020, 0.050)
    assert (p.replicas, p.queue_wait_s, p.utilization) == (3, pytest.approx(0.020), pytest.approx(2 / 3))
    assert size_prefill_pool(100, 0.020, 0.035).replicas == 4
    assert md1_wait_s(0.5, 0.020) == pytest.approx(0.010)


def test_plan_end_to_end_against_hand_arithmetic(bundle):
    """Llama 3.1 8B on H200, 20 req/s of 1,024/256 tokens, TTFT 500 ms, TPOT 50 ms: the prefill pool from the
    prompt tokens/s over one replica's prefill throughput, the decode pool from the knee, TPOT at the operating
    batch (below the knee), TTFT = wait + prefill + 4.5 steps (the 134,217,728 B hand-off, 2.68 ms at 50e9 B/s,
    fits one step), GPUs and $/hour from both pools."""
    d = bundle.disaggregated
    rho = 20 * 1024 / (1024 / d.prefill.prefill_s)
    assert d.prefill.utilization == pytest.approx(rho) and d.prefill.replicas == max(1, math.floor(rho) + 1)
    assert d.decode.replicas == math.ceil(20 * 256 * d.decode.step_s / d.decode.batch_per_replica - 1e-9)
    assert d.decode_operating_batch == pytest.approx(20 * 256 * d.tpot_s / d.decode.replicas, rel=1e-4)
    assert d.tpot_s <= d.decode.step_s <= 0.05
    assert d.kv_network.time_s == pytest.approx(134_217_728 / 50e9) and d.kv_network.time_s <= d.tpot_s
    assert d.ttft_s == pytest.approx(d.prefill.queue_wait_s + d.prefill.prefill_s + 4.5 * d.tpot_s)
    dis, col = d.disaggregated, d.colocated
    assert dis.gpus == d.prefill.replicas + d.decode.replicas
    assert dis.usd_per_hour == pytest.approx(dis.gpus * H200.price_usd_per_hour)
    assert d.verdict == ("disaggregated wins" if dis.usd_per_hour < col.usd_per_hour else "disaggregated loses")


@settings(max_examples=60, deadline=None)
@given(transfer=st.floats(0, 0.5), step=st.floats(1e-4, 0.2))
def test_decode_side_bounds(transfer, step):
    """At least the transfer plus 3.5 steps, at most one step more (the completion is polled once a step)."""
    side = decode_side_s(transfer, step)
    assert transfer + 3.5 * step - 1e-12 <= side <= transfer + (DECODE_SIDE_STEPS + 1) * step + 1e-9
    assert side >= 4.5 * step - 1e-12


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.1, 200), out=st.integers(1, 2048), n=st.integers(1, 8), a=st.floats(1e-3, 0.05),
       k=st.floats(0, 1e-3), cap=st.integers(1, 1024))
@example(rate=33.0, out=763, n=3, a=0.001, k=0.0001050383046329624, cap=187)  # the iteration left 8e-4 (slope 0.88)
def test_operating_batch_is_a_fixed_point_within_the_cap(rate, out, n, a, k, cap):
    step = lambda b: a + k * b
    b, s = operating_batch(rate, out, n, step, cap)
    assert 1.0 <= b <= cap and s == pytest.approx(step(b))
    target = rate * out * s / n
    assert b == pytest.approx(min(cap, max(1.0, target)), rel=1e-4, abs=1e-4)


def test_kv_transfer_is_whole_blocks():
    """vLLM reads whole blocks: 1,000 prompt tokens in 16-token blocks are 63 blocks = 1,008 tokens × 131,072 B."""
    from planner.memory import kv_bytes_per_request

    b = kv_bytes_per_request(catalog.model("llama-3.1-8b"), "bf16", 1000, 16).total_bytes
    assert b == 1008 * 131_072
    assert KvTransfer(b, 2, "nvlink", 450e9).time_s == pytest.approx(b / 900e9)
