"""calibration/data/h200-2026-12-04-eager-trace (COMMAND.md): fused-MoE prompt steps above the CUDA graphs timed and
traced on one H200.  The summaries' arithmetic, and the recorded figures calibration/data/README.md reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.campaigns.eager_trace import eager_excess_s, summarize_trace, union_s

DATA = Path(__file__).resolve().parents[1] / "calibration" / "data" / "h200-2026-12-04-eager-trace"


def test_union_of_kernel_intervals():
    # [0, 10] and [5, 15] overlap -> 15 us; [20, 30] apart -> 10 us; microseconds in, seconds out
    assert union_s([(5, 15), (0, 10), (20, 30)]) == pytest.approx(25e-6)
    assert union_s([]) == 0.0


def test_trace_summary_gaps_and_cpu_ops(tmp_path):
    ev = [{"cat": "kernel", "ts": 0, "dur": 10, "name": "k1"}, {"cat": "kernel", "ts": 5, "dur": 10, "name": "k2"},
          {"cat": "kernel", "ts": 400, "dur": 100, "name": "k1"},
          {"cat": "cpu_op", "ts": 20, "dur": 300, "name": "vllm::moe_forward"}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    s = summarize_trace(p, 0.001)
    # busy = [0, 15] + [400, 500] = 115 us over a span of 500 us; one gap of 400 - 15 = 385 us, the CPU op in it
    assert s["kernel_busy_s"] == pytest.approx(115e-6) and s["kernel_span_s"] == pytest.approx(500e-6)
    assert s["gap_total_s"] == pytest.approx(385e-6) and s["gaps_over_100us"] == 1
    assert s["largest_gaps"][0]["cpu_ops"] == [["vllm::moe_forward", 300]]
    assert s["top_kernels_us"][0] == ["k1", 2, 110]  # 10 + 100 us


def _summary(rel: str) -> dict:
    return json.loads((DATA / rel).read_text())


def test_recorded_gpu_idles_through_a_fused_moe_eager_step():
    """Traced at 2,048 tokens: the fused-MoE engines' kernels are busy for under a third of the step, the dense
    control's for most of it (README: 17.7 of 70.0 ms, 25.2 of 93.4, 21.3 of 78.6; Llama 42.9 of 50.3)."""
    for rel, busy_ms, wall_ms in (("a/qwen3-30b-a3b-l24.trace.json", 17.7, 70.0),
                                  ("a/gpt-oss-20b.trace.json", 25.2, 93.4),
                                  ("b/deepseek-v2-lite.trace.json", 21.3, 78.6)):
        t = _summary(rel)["traces"]["2048"]
        assert t["kernel_busy_s"] * 1e3 == pytest.approx(busy_ms, abs=0.05)
        assert t["wall_s"] * 1e3 == pytest.approx(wall_ms, abs=0.05)
        assert t["kernel_busy_s"] < t["wall_s"] / 3
    llama = _summary("b/llama-3.1-8b.trace.json")["traces"]["2048"]
    assert llama["kernel_busy_s"] > 0.8 * llama["wall_s"]


@pytest.mark.parametrize("rel, key, excess_ms", [
    # median of the 1,536 / 2,048 / 3,000-token medians less the 256-token median (README's figures)
    ("c/qwen3-30b-a3b-l12.trace.json", "walls_s", 22.7), ("c/qwen3-30b-a3b-l24.trace.json", "walls_s", 29.3),
    ("c/qwen3-30b-a3b.trace.json", "walls_s", 34.2), ("c/mp/qwen3-30b-a3b-l24.trace.json", "walls_s", 22.3),
    ("c/mp/qwen3-30b-a3b.trace.json", "walls_s", 53.2), ("c/qwen3-30b-a3b-l12.trace.json", "walls_gc_off_s", 21.6),
    ("c/qwen3-30b-a3b-l24.trace.json", "walls_gc_off_s", 30.5), ("c/qwen3-30b-a3b.trace.json", "walls_gc_off_s", 39.6),
])
def test_recorded_eager_excess(rel, key, excess_ms):
    assert eager_excess_s(_summary(rel), key) * 1e3 == pytest.approx(excess_ms, abs=0.05)


def test_recorded_cost_grows_with_moe_layers_in_the_servers_mode():
    """Engine core in its own process (as the probes and vllm serve run it): 48 layers 2.3-2.4x the 24-layer
    engine's step at 2,048 and 3,000 tokens (77.9 / 32.9, 83.9 / 36.4 ms)."""
    deep, half = _summary("c/mp/qwen3-30b-a3b.trace.json"), _summary("c/mp/qwen3-30b-a3b-l24.trace.json")
    for n in ("2048", "3000"):
        ratio = sorted(deep["walls_s"][n]["wall_s"])[1] / sorted(half["walls_s"][n]["wall_s"])[1]
        assert 2.25 < ratio < 2.45


