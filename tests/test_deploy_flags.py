"""Every ``vllm serve`` command the planner writes parses with vLLM 0.26.0's options (the pinned list; vLLM's own
parser where vLLM is installed), and the commands that booted on the H200s are the ones serve_command writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.io import catalog
from planner.deploy import deployment_bundle, serve_command
from planner.deploy.flags import UnknownServeFlag, parse_serve_args, pinned_option_strings
from planner.deploy.ray import serve_argv_of_head
from planner.specs import Deployment, Workload

ROOT = Path(__file__).resolve().parent.parent
BOOTS = sorted(p for day in ("h200x2-2026-11-30", "h200x2-2026-12-01") for pat in ("serve-*", "verify-*")
               for p in (ROOT / "calibration" / "data" / day).glob(f"{pat}/serve_bench.jsonl"))


def records(path: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == kind]


def test_pinned_list_is_vllm_0_26s():
    """372 option strings, with the 0.26 spellings the planner relies on (and not the old ones)."""
    opts = pinned_option_strings()
    assert len(opts) == 372
    for o in ("--kv-cache-memory-bytes", "--enable-prefix-caching", "--no-enable-prefix-caching", "--speculative-config",
              "-tp", "--tensor-parallel-size", "-pp", "--pipeline-parallel-size", "--kv-transfer-config",
              "--distributed-executor-backend", "--port", "--max-model-len", "--kv-cache-dtype", "--quantization"):
        assert o in opts, o
    assert "--kv-cache-memory" not in opts and "--disable-log-requests" not in opts


def test_unknown_and_abbreviated_flags_fail():
    with pytest.raises(UnknownServeFlag, match="--kv-cache-memory"):
        parse_serve_args(["m", "--kv-cache-memory", "123"])  # 0.26 spells it --kv-cache-memory-bytes
    with pytest.raises(UnknownServeFlag, match="--max-model"):
        parse_serve_args(["m", "--max-model", "4096"])  # no abbreviations
    with pytest.raises(UnknownServeFlag):
        parse_serve_args(["m", "--tensor-parallel", "2"])
    ok = parse_serve_args(["m", "--gpu_memory_utilization", "0.9", "--enable-prefix-caching", "--port=8001"])
    assert ok == {"model_tag": "m", "--gpu-memory-utilization": "0.9", "--enable-prefix-caching": True,
                  "--port": "8001"}


@pytest.mark.parametrize("path", BOOTS, ids=[f"{p.parent.parent.name[-5:]}/{p.parent.name}" for p in BOOTS])
def test_serve_command_writes_the_commands_that_booted(path):
    """The planner-generated commands booted on the H200s (vLLM 0.26.0, 2026-11-30 and 12-01) are exactly what
    serve_command writes for the same inputs (serve_bench adds only a local model path, its port and
    ``--load-format dummy --seed 0 [--tokenizer DIR]``), less the ``--block-size 16`` they gave, which serve_command now
    leaves to vLLM (its default, and what its FLASH_ATTN backend on an H200 takes); and vLLM logged a KV pool within
    3 % of our prediction (+0.23 %, +0.03 %, +2.36 % on 11-30; +0.23 %, +0.025 % at max-model-len 1216, +0.03 % at TP
    2 on 12-01)."""
    dep_rec, boot = records(path, "deploy")[0], records(path, "boot")[0]
    argv = dep_rec["argv"]
    parse_serve_args(argv[2:])
    m, g = catalog.model(dep_rec["model"]), catalog.gpu(dep_rec["gpu"])
    tp = int(argv[argv.index("--tensor-parallel-size") + 1])
    dep = Deployment.for_gpu(g, num_gpus=tp, tensor_parallel=tp, weight_dtype=dep_rec["weight_dtype"],
                             kv_cache_dtype=dep_rec["kv_cache_dtype"])
    port = int(argv[argv.index("--port") + 1])
    prof, _ = catalog.resolve_profile("auto", g.id)
    cmd = serve_command(m, g, dep, max_model_len=int(argv[argv.index("--max-model-len") + 1]), profile=prof,
                        model_path=argv[2], port=port, extra_args=tuple(argv[argv.index("--load-format"):]),
                        enable_prefix_caching="--no-enable-prefix-caching" not in argv)
    i = argv.index("--block-size")
    assert argv[i + 1] == "16" and list(cmd.argv) == argv[:i] + argv[i + 2:]
    assert cmd.env == dep_rec["env"]
    assert cmd.predicted_kv_pool_bytes_per_gpu == pytest.approx(boot["kv_available_bytes"], rel=0.03)


def _bundles():
    """A spread of plans: TP 1, TP 2, fp8 weights and KV, no prefix caching, speculative decoding,
    disaggregated, a replica across nodes."""
    h200, h100 = catalog.gpu("h200-sxm"), catalog.gpu("h100-sxm")
    wl = Workload(prompt_tokens=2048, output_tokens=256, request_rate_per_s=10, ttft_slo_s=1.0, tpot_slo_s=0.1)
    yield deployment_bundle(catalog.model("llama-3.1-8b"), h200, Deployment.for_gpu(h200), wl, disaggregated=True)
    yield deployment_bundle(catalog.model("qwen2.5-32b"), h200, Deployment.for_gpu(h200, num_gpus=2, tensor_parallel=2),
                            wl, auto_layout=False, enable_prefix_caching=False)
    yield deployment_bundle(catalog.model("llama-3.1-70b"), h100,
                            Deployment.for_gpu(h100, weight_dtype="fp8", kv_cache_dtype="fp8"), wl,
                            spec_preset="eagle", spec_model="yuhuili/EAGLE-LLaMA3.1-Instruct-70B")
    yield deployment_bundle(catalog.model("llama-3.1-405b"), h100, Deployment.for_gpu(h100),
                            Workload(prompt_tokens=2048, output_tokens=256, concurrency=300))


BUNDLES = list(_bundles())


def all_serve_argvs(b) -> list[list[str]]:
    """Every vllm serve argv a bundle holds: serve.sh, the manifests' containers (and Ray head scripts)."""
    import shlex

    import yaml

    out = [list(b.serve.argv)]
    line = b.files["serve.sh"].strip().splitlines()[-1]
    words = shlex.split(line)
    out.append(words[next(i for i, w in enumerate(words) if w == "vllm"):])
    for name, text in b.files.items():
        if not name.startswith("k8s-"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc["kind"] == "Deployment":
                c = doc["spec"]["template"]["spec"]["containers"][0]
                if c["command"][:2] == ["vllm", "serve"]:
                    out.append(c["command"] + c["args"])
            elif doc["kind"] == "RayCluster":
                head = doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
                out.append(serve_argv_of_head(head["args"][0]))
    return out


@pytest.mark.parametrize("b", BUNDLES, ids=[f"{b.model.id}-tp{b.layout.tensor_parallel}pp{b.layout.pipeline_parallel}"
                                            for b in BUNDLES])
def test_every_generated_command_parses_with_the_pinned_flags(b):
    argvs = all_serve_argvs(b)
    assert len(argvs) >= 3
    for argv in argvs:
        assert argv[:2] == ["vllm", "serve"]
        parsed = parse_serve_args(argv[2:])
        assert parsed["model_tag"] == b.serve.argv[2]
        assert parsed["--max-model-len"] == str(b.max_model_len)
    assert all(a == argvs[0] for a in argvs[1:2])  # serve.sh is the command


def test_vllm_own_parser_accepts_every_generated_command():
    """Only where vLLM 0.26 is installed (the GPU machine): its own `vllm serve` parser, unknown flags fatal."""
    cli_args = pytest.importorskip("vllm.entrypoints.openai.cli_args")
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm serve")
    parser.add_argument("model_tag", nargs="?")  # `vllm serve` adds its positional before make_arg_parser
    parser = cli_args.make_arg_parser(parser)
    for b in BUNDLES:
        for argv in all_serve_argvs(b):
            ns = parser.parse_args(argv[2:])
            assert ns.max_model_len == b.max_model_len


def test_a_recurrent_state_hybrid_says_vllm_raises_its_block():
    """Granite-4.0-H-Small: vLLM raises the 16-token block to 528 (planner.memory.hybrid_block_tokens) whatever the
    command says; the command leaves the block to vLLM and says so, and its pool and concurrency count the 528-token
    pages.  An attention-only model gets no such note; a block other than vLLM's default is written."""
    from conftest import granite_4_h_small, mistral_7b

    gpu = catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    cmd = serve_command(granite_4_h_small(), gpu, Deployment.for_gpu(gpu), max_model_len=2200, profile=prof)
    argv = list(cmd.argv)
    assert "--block-size" not in argv  # vLLM's default, left to vLLM (which raises it)
    assert any("raises the KV block to 528 tokens" in n for n in cmd.notes)
    assert cmd.predicted_max_concurrency == 575  # (5 blocks of tokens + 9 of state) x 528 x 16,384 B a request
    plain = serve_command(mistral_7b(), gpu, Deployment.for_gpu(gpu), max_model_len=2200, profile=prof)
    assert not any("KV block" in n for n in plain.notes)
    wide = serve_command(mistral_7b(), gpu, Deployment.for_gpu(gpu, block_size_tokens=32), max_model_len=2200,
                         profile=prof)
    assert wide.argv[wide.argv.index("--block-size") + 1] == "32"  # a block other than vLLM's default is written


def test_the_sizing_table_says_how_much_of_a_request_is_recurrent_state():
    """`planner size`'s memory table: Granite-4.0-H-Small's 121.1 MB a request at 2,200 tokens is 77.9 MB of state (36
    pages of 528 x 4,096 B) whatever the context; an attention-only model's table has no such line."""
    from conftest import granite_4_h_small, mistral_7b

    from planner.plan import plan
    from planner.report import report_text

    gpu = catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    w = Workload(prompt_tokens=2000, output_tokens=200)
    text = report_text(plan(granite_4_h_small(), gpu, Deployment.for_gpu(gpu), w, prof))
    assert "KV per request (2,200 tokens)     0.121 GB" in text
    assert "of it recurrent state            0.078 GB (its linear layers', whatever the context)" in text
    assert "recurrent state" not in report_text(plan(mistral_7b(), gpu, Deployment.for_gpu(gpu), w, prof))


def test_prefix_caching_follows_vllms_default_for_the_model():
    """vLLM 0.26 serve turns automatic prefix caching on by default, except for a model with Mamba / linear-attention
    layers ("Hybrid models support prefix caching but keep it opt-in for now"): the command, the simulator's engine and
    the helm router follow that default unless asked, and a hybrid's command says what the setting means there."""
    from conftest import granite_4_h_small, mistral_7b

    from planner.serving.config import engine_setup, prefix_caching_for

    gpu = catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    dep = Deployment.for_gpu(gpu)
    hybrid, plain = granite_4_h_small(), mistral_7b()
    assert (prefix_caching_for(hybrid), prefix_caching_for(plain)) == (False, True)
    assert (prefix_caching_for(hybrid, True), prefix_caching_for(plain, False)) == (True, False)
    for model, asked, flag, note in ((hybrid, None, "--no-enable-prefix-caching", "keeps it opt-in"),
                                     (hybrid, True, "--enable-prefix-caching", "an upper bound"),
                                     (plain, None, "--enable-prefix-caching", None),
                                     (plain, False, "--no-enable-prefix-caching", None)):
        cmd = serve_command(model, gpu, dep, max_model_len=2200, profile=prof, enable_prefix_caching=asked)
        assert flag in cmd.argv and ({"--enable-prefix-caching", "--no-enable-prefix-caching"} - {flag}).isdisjoint(
            cmd.argv)
        says = [n for n in cmd.notes if "prefix caching" in n]
        assert (note is None and not says) or (len(says) == 1 and note in says[0]), says
        _, cfg = engine_setup(model, gpu, dep, prof, enable_prefix_caching=asked)
        assert cfg.enable_prefix_caching == ("--enable" in flag)
    on = [n for n in serve_command(hybrid, gpu, dep, max_model_len=2200, profile=prof,
                                   enable_prefix_caching=True).notes if "prefix caching" in n][0]
    assert "raised to 768 tokens" in on and "528 without caching" in on  # vLLM's 'all' mode block (Mamba-2 chunk 256)


def test_a_hybrids_bundle_routes_without_prefix_awareness_by_default():
    """The deployment bundle of Granite-4.0-H-Small (prefix caching off: vLLM's default for a hybrid) routes round
    robin and says why; asked to cache prefixes, it writes --enable-prefix-caching and routes prefix-aware."""
    from conftest import granite_4_h_small

    from planner.deploy.bundle import deployment_bundle

    gpu = catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    w = Workload(prompt_tokens=2000, output_tokens=200)
    for asked, routing, flag in ((None, "roundrobin", "--no-enable-prefix-caching"),
                                 (True, "prefixaware", "--enable-prefix-caching")):
        b = deployment_bundle(granite_4_h_small(), gpu, Deployment.for_gpu(gpu), w, profile=prof,
                              enable_prefix_caching=asked)
        assert f"routingLogic: {routing}" in b.files["helm-values-production-stack.yaml"]
        assert f" {flag} " in b.files["serve.sh"] or f" {flag}\n" in b.files["serve.sh"]
        assert sum("prefix caching" in n for n in b.notes) == 1
