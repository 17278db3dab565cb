"""The dashboard's Capacity view (AppTest): nothing heavy until asked, then the metrics, the chart of demand vs
capacity vs attainment, the mixes and the downloads; and the figure itself."""

from __future__ import annotations

import base64
import json

import numpy as np

from test_app import new_app, nodes, run


def test_capacity_view_plans_on_request():
    at = run(new_app(), "Capacity")
    assert any("Plan capacity" in i.value for i in at.info)
    assert not nodes(at, "plotly_chart")
    at.number_input(key="cap_peak").set_value(30.0)
    at.selectbox(key="cap_days").set_value(1)
    at.button(key="cap_run").click()
    run(at)
    labels = [m.label for m in at.metric]
    assert {"Replicas", "Autoscaled", "Static peak", "In SLO (replay)", "Lead time"} <= set(labels)
    spec = json.loads(nodes(at, "plotly_chart")[0].proto.spec)
    names = {t.get("name") for t in spec["data"]}
    assert {"demand (req/s)", "autoscaled replicas × knee (req/s)", "within the targets (replay, %)"} <= names
    demand = next(t for t in spec["data"] if t.get("name") == "demand (req/s)")
    y = demand["y"]
    y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]) if isinstance(y, dict) else np.array(y)
    assert len(demand["x"]) == 24 and demand["x"][14].startswith("2024-01-01T14:00") and y.max() == 30.0
    assert [b for b in nodes(at, "download_button")]
    assert "Against the API" in " ".join(m.value for m in at.markdown)
