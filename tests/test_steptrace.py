"""calibration/steptrace/sitecustomize.py patches vLLM's scheduler and executor when they are imported, in any
process started with the folder on PYTHONPATH: checked here on a stand-in `vllm` package (no vLLM in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from calibration.serve_bench import trace_env
from planner.compile_keys import shape_compile_s
from planner.io import catalog

REPO = Path(__file__).resolve().parents[1]

SCHEDULER = '''
from types import SimpleNamespace as NS
class Req:
    def __init__(self, done): self.num_computed_tokens = done
class Scheduler:
    def __init__(self):
        self.requests = {"a": Req(0), "b": Req(512), "c": Req(900)}
        self.running, self.waiting = ["b", "c"], ["a"]
    def schedule(self, throttle=False):
        return NS(total_num_scheduled_tokens=1025, scheduled_new_reqs=[NS(req_id="a")],
                  num_scheduled_tokens={"a": 700, "b": 324, "c": 1})
    def update_from_output(self, so, mo):
        return {"out": 1}
'''
EXECUTOR = '''
class UniProcExecutor:
    def execute_model(self, so, non_block=False): return "fut"
    def sample_tokens(self, g, non_block=False): return "fut2"
'''
DRIVER = '''
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.executor.uniproc_executor import UniProcExecutor
s, x = Scheduler(), UniProcExecutor()
for _ in range(3):
    so = s.schedule()
    assert x.execute_model(so, non_block=True) == "fut" and x.sample_tokens(None) == "fut2"
    assert s.update_from_output(so, None) == {"out": 1}
'''


def _fake_vllm(root: Path) -> None:
    for mod, text in (("v1/core/sched/scheduler.py", SCHEDULER), ("v1/executor/uniproc_executor.py", EXECUTOR)):
        path = root / "vllm" / mod
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_step_trace_records_each_schedule_with_its_shape_and_the_previous_iteration_times(tmp_path):
    _fake_vllm(tmp_path / "site")
    env = {**os.environ, **trace_env(tmp_path, True, 0.002)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(tmp_path / "site")])
    code = DRIVER + "import sys; print(sys.getswitchinterval())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.split()[-1]) == 0.002  # PLANNER_SWITCH_INTERVAL_S reached the process
    files = list(tmp_path.glob("steps.*.jsonl"))
    assert len(files) == 1  # one process, flushed at exit
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert len(recs) == 3
    first, second = recs[0], recs[1]
    # the shape: 1,025 tokens = a new 700-token prompt + a 324-token chunk at 512 done + one decode
    assert (first["tok"], first["new"], first["dec"], first["chunks"], first["ctx"]) == (1025, 1, 1, [700, 324],
                                                                                          [0, 512])
    assert first["dctx"] == 900  # the one decoding request ("c") has 900 tokens computed
    assert (first["run"], first["wait"]) == (2, 1)
    assert "x" not in first and {"x", "y", "u0", "u1"} <= set(second)  # times of the iteration before
    assert first["t0"] <= first["t1"] <= second["u0"] <= second["u1"] <= second["t0"]


def test_trace_env_is_empty_unless_asked_and_puts_the_folder_first(tmp_path):
    assert trace_env(tmp_path, False, 0.0) == {}
    env = trace_env(tmp_path, True, 0.0)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO / "calibration" / "steptrace")
    assert env["PLANNER_STEP_TRACE"] == str(tmp_path.resolve() / "steps") and "PLANNER_SWITCH_INTERVAL_S" not in env


# ------------------------------------------------------------ the traced floors (calibration/trace_points.py)

TRACES = REPO / "calibration/data/h200-2026-12-02-serve-steps"


def test_launch_floor_is_the_eager_calls_less_the_graph_calls():
    """Llama-3.1-8B served (chat 10 + 24 req/s): 385 eager steps' execute_model calls, median 25.67 ms; 3,717 graph
    steps', 1.70 ms: floor 23.97 ms; its 108 steps of 512-1,024 tokens ran at a median period of 30.4 ms."""
    from calibration.trace_points import launch_floor, range_period_s

    f = launch_floor(TRACES / "c/serve-llama-trace", "llama-3.1-8b")
    assert (f.eager_steps, f.graph_steps) == (385, 3717)
    assert f.eager_call_s == pytest.approx(0.02567, abs=1e-5) and f.graph_call_s == pytest.approx(0.00170, abs=1e-5)
    assert f.seconds == pytest.approx(f.eager_call_s - f.graph_call_s, rel=1e-12)
    period, n = range_period_s(TRACES / "c/serve-llama-trace", "llama-3.1-8b", 512, 1024)
    assert n == 108 and period == pytest.approx(0.0304, abs=1e-4)


