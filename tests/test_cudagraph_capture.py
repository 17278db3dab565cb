"""vLLM's largest CUDA graph as a deployment setting (--max-cudagraph-capture-size, issue #21): the planner's
engine model, the `vllm serve` command and the recorded engines read it in one place
(:func:`planner.kernel_families.cudagraph_max_tokens`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibration.records import parse_engine_log
from calibration.serving_points import recorded_deployment
from planner.cli.app import app
from planner.compile_keys import capture_sizes, keys_at_start, warm_up_sizes
from planner.deploy import serve_command
from planner.io import catalog
from planner.kernel_families import cudagraph_max_tokens
from planner.serving.loadtests import engine_hints
from planner.specs import Deployment

ROOT = Path(__file__).resolve().parents[1]
H200 = catalog.gpu("h200-sxm")
QWEN, OSS = catalog.model("qwen3-30b-a3b"), catalog.model("gpt-oss-20b")
RUN = CliRunner()


def test_the_largest_graph_is_vllms_default_unless_set():
    dep = Deployment.for_gpu(H200)  # 8,192 tokens, 1,024 sequences
    assert cudagraph_max_tokens(dep, QWEN) == 512  # min(2 x 1,024, 512)
    assert cudagraph_max_tokens(dep, OSS) == 1024  # gpt-oss: 1,024
    assert cudagraph_max_tokens(dep.replace(max_num_seqs=100), QWEN) == 200  # 2 x 100
    # set: vLLM takes it as given (no 2 x max_num_seqs cap), at most max_num_batched_tokens
    assert cudagraph_max_tokens(dep.replace(max_cudagraph_capture_tokens=4096), QWEN) == 4096
    assert cudagraph_max_tokens(dep.replace(max_cudagraph_capture_tokens=4096, max_num_seqs=100), QWEN) == 4096
    assert cudagraph_max_tokens(dep.replace(max_cudagraph_capture_tokens=20000), QWEN) == 8192


def test_capture_sizes_follow_vllms_list_and_warm_up_is_not_needed_inside_the_graphs():
    dep = Deployment.for_gpu(H200, max_cudagraph_capture_tokens=8192)
    sizes = capture_sizes(dep, QWEN)
    # 1, 2, 4; 8..248 by 8 (31); 256..8,192 by 16 (497): vLLM 0.26 config/vllm.py _set_cudagraph_sizes
    assert len(sizes) == 3 + 31 + 497 and sizes[-1] == 8192
    # every step is inside the graphs: the captures compile every MoE kernel key a step can have, nothing to warm
    assert warm_up_sizes(dep, QWEN) == []
    assert len(keys_at_start(dep, QWEN)) > len(keys_at_start(Deployment.for_gpu(H200), QWEN))


def test_serve_command_writes_the_flag_only_when_set():
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    argv = serve_command(QWEN, H200, Deployment.for_gpu(H200), max_model_len=4096, profile=prof).argv
    assert "--max-cudagraph-capture-size" not in argv
    argv = serve_command(QWEN, H200, Deployment.for_gpu(H200, max_cudagraph_capture_tokens=8192), max_model_len=4096,
                         profile=prof).argv
    assert argv[argv.index("--max-cudagraph-capture-size") + 1] == "8192"
    # a recorded engine's deployment reads it back
    assert recorded_deployment({"argv": argv, "gpu": "h200-sxm"}, "qwen3-30b-a3b").max_cudagraph_capture_tokens == 8192


def test_replay_reads_the_recorded_engines_graphs(tmp_path):
    argv = ["vllm", "serve", "m", "--max-num-seqs", "1024", "--max-num-batched-tokens", "8192",
            "--max-cudagraph-capture-size", "4096"]
    (tmp_path / "serve_bench.jsonl").write_text(json.dumps({"type": "deploy", "argv": argv}) + "\n")
    assert engine_hints(tmp_path / "bench.json")["max_cudagraph_capture_tokens"] == 4096


def test_cli_bad_value_names_the_flag():
    r = RUN.invoke(app, ["simulate", "--model", "qwen3-30b-a3b", "--gpu", "h200-sxm", "--rate", "2",
                         "--max-cudagraph-capture-size", "0"])
    assert r.exit_code == 2 and "--max-cudagraph-capture-size" in r.output


def test_a_larger_graph_never_slows_a_launch_bound_moe_engine():
    """Qwen3-30B-A3B at 14 req/s of chat: its 1-2k-token prompt steps leave the 60-90 ms eager launch for piecewise
    graphs (the simulator's prediction the 2026-12-05 capture campaign checks)."""
    base = ["simulate", "--model", "qwen3-30b-a3b", "--gpu", "h200-sxm", "--rate", "14", "--workload", "chat",
            "--num-requests", "300", "--json"]
    out = [json.loads(RUN.invoke(app, base + extra).output) for extra in ([], ["--max-cudagraph-capture-size", "8192"])]
    assert out[1]["ttft_s"]["p50"] < out[0]["ttft_s"]["p50"]
    assert out[1]["tpot_s"]["p50"] < out[0]["tpot_s"]["p50"]


def test_the_plan_says_when_a_prompt_step_is_launch_bound_above_the_graphs():
    from planner.phases import graph_note, mixed_step_time
    from planner.roofline import hw_coeffs, model_costs

    prof = catalog.profile_for("h200-sxm", "0.26.0")
    dep = Deployment.for_gpu(H200)
    note = graph_note(QWEN, H200, dep, prof, 64, 1500.0, 1500)
    assert note is not None and "--max-cudagraph-capture-size 8192" in note and "(512 tokens)" in note
    # the two step times it quotes are the step formula's: eager (launch-bound) and piecewise
    hw = hw_coeffs(H200, "bf16", prof, QWEN)
    eager = float(mixed_step_time(model_costs(QWEN, dep), hw, 64, 1500.0, 1500).total_s)
    graphs = float(mixed_step_time(model_costs(QWEN, dep.replace(max_cudagraph_capture_tokens=8192)), hw, 64, 1500.0,
                                   1500).total_s)
    assert f"{1e3 * eager:.1f} ms" in note and f"{1e3 * graphs:.1f} ms" in note and graphs < eager / 1.1
    # nothing to say: inside the graphs already, or a dense model whose eager step is GPU-bound
    assert graph_note(QWEN, H200, dep.replace(max_cudagraph_capture_tokens=8192), prof, 64, 1500.0, 1500) is None
    assert graph_note(QWEN, H200, dep, prof, 64, 300.0, 300) is None  # 64 + 300 tokens: inside the 512 graphs
    assert graph_note(catalog.model("llama-3.1-8b"), H200, dep, prof, 64, 1500.0, 1500) is None


def test_the_cold_start_note_counts_the_graphs_a_larger_capture_adds():
    from planner.compile_keys import cold_start_note

    prof = catalog.profile_for("h200-sxm", "0.26.0")
    big = cold_start_note(QWEN, Deployment.for_gpu(H200, max_cudagraph_capture_tokens=8192), prof, 4096)
    # 531 piecewise + 83 full graphs against 51 + 51: 512 more x 0.189 s (the H100's Qwen3 pair: (119 - 22) / 512)
    assert "1-8192 tokens" in big and "614 CUDA graphs where vLLM's default captures 102: about 97 s more" in big
    assert "CUDA graphs where" not in cold_start_note(QWEN, Deployment.for_gpu(H200), prof, 4096)


CAPTURE = ROOT / "calibration/data/h100-2026-12-05-capture"
PAIRS = {"qwen3-30b-a3b": ("a/serve-qwen3-cg8192", "b/serve-qwen3-default"),
         "moonlight-16b-a3b": ("c/serve-moonlight-cg8192", "d/serve-moonlight-default")}


def logged(folder: str) -> dict:
    return parse_engine_log((CAPTURE / folder / "serve.log").read_text(encoding="utf-8", errors="replace"))


def test_the_graph_count_is_what_vllm_logged_for_each_engine():
    """graph_count against every committed engine log's "Profiling CUDA graph memory" line: 102 at the defaults,
    166 for gpt-oss, 614 with 8,192-token graphs."""
    from planner.compile_keys import graph_count

    h100 = catalog.gpu("h100-sxm")
    for big, default in PAIRS.values():
        big_dep = Deployment.for_gpu(h100, max_cudagraph_capture_tokens=8192)
        assert logged(big)["cudagraph_graphs"] == graph_count(big_dep, QWEN) == 531 + 83
        assert logged(default)["cudagraph_graphs"] == graph_count(Deployment.for_gpu(h100), QWEN) == 51 + 51
    oss = parse_engine_log((ROOT / "calibration/data/h200-2026-12-02-serve-mxfp4/h/serve-gpt-oss-20b-trace/serve.log")
                           .read_text(encoding="utf-8", errors="replace"))
    assert oss["cudagraph_graphs"] == graph_count(Deployment.for_gpu(H200), OSS) == 83 + 83


def test_the_graphs_beyond_the_default_are_counted_from_vllms_list():
    """extra_graphs: 614 - 102 = 512 more with 8,192-token graphs on Qwen3-30B-A3B, none at the default (returned
    without counting: every sweep row's start-up check asks), and fewer with a smaller largest graph (256: 35 + 35
    sizes up to it against 51 + 51, -32)."""
    from planner.compile_keys import extra_graphs, graph_count

    for cap, more in ((8192, 512), (None, 0), (256, -32)):
        dep = Deployment.for_gpu(H200, max_cudagraph_capture_tokens=cap)
        assert extra_graphs(dep, QWEN) == more
        assert more == graph_count(dep, QWEN) - graph_count(Deployment.for_gpu(H200), QWEN)


def test_the_graph_terms_are_fitted_on_qwen3_and_hold_on_moonlight():
    """The profile's bytes and seconds per graph more are the Qwen3 pair's differences (3.79 - 0.64 GiB and 119 - 22 s
    over 512 graphs); Moonlight's pair, held out, is within 1 % and 5 %."""
    from calibration.family_fit import CAPTURE_FIT, DATA, graph_terms

    prof = catalog.profile_for("h200-sxm", "0.26.0")
    per_b, per_s = graph_terms(*(DATA / f for f in CAPTURE_FIT))
    assert per_b == prof.v1_cudagraph_bytes_per_graph == pytest.approx((3.79 - 0.64) * 2**30 / 512)
    assert per_s == prof.cudagraph_capture_s_per_graph == pytest.approx((119 - 22) / 512)
    held_b, held_s = graph_terms(*(CAPTURE / f / "serve.log" for f in PAIRS["moonlight-16b-a3b"]))
    assert held_b == pytest.approx(per_b, rel=0.01) and held_s == pytest.approx(per_s, rel=0.05)


@pytest.mark.parametrize("model_id", sorted(PAIRS))
def test_the_kv_pool_loses_what_vllms_estimate_takes_for_larger_graphs(model_id):
    """The V1 runner's pool with 8,192-token graphs: within 1 % of vLLM's logged one (it was +34.6 % for Qwen3 and
    +9.6 % for Moonlight before the per-graph term), and the pool the larger graphs cost within 2 % of the logged
    difference (Qwen3 12.41 - 9.25 GiB, Moonlight 39.15 - 36.03)."""
    from calibration.serving_points import served_kv_pools

    rows = {f: (logged_b, pred) for f, logged_b, pred, _ in served_kv_pools(CAPTURE)}
    (big_l, big_p), (def_l, def_p) = (rows[f] for f in PAIRS[model_id])
    assert big_p == pytest.approx(big_l, rel=0.01) and def_p == pytest.approx(def_l, rel=0.01)
    assert def_p - big_p == pytest.approx(def_l - big_l, rel=0.02)


def test_a_dense_engine_with_larger_graphs_needs_their_room_above_the_pool():
    """The V2 runner captures after sizing the pool: 512 graphs more need ~3.15 GiB of headroom beside the 1 GiB
    floor; an H100 at 0.95 leaves 4.0 GiB (refused), at 0.90 7.9 GiB (starts); the V1 runner's estimate is in its
    pool already (no refusal)."""
    from planner.startup import startup_check

    h100, llama = catalog.gpu("h100-sxm"), catalog.model("llama-3.1-8b")
    prof = catalog.resolve_profile("auto", "h100-sxm")[0]
    big = Deployment.for_gpu(h100, max_cudagraph_capture_tokens=8192)
    refused = startup_check(llama, h100, big.replace(gpu_memory_utilization=0.95), 4096, prof)
    assert [p.field for p in refused.problems] == ["gpu_memory_utilization"]
    assert "512 CUDA graphs more than vLLM's default" in refused.reasons()[0]
    assert startup_check(llama, h100, big.replace(gpu_memory_utilization=0.90), 4096, prof).ok
    assert startup_check(llama, h100, Deployment.for_gpu(h100, gpu_memory_utilization=0.95), 4096, prof).ok
    assert startup_check(QWEN, h100, big.replace(gpu_memory_utilization=0.95), 4096, prof).ok


def test_the_graph_note_quotes_the_measured_runs():
    """The note's measured numbers are the committed runs' (vllm bench serve's TPOT p50, default -> 8,192 graphs)."""
    from planner.phases import graph_note

    def p50(folder, run):
        return json.loads((CAPTURE / folder / f"bench-{run}.json").read_text())["median_tpot_ms"]

    note = graph_note(QWEN, H200, Deployment.for_gpu(H200), catalog.profile_for("h200-sxm", "0.26.0"), 64, 1500.0,
                      1500)
    moon, qwen = PAIRS["moonlight-16b-a3b"], PAIRS["qwen3-30b-a3b"]
    assert (f"TPOT p50 {p50(moon[1], 'chat30'):.1f} -> {p50(moon[0], 'chat30'):.1f} ms" in note
            and f"8 req/s {p50(qwen[1], 'chat8'):.1f} -> {p50(qwen[0], 'chat8'):.1f} ms" in note)
    mla = json.loads((CAPTURE.parent / "h200-2026-12-05-mla-graphs/f/serve-dsv2lite-default/bench-chat20.json")
                     .read_text()), json.loads((CAPTURE.parent / "h200-2026-12-05-mla-graphs/e/serve-dsv2lite-cg8192/"
                                                "bench-chat20.json").read_text())
    assert (f"20 req/s TPOT p50 {mla[0]['median_tpot_ms']:.1f} -> {mla[1]['median_tpot_ms']:.1f} ms, TTFT p50 "
            f"{mla[0]['median_ttft_ms']:.0f} -> {mla[1]['median_ttft_ms']:.0f} ms" in note)
    # 512 x 6.30 MiB = 3.15 GiB (fmt_gib: 3.1), 512 x 0.189 s = 97 s
    assert "512 graphs more take about 3.1 GiB of memory from the KV pool and 97 s more start-up" in note


def test_the_boots_table_marks_an_engine_with_larger_graphs(tmp_path, monkeypatch):
    from calibration import boots

    monkeypatch.setattr(boots, "ROOT", tmp_path)  # the sources are named relative to the repository

    argv = ["vllm", "serve", "m", "--tensor-parallel-size", "1", "--max-num-seqs", "1024",
            "--max-num-batched-tokens", "8192"]
    for name, extra in (("a", []), ("b", ["--max-cudagraph-capture-size", "8192"])):
        (tmp_path / name).mkdir()
        recs = [{"type": "deploy", "model": "qwen3-30b-a3b", "gpu": "h200-sxm", "argv": argv + extra},
                {"type": "boot", "model": "qwen3-30b-a3b", "boot_s": 100.0, "init_engine_s": 60.0}]
        (tmp_path / name / "serve_bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    default, larger = boots.collect(tmp_path)
    assert "max_cudagraph_capture_tokens" not in default and larger["max_cudagraph_capture_tokens"] == 8192
