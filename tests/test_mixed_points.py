"""The mixed engine steps of calibration/data/h200-2026-12-01-moe-mixed (calibration/mixed_probe.py: B decodes at
1,024 tokens + one new prompt of C tokens, vllm serve's scheduler settings, one H200) in the refit, and the eager
step's CPU launch floor they identify (recorded data only)."""

import json
from pathlib import Path

import numpy as np
import pytest

from calibration.mixed_points import mixed_points
from calibration.refit import MIXED, inputs
from planner.attention_sums import attended_prefill
from planner.io import catalog
from planner.roofline import hw_coeffs, linear_s, model_costs, step_time
from planner.specs import Deployment
from planner.validate import error_pct, predict

ROOT = Path(__file__).resolve().parent.parent
MIXED_JSONL = ROOT / "calibration/data/h200-2026-12-01-moe-mixed/mixed.jsonl"


@pytest.fixture(scope="module")
def prof():
    return catalog.profile_for("h200-sxm", "0.26.0")


def test_the_refit_fits_the_moe_cells_and_holds_out_the_dense_ones(prof):
    """inputs() turns the file's 52 mixed_grid records into one point per cell, the median of its repeats:
    Qwen3-30B-A3B's 5 batches x 4 chunks = 20 fit points, Llama-3.1-8B's 3 x 2 = 6 held out.  B=32 + a 1,024-token
    prompt ran 86.1 and 49.2 ms: its point is their median, 67.6 ms.  The committed profile's MoE stage was
    fitted on them: 19 probe points + 20 cells, + the 17 probes of each of Qwen3-30B-A3B-l24 and Qwen3-30B-A3B on one
    host (h200-2026-12-03-layers) = 73."""
    assert MIXED == {"h200-2026-12-01-moe-mixed/mixed.jsonl": {"qwen3-30b-a3b": "fit", "llama-3.1-8b": "validate"}}
    _, points, _ = inputs()
    cells = [p for p in points if p.source.endswith("moe-mixed/mixed.jsonl")]
    assert sum(p.role == "fit" and p.model.id == "qwen3-30b-a3b" for p in cells) == 20
    assert sum(p.role == "validate" and p.model.id == "llama-3.1-8b" for p in cells) == 6
    assert all(p.metric == "mixed_step_s" and p.prompt_tokens == 1024 for p in cells)
    assert all(p.deployment.max_num_batched_tokens == 8192 for p in cells)  # the engine's mixed_engine record
    cell = next(p for p in cells if p.model.id == "qwen3-30b-a3b" and (p.batch_size, p.chunk_tokens) == (32, 1024))
    runs = [json.loads(x)["mixed_step_s"] for x in MIXED_JSONL.read_text().splitlines()
            if '"mixed_grid"' in x and '"qwen3-30b-a3b"' in x and '"batch_size": 32,' in x and '"chunk_tokens": 1024,' in x]
    assert len(runs) == 2 and cell.measured == pytest.approx(np.median(runs)) == pytest.approx(0.0676, abs=1e-4)
    assert prof.fit.points["moe"] == 39 + 2 * 17
    assert "h200-2026-12-01-moe-mixed/mixed.jsonl" in prof.raw_data


def test_the_served_floor_sits_above_the_in_process_cells(prof):
    """The committed profile's eager launch floor is the one traced inside vllm serve (Qwen3-30B-A3B: 75.8 ms, the
    fused MoE's part the median of six hosts; calibration/refit.py with_serve_floors), and in-process engine steps
    launch faster (no API threads in the process).  So the 15 eager cells (> 512 tokens) of these in-process probes are
    over-predicted: median +41.2 % (+4.1 % to +95.2 %: one cell's repeats spread 40-93 ms; +61.7 % with the one host's
    87.8 ms), while the 5 cells inside the CUDA graphs (a 256-token prompt) stay within 15 % (-13.4 % to +4.3 %).
    Without any floor the eager cells come out at -45 % or less."""
    pts = mixed_points(MIXED_JSONL, {"qwen3-30b-a3b": "fit"})
    err = np.array([error_pct(predict(p, prof), p.measured) for p in pts])
    assert len(pts) == 20
    eager = np.array([p.batch_size + p.chunk_tokens > 512 for p in pts])
    assert eager.sum() == 15
    assert 30.0 < np.median(err[eager]) < 60.0 and err[eager].min() > 0.0
    assert np.max(np.abs(err[~eager])) <= 15.0
    no_floor = prof.model_copy(update={"eager_layer_launch_s": 0.0,
                                       "moe": prof.moe.model_copy(update={"eager_layer_launch_s": 0.0})})
    assert np.median([error_pct(predict(p, no_floor), p.measured) for p, e in zip(pts, eager) if e]) < -45.0


