"""The fp8 fused MoE of a quantised-router model launches longer than the bf16 one: Qwen3-30B-A3B served with fp8 and
then bf16 weights on one H200, chat 10 req/s each, every step traced (calibration/data/h200-2026-12-03-fp8-moe-launch
y/, COMMAND.md); Mixtral-8x7B (bf16 router) the same way on another (z/), held out.  The floors, the profile's
``eager_layer_launch_extra_s`` fitted from them, where it applies and how a host's own trace rebuilds it are pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.refit import DATA, FP8_LAUNCH_PAIR
from calibration.serve_floor import served_terms, with_launch_extra
from calibration.served_steps import served_runs
from calibration.serving_points import recorded_deployment, replay_folder
from calibration.trace_points import launch_floor, stalls
from calibration.variants import probe_model
from planner.io import catalog
from planner.kernel_families import moe_coeffs

PAIR = Path(__file__).resolve().parent.parent / "calibration/data/h200-2026-12-03-fp8-moe-launch/y"
FP8, BF16 = PAIR / "serve-qwen3-30b-a3b-fp8", PAIR / "serve-qwen3-30b-a3b-bf16"
MIXTRAL = PAIR.parent / "z"
MODEL = "qwen3-30b-a3b"
PROF = catalog.profile_for("h200-sxm", "0.26.0")


def records(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "serve_bench.jsonl").read_text().splitlines() if x.strip()]


def test_the_pair_ran_on_one_machine_with_real_fp8_weights():
    """Both engines booted one after the other in one device call; the fp8 one loaded 29.06 GiB (fp8 experts: the bf16
    engine 56.88 GiB), so it ran fp8 kernels.  Each served its chat10 run (150 requests); chat20 was skipped by the
    job's time budget (fp8 boot 180 s), and the record says so."""
    for folder, dtype, gib in ((FP8, "fp8", "29.06"), (BF16, "bf16", "56.88")):
        recs = records(folder)
        deploy = next(r for r in recs if r["type"] == "deploy")
        assert recorded_deployment(deploy).weight_dtype == dtype
        assert f"Model loading took {gib} GiB" in (folder / "serve.log").read_text(errors="replace")
        assert [r["run"] for r in recs if r["type"] == "skipped"] == ["chat20"]
        assert [r["file"] for r in recs if r["type"] == "bench"] == ["bench-chat10.json"]
    assert all(v["stalls"] == 0 for f in (FP8, BF16) for v in stalls(f).values())
    assert [str(f.relative_to(DATA)) for f in (FP8, BF16)] == list(FP8_LAUNCH_PAIR)


def test_the_floors_and_the_extra_per_moe_layer():
    """Floors 92.83 ms (99 eager steps) and 68.10 ms (106): (92.83 - 68.10) / 48 MoE layers = 0.515 ms a layer; the
    profile's fp8 variant launches 0.830 (the bf16 fused MoE's, six hosts' median) + 0.515 = 1.345 ms a MoE layer."""
    fp8, bf16 = launch_floor(FP8, MODEL), launch_floor(BF16, MODEL)
    assert (fp8.eager_steps, bf16.eager_steps) == (99, 106)
    assert 1e3 * fp8.seconds == pytest.approx(92.83, abs=0.01) and 1e3 * bf16.seconds == pytest.approx(68.10, abs=0.01)
    extra = PROF.moe_variants["fp8"].eager_layer_launch_extra_s
    assert 1e3 * extra == pytest.approx((92.83 - 68.10) / 48, abs=0.001)
    assert 1e3 * PROF.moe_variants["fp8"].eager_layer_launch_s == pytest.approx(0.830 + 0.515, abs=0.001)
    assert with_launch_extra(PROF, "fp8", (fp8, bf16)).moe_variants["fp8"].eager_layer_launch_extra_s == pytest.approx(
        extra, rel=1e-9)
    with pytest.raises(ValueError, match="one model"):
        with_launch_extra(PROF, "fp8", (fp8, fp8))


def test_a_hosts_own_bf16_trace_rebuilds_its_fp8_floor():
    """`planner calibrate +serve` traces the bf16 engine of a host: the fp8 variant takes that host's fused-MoE launch
    plus the extra.  On the pair's host: (68.10 - 48 x 0.749) / 48 = 0.670 ms + 0.515, so the fp8 engine's floor comes
    out 48 x (0.749 + 1.185) = 92.8 ms, the one it traced."""
    host = served_terms(PROF, [launch_floor(BF16, MODEL)], log=lambda _: None)
    fp8 = host.moe_variants["fp8"]
    assert fp8.eager_layer_launch_extra_s == PROF.moe_variants["fp8"].eager_layer_launch_extra_s
    floor = 48 * (host.eager_layer_launch_s + fp8.eager_layer_launch_s)
    assert floor == pytest.approx(launch_floor(FP8, MODEL).seconds, rel=1e-9)
    slower = PROF.with_launch_scaled(1.2).moe_variants["fp8"]
    assert slower.eager_layer_launch_extra_s == pytest.approx(1.2 * PROF.moe_variants["fp8"].eager_layer_launch_extra_s)


def test_only_an_engine_with_a_quantised_router_pays_it():
    """Qwen3-MoE quantises its router with the experts (planner.kernel_families.QUANTIZED_ROUTER_ARCHITECTURES), as the
    pair's engine did; Mixtral-8x7B keeps a bf16 router, and its fp8 in-process 700-token prompt took 46.5 ms, under
    the bf16 floor alone (32 x (0.749 + 0.830) = 50.5 ms): it launches as the bf16 kernel does."""
    qwen = moe_coeffs(probe_model("qwen3-235b-a22b-l16"), "fp8", PROF)
    mixtral = moe_coeffs(catalog.model("mixtral-8x7b"), "fp8", PROF)
    assert 1e3 * qwen.eager_layer_launch_s == pytest.approx(1.345, abs=0.001)
    assert mixtral.eager_layer_launch_s == pytest.approx(PROF.moe.eager_layer_launch_s)
    assert mixtral.eager_layer_launch_extra_s == 0.0
    assert moe_coeffs(catalog.model(MODEL), "bf16", PROF).eager_layer_launch_s == PROF.moe.eager_layer_launch_s


