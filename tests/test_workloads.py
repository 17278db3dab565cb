"""planner.serving.workloads: preset shapes, bursty arrivals, traces, input validation."""

from __future__ import annotations

import numpy as np
import pytest

from planner.serving import EngineConfig
from planner.io.traces import load_trace
from planner.serving.workloads import agentic, batch, chat, make_requests, rag, synthetic


def test_presets_shapes():
    c = chat(2000, rate_per_s=5, seed=0)
    assert 100 < c.prompt_tokens.mean() < 220 and 250 < c.output_tokens.mean() < 420  # ShareGPT means 161 / 338
    assert np.all(np.diff(c.arrival_s) > 0)
    assert c.arrival_s[-1] == pytest.approx(2000 / 5, rel=0.1)
    r = rag(300, seed=0)
    assert r.prompt_tokens.mean() > 3000 and (r.prefix_group == 0).all()
    a = agentic(10, turns=4)
    assert len(a) == 40 and (a.prompt_tokens.reshape(10, 4)[:, 1:] > a.prompt_tokens.reshape(10, 4)[:, :-1]).all()
    b = batch(50)
    assert (b.arrival_s == 0).all()


def test_bursty_arrivals_have_the_asked_cv():
    from planner.serving.workloads import gamma_arrivals

    gaps = np.diff(gamma_arrivals(20000, 10.0, cv=3.0, seed=1))
    assert gaps.mean() == pytest.approx(0.1, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


def test_trace_csv_and_jsonl(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,10\n0.1,200,20\n")
    r = load_trace(p)
    assert r.arrival_s.tolist() == [0.1, 0.5] and r.prompt_tokens.tolist() == [200, 100]
    j = tmp_path / "t.jsonl"
    j.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n{"type": "header"}\n')
    assert len(load_trace(j)) == 1
    bad = tmp_path / "b.csv"
    bad.write_text("arrival_s,prompt_tokens\n0,1\n")
    with pytest.raises(ValueError, match="output_tokens"):
        load_trace(bad)


def test_bad_workload_input_names_the_field():
    with pytest.raises(ValueError, match="output_tokens"):
        make_requests(10, 0)
    with pytest.raises(ValueError, match="rate"):
        synthetic(10, 10, 10, rate_per_s=-1)
    with pytest.raises(ValueError, match="num_requests"):
        make_requests([10, 20], [1, 2, 3])
    with pytest.raises(ValueError, match="whole numbers"):
        make_requests(10.5, 2)
    with pytest.raises(ValueError, match="kv_capacity_tokens"):
        EngineConfig(kv_capacity_tokens=8)