def test_served_terms_per_layer_and_per_moe_layer_and_their_held_out_check():
    """dense: 23.97 ms / 32 layers = 0.749 ms per layer; MoE (Qwen3-30B-A3B, 48 layers, all MoE): (87.77 ms −
    48 × 0.749) / 48 = 1.079 ms per MoE layer on top, which the fp8 variant keeps (HELD_FROM_BF16) with its extra
    0.515 ms (calibration/data/h200-2026-12-03-fp8-moe-launch); the MoE kernel
    with a traced floor loses its in-process additive eager cost.  The committed profile's MoE part is the median of
    six Qwen3-30B-A3B hosts (calibration.refit.FUSED_FLOOR_FIT: 1.079, 0.474, 0.909, 0.899, 0.456, 0.761 ms ->
    0.830 ms).  Held out: Qwen2.5-7B (28 layers) predicted 21.0 ms, traced 20.8 ms (+0.9 %); Mixtral-8x7B (32 MoE
    layers) predicted 58.5 ms with b/'s alone, 50.5 ms with the median, traced 49.4 ms (f/: +2.2 %) and 62.8 ms on
    another host (p/: -19.5 %)."""
    from calibration.serve_floor import served_terms
    from calibration.trace_points import launch_floor

    llama, qwen3 = TRACES / "c/serve-llama-trace", TRACES / "b/serve-qwen3-30b-a3b-trace"
    floors = [launch_floor(llama, "llama-3.1-8b"), launch_floor(qwen3, "qwen3-30b-a3b")]
    base = catalog.profile_for("h200-sxm", "0.26.0")
    base = base.model_copy(update={"eager_layer_launch_s": 0.0, "moe": base.moe.model_copy(update={
        "eager_layer_launch_s": 0.0, "eager_layer_overhead_s": 0.002})})
    prof = served_terms(base, floors, log=lambda _: None)
    dense, moe = prof.eager_layer_launch_s, prof.moe.eager_layer_launch_s
    assert dense == pytest.approx(floors[0].seconds / 32, rel=1e-12) == pytest.approx(0.000749, rel=1e-3)
    assert moe == pytest.approx((floors[1].seconds - 48 * dense) / 48, rel=1e-12) == pytest.approx(0.001079, rel=1e-3)
    fp8 = prof.moe_variants["fp8"]
    assert prof.moe.eager_layer_overhead_s == 0.0
    assert fp8.eager_layer_launch_s == pytest.approx(moe + fp8.eager_layer_launch_extra_s, rel=1e-12)
    assert prof.moe_variants["mxfp4"] == base.moe_variants["mxfp4"]  # no trace of that kernel: as fitted
    only_dense = served_terms(base, floors[:1], log=lambda _: None)
    assert only_dense.eager_layer_launch_s == dense and only_dense.moe == base.moe
    assert served_terms(base, [], log=lambda _: None) == base
    qwen = launch_floor(TRACES / "e/serve-qwen2.5-7b-trace", "qwen2.5-7b")
    mixtral = launch_floor(TRACES / "f/serve-mixtral-8x7b-trace", "mixtral-8x7b")
    assert abs(28 * dense / qwen.seconds - 1) < 0.02
    assert 0.15 < 32 * (dense + moe) / mixtral.seconds - 1 < 0.22
    from calibration.refit import DATA, FUSED_FLOOR_FIT

    hosts = [launch_floor(DATA / f, m) for f, m in FUSED_FLOOR_FIT]
    assert hosts[0] == floors[1] and len(hosts) == 6
    median = served_terms(base, floors[:1] + hosts, log=lambda _: None).moe.eager_layer_launch_s
    assert median == pytest.approx(0.000830, rel=1e-3)  # (0.761 + 0.899) / 2
    assert 0.0 < 32 * (dense + median) / mixtral.seconds - 1 < 0.03
    committed = catalog.profile_for("h200-sxm", "0.26.0")  # the committed profile carries them
    assert committed.eager_layer_launch_s == pytest.approx(dense, rel=1e-9)
    assert committed.moe.eager_layer_launch_s == pytest.approx(median, rel=1e-9)
    assert committed.shape_corrections == []


