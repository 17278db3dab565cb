"""calibration/public_check.py: the public-measurement reader, the model mapping, each scenario's prediction
(arithmetic pinned against planner.phases / the simulator), every row compared or reported, and the bands."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from calibration import public_check as pc
from calibration.public_data import COLUMNS, OUT_COLUMNS
from planner.io import catalog
from planner.phases import decode_step_time, prefill_time
from planner.profile import ErrorBand
from planner.serving import engine_setup, simulate
from planner.specs import Deployment
from planner.serving.workloads import make_requests, poisson_arrivals

BASE = {"gpu": "h100-sxm", "engine": "vllm", "engine_version": "0.11.0", "model": "llama-3.1-8b",
        "weight_dtype": "bf16", "kv_cache_dtype": "bf16", "tensor_parallel": "1", "num_gpus": "1",
        "scenario": "single_request_latency", "batch_size_or_concurrency": "1", "request_rate_per_s": "",
        "input_tokens": "128", "output_tokens": "64", "metric": "decode_tokens_per_s_per_seq",
        "statistic": "mean", "value": "100", "source_url": "https://example.org/x", "source_title": "t",
        "source_date": "2025-01", "read_date": "2026-11-30", "note": "n"}


def write(tmp_path, rows, header=None):
    path = tmp_path / "public.csv"
    header = header or list(BASE)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({**BASE, **r})
    return path


def row(**over) -> pc.PublicRow:
    vals = {**BASE, **over}
    rec = {}
    for k in COLUMNS:
        v = vals[k]
        if k in ("tensor_parallel", "num_gpus", "batch_size_or_concurrency", "input_tokens", "output_tokens"):
            rec[k] = int(v) if v != "" else None
        elif k in ("request_rate_per_s", "value"):
            rec[k] = float(v) if v != "" else None
        else:
            rec[k] = v
    return pc.PublicRow(line=2, **rec)


def setup(r: pc.PublicRow, model_id: str):
    gpu, model = catalog.gpu(r.gpu), catalog.model(model_id)
    return model, gpu, catalog.profile_for(r.gpu, transfer=True)


# ------------------------------------------------------------------------------------------------ reader


def test_reader_reads_a_good_file(tmp_path):
    rows = pc.read_public(write(tmp_path, [{}, {"scenario": "request_rate", "request_rate_per_s": "1.5"}]))
    assert [r.line for r in rows] == [2, 3]
    assert rows[0].tensor_parallel == 1 and rows[0].value == 100.0 and rows[0].request_rate_per_s is None
    assert rows[1].request_rate_per_s == 1.5


@pytest.mark.parametrize("over, where", [
    ({"value": "fast"}, "line 3, column 'value': not a number ('fast')"),
    ({"value": ""}, "line 3, column 'value': empty"),
    ({"value": "-1"}, "line 3, column 'value'"),
    ({"num_gpus": "1.5"}, "line 3, column 'num_gpus': expected a whole number"),
    ({"tensor_parallel": "8"}, "line 3, column 'tensor_parallel': 8 exceeds num_gpus 1"),
    ({"scenario": "burst"}, "line 3, column 'scenario': unknown scenario 'burst'"),
    ({"metric": "tokens"}, "line 3, column 'metric': unknown metric 'tokens'"),
    ({"weight_dtype": "fp6"}, "line 3, column 'weight_dtype'"),
    ({"gpu": "h999"}, "line 3, column 'gpu': unknown GPU id 'h999'"),
    ({"model": ""}, "line 3, column 'model': empty"),
])
def test_reader_errors_name_line_and_column(tmp_path, over, where):
    with pytest.raises(pc.PublicDataError, match="public.csv " + where.replace("(", r"\(").replace(")", r"\)")):
        pc.read_public(write(tmp_path, [{}, over]))


def test_reader_counts_lines_across_quoted_newlines(tmp_path):
    path = write(tmp_path, [{"note": "two\nlines"}, {"value": "x"}])
    with pytest.raises(pc.PublicDataError, match="line 4, column 'value'"):
        pc.read_public(path)


def test_reader_missing_column_extra_field_and_missing_file(tmp_path):
    with pytest.raises(pc.PublicDataError, match="line 1: missing column.*value"):
        pc.read_public(write(tmp_path, [{}], header=[k for k in BASE if k != "value"]))
    path = write(tmp_path, [{}])
    path.write_text(path.read_text() + ",".join(BASE.values()) + ",extra\n")
    with pytest.raises(pc.PublicDataError, match="line 3.*more than the header"):
        pc.read_public(path)
    with pytest.raises(pc.PublicDataError, match="cannot read"):
        pc.read_public(tmp_path / "nope.csv")


# ------------------------------------------------------------------------------------------ models


def test_model_mapping():
    assert pc.map_model("llama-3.1-405b") == ("llama-3.1-405b", "catalog id")
    assert pc.map_model("meta-llama/Llama-3.3-70B-Instruct")[0] == "llama-3.1-70b"
    assert pc.map_model("meta-llama/Meta-Llama-3-8B")[0] == "llama-3.1-8b"
    assert pc.map_model("meta-llama/Llama-2-70b-chat-hf")[1].startswith("approx.")
    for name in ("meta-llama/Llama-2-7b-hf", "TheBloke/Llama-2-7B-GPTQ", "Qwen/Qwen3-8B", "acme/unknown-1b"):
        mid, why = pc.map_model(name)
        assert mid is None and why
    # every equivalent names a catalog model, and the docstring table documents each one
    for name, (mid, _) in pc.EQUIVALENT.items():
        assert catalog.model(mid).id == mid
        assert name.split("/")[1].removesuffix("-chat-hf").removesuffix("-hf") in pc.__doc__


def test_llama2_70b_is_within_a_few_percent_of_llama31_70b():
    m = catalog.model("llama-3.1-70b")
    llama2 = m.published_total_params - 2 * (128256 - 32000) * m.hidden_size
    assert 68.9e9 < llama2 < 69.1e9 and (m.published_total_params - llama2) / llama2 < 0.025


@pytest.mark.parametrize("model, dtype, family", [
    ("llama-3.1-8b", "bf16", "dense"), ("llama-3.1-8b", "fp8", "fp8"), ("llama-3.1-8b", "int4", "int4"),
    ("mixtral-8x7b", "bf16", "moe"), ("gpt-oss-20b", "mxfp4", "mxfp4"), ("qwen3-30b-a3b", "nvfp4", "mxfp4"),
    (None, "fp16", "dense"),
])
def test_family(model, dtype, family):
    assert pc.family_of(model, dtype) == family


# ---------------------------------------------------------------------------------------- predictions


def test_batch1_decode_row_is_tokens_over_summed_steps():
    r = row(input_tokens="0", output_tokens="512")
    model, gpu, prof = setup(r, "llama-3.1-8b")
    dep = Deployment.for_gpu(gpu)
    got, _ = pc.predict(r, model, gpu, prof)
    steps = decode_step_time(model, gpu, dep, 1, np.arange(1, 513), prof).time_s
    assert got == pytest.approx(512 / np.sum(steps), rel=1e-12)
    one, _ = pc.predict(replace(r, output_tokens=1), model, gpu, prof)
    assert one == pytest.approx(1 / decode_step_time(model, gpu, dep, 1, 1, prof).time_s, rel=1e-12)


def test_single_request_ttft_is_prefill_time():
    r = row(metric="ttft_s", input_tokens="2048", output_tokens="1", weight_dtype="fp8", kv_cache_dtype="fp8")
    model, gpu, prof = setup(r, "llama-3.1-8b")
    got, said = pc.predict(r, model, gpu, prof)
    dep = Deployment.for_gpu(gpu, weight_dtype="fp8", kv_cache_dtype="fp8")
    assert got == pytest.approx(prefill_time(model, gpu, dep, 2048, 1, prof).time_s, rel=1e-12)
    assert "KV dtype" not in said


def test_fixed_batch_e2e_is_the_batch_makespan():
    r = row(scenario="fixed_batch", batch_size_or_concurrency="8", input_tokens="32", output_tokens="128",
            metric="e2e_latency_s")
    model, gpu, prof = setup(r, "llama-3.1-8b")
    got, said = pc.predict(r, model, gpu, prof)
    cost, cfg = engine_setup(model, gpu, Deployment.for_gpu(gpu), prof)
    res = simulate(make_requests(np.full(8, 32), np.full(8, 128), np.full(8, np.nan), closed_loop=8), cost, cfg)
    assert got == pytest.approx(res.duration_s, rel=1e-12) and "8 requests simulated" in said
    tput, _ = pc.predict(replace(r, metric="output_tokens_per_s"), model, gpu, prof)
    assert tput == pytest.approx(8 * 128 / res.duration_s, rel=1e-9)


def test_system_throughput_is_per_replica_times_replicas():
    r = row(scenario="offline_throughput", batch_size_or_concurrency="", input_tokens="128", output_tokens="128",
            metric="output_tokens_per_s", note="64 prompts")
    model, gpu, prof = setup(r, "llama-3.1-8b")
    one, _ = pc.predict(r, model, gpu, prof)
    eight, said = pc.predict(replace(r, num_gpus=8), model, gpu, prof)
    per_gpu, _ = pc.predict(replace(r, num_gpus=8, metric="output_tokens_per_s_per_gpu"), model, gpu, prof)
    assert eight == pytest.approx(8 * one, rel=1e-12) and per_gpu == pytest.approx(one, rel=1e-12)
    assert "8 replicas of TP1" in said and "64 requests simulated" in said


def test_workload_shapes_per_scenario():
    burst, _ = pc._requests(row(scenario="offline_throughput", note=""), 1, 1024)
    assert len(burst) == 4096 and np.all(burst.arrival_s == 0) and burst.closed_loop == 0
    loop, _ = pc._requests(row(scenario="fixed_concurrency", batch_size_or_concurrency="25"), 1, 1024)
    assert len(loop) == 200 and loop.closed_loop == 25 and np.all(np.isnan(loop.arrival_s))
    assert len(pc._requests(row(scenario="fixed_concurrency", batch_size_or_concurrency="100"), 1, 1024)[0]) == 400
    rate, _ = pc._requests(row(scenario="request_rate", request_rate_per_s=8.0, note="200 ShareGPT prompts",
                               input_tokens="", output_tokens=""), 4, 1024)
    assert len(rate) == 200 and np.allclose(rate.arrival_s, poisson_arrivals(200, 2.0, seed=0))
    with pytest.raises(pc.NotComparable, match="input lengths"):
        pc._requests(row(scenario="offline_throughput", input_tokens="", note="OpenOrca"), 1, 1024)


def test_stated_sharegpt_means_are_used():
    r = row(scenario="offline_throughput", input_tokens="", output_tokens="",
            note="ShareGPT 1000 prompts (215,312 input / ~194k generated tokens in total)")
    p, o, said = pc._lengths(r, 1000)
    assert "215/194" in said and 170 < p.mean() < 260 and 150 < o.mean() < 240


def test_concurrency_above_the_default_raises_max_num_seqs_and_tgi_tpot_includes_prefill():
    r = row(gpu="a100-sxm-80gb", scenario="fixed_concurrency", batch_size_or_concurrency="300",
            input_tokens="64", output_tokens="32", metric="tpot_s", statistic="median")
    dep, said = pc._deployment(r, catalog.gpu(r.gpu))
    assert dep.max_num_seqs == 300 and "max_num_seqs raised to 300" in said
    model, gpu, prof = setup(r, "llama-3.1-8b")
    vllm, _ = pc.predict(r, model, gpu, prof)
    tgi, _ = pc.predict(replace(r, engine="tgi"), model, gpu, prof)
    assert tgi > vllm  # TGI's per-token latency counts the prefill


def test_not_comparable_rows_say_why():
    r = row(gpu="rtx-4090", model="llama-3.1-70b")
    (c,) = pc.compare([r])
    assert not c.comparable and c.predicted is None and "does not fit" in c.reason
    (c,) = pc.compare([row(model="Qwen/Qwen3-8B")])
    assert not c.comparable and "no catalog equivalent" in c.reason and c.error_pct is None
    (c,) = pc.compare([row(engine="tensorrt-llm", weight_dtype="")])
    assert not c.comparable and "not stated" in c.reason


# ------------------------------------------------------------------------------- the real CSV and bands


@pytest.fixture(scope="module")
def real():
    rows = pc.read_public()
    return rows, pc.compare(rows)


def test_every_public_row_is_compared_or_reported(real):
    rows, comps = real
    assert len(rows) == len(comps) == 188
    assert [c.row for c in comps] == rows
    for c in comps:
        if c.comparable:
            assert c.predicted > 0 and np.isfinite(c.error_pct) and c.reason == ""
            assert c.profile_mode == ("calibrated" if c.row.gpu == "h200-sxm" else "transferred")
        else:
            assert c.predicted is None and c.reason
    assert sum(c.comparable for c in comps) >= 130
    committed = list(csv.DictReader(pc.OUT_PATH.open()))
    assert list(committed[0]) == list(OUT_COLUMNS)
    assert [int(r["line"]) for r in committed] == [r.line for r in rows]
    assert [r["comparable"] == "yes" for r in committed] == [c.comparable for c in comps]


def comp(gpu, err, engine="vllm", mode="transferred", regime="decode", url="u1", ok=True):
    r = row(gpu=gpu, engine=engine, source_url=url, value="100")
    return pc.Comparison(r, "llama-3.1-8b", "dense", regime, ok, "" if ok else "why", mode,
                         100 + err if ok else None, "")


def test_transfer_bands_keys_and_bases():
    comps = [comp("a100-sxm-80gb", e, engine=eng, url=u) for e, eng, u in
             [(10, "vllm", "u1"), (-20, "vllm", "u2"), (30, "vllm", "u1"), (-40, "vllm", "u1")]]
    comps += [comp("a100-sxm-80gb", 90, engine="tgi", url="u3")] * 3  # another engine: reported, not a band
    comps += [comp("h100-sxm", 5), comp("h100-sxm", 5)]  # only 2 points: no band
    comps += [comp("h200-sxm", 1, mode="calibrated")] * 3  # the control: no band
    comps += [comp("l40s", 0, ok=False)] * 3  # not comparable: ignored
    comps += [comp("a100-sxm-80gb", 50, regime="throughput")] * 3
    bands = pc.transfer_bands(comps)
    assert set(bands) == {"a100-sxm-80gb/decode", "a100-sxm-80gb/throughput"}
    b = bands["a100-sxm-80gb/decode"]
    assert isinstance(b, ErrorBand) and b.n == 4
    assert b.median_pct == pytest.approx(25.0) and b.pct == pytest.approx(round(np.percentile([10, 20, 30, 40], 90), 2))
    assert b.basis == "public: vllm (4 points, 2 sources)"
    assert bands["a100-sxm-80gb/throughput"].basis == "public: vllm (3 points, 1 source)"


def test_committed_profile_carries_the_transfer_bands(real):
    _, comps = real
    bands = pc.transfer_bands(comps)
    committed = catalog.profile_for("h200-sxm").transfer_error_bands
    assert set(committed) == set(bands) and "h100-sxm/throughput" in bands
    for k, b in bands.items():
        assert committed[k].n == b.n and committed[k].pct == pytest.approx(b.pct, abs=0.05), k
        assert k.split("/")[1] in ("decode", "prefill", "throughput") and not k.startswith("h200-sxm")


def test_control_pairs_remove_the_engine_offset():
    a = comp("h100-sxm", -50)
    twin = comp("h200-sxm", -60, mode="calibrated")
    (p,) = pc.control_pairs([a, twin, comp("h100-sxm", 0, engine="tgi")])
    assert p["relative_error_pct"] == pytest.approx(100 * (0.5 / 0.4 - 1))


def test_error_table_and_markdown():
    comps = [comp("a100-sxm-80gb", e) for e in (10, -20, 30)] + [comp("l40s", 5, engine="llama.cpp")]
    t = pc.error_table(comps, ("gpu", "engines"))
    assert [(r["gpu"], r["engines"], r["n"]) for r in t] == [("a100-sxm-80gb", "vllm", 3), ("l40s", "other engines", 1)]
    assert t[0]["median_abs_pct"] == pytest.approx(20.0) and t[0]["median_signed_pct"] == pytest.approx(10.0)
    assert pc.markdown(t).splitlines()[2].startswith("| a100-sxm-80gb | vllm | 3 | 20 % |")
