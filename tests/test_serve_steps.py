"""calibration.serve_steps on the recorded MoE chat runs (calibration/data/h200-2026-12-01-moe-chat) and the
recorded mixed-step probes of calibration/data/h200x2-2026-11-30 (nothing synthetic)."""

from calibration.serve_steps import (MOE_CHAT, client_steps, decode_step_ratio, eager_periods, engine_step_count,
                                     mixed_rows, predict_mixed)
from calibration.serving_points import serving_setup
from planner.io import catalog
from planner.io.jsonl import read_jsonl
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cost():
    return serving_setup(MOE_CHAT, "qwen3-30b-a3b", catalog.profile_for("h200-sxm", "0.26.0"))[0]


def test_client_clusters_count_the_engine_steps():
    """One cluster of token arrivals per engine step: 468 clusters vs vLLM's 475 counted steps at 8 req/s,
    457 vs 454 at 20 req/s (within 2 %); every streamed token lands in exactly one cluster."""
    for run, steps in (("chat8", 475), ("chat20", 454)):
        s = client_steps(MOE_CHAT / f"bench-{run}.json")
        assert engine_step_count(MOE_CHAT, run) == steps
        assert abs(s["tokens"].size / steps - 1) < 0.02
        assert s["tokens"].sum() == s["first_tokens"].sum() + s["decodes"].sum()


def test_serving_decode_steps_match_the_step_model():
    """Pure decode steps under vllm serve run within 10 % of StepCost (1.04-1.07 measured): the serving gap is
    not in the decode steps."""
    cost = _cost()
    for run in ("chat8", "chat20"):
        assert 0.95 < decode_step_ratio(client_steps(MOE_CHAT / f"bench-{run}.json"), cost) < 1.10


def test_mixed_rows_keep_the_possible_probes():
    """h200x2-moe-fit.jsonl: of three mixed probes only B=128 + a 256-token chunk (25.1 ms, decode period
    20.8 ms) lasts longer than its decode period; the model puts it at 21.7 ms, within 20 %."""
    rows = mixed_rows(read_jsonl(ROOT / "calibration/data/h200x2-2026-11-30/h200x2-moe-fit.jsonl"))
    assert [(r["batch"], r["chunk"]) for r in rows] == [(128, 256)]
    mixed, lone, decode = predict_mixed(_cost(), 128, rows[0]["context"], 256)
    assert abs(mixed / rows[0]["measured_s"] - 1) < 0.2
    assert lone > 0 and decode > 0 and mixed < lone + decode  # the model shares the expert reads


def test_eager_periods_are_where_the_moe_serving_gap_is():
    """chat20 (20 req/s, warm engine): the 40-200 ms periods that end with first tokens (the eager steps above
    the 512-token CUDA graphs: ~2,050 tokens each) average 84.7 ms.  StepCost put the same steps at 58.3 ms with
    the floor fitted on in-process probes (48 x 1.04 ms); with one host's floor traced inside vllm serve (48 x (0.749
    + 1.079) ms = 87.8 ms, calibration/trace_points.py) at 93.4 ms (+10 %); with the median of six hosts' (48 x (0.749
    + 0.830) ms = 75.8 ms) at 82.0 ms (-3 %); the decode steps are within 10 %."""
    e = eager_periods(client_steps(MOE_CHAT / "bench-chat20.json"), _cost())
    assert e["n"] == 89
    assert 0.080 < e["measured_s"] < 0.090 and 1900 < e["tokens"] < 2200
    assert 0.078 < e["predicted_s"] < 0.086


def test_bench_records_keep_the_latency_histogram_sums():
    """serve_bench keeps the server's TTFT split (queue + prefill histograms' _sum/_count) beside the counters,
    and leaves the label-summed buckets out."""
    from calibration.records import scrape
    from calibration.serve_bench import _counters

    text = "\n".join([
        'vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 1.5',
        'vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 10',
        'vllm:request_prefill_time_seconds_bucket{engine="0",le="0.1",model_name="m"} 4',
        'vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 0.9',
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 1024',
        'vllm:num_requests_running{engine="0",model_name="m"} 3'])
    kept = _counters(scrape(text))
    assert kept == {"vllm:request_queue_time_seconds_sum": 1.5, "vllm:request_queue_time_seconds_count": 10.0,
                    "vllm:request_prefill_time_seconds_sum": 0.9, "vllm:prompt_tokens_total": 1024.0}