MXFP4 = REPO / "calibration/data/h200-2026-12-02-serve-mxfp4"
DEEP = REPO / "calibration/data/h200-2026-12-03-deep"


def test_the_mxfp4_engine_stalls_above_the_graphs_and_not_inside_them():
    """gpt-oss-20b served at 8,192 tokens per step (h/): 13-15 execute_model calls > 0.3 s in every run, the last
    after 1,400 requests as many as in the first; at 1,024 (i/: every step inside the CUDA graphs) none in 10,369
    steps.  The traced dense and bf16-MoE engines stall only in their first traffic (Qwen3: 4 in 'warm', then 0)."""
    from calibration.trace_points import stalls

    h = stalls(MXFP4 / "h/serve-gpt-oss-20b-trace")
    assert [h[r]["stalls"] for r in ("warm", "chat10", "chat30", "chat30b")] == [13, 15, 15, 15]
    assert h["chat30b"]["stall_s"] == pytest.approx(15.28, abs=0.01) and h["chat30b"]["eager_steps"] == 83
    i = stalls(MXFP4 / "i/serve-gpt-oss-20b-mnbt1024")
    assert sum(v["steps"] for v in i.values()) == 1715 + 5189 + 3465
    assert all(v["stalls"] == 0 and v["eager_steps"] == 0 for v in i.values())
    q = stalls(TRACES / "b/serve-qwen3-30b-a3b-trace")
    assert q["warm"]["stalls"] == 4 and q["chat20"]["stalls"] == q["chat34"]["stalls"] == 0


def test_piecewise_launch_grows_with_the_layers():
    """A prompt-carrying step inside the graphs minus a decode-only step: Llama-3.1-8B 9.11 − 1.69 = 7.42 ms (32
    layers); Qwen2.5-7B 6.70 (28), Mixtral-8x7B 7.42 (32), gpt-oss-20b (i/) 5.66 ms (24); on 2026-12-03 Qwen2.5-32B
    8.33 ms (64 layers) on a host whose eager floor per layer was 0.835x Llama's, and Llama-3.1-70B's 80 layers (a
    quarter of its FFN width) 18.26 ms on one 0.934x as fast.  At the Llama host's speed 7.42 / 9.98 / 19.56 ms: the
    80-layer engine pays 2.6x the 32-layer one (2.5x the layers), the 64-layer one less than its layers say."""
    from calibration.trace_points import launch_floor, piecewise_launch_s

    llama_c = TRACES / "c/serve-llama-trace"
    llama, n_mixed, n_dec = piecewise_launch_s(llama_c, "llama-3.1-8b")
    assert llama == pytest.approx(0.00742, rel=0.01) and (n_mixed, n_dec) == (57, 3660)
    for folder, model, ms in (("e/serve-qwen2.5-7b-trace", "qwen2.5-7b", 6.70), ("f/serve-mixtral-8x7b-trace",
                                                                                "mixtral-8x7b", 7.42)):
        assert piecewise_launch_s(TRACES / folder, model)[0] == pytest.approx(ms * 1e-3, rel=0.01)
    oss = piecewise_launch_s(MXFP4 / "i/serve-gpt-oss-20b-mnbt1024", "gpt-oss-20b")[0]
    assert oss == pytest.approx(0.00566, rel=0.01)
    per_layer = launch_floor(llama_c, "llama-3.1-8b").seconds / 32
    at_llama_speed = {}
    for folder, model, layers, ms, n in (("t/serve-qwen2.5-32b-steps", "qwen2.5-32b", 64, 8.33, 199),
                                         ("u/serve-llama-3.1-70b-i7168-steps", "llama-3.1-70b-i7168", 80, 18.26, 136)):
        call, n_mixed, _ = piecewise_launch_s(DEEP / folder, model)
        assert call == pytest.approx(ms * 1e-3, rel=0.01) and n_mixed == n
        at_llama_speed[layers] = call * per_layer / (launch_floor(DEEP / folder, model).seconds / layers)
    assert at_llama_speed[64] == pytest.approx(0.00998, rel=0.01)
    assert at_llama_speed[80] == pytest.approx(0.01956, rel=0.01)
    assert at_llama_speed[80] / llama > 80 / 32 > at_llama_speed[64] / llama


