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