def test_the_pair_replayed():
    """Reported, not checked (the extra is fitted on them): the fp8 run's TTFT p50 +15.2 %, TPOT p50 +8.4 % (TTFT +14.3
    before the OpenAI server's time per prompt token, +13.0 before its output handling, stream_output_overhead_s;
    TPOT -1.6 before
    the per-layer step term, whose layer costs make the 48-layer model's steps longer; +5.6 before
    the dense linear kernel law put CUTLASS fp8's token-count steps into its attention GEMMs, -1.8 before the fused-MoE
    kernel law; the profile's fp8 floor, 48 x (0.749 + 1.345) = 100.5 ms, against this host's 92.8); the
    bf16 run's +43.9 / +19.0 % (+42.5 before the time per prompt token, +39.8 / +18.9 before the output handling, +38.4 / +16.3 before the layer term; profile
    75.8 ms, host 68.1).  The step formula on
    their served steps: -2.4 / -4.4 % of the spans (-2.3 / -4.1 before)."""
    for folder, ttft, tpot, span in ((FP8, 15.2, 8.4, -2.4), (BF16, 43.9, 19.0, -4.4)):
        (c,) = replay_folder(folder, MODEL, PROF)
        assert c.error_pct("ttft_p50_s") == pytest.approx(ttft, abs=0.5)
        assert c.error_pct("tpot_p50_s") == pytest.approx(tpot, abs=0.5)
        assert abs(c.error_pct("output_tokens_per_s")) < 1
        (r,) = served_runs(folder, MODEL, PROF)
        assert r.error_pct == pytest.approx(span, abs=0.2)


def test_a_bf16_router_engine_launches_as_bf16_held_out():
    """Mixtral-8x7B fp8 (43.78 GiB loaded) and bf16 (87.0 GiB) on one machine, each after the plan's warm-up (10 and 5
    requests), chat 4 req/s: floors 52.50 and 52.18 ms, 0.01 ms a MoE layer apart, where Qwen3-30B-A3B's differed by
    0.515.  The profile gives it the bf16 launch, 32 x (0.749 + 0.830) = 50.5 ms, and its fp8 run (held out): TTFT p50
    +3.5 %, p99 -8.1 %, TPOT p50 -8.1 % (1.1 over the target), throughput +1.0 % (+4.8, -9.9, -7.9, +1.1 % before the
    family stages were fitted with the served dense launch, which moved the fp8 stage's per-layer cost; TTFT +2.5 / -11.3 % before the OpenAI
    server's time per prompt token, +1.6 / -11.9 % before its output handling; +4.7, -12.0, -3.9, +0.5 % before the
    per-layer step term; +4.4, -8.4, -3.2, +0.5 % before the dense linear kernel law; +4.2, +4.5, -3.2, +0.4 % before the fused-MoE kernel law)."""
    fp8_dir, bf16_dir = MIXTRAL / "serve-mixtral-8x7b-fp8", MIXTRAL / "serve-mixtral-8x7b-bf16"
    for folder, gib in ((fp8_dir, "43.78"), (bf16_dir, "87.0")):
        assert f"Model loading took {gib} GiB" in (folder / "serve.log").read_text(errors="replace")
        assert not [r for r in records(folder) if r["type"] == "skipped"]
    fp8, bf16 = launch_floor(fp8_dir, "mixtral-8x7b"), launch_floor(bf16_dir, "mixtral-8x7b")
    assert (fp8.weight_dtype, bf16.weight_dtype) == ("fp8", "bf16")
    assert 1e3 * fp8.seconds == pytest.approx(52.50, abs=0.01) and 1e3 * bf16.seconds == pytest.approx(52.18, abs=0.01)
    assert abs(fp8.seconds - bf16.seconds) / 32 < 0.05 * PROF.moe_variants["fp8"].eager_layer_launch_extra_s
    assert all(v["stalls"] == 0 for f in (fp8_dir, bf16_dir) for v in stalls(f).values())
    (c,) = replay_folder(fp8_dir, "mixtral-8x7b", PROF)
    for key, err in (("ttft_p50_s", 3.5), ("ttft_p99_s", -8.1), ("tpot_p50_s", -8.1), ("output_tokens_per_s", 1.0)):
        assert c.error_pct(key) == pytest.approx(err, abs=0.3)


def test_an_fp8_engines_own_trace_is_its_whole_launch():
    """`planner calibrate +serve` on an fp8 engine: its traced floor is the variant's launch, with no extra left to take
    off or add.  Mixtral-8x7B fp8's own trace (52.50 ms) replays at 32 x (0.749 + 0.892) = 52.5 ms, not 36.0 ms (the
    trace less Qwen3's 0.515 a MoE layer, as it did before the extra was cleared with an own trace)."""
    own = launch_floor(MIXTRAL / "serve-mixtral-8x7b-fp8", "mixtral-8x7b")
    host = served_terms(PROF, [own], log=lambda _: None)
    assert host.moe_variants["fp8"].eager_layer_launch_extra_s == 0.0
    coeffs = moe_coeffs(catalog.model("mixtral-8x7b"), "fp8", host)
    assert 32 * (host.eager_layer_launch_s + coeffs.eager_layer_launch_s) == pytest.approx(own.seconds, rel=1e-9)