def test_a_trace_without_eager_or_graph_steps_is_refused(tmp_path):
    from calibration.trace_points import launch_floor

    (tmp_path / "serve_bench.jsonl").write_text(json.dumps({"type": "deploy", "gpu": "h200-sxm", "argv": [
        "vllm", "serve", "m", "--max-num-batched-tokens", "8192", "--max-num-seqs", "1024"]}) + "\n")
    with pytest.raises(ValueError, match="no traced eager or graph steps"):
        launch_floor(tmp_path, "llama-3.1-8b")


def test_each_new_32_token_step_size_of_the_mxfp4_engine_compiles_once():
    """Every eager step of the traced gpt-oss engines whose compile key (T // 32, T % 16 == 0) no earlier step had
    stalled, and no other did: gpt-oss-120b (g/) 21 new keys, all stalled, 116 steps of seen keys, none stalled;
    gpt-oss-20b (h/) 58 and 230.  Median stall over the seen keys' eager
    call: 1.956 s (120b: the profile's 1.956 / 36 MoE layers = 54.3 ms per layer), 0.911 s (20b, held out: the
    profile predicts 24 × 54.3 = 1.30 s, +43 %)."""
    from calibration.refit import SHAPE_COMPILE_FIT
    from calibration.trace_points import shape_compiles

    g = shape_compiles(MXFP4 / "g/serve-gpt-oss-120b-trace", "gpt-oss-120b")
    h = shape_compiles(MXFP4 / "h/serve-gpt-oss-20b-trace", "gpt-oss-20b")
    assert (g.new_keys, g.compiled_steps, g.stalled_compiled, g.quiet_new) == (21, 116, 0, 0)
    assert (h.new_keys, h.compiled_steps, h.stalled_compiled, h.quiet_new) == (58, 230, 0, 0)
    assert g.median_s == pytest.approx(1.956, abs=0.001) and h.median_s == pytest.approx(0.911, abs=0.001)
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    assert SHAPE_COMPILE_FIT[1] == "gpt-oss-120b"
    # the law grows with the experts (calibration.refit.MXFP4_COMPILE_VARIANTS: offset 96.0 experts), scaled on g/:
    # 1.956 s / (96.0 + 128) = 8.73 ms an expert; gpt-oss-20b (32 experts) 8.73 ms x 128.0 = 1.118 s against its own
    # 0.911 s here (+23 %; the per-layer law gave 1.956 x 24 / 36 = 1.304 s, +43 %)
    mx = prof.moe_variants["mxfp4"]
    assert mx.shape_compile_layer_s == 0.0 and mx.shape_compile_offset_experts == pytest.approx(96.04, abs=0.01)
    assert mx.shape_compile_expert_s == pytest.approx(g.median_s / (mx.shape_compile_offset_experts + 128), rel=1e-9)
    assert shape_compile_s(catalog.model("gpt-oss-20b"), "mxfp4", prof) == pytest.approx(1.118, abs=0.001)
    with pytest.raises(ValueError, match="no traced eager steps"):  # i/: every step inside the CUDA graphs
        shape_compiles(MXFP4 / "i/serve-gpt-oss-20b-mnbt1024", "gpt-oss-20b")


def test_a_size_sweep_sends_one_prompt_of_each_size(tmp_path):
    """serve_bench --size-sweep: one request at a time of from, from + step, ... prompt tokens of random words
    (their word count is their token count under the synthetic tokenizer), each recorded with its latency (None
    and the server's reason where it refused one)."""
    from calibration.serve_bench import size_sweep
    from planner.io.jsonl import read_jsonl

    class Stub:
        def __init__(self):
            self.bodies = []

        def post(self, path, body):
            self.bodies.append(body)
            n = len(body["prompt"].split())
            if n == 1105:
                raise RuntimeError("HTTP 400 from /v1/completions: refused")
            return {"usage": {"prompt_tokens": n}}

    stub, rec_path = Stub(), tmp_path / "serve_bench.jsonl"
    rec = size_sweep(stub, "gpt-oss-20b", 201_088, {"name": "sweep", "from": 1041.0, "step": 32.0, "n": 4.0},
                     rec_path, 0)
    assert [len(b["prompt"].split()) for b in stub.bodies] == rec["prompt_tokens"] == [1041, 1073, 1105, 1137]
    assert all(b["max_tokens"] == 1 and b["ignore_eos"] for b in stub.bodies)
    assert rec["latency_s"][2] is None and len(rec["errors"]) == 1 and "1105" in rec["errors"][0]
    words = [w for b in stub.bodies for w in b["prompt"].split()]
    assert all(w.startswith("w") and int(w[1:]) >= 3 for w in words) and len(set(words)) > 4000  # no cache hits
    assert read_jsonl(rec_path)[0]["type"] == "size_sweep"