def test_an_eager_step_takes_the_longer_of_gpu_work_and_its_launch_floor(prof):
    """Qwen3-30B-A3B, a lone 768-token prompt (eager: > 512 tokens): floor = 48 layers x (every layer's launch,
    0.749 ms traced on Llama-3.1-8B, + the fused-MoE layer's, 0.830 ms: Qwen3-30B-A3B's six traced hosts' median)
    = 75.8 ms; the step takes max(GPU work, floor) + overheads, not their sum.  A 256-token prompt (inside the CUDA
    graphs, piecewise) has the piecewise launch's floor, 48 x 0.2118 ms = 10.17 ms; a decode-only step of 256 (a full
    graph) none."""
    m, g = catalog.model("qwen3-30b-a3b"), catalog.gpu("h200-sxm")
    mc, hw = model_costs(m, Deployment.for_gpu(g)), hw_coeffs(g, "bf16", prof, m)
    st = step_time(mc, hw, prefill_tokens=768.0, prefill_attended=attended_prefill(mc, 0.0, 768.0), sampled_seqs=1.0)
    assert prof.eager_layer_launch_s == pytest.approx(0.000749, rel=1e-3)
    assert float(st.launch_s) == pytest.approx(48 * (prof.eager_layer_launch_s + prof.moe.eager_layer_launch_s),
                                               rel=1e-12) == pytest.approx(0.0758, rel=1e-3)
    gpu = float(linear_s(st.linear_compute_s, st.linear_memory_s, st.dequant_s, st.moe_compute_s, st.moe_memory_s)
                + max(st.attention_compute_s, st.attention_memory_s) + st.comm_s)
    assert 0.010 < gpu < 0.5 * float(st.launch_s)  # ~17 ms of GPU work under a ~76 ms floor: total = floor + overhead
    assert float(st.total_s) == pytest.approx(float(st.launch_s) + float(st.overhead_s), rel=1e-12)
    small = step_time(mc, hw, prefill_tokens=256.0, prefill_attended=attended_prefill(mc, 0.0, 256.0),
                      sampled_seqs=1.0)
    assert 1e3 * float(small.launch_s) == pytest.approx(48 * 0.2118, abs=0.01)
    assert float(small.launch_s) == pytest.approx(prof.piecewise_step_launch_s + 48 * prof.piecewise_layer_launch_s)
    assert float(step_time(mc, hw, decode_seqs=256.0, decode_attended=256.0 * 512).launch_s) == 0.0


def test_unfinished_or_damaged_cells_are_left_out(tmp_path):
    """A cell whose prompt did not finish, or whose time is not a positive number, is not a point (and is listed)."""
    lines = MIXED_JSONL.read_text().splitlines()
    grid = [i for i, x in enumerate(lines) if '"mixed_grid"' in x and '"llama-3.1-8b"' in x]
    a, b = json.loads(lines[grid[0]]), json.loads(lines[grid[1]])
    a["finished"], b["mixed_step_s"] = False, float("nan")
    lines[grid[0]], lines[grid[1]] = json.dumps(a), json.dumps(b)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    excluded: list[str] = []
    pts = mixed_points(path, {"llama-3.1-8b": "validate"}, excluded=excluded)
    assert len(excluded) == 2
    whole = mixed_points(MIXED_JSONL, {"llama-3.1-8b": "validate"})
    assert len(whole) == 6 and sum(p.measured for p in pts) != sum(p.measured for p in whole)
