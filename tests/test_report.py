"""The sizing report's export formats (planner.report): dict/DataFrame, CSV and JSON of raw SI numbers."""

from __future__ import annotations

import pytest
from conftest import make_deployment, make_gpu, mistral_7b

from planner.plan import plan
from planner.specs import Workload


def test_report_to_dict_is_json_safe():
    import json

    r = plan(mistral_7b(), make_gpu(), make_deployment(), Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=5))
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["calibration_mode"] == "ideal" and d["price_source"]
    assert d["gpus_needed"] >= 1 and d["max_concurrency"] == r.max_concurrency
    assert len(r.to_frame()) == 1


def test_report_writers(tmp_path):
    """CSV/JSON of a plan: raw numbers in unit-suffixed columns, price source and calibration mode included."""
    import json

    import pandas as pd

    from planner.report import latency_frame, memory_frame, write_csv, write_json

    r = plan(mistral_7b(), make_gpu(), make_deployment(), Workload(prompt_tokens=4096, output_tokens=512))
    df = pd.read_csv(write_csv([r, r], tmp_path / "r.csv"))
    assert len(df) == 2
    assert {"price_source", "price_date", "calibration_mode", "weight_bytes_per_gpu", "tpot_s"} <= set(df.columns)
    assert pd.api.types.is_float_dtype(df["tpot_s"]) and df["calibration_mode"].iloc[0] == "ideal"
    d = json.loads(write_json(r, tmp_path / "r.json").read_text())
    assert d["weight_bytes_per_gpu"] == pytest.approx(r.memory.weight_bytes)
    mem = memory_frame(r)
    assert mem["bytes_per_gpu"].sum() == pytest.approx(r.memory.gpu_memory_bytes)
    assert list(latency_frame(r)["phase"]) == ["ttft", "tpot"]



def test_a_sliding_window_plan_shows_what_admitting_a_request_asks():
    """Gemma-3-27B at 15,000 + 1,000 tokens on an H200: a request holds 1,000 blocks in the full group and 65 in each
    of 6 sliding groups (1,390 x 16 x 10 x 8,192 B = 1.822 GB) but is admitted only with 7 x 1,000 blocks free (9.175
    GB): the text says so, the JSON carries it, and the max concurrency is 1 + (pool - ask) // held.  A model without
    sliding layers asks what it holds and prints no such line."""
    from planner.io import catalog
    from planner.report import report_text
    from planner.specs import Deployment

    m, g = catalog.model("gemma-3-27b"), catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    r = plan(m, g, Deployment.for_gpu(g), Workload(prompt_tokens=15_000, output_tokens=1_000), prof)
    page = 16 * 10 * 8192
    assert r.kv_per_request_bytes_per_gpu == (1000 + 6 * 65) * page == 1_821_900_800
    assert r.kv_admission_bytes_per_gpu == 7 * 1000 * page == 9_175_040_000
    assert r.max_concurrency == 1 + int((r.memory.kv_pool_bytes - 7 * 1000 * page) // ((1000 + 6 * 65) * page))
    assert r.to_dict()["kv_admission_bytes_per_gpu"] == 9_175_040_000
    assert "admitting one asks free          9.175 GB" in report_text(r)
    dense = plan(mistral_7b(), make_gpu(), make_deployment(), Workload(prompt_tokens=4096, output_tokens=512))
    assert dense.to_dict()["kv_admission_bytes_per_gpu"] == dense.kv_per_request_bytes_per_gpu
    assert "admitting one asks free" not in report_text(dense)