def test_the_mxfp4_compile_grows_with_the_experts_not_the_layers():
    """In-process cold samples (a new prompt size's first call less the warm median) on one host, 2026-12-03:
    gpt-oss-120b's 18-layer variant (128 experts) 1.743 and 1.764 s, its 32-expert variant (36 layers) 0.957 and
    1.048 s; gpt-oss-120b itself (36 layers, 128 experts, 2026-12-01) median 1.793 s.  Halving the layers kept the
    stall, quartering the experts took 43 % off: s = k (offset + E), offset (1.002 x 128 - 1.754 x 32) / (1.754 -
    1.002) = 96.0 experts."""
    from calibration.family_fit import DATA as FDATA
    from calibration.family_fit import cold_stalls
    from calibration.refit import MXFP4_COMPILE_VARIANTS
    from calibration.serve_floor import expert_compile_offset

    name, (l18, e32) = MXFP4_COMPILE_VARIANTS
    got = {m: [round(x, 3) for x in cold_stalls(FDATA / name, m)] for m in (l18, e32)}
    assert got == {l18: [1.743, 1.764], e32: [0.957, 1.048]}
    assert np.median(cold_stalls(FDATA / "h200-2026-12-01/mxfp4/h200-families.jsonl", "gpt-oss-120b")) == pytest.approx(
        1.793, abs=0.001)
    assert expert_compile_offset([(1.7536, 128), (1.0022, 32)]) == pytest.approx(96.04, abs=0.01)
    with pytest.raises(ValueError, match="different experts"):
        expert_compile_offset([(1.0, 32), (1.2, 32)])


def test_a_hosts_own_mxfp4_trace_scales_the_expert_law():
    """What `planner calibrate +serve` fits on a host serving gpt-oss-20b (h/, median stall 0.911 s): the profile's
    offset kept, 0.911 / (96.0 + 32) = 7.12 ms an expert; its gpt-oss-120b then 7.12 ms x 224.0 = 1.59 s."""
    from calibration.serve_floor import served_terms
    from calibration.trace_points import shape_compiles

    prof = catalog.profile_for("h200-sxm", "0.26.0")
    h = shape_compiles(MXFP4 / "h/serve-gpt-oss-20b-trace", "gpt-oss-20b")
    mx = served_terms(prof, [], [h], log=lambda _: None).moe_variants["mxfp4"]
    offset = prof.moe_variants["mxfp4"].shape_compile_offset_experts
    assert mx.shape_compile_offset_experts == offset and mx.shape_compile_layer_s == 0.0
    assert mx.shape_compile_expert_s == pytest.approx(h.median_s / (offset + 32), rel=1e-12)
    assert 1e3 * mx.shape_compile_expert_s == pytest.approx(7.12, abs=0.01)


def test_after_a_sweep_of_one_size_per_bucket_only_the_multiples_of_16_still_compile():
    """j/: gpt-oss-20b at 8,192 tokens per step after one request of each of 1,041, 1,073, ..., 8,177 tokens (224
    sweep steps, every one a new key: 224 stalls, latency median 0.96 s), then chat at 30 req/s: 7 of its 150 eager
    steps stalled, each a multiple of 16 (2,304, 2,448, 1,328, ...: the key's other half, which the sweep's odd sizes
    did not compile), none of the rest.  Replayed with the sweep's keys compiled, the simulator predicts 5 (7 before
    the family stages were fitted with the served dense launch, which moved the MXFP4 stage's GEMM terms; 5 before
    the per-layer step term, 6 before the piecewise prompt steps' launch: the steps it forms, and so their sizes, move
    with every step's time; 6 since the MXFP4 compile grows with the experts: 1.12 s a stall here, 1.30 s before)."""
    from calibration.serving_points import replay_folder
    from calibration.trace_points import shape_compiles, stalls

    j = MXFP4 / "j/serve-gpt-oss-20b-sweep"
    c = shape_compiles(j, "gpt-oss-20b")
    assert (c.new_keys, c.compiled_steps, c.stalled_compiled, c.quiet_new) == (231, 143, 0, 0)
    assert c.median_s == pytest.approx(0.878, abs=0.001)
    assert stalls(j)["chat30"]["stalls"] == 7 and stalls(j)["chat30"]["eager_steps"] == 150
    from planner.io.jsonl import read_jsonl

    sweep = next(r for r in read_jsonl(j / "serve_bench.jsonl") if r["type"] == "size_sweep")
    assert len(sweep["prompt_tokens"]) == 224 and not sweep["errors"] and min(sweep["latency_s"]) > 0.7
    (chat30,) = replay_folder(j, "gpt-oss-20b", catalog.profile_for("h200-sxm", "0.26.0"))
    assert chat30.predicted["compile_stalls"] == 6


