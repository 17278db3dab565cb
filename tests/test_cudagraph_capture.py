"""vLLM's largest CUDA graph as a deployment setting (--max-cudagraph-capture-size, issue #21): the planner's
engine model, the `vllm serve` command and the recorded engines read it in one place
(:func:`planner.kernel_families.cudagraph_max_tokens`)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from calibration.serving_points import recorded_deployment
from planner.cli.app import app
from planner.compile_keys import capture_sizes, keys_at_start, warm_up_sizes
from planner.deploy import serve_command
from planner.io import catalog
from planner.kernel_families import cudagraph_max_tokens
from planner.serving.loadtests import engine_hints
from planner.specs import Deployment

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
    assert "1-8192 tokens" in big and "531 graph sizes where vLLM's default captures 51" in big
    assert "graph sizes" not in cold_start_note(QWEN, Deployment.for_gpu(H200), prof, 4096)


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
