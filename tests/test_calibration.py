"""Calibration on recorded REAL measurements (vLLM 0.26.0 on an NVIDIA H200, committed under
calibration/data/), and the probe plumbing exercised with a stand-in vllm module (no numbers from the
stand-in are ever used as measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibration.fit import measurement_rows
from calibration.probes import plan_points
from calibration.records import append_record, done_keys, parse_engine_log, read_records
from calibration.run import gpu_matches, remaining_points
from planner.io import catalog
from planner.cli.app import app
from planner.validate import choose_profile, read_measurements, validate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "calibration" / "data"
FIT_RAW = DATA / "h200-fit.jsonl"
VAL_RAW = DATA / "h200-validate.jsonl"
RAW_FILES = [DATA / n for n in ("h200-fit.jsonl", "h200-fit2.jsonl", "h200-fit3.jsonl", "h200-validate.jsonl")]
VAL_CSV = DATA / "h200-validation.csv"
GIB = 2**30


# ------------------------------------------------------------------------------ vLLM's start-up log


def test_parse_engine_log_on_the_recorded_h200_log():
    """The real log of the Mistral-7B fit engine: 128.62 GiB requested (0.92 × 139.8 GiB), 13.51 GiB
    weights, 1.78 GiB peak activation, 0.22 GiB non-torch → 113.11 GiB pool = 926,560 tokens."""
    t = parse_engine_log((DATA / "h200-fit.mistral-7b-v0.3.auto.fit.log").read_text())
    assert t["kv_cache_tokens"] == 926_560
    assert t["weights_bytes"] == pytest.approx(13.51 * GIB)
    assert t["peak_activation_bytes"] == pytest.approx(1.78 * GIB)
    assert t["non_torch_bytes"] == pytest.approx(0.22 * GIB)
    assert t["requested_bytes"] == pytest.approx(128.62 * GIB)
    assert t["total_memory_bytes"] == pytest.approx(139.8 * GIB)
    # the pool is what is left: 128.62 − 13.51 − 1.78 − 0.22 = 113.11 GiB (no CUDA-graph term in 0.26's V2 runner)
    assert t["kv_available_bytes"] == pytest.approx((128.62 - 13.51 - 1.78 - 0.22) * GIB, rel=1e-4)
    # 113.11 GiB / 131,072 B ≈ 926,6xx tokens; the log rounds to 0.01 GiB (= 82 tokens of 131,072 B)
    assert int(t["kv_available_bytes"] // (131072 * 16)) * 16 == pytest.approx(926_560, abs=82)


def test_parse_engine_log_ignores_noise():
    assert parse_engine_log("nothing here\nGPU KV cache size: 1,024 tokens\n") == {"kv_cache_tokens": 1024}
    assert parse_engine_log("") == {}


# ------------------------------------------------------------------------------------- records


def test_records_survive_a_torn_last_line(tmp_path):
    p = tmp_path / "raw.jsonl"
    append_record(p, {"type": "probe", "model": "m", "metric": "prefill_s", "batch_size": 1, "prompt_tokens": 8,
                      "output_tokens": 1, "status": "ok", "measured": 0.01})
    with open(p, "a") as f:
        f.write('{"type": "probe", "model": "m", "met')  # killed mid-write
    recs = read_records(p)
    assert len(recs) == 1
    assert len(done_keys(recs)) == 1


def test_recorded_raw_files_are_complete():
    fit, val = read_records(FIT_RAW), read_records(VAL_RAW)
    env = next(r for r in fit if r["type"] == "env")
    assert env["device_name"] == "NVIDIA H200" and env["vllm_version"] == "0.26.0"
    probes = [r for r in fit + val if r["type"] == "probe"]
    assert probes and all(r["status"] == "ok" for r in probes)
    micro = next(r for r in fit if r["type"] == "microbench")
    # measured ceilings sit below the datasheet roofs (989 TFLOP/s bf16, 4.8 TB/s)
    assert 600e12 < micro["peak_flops_per_s"]["bf16"] < 989.4e12
    assert 3.5e12 < micro["hbm_bandwidth_bytes_per_s"] < 4.8e12


def test_plan_points_respects_capacity_and_roles():
    fit = plan_points(kv_capacity_tokens=900_000)
    val = plan_points(kv_capacity_tokens=900_000, role="validate")
    key = lambda p: (p["metric"], p["batch_size"], p["prompt_tokens"])
    assert not {key(p) for p in fit} & {key(p) for p in val}, "validation points must differ from fit points"
    small = plan_points(kv_capacity_tokens=20_000)
    assert all(p["batch_size"] * (p["prompt_tokens"] + p["output_tokens"]) <= 20_000 for p in small
               if p["metric"] == "decode_step_s")
    assert len(plan_points(quick=True)) < len(fit)


def test_remaining_points_for_resume():
    recs = read_records(VAL_RAW)
    assert remaining_points(recs, "llama-3.1-8b", "auto", "validate", quick=False) == 0
    assert remaining_points(recs, "qwen2.5-72b", "auto", "validate", quick=False) == -1


@pytest.mark.parametrize("spec_id,name,ok", [
    ("h200-sxm", "NVIDIA H200", True), ("h100-sxm", "NVIDIA H100 80GB HBM3", True),
    ("h100-pcie", "NVIDIA H100 80GB HBM3", False), ("h100-pcie", "NVIDIA H100 PCIe", True),
    ("a100-sxm-80gb", "NVIDIA A100-SXM4-80GB", True), ("l4", "NVIDIA H200", False),
])
def test_gpu_name_check(spec_id, name, ok):
    assert gpu_matches(spec_id, name) is ok


def test_probe_child_plumbing_with_a_stand_in_engine(tmp_path):
    """The child process writes an engine record and one record per point, records a failing point
    as failed and goes on, and --resume skips what is done.  (Stand-in vllm: timings are synthetic
    and discarded.)"""
    out = tmp_path / "raw.jsonl"
    args = {"out": str(out), "model": "mistral-7b-v0.3", "gpu": "h200-sxm", "role": "validate", "quick": True,
            "resume": False, "kv_cache_dtype": "auto", "time_budget_s": 60, "work_dir": str(tmp_path)}
    (tmp_path / "args.json").write_text(json.dumps(args))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "fake_vllm"), str(ROOT)]))
    run = lambda: subprocess.run([sys.executable, "-m", "calibration.probes", str(tmp_path / "args.json")],
                                 env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    r = run()
    assert r.returncode == 0, r.stderr
    recs = read_records(out)
    probes = [x for x in recs if x["type"] == "probe"]
    assert recs[0]["type"] == "engine" and recs[0]["num_gpu_blocks"] == 50_000
    assert len(probes) == len(plan_points(quick=True, role="validate", kv_capacity_tokens=800_000))
    failed = [x for x in probes if x["status"] == "failed"]
    assert failed and all("synthetic failure" in x["error"] for x in failed)  # the 12000-token prompts
    assert (tmp_path / "mistral-7b-v0.3" / "config.json").exists()
    args["resume"] = True
    (tmp_path / "args.json").write_text(json.dumps(args))
    assert run().returncode == 0
    again = [x for x in read_records(out) if x["type"] == "probe"]
    # resumed: only the failed points were tried again
    assert len(again) == len(probes) + len(failed)


# ------------------------------------------------------------------------------------------ fit


def test_fit_reproduces_its_training_points(fitted):
    """Each family is fitted on its own engines (calibration/refit.py) and reproduces them."""
    prof, _, _ = fitted
    assert set(prof.models_used) == {"mistral-7b-v0.3", "qwen2.5-32b", "llama-3.1-8b", "qwen3-30b-a3b",
                                     "gpt-oss-120b", "deepseek-v2-lite", "gemma-3-12b",  # + calibration.family_fit
                                     # the dense and fused-MoE fit models at other depths (h200-2026-12-03-layers)
                                     "mistral-7b-v0.3-l16", "mistral-7b-v0.3-l64", "qwen3-30b-a3b-l24"}
    for key in ("dense/decode", "dense/prefill_long", "kv-fp8/decode", "fp8/decode", "int4/decode", "moe/decode",
                "tp/decode", "tp/prefill_long"):
        r = prof.residuals[key]
        assert r.n >= 5, key
        # tp/prefill_long (5 points): 5.5 % at the converged optimum of the TP stage (objective 0.0430), where the
        # committed profile of 2026-11-29 stopped in a worse one (0.0464) that had 4.3 % here but 2.0 % (now
        # 1.1 %) on tp/decode; see tests/test_calibration_fit.py
        assert r.median_abs_error_pct <= (6.0 if key == "tp/prefill_long" else 5.0), key
        assert r.p90_abs_error_pct <= 12.0, key
    # prompts of <= 2,048 tokens: wall time is dominated by CPU-side launch/front-end cost that varied
    # by up to 60 % between identical engines (Mistral 128 tokens: 10.6, 17.0, 18.4 ms in three runs)
    assert prof.residuals["dense/prefill_short"].median_abs_error_pct <= 12.0
    assert prof.residuals["dense/kv_capacity"].median_abs_error_pct <= 0.5


def test_fit_memory_terms_are_vllms(fitted):
    prof, _, _ = fitted
    assert prof.device_memory_bytes == 150_109_880_320  # torch total_memory on the H200
    assert prof.non_torch_bytes == pytest.approx(0.22 * GIB)
    assert prof.weight_bytes_factor == pytest.approx(13.51 * GIB / 14_496_047_104, rel=1e-3)
    assert prof.cudagraph_bytes == 0.0


@pytest.mark.parametrize("key,decode_median,prefill_median", [
    ("dense/llama-3.1-8b/bf16", 3.0, 10.0), ("dense/qwen2.5-7b/bf16", 3.0, 7.0),
    ("kv-fp8/mistral-7b-v0.3/fp8", 3.0, 7.0), ("kv-fp8/llama-3.1-8b/fp8", 3.0, 7.0),
    ("fp8/qwen2.5-32b/bf16", 5.0, 8.0)])
def test_held_out_measurements(fitted, key, decode_median, prefill_median):
    """Never fitted on: Llama 3.1 8B (128K vocabulary), Qwen2.5 7B (28 layers, 4 KV heads, 152K
    vocabulary, FFN 18,944), Mistral and Llama with an fp8 KV cache (the fp8-KV family is fitted on one
    Mistral engine), Qwen2.5-32B with fp8 weights (the fp8 family is fitted on Llama-3.1-8B).  The bounds
    are what the model achieves (the benchmark reports them against the issue's targets): fp8 decode on
    the 32B was -16..-21 % at batch 24 and -28 % at 160 (median 12 %) until the dense linear kernel law
    took CUTLASS fp8's token-count configurations from the kernel timings (median now 3.0 %); its long
    prompts -7 % (the fp8 stage's compute share, refitted with the law: +2 %)."""
    prof, _, _ = fitted
    dec = prof.validation[f"{key}/decode"]
    assert dec.n >= 4 and dec.median_abs_error_pct <= decode_median
    pre = prof.validation[f"{key}/prefill_long"]
    assert pre.n >= 4 and pre.median_abs_error_pct <= prefill_median
    assert prof.validation[f"{key}/kv_capacity"].median_abs_error_pct <= 1.0
    assert prof.validation[f"{key}/weights"].median_abs_error_pct <= 1.0


def test_error_bands_come_from_held_out_points_where_there_are_some(fitted):
    prof, _, _ = fitted
    # held out: Llama-3.1-8B at 16, 32 and 64 layers and the 80-layer Llama-3.1-70B-i7168 (h200-2026-12-04-layers-val),
    # Qwen2.5-7B; their batch 128-256 decode steps are 8-17 % fast (p90 5.5 %)
    assert prof.error_bands["dense/decode"].basis.startswith(
        "held-out: llama-3.1-70b-i7168, llama-3.1-8b, llama-3.1-8b-l16, llama-3.1-8b-l64, qwen2.5-7b")
    assert prof.error_bands["dense/decode"].pct <= 6.0 and prof.error_bands["dense/decode"].median_pct <= 2.0
    assert prof.error_bands["int4/decode"].basis.startswith("fit residuals")  # no held-out int4 engine
    assert prof.step_overhead_spread.n >= 10 and prof.step_overhead_spread.p10 <= prof.step_overhead_spread.p90


def test_validation_csv_is_the_recorded_validation_runs(fitted):
    _, points, extra = fitted
    rows = measurement_rows([x for x in points if x.role != "fit" and x.model.id in catalog.models()] + extra)
    csv_rows = read_measurements(VAL_CSV)
    # 75 from the first H200 session + 36 held-out engines/runs of 2026-11-30 + 6 held-out Llama-3.1-8B mixed-step
    # cells of 2026-12-01 (batch 0/32/128 x chunk 768/2,048, calibration/data/h200-2026-12-01-moe-mixed) + 31 probes
    # of the two dense fp8 engines of 2026-12-03 (h200-2026-12-03-linear-kernel/lc: 2 prompts + 11 / 12 batches and
    # the KV pool and weights of each) + 19 of Llama-3.1-8B of 2026-12-04 (h200-2026-12-04-layers-val: 17 probes, its
    # KV pool and weights; its 16- and 64-layer variants and Llama-3.1-70B-i7168 are probe variants, not catalog
    # models, so `planner validate` does not read them) = 167
    assert len(csv_rows) == len(rows) == 75 + 36 + 6 + 31 + 19
    assert sorted(m.measured for m in csv_rows) == sorted(float(r["measured"]) for r in rows)


def test_planner_validate_on_the_recorded_h200_measurements():
    res = validate(read_measurements(VAL_CSV), choose_profile("auto"))
    s = res["summary"]
    assert s["kv_cache_tokens"]["median_abs_error_pct"] <= 2.0 and s["kv_cache_tokens"]["p90_abs_error_pct"] <= 2.0
    assert s["weights_bytes"]["median_abs_error_pct"] <= 1.0
    assert s["decode_step_s"]["median_abs_error_pct"] <= 5.0 and s["decode_step_s"]["p90_abs_error_pct"] <= 10.0
    assert s["prefill_s"]["median_abs_error_pct"] <= 7.0
    assert all(r["calibration_mode"] == "calibrated" for r in res["rows"])
    ideal = validate(read_measurements(VAL_CSV), choose_profile("none"))["summary"]
    # the spec-sheet roofline misses real vLLM by 30-70 %; the calibrated model by a few percent
    assert ideal["decode_step_s"]["median_abs_error_pct"] > 25.0
    assert ideal["prefill_s"]["median_abs_error_pct"] > 25.0


def test_cli_validate_json():
    r = CliRunner().invoke(app, ["validate", str(VAL_CSV), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"rows", "summary"}
    row = out["rows"][0]
    assert {"model", "gpu", "metric", "measured", "predicted", "error_pct"} <= set(row)
    assert set(out["summary"]["prefill_s"]) == {"n", "median_abs_error_pct", "p90_abs_error_pct",
                                                 "median_signed_error_pct"}


def test_cli_validate_bad_input(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("model,gpu,metric,measured,batch_size,prompt_tokens\nmistral-7b-v0.3,h200-sxm,prefill_s,-1,1,128\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert "measured" in r.output and "Traceback" not in r.output
    bad.write_text("model,gpu,metric,measured\nnope,h200-sxm,prefill_s,1\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and "unknown id 'nope'" in r.output


def test_cli_calibrate_without_gpu_is_a_clear_error():
    r = CliRunner().invoke(app, ["calibrate", "--gpu", "h200-sxm"])
    assert r.exit_code == 2
    assert "error:" in r.output and "Traceback" not in r.output


def test_transferred_profile_for_gpus_without_one():
    """A GPU with no committed profile borrows the H200's efficiencies (same vendor first, else any),
    labelled 'transferred'; --profile none still gives the ideal roofline."""
    own = catalog.profile_for("h200-sxm")
    t = catalog.profile_for("h100-sxm", transfer=True)
    assert catalog.profile_for("h100-sxm") is None
    assert t.mode == "transferred" and t.transferred_from == "h200-sxm" and t.gpu_id == "h100-sxm"
    assert t.weight_bandwidth_efficiency == own.weight_bandwidth_efficiency
    assert t.device_memory_bytes is None  # the H100's own memory is used
    assert catalog.profile_for("mi300x", transfer=True).transferred_from == "h200-sxm"  # cross-vendor fallback
    r = CliRunner().invoke(app, ["size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "2048"])
    assert r.exit_code == 0 and "transferred calibration" in r.output
    r = CliRunner().invoke(app, ["size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--profile", "none"])
    assert r.exit_code == 0 and "ideal roofline" in r.output


def test_tensor_parallel_terms_are_recovered_from_tp_engines():
    """The fit of vLLM's custom all-reduce terms, checked on SYNTHETIC records made by the planner itself
    from a known profile (the real TP 2 fit is in the committed profile): a TP=2 engine of Llama 3.1 70B
    plus a TP=1 engine of Mistral 7B; the fit must recover the per-collective latency and the link
    efficiency it was generated with.  The dense terms come from TP=1 engines of two models and two depths
    (Mistral 7B with 32 and 16 layers, Qwen2.5 32B): one size alone cannot tell weight bandwidth from per-step
    overhead, nor two models of their own depths a per-step from a per-layer cost (s + L l + W / bw: three unknowns)."""
    import numpy as np

    from calibration.fit import fit_profile
    from calibration.variants import probe_model
    from planner.specs import Deployment
    from planner.validate import Measurement, predict

    from planner.profile import AllreduceCoeffs

    truth = catalog.profile_for("h200-sxm").model_copy(update={"allreduce": AllreduceCoeffs(
        custom_latency_s=2.0e-5, custom_bandwidth_efficiency=0.55, nccl_latency_s=4e-5, nccl_bandwidth_efficiency=0.6)})
    recs = [{"type": "env", "gpu": "h200-sxm", "vllm_version": "synthetic", "date": "2026-11-29"}]
    for model_id, tp in (("llama-3.1-70b", 2), ("mistral-7b-v0.3", 1), ("mistral-7b-v0.3-l16", 1), ("qwen2.5-32b", 1)):
        recs.append({"type": "engine", "model": model_id, "kv_cache_dtype": "auto", "role": "fit", "tensor_parallel": tp,
                     "max_num_batched_tokens": 16384, "max_num_seqs": 1024, "gpu_memory_utilization": 0.92})
        dep = Deployment.for_gpu(catalog.gpu("h200-sxm"), num_gpus=tp, tensor_parallel=tp, max_num_batched_tokens=16384)
        pts = [("prefill_s", 1, p, 1) for p in (128, 512, 2048, 8192, 16384)] + [
            ("decode_step_s", b, c, 64) for b in (1, 8, 32, 128, 256) for c in (512, 4096)]
        if tp == 1:  # the dense terms are fitted on the TP 1 engines alone (two sizes, as the real fit)
            pts = [(x["metric"], x["batch_size"], x["prompt_tokens"], x["output_tokens"])
                   for x in plan_points(role="fit", kv_capacity_tokens=800_000)]
        for metric, b, p, o in pts:
            m = Measurement(probe_model(model_id), dep, metric, b, p, o, 1.0)
            recs.append({"type": "probe", "status": "ok", "model": model_id, "gpu": "h200-sxm", "kv_cache_dtype": "auto",
                         "role": "fit", "tensor_parallel": tp, "metric": metric, "batch_size": b,
                         "prompt_tokens": p, "output_tokens": o, "measured": predict(m, truth)})
    prof, _ = fit_profile(recs)
    assert prof.allreduce.custom_latency_s == pytest.approx(2.0e-5, rel=0.15)
    assert prof.allreduce.custom_bandwidth_efficiency == pytest.approx(0.55, rel=0.15)
    assert prof.residuals["tp/decode"].median_abs_error_pct < 1.0
    assert np.isfinite(prof.weight_bandwidth_efficiency)


def test_model_dir_option_is_checked(tmp_path):
    from calibration.run import CalibrationError, parse_model_dirs

    (tmp_path / "config.json").write_text("{}")
    assert parse_model_dirs([f"mistral-7b-v0.3={tmp_path}"]) == {"mistral-7b-v0.3": str(tmp_path)}
    with pytest.raises(CalibrationError, match="ID=PATH"):
        parse_model_dirs(["no-equals-sign"])
    with pytest.raises(CalibrationError, match="no config.json"):
        parse_model_dirs([f"mistral-7b-v0.3={tmp_path / 'missing'}"])
    r = CliRunner().invoke(app, ["calibrate", "--gpu", "h200-sxm", "--model-dir", "x"])
    assert r.exit_code == 2 and "ID=PATH" in r.output