def test_the_plans_full_warm_up_leaves_no_stall():
    """k/: gpt-oss-20b at 4,096 tokens per step after both halves of every compile key above the graphs (prompts of
    32k + 17, then 32k + 16 tokens, k = 32..127: 192 requests, the warm-up cold_start_note asks for): chat at 30 and
    10 req/s then ran 200 and 98 eager steps without a stall; the simulator, with the sweeps' keys compiled, predicts
    none.  Its served eager launch is the profile's MXFP4 floor, fitted on gpt-oss-120b's trace (g/): the floor less
    36 dense layers' launch, per MoE layer, in place of the in-process stage's additive eager cost."""
    from calibration.refit import SHAPE_COMPILE_FIT
    from calibration.serving_points import replay_folder
    from calibration.trace_points import launch_floor, shape_compiles, stalls
    from planner.compile_keys import mxfp4_key as compile_key
    from planner.compile_keys import warm_up_sizes
    from planner.io.jsonl import read_jsonl
    from planner.specs import Deployment

    k = MXFP4 / "k/serve-gpt-oss-20b-warmed"
    sweeps = [r for r in read_jsonl(k / "serve_bench.jsonl") if r["type"] == "size_sweep"]
    swept = {compile_key(t) for r in sweeps for t in r["prompt_tokens"]}
    dep = Deployment.for_gpu(catalog.gpu("h200-sxm"), weight_dtype="mxfp4", max_num_batched_tokens=4096)
    assert len(swept) == 192 == len(warm_up_sizes(dep, catalog.model("gpt-oss-20b")))
    st = stalls(k)
    assert (st["chat30"]["stalls"], st["chat10"]["stalls"]) == (0, 0)
    assert (st["chat30"]["eager_steps"], st["chat10"]["eager_steps"]) == (200, 98)
    c = shape_compiles(k, "gpt-oss-20b")
    assert c.stalled_compiled == 0 and c.new_keys == 192 and c.quiet_new == 1  # one sweep key came out fast
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    assert [r.predicted["compile_stalls"] for r in replay_folder(k, "gpt-oss-20b", prof)] == [0, 0]
    floor = launch_floor(MXFP4 / SHAPE_COMPILE_FIT[0].split("/", 1)[1], "gpt-oss-120b").seconds
    mx = prof.moe_variants["mxfp4"]
    assert mx.eager_layer_launch_s == pytest.approx((floor - 36 * prof.eager_layer_launch_s) / 36, rel=1e-9)
    assert mx.eager_layer_overhead_s == 0.0


CALIBRATE_SERVE = REPO / "calibration/data/h200-2026-12-02-calibrate-serve"