def test_served_floor_two_depths_one_host():
    """calibration/data/h200-2026-12-04-served-depths (COMMAND.md): the bf16 fused MoE's served launch floor at 48 and
    24 layers on one machine, 60.9 and 32.5 ms: 1.87x for 2x the layers, a line of 4.1 ms + 1.18 ms a layer (the
    profile's per-layer floor through zero stands)."""
    from calibration.trace_points import launch_floor

    root = DATA.parent / "h200-2026-12-04-served-depths" / "fb"
    deep = launch_floor(root / "serve-qwen3-30b-a3b-bf16", "qwen3-30b-a3b")
    half = launch_floor(root / "serve-qwen3-30b-a3b-l24-bf16", "qwen3-30b-a3b-l24")
    assert deep.seconds * 1e3 == pytest.approx(60.9, abs=0.05) and half.seconds * 1e3 == pytest.approx(32.5, abs=0.05)
    slope = (deep.seconds - half.seconds) / 24
    assert slope * 1e3 == pytest.approx(1.18, abs=0.005)
    assert (half.seconds - 24 * slope) * 1e3 == pytest.approx(4.1, abs=0.05)


def test_one_host_probes_mode_against_served_mode():
    """calibration/data/h200-2026-12-04-mode-check (COMMAND.md): on one machine, Qwen3-30B-A3B's lone prompts in the
    probes' mode took 54.4 / 53.9 ms at 1,536 / 2,048 tokens (the whole step) where its served eager steps kept the
    launch call 82.4 ms (floor 80.3 + graph call 2.1): 1.5x there.  The profile's served floor predicts this engine's
    call 80.7 ms; its chat10 replays TTFT p50 +3.2 % (+2.2 before the OpenAI server's time per prompt token), TPOT
    +7.2 %.  Not reproduced on the next host (test below): the gap was that run's launch, not the mode."""
    from calibration.serving_points import recorded_deployment, replay_folder
    from calibration.trace_points import _read, launch_floor
    from calibration.variants import probe_model
    from planner.io import catalog
    from planner.serving import StepCost

    root = DATA.parent / "h200-2026-12-04-mode-check"
    walls = json.loads((root / "qwen3/et/mp/qwen3-30b-a3b.trace.json").read_text())["walls_s"]
    med = {p: 1e3 * sorted(walls[p]["wall_s"])[1] for p in ("1536", "2048")}
    assert med == pytest.approx({"1536": 54.41, "2048": 53.89}, abs=0.01)
    folder = root / "qwen3/serve-qwen3-30b-a3b-bf16"
    served = launch_floor(folder, "qwen3-30b-a3b")
    assert 1e3 * served.seconds == pytest.approx(80.3, abs=0.05)
    assert 1e3 * served.eager_call_s == pytest.approx(82.4, abs=0.05)
    assert served.eager_call_s / (med["2048"] / 1e3) == pytest.approx(1.53, abs=0.01)
    prof, g = catalog.profile_for("h200-sxm", "0.26.0"), catalog.gpu("h200-sxm")
    deploy = next(r for r in _read(str(folder.resolve()))[0] if r["type"] == "deploy")
    cost = StepCost.from_specs(probe_model("qwen3-30b-a3b"), g, recorded_deployment(deploy), prof)
    assert 1e3 * cost.cpu_s(2048, 1, True) == pytest.approx(80.7, abs=0.05)
    (c,) = replay_folder(folder, "qwen3-30b-a3b", prof)
    assert c.error_pct("ttft_p50_s") == pytest.approx(3.2, abs=0.3)
    assert c.error_pct("tpot_p50_s") == pytest.approx(7.2, abs=0.3)


def test_the_mode_gap_is_not_the_step_budget_and_did_not_come_back_on_the_next_host():
    """calibration/data/h200-2026-12-04-budget-check (COMMAND.md): one machine, minutes apart.  Qwen3-30B-A3B's lone
    prompts in the probes' mode (16,384-token budget) 64.1 / 75.0 ms at 1,536 / 2,048 tokens; served with the probes'
    budget the eager launch floor was 82.0 ms, with vllm serve's 8,192 (run after it) 61.8 ms: the budget does not
    lengthen it (the longer one had the larger budget and ran first), and the probes' mode sits inside the served
    runs' spread (0.85-1.12x), where the mode check's host had 1.5x.  The served lone 2,048-token prompts took 89.5 /
    72.8 ms (the two budgets)."""
    from calibration.trace_points import launch_floor

    root = DATA.parent / "h200-2026-12-04-budget-check"
    walls = json.loads((root / "a/et-16384/qwen3-30b-a3b.trace.json").read_text())["walls_s"]
    med = {p: 1e3 * sorted(walls[p]["wall_s"])[1] for p in ("1536", "2048")}
    assert med == pytest.approx({"1536": 64.14, "2048": 75.01}, abs=0.01)
    floors = {b: launch_floor(root / f"{r}/serve-qwen3-{b}", "qwen3-30b-a3b") for r, b in (("a", 16384), ("b", 8192))}
    assert {b: round(1e3 * f.seconds, 1) for b, f in floors.items()} == {16384: 82.0, 8192: 61.8}
    # the served eager calls (63.7 and 84.3 ms) against the lone 2,048-token step in the probes' mode: 0.85x and 1.12x
    ratio = {b: f.eager_call_s / (med["2048"] / 1e3) for b, f in floors.items()}
    assert ratio == pytest.approx({8192: 0.85, 16384: 1.12}, abs=0.01)