def test_calibrate_serve_jobs_traced_another_hosts_floor_and_the_compile_keys_held():
    """``planner calibrate`` with ``+serve`` on another lent H200 (COMMAND.md): Llama-3.1-8B's eager calls 18.09 ms,
    graph steps 1.24 ms: floor 16.86 ms, 0.527 ms per layer where the committed profile's host gave 0.749 (-30 %);
    Qwen3-30B-A3B's floor 79.56 ms (committed 87.77): (79.56 − 48 × 0.527) / 48 = 1.131 ms per MoE layer on top.
    Its cold engine compiled the 4 keys planner.compile_keys predicts (every new key stalled, median 1.34 s; none of
    142 eager steps with a seen key did).  The floor is the host's: this is what the +serve job measures."""
    from calibration.serve_floor import traced_engines, with_traces
    from calibration.trace_points import launch_floor, shape_compiles

    llama = launch_floor(CALIBRATE_SERVE / "llama/serve-llama-3.1-8b-trace", "llama-3.1-8b")
    qwen3 = launch_floor(CALIBRATE_SERVE / "qwen3/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b")
    assert (llama.eager_steps, llama.graph_steps, qwen3.eager_steps, qwen3.graph_steps) == (155, 2916, 130, 727)
    assert llama.seconds == pytest.approx(0.01686, abs=1e-5) and qwen3.seconds == pytest.approx(0.07956, abs=1e-5)
    c = shape_compiles(CALIBRATE_SERVE / "qwen3/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b")
    assert (c.new_keys, c.compiled_steps, c.stalled_compiled, c.quiet_new) == (4, 142, 0, 0)
    assert c.median_s == pytest.approx(1.342, abs=1e-3)
    traces = traced_engines(CALIBRATE_SERVE / "llama") + traced_engines(CALIBRATE_SERVE / "qwen3")
    committed = catalog.profile_for("h200-sxm", "0.26.0")
    host = with_traces(committed, traces, log=lambda _: None)
    assert host.eager_layer_launch_s == pytest.approx(llama.seconds / 32, rel=1e-12)
    assert host.moe.eager_layer_launch_s == pytest.approx((qwen3.seconds - 48 * llama.seconds / 32) / 48, rel=1e-12)
    assert host.moe.shape_compile_layer_s == pytest.approx(c.median_s / 48, rel=1e-12)
    assert host.eager_layer_launch_s / committed.eager_layer_launch_s - 1 == pytest.approx(-0.297, abs=1e-3)
    # its own floor fitted, what is left of the launch spread a plan shows is the run-to-run one (0.91-1.09x, not the
    # hosts' and runs' 0.72-1.20x of the committed profile)
    assert host.launch_call_spread == committed.launch_run_spread != committed.launch_call_spread


def test_a_third_host_agrees_with_the_second_not_with_the_profiles():
    """The same two +serve jobs on a third lent H200 (llama2/, qwen3b/): Llama-3.1-8B floor 17.30 ms (second host
    16.86, the committed profile's 23.97), Qwen3-30B-A3B 79.11 ms (79.56; 87.77); Qwen3's cold engine again compiled
    the 4 predicted keys (median 1.52 s) and no seen key stalled in 144 eager steps."""
    from calibration.trace_points import launch_floor, shape_compiles

    llama = launch_floor(CALIBRATE_SERVE / "llama2/serve-llama-3.1-8b-trace", "llama-3.1-8b")
    qwen3 = launch_floor(CALIBRATE_SERVE / "qwen3b/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b")
    assert llama.seconds == pytest.approx(0.01730, abs=1e-5) and qwen3.seconds == pytest.approx(0.07911, abs=1e-5)
    c = shape_compiles(CALIBRATE_SERVE / "qwen3b/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b")
    assert (c.new_keys, c.compiled_steps, c.stalled_compiled, c.quiet_new) == (4, 144, 0, 0)
    assert c.median_s == pytest.approx(1.515, abs=1e-3)


def test_the_serve_job_fits_the_hosts_http_frontend_overhead_on_its_dense_chat_run():
    """The OpenAI server's per-request overhead is what the first token takes beyond the simulated engine, fitted on
    the engine as finally simulated (its served launch floors in): on the committed profile's own run (Llama
    bench-r12 of 2026-11-30, 49.9 ms measured) the engine alone already reaches 57.8 ms, so the fit is 0, never below
    (it was 6.0 ms when fitted before the served floors, which put both calibrate-serve hosts' Llama chat TTFT p50 at
    +17..+18 %).  A calibrate-serve host's own chat run (51.3 ms measured, 57.7 ms simulated with its floor and its
    own time per prompt token, 2.36 us) fits 0 too; TTFT p50 +13.5 % with the committed profile, +12.4 % with the
    host's (+9.3 / +6.2 % before the OpenAI server's time per prompt token, http_frontend_token_s; 54.4 and 53.5 ms,
    +6.9 / +4.2 %, before its output handling, stream_output_overhead_s, which also puts the first token later; +7.4 /
    +4.6 % before the per-layer step term, +5.7 / +4.1 % before the piecewise prompt steps' launch); the MoE trace is
    not used for it."""
    from calibration.serve_floor import traced_engines, with_traces
    from calibration.serving_points import fit_http_frontend, replay_folder

    committed = catalog.profile_for("h200-sxm", "0.26.0")
    r12 = REPO / "calibration/data/h200x2-2026-11-30/serve-llama-3.1-8b"
    assert committed.http_frontend_overhead_s == 0.0 == fit_http_frontend(r12, "llama-3.1-8b", committed, "bench-r12")
    own = next(c for c in replay_folder(r12, "llama-3.1-8b", committed) if c.name == "bench-r12")
    assert own.measured["ttft_p50_s"] == pytest.approx(0.0499, abs=1e-4)
    assert own.predicted["ttft_p50_s"] == pytest.approx(0.0578, abs=2e-4)
    folder = CALIBRATE_SERVE / "llama/serve-llama-3.1-8b-trace"
    traces = traced_engines(CALIBRATE_SERVE / "llama") + traced_engines(CALIBRATE_SERVE / "qwen3")
    host = with_traces(committed, traces, log=lambda _: None)
    bare = next(c for c in replay_folder(folder, "llama-3.1-8b", host, frontend_overhead_s=0.0)
                if c.name == "bench-chat")
    assert bare.measured["ttft_p50_s"] == pytest.approx(0.0513, abs=1e-4)
    assert bare.predicted["ttft_p50_s"] == pytest.approx(0.0577, abs=2e-4)
    assert host.http_frontend_overhead_s == 0.0
    before, after = (next(c for c in replay_folder(folder, "llama-3.1-8b", p) if c.name == "bench-chat")
                     for p in (committed, host))
    assert before.error_pct("ttft_p50_s") == pytest.approx(13.5, abs=0.3)
    assert after.error_pct("ttft_p50_s") == pytest.approx(12.4, abs=0.3)
    assert host.http_frontend_token_s == pytest.approx(2.36e-6, abs=0.01e-6)  # this host's two chat runs


def test_requests_waited_before_the_engine_not_in_its_queue_at_high_streaming_rates():
    """The fresh host's traces (calibration/data/h200-2026-12-02-timeline): from the client's send to the step that
    scheduled the request, first-come first-served on both sides.  Llama-3.1-8B at 24 req/s (2,783 output tokens/s)
    p90 40.1 ms, at 36 req/s (3,707 tokens/s) 149.5 ms; Moonlight at 20 req/s 88.0 ms, at 30 req/s (3,615 tokens/s)
    275.5 ms — while no decode-only step found a request waiting in the engine's own queue (data README)."""
    from calibration.trace_points import client_lags

    data = REPO / "calibration/data/h200-2026-12-02-timeline"
    llama = {c.run: c for c in client_lags(data / "c/serve-llama-trace")}
    moon = {c.run: c for c in client_lags(data / "o/serve-moonlight-16b-a3b-trace2")}
    assert len(llama["chat36"].lags_s) == 432 and len(moon["chat30"].lags_s) == 600
    assert 1e3 * llama["chat24"].pct_s(90) == pytest.approx(40.1, abs=0.1)
    assert 1e3 * llama["chat36"].pct_s(90) == pytest.approx(149.5, abs=0.1)
    assert 1e3 * moon["chat20"].pct_s(90) == pytest.approx(88.0, abs=0.1)
    assert 1e3 * moon["chat30"].pct_s(50) == pytest.approx(66.5, abs=0.1)
    assert 1e3 * moon["chat30"].pct_s(90) == pytest.approx(275.5, abs=0.1)
    for c in [*llama.values(), *moon.values()]:
        assert c.waiting_decode_steps == 0 and c.decode_steps > 200, c.run


def test_a_second_api_server_takes_little_of_the_wait_before_the_scheduler():
    """calibration/data/h200-2026-12-02-api-servers (COMMAND.md): Llama-3.1-8B chat 24 / 36 / 40 req/s with one and with
    two OpenAI server processes: the client -> scheduled p90 66.2 / 156.0 / 387.5 ms against 48.7 / 138.4 / 386.3 ms."""
    from calibration.trace_points import client_lags

    data = REPO / "calibration/data/h200-2026-12-02-api-servers"
    one = {c.run: c for c in client_lags(data / "x1/serve-llama-api1")}
    two = {c.run: c for c in client_lags(data / "x2/serve-llama-api2")}
    for run, p90_one, p90_two in (("chat24", 66.2, 48.7), ("chat36", 156.0, 138.4), ("chat40", 387.5, 386.3)):
        assert 1e3 * one[run].pct_s(90) == pytest.approx(p90_one, abs=0.1)
        assert 1e3 * two[run].pct_s(90) == pytest.approx(p90_two, abs=0.1)
        assert one[run].waiting_decode_steps == two[run].waiting_decode_steps == 0
