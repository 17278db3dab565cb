"""The Streamlit dashboard through streamlit.testing's AppTest: every view, every preset, widget changes
that move numbers the right way, the URL round trip, and hostile inputs that must end in a plain
message (st.error / st.warning), never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from planner.presets import PRESETS

APP = str(Path(__file__).resolve().parents[1] / "app.py")
VIEWS = ["Memory", "Latency", "Roofline", "Triangle", "Cost", "Sizing report", "Load"]

#: Mistral-7B-v0.3's config.json (the keys the importer reads), for the upload path.
MISTRAL_CONFIG = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


# ------------------------------------------------------------------------------------------ helpers


def new_app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = str(v)
    return at


def run(at: AppTest, view: str | None = None) -> AppTest:
    if view is not None:
        at.session_state["view"] = view
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def nodes(at: AppTest, kind: str) -> list:
    """Every element of ``kind`` (e.g. 'plotly_chart') in the main area, tabs included."""
    out, stack = [], [at.main]
    while stack:
        for child in getattr(stack.pop(), "children", {}).values():
            if getattr(child, "type", None) == kind:
                out.append(child)
            stack.append(child)
    return out


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def num(text: str) -> float:
    """'1,234' / '113.9 GiB' / '$0.17' / '22.0 ms' -> the number."""
    return float(text.replace("$", "").replace(",", "").split()[0])


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def figure_titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in nodes(at, "plotly_chart")]


@pytest.fixture
def app() -> AppTest:
    return run(new_app())


# ------------------------------------------------------------------------------------ default + views


def test_default_scenario_shows_every_headline_metric_with_units(app):
    labels = [m.label for m in app.metric]
    assert labels == ["Max concurrent users", "KV cache pool / GPU", "TTFT (one prompt)", "SLO-feasible batch",
                      "TPOT at that batch", "$ / M output tokens"]
    assert metric(app, "KV cache pool / GPU").endswith("GiB")
    assert metric(app, "TTFT (one prompt)").endswith(" ms")
    assert metric(app, "$ / M output tokens").startswith("$")
    assert num(metric(app, "Max concurrent users")) > 0
    assert not errors(app)


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_renders_with_its_explanation(view):
    at = run(new_app(), view)
    assert not errors(at), errors(at)
    captions = " ".join(c.value for c in at.caption)
    vocab = {"Memory": "KV cache", "Latency": "TTFT", "Roofline": "memory-bound", "Triangle": "pick two",
             "Cost": "$/Mtok", "Sizing report": "sweep", "Load": "TPOT/ITL"}
    assert vocab[view] in captions
    charts = figure_titles(at)
    expected = {
        "Memory": ["Memory per GPU", "Max concurrent users vs context length"],
        "Latency": ["TTFT vs prompt length (prefill)", "TPOT vs batch size (decode)",
                    "TPOT vs context length (decode reads the whole KV cache)", "Throughput vs batch size"],
        "Roofline": ["Roofline: NVIDIA H200 SXM 141GB"],
        "Triangle": ["Quality – latency – throughput: pick two"],
        "Cost": ["Cost per million tokens at the SLO-feasible batch"],
    }.get(view, [])
    for title in expected:
        assert title in charts, (title, charts)


def test_memory_view_answers_the_seeds_160_user_question(app):
    text = " ".join(m.value for m in app.markdown)
    assert "For **160 concurrent users**" in text and "tokens**" in text
    table = nodes(app, "dataframe")[0].value
    row = table[table["quantity"] == "KV bytes per token (whole model)"].iloc[0]
    assert row["value"] == "131,072 B"  # seeds: 2 × 32 × 8 × 128 × 2 B


def test_roofline_names_the_bounds():
    at = run(new_app(), "Roofline")
    table = nodes(at, "dataframe")[0].value
    bounds = dict(zip(table["label"], table["bound"]))
    assert bounds["prefill"] == "compute-bound"
    assert bounds["decode, batch 1"] == "memory-bound"


def test_cost_view_calls_out_the_cheapest_configuration_in_words():
    at = run(new_app(), "Cost")
    [msg] = [s.value for s in at.success]
    assert "per million output tokens" in msg and "batch" in msg and "TPOT" in msg and " × " in msg


def test_sizing_report_offers_the_cli_csv():
    at = run(new_app(), "Sizing report")
    [button] = at.get("download_button")
    assert button.label == "Download the sweep as CSV"
    code = " ".join(c.value for c in nodes(at, "code"))
    assert "planner sweep -m mistral-7b-v0.3 --prompt-tokens 4096 --output-tokens 512" in code
    assert len(nodes(at, "dataframe")[0].value) > 100


def simulate_load(at: AppTest) -> AppTest:
    run(at, "Load")
    at.button(key="load_run").click()
    return run(at)


def test_load_view_simulates_on_request_and_finds_the_knee():
    at = run(new_app(), "Load")
    assert any("Press **Simulate**" in i.value for i in at.info)
    assert not nodes(at, "plotly_chart")  # nothing heavy until asked
    simulate_load(at)
    text = " ".join(m.value for m in at.markdown)
    assert "(the knee)" in text and "requests/s" in text
    spec = json.loads(nodes(at, "plotly_chart")[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == {"TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"}
    knee = float(text.split("up to about **")[1].split()[0].replace(",", ""))
    # a stricter TTFT target moves the knee down
    at.number_input(key="ttft_ms").set_value(300)
    run(at)
    assert any("Press **Simulate**" in i.value for i in at.info)  # the scenario changed: results are not stale
    simulate_load(at)
    text = " ".join(m.value for m in at.markdown)
    assert float(text.split("up to about **")[1].split()[0].replace(",", "")) < knee


def test_load_view_scales_with_replicas():
    at = run(new_app(gpus=2))
    simulate_load(at)
    assert "2 replica(s)" in " ".join(m.value for m in at.markdown)


# --------------------------------------------------------------------------------------------- presets


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_applies_and_plans(name):
    at = run(new_app())
    at.button(key=f"preset-{name}").click()
    run(at)
    p = PRESETS[name]
    assert at.session_state["prompt"] == p.prompt_tokens
    assert at.session_state["output"] == p.output_tokens
    assert at.session_state["wdtype"] == p.weight_dtype and at.session_state["kvdtype"] == p.kv_cache_dtype
    assert at.session_state["users"] == p.target_users
    assert at.session_state["tp"] == p.tensor_parallel and at.session_state["gpus"] == p.num_gpus
    assert at.session_state["model"] in p.model_ids
    assert not errors(at), errors(at)
    assert num(metric(at, "SLO-feasible batch")) >= 1
    assert any(name in c.value for c in at.sidebar.caption)
    for view in VIEWS:  # every view works under every preset
        run(at, view)
        assert not errors(at), (view, errors(at))


# ---------------------------------------------------------------------------- numbers move the right way


def users(at: AppTest) -> float:
    return num(metric(at, "Max concurrent users"))


def test_longer_context_fits_fewer_users(app):
    before = users(app)
    app.number_input(key="prompt").set_value(16384)
    assert users(run(app)) < before / 3


def test_fp8_kv_cache_fits_more_users(app):
    before = users(app)
    app.selectbox(key="kvdtype").set_value("fp8")
    after = users(run(app))
    assert after > 1.9 * before  # half the bytes per token: about twice the users


def test_int4_weights_free_memory_for_more_users(app):
    before = users(app)
    app.selectbox(key="wdtype").set_value("int4")
    assert users(run(app)) > before


def test_more_gpus_serve_more_users(app):
    before = users(app)
    app.number_input(key="gpus").set_value(4)
    assert users(run(app)) == pytest.approx(4 * before)


def test_lower_utilization_shrinks_the_kv_pool(app):
    before = num(metric(app, "KV cache pool / GPU"))
    app.slider(key="util").set_value(0.5)
    assert num(metric(run(app), "KV cache pool / GPU")) < before


def test_tighter_tpot_target_shrinks_the_batch(app):
    before = num(metric(app, "SLO-feasible batch"))
    app.number_input(key="tpot_ms").set_value(10.0)
    after = num(metric(run(app), "SLO-feasible batch"))
    assert 1 <= after < before
    assert num(metric(app, "TPOT at that batch")) <= 10.0


def test_longer_prompt_raises_ttft(app):
    before = num(metric(app, "TTFT (one prompt)"))
    app.number_input(key="prompt").set_value(32000)
    assert num(metric(run(app), "TTFT (one prompt)")) > 4 * before


def test_price_override_scales_the_cost(app):
    before = num(metric(app, "$ / M output tokens"))
    catalog_price = 4.54  # hardware/h200-sxm.yaml
    app.number_input(key="price").set_value(2 * catalog_price)
    assert num(metric(run(app), "$ / M output tokens")) == pytest.approx(2 * before, rel=0.1)


# --------------------------------------------------------------------------------------------- the URL


def test_url_query_params_reopen_a_scenario():
    at = run(new_app(prompt=16384, kvdtype="fp8", gpus=2, tp=2, gpu="h100-sxm", model="llama-3.1-8b"))
    assert at.session_state["prompt"] == 16384
    assert at.session_state["kvdtype"] == "fp8"
    assert at.session_state["gpu"] == "h100-sxm" and at.session_state["model"] == "llama-3.1-8b"
    via_url = users(at)
    at2 = run(new_app())
    at2.selectbox(key="model").set_value("llama-3.1-8b")
    at2.selectbox(key="gpu").set_value("h100-sxm")
    at2.number_input(key="gpus").set_value(2)
    at2.selectbox(key="tp").set_value(2)
    at2.number_input(key="prompt").set_value(16384)
    at2.selectbox(key="kvdtype").set_value("fp8")
    assert users(run(at2)) == via_url


def test_every_scenario_widget_is_bound_to_the_url(app):
    """The browser writes bound widgets to the URL (tests/test_browser.py checks that end to end);
    here: every scenario widget and the view tabs carry a query-parameter key."""
    widgets = [*app.sidebar.selectbox, *app.sidebar.number_input, *app.sidebar.slider, *app.sidebar.radio]
    bound = {w.proto.query_param_key for w in widgets}
    assert bound >= {"model", "gpu", "gpus", "tp", "wdtype", "kvdtype", "util", "prompt", "output", "users",
                     "ttft_ms", "tpot_ms", "price", "calib"}
    [tabs] = nodes(app, "tab_container")
    assert tabs.proto.tab_container.query_param_key == "view"


def test_view_reopens_from_the_url():
    at = run(new_app(view="Roofline"))
    assert any(t.startswith("Roofline") for t in figure_titles(at))


# ------------------------------------------------------------------------------------------- hostile


@pytest.mark.parametrize("key,value,fragment", [
    ("prompt", 0, "Prompt length must be at least 1"),
    ("output", 0, "Output length must be at least 1"),
    ("users", 0, "Target concurrent users must be at least 1"),
    ("gpus", 0, "GPU count must be at least 1"),
    ("ttft_ms", 0, "TTFT target must be above 0 ms"),
    ("tpot_ms", 0.0, "TPOT target must be above 0 ms"),
])
def test_zero_inputs_give_a_plain_error(app, key, value, fragment):
    app.number_input(key=key).set_value(value)
    run(app)
    assert any(fragment in e for e in errors(app)), errors(app)


def test_huge_prompt_explains_with_numbers(app):
    app.number_input(key="prompt").set_value(10_000_000)
    run(app)
    errs = " ".join(errors(app))
    assert "exceeds the model's 32,768-token limit" in errs
    assert "GiB" in errs  # one request needs X GiB of KV, the pool has Y GiB
    assert users(app) == 0
    for view in VIEWS:
        run(app, view)


def test_model_that_does_not_fit_says_needs_and_has():
    at = run(new_app(model="llama-3.1-405b", gpu="l4"))
    errs = " ".join(errors(at))
    assert "does not fit: needs" in errs and "GiB" in errs and "has" in errs
    for view in VIEWS:
        run(at, view)


def test_tensor_parallel_larger_than_gpu_count(app):
    app.selectbox(key="tp").set_value(8)
    run(app)
    assert any("Tensor parallel 8 needs at least 8 GPUs" in e for e in errors(app))


def test_impossible_tpot_target_is_explained(app):
    app.number_input(key="tpot_ms").set_value(0.5)
    run(app)
    assert any("TPOT target 0.5 ms is below" in e for e in errors(app)), errors(app)
    run(app, "Cost")
    assert any("No GPU in the catalog meets" in w.value for w in app.warning)


def test_huge_gpu_count_and_tiny_utilization_do_not_crash(app):
    app.number_input(key="gpus").set_value(4096)
    app.slider(key="util").set_value(0.1)
    run(app)
    for view in VIEWS:
        run(app, view)


def test_hostile_url_values_are_ignored():
    at = run(new_app(prompt="-5", gpu="no-such-gpu", util="7", tp="3", model="../../etc/passwd", view="Nope"))
    assert at.session_state["prompt"] == 4096 and at.session_state["gpu"] == "h200-sxm"
    assert not errors(at)


# -------------------------------------------------------------------------------------------- uploads


def upload(contents: bytes, name: str = "config.json") -> AppTest:
    at = run(new_app())
    at.selectbox(key="model").set_value("upload config.json")
    run(at)
    assert any("Upload a config.json" in i.value for i in at.sidebar.info)
    at.file_uploader(key="upload").upload(name, contents, "application/json")
    return run(at)


@pytest.mark.parametrize("contents,fragment", [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe\x00garbage", "not valid JSON"),
    (json.dumps({"hidden_size": 4096}).encode(), "missing"),
    (json.dumps([1, 2, 3]).encode(), "expected a JSON object"),
    (json.dumps({**MISTRAL_CONFIG, "num_key_value_heads": 7}).encode(), "not a multiple"),
    (json.dumps({**MISTRAL_CONFIG, "hidden_size": -1}).encode(), "hidden_size"),
    (b" " * (300 * 1024) + b"{}", "the limit is"),
    (b"[" * 200_000 + b"]" * 200_000, "the limit is"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (json.dumps({**MISTRAL_CONFIG, "num_hidden_layers": float("nan")}).encode(), "num_hidden_layers"),
])
def test_malformed_upload_gives_an_error_not_an_exception(contents, fragment):
    at = upload(contents)
    errs = [e.value for e in at.sidebar.error]
    assert any(fragment in e for e in errs), errs


def test_valid_upload_is_planned_like_the_catalog_model():
    at = upload(json.dumps(MISTRAL_CONFIG).encode())
    assert not errors(at) and not at.sidebar.error
    uploaded_users = users(at)
    catalog = run(new_app())
    assert uploaded_users == users(catalog)  # same architecture, same answer
    for view in VIEWS:
        run(at, view)
        assert not errors(at), (view, errors(at))


# ------------------------------------------------------------------------------------- calibration


@pytest.fixture
def calibrated_h200(monkeypatch):
    """A calibrated profile for the H200 (the committed profiles come from the calibration work)."""
    import streamlit as st

    from planner import catalog
    from planner.profile import CalibrationProfile, Residuals

    prof = CalibrationProfile(
        mode="calibrated", gpu_id="h200-sxm", engine="vllm", engine_version="0.26.0", created="2026-11-29",
        matmul_efficiency_max=0.7, weight_bandwidth_efficiency=0.8, kv_bandwidth_efficiency=0.8,
        step_overhead_s=0.002,
        residuals={"decode": Residuals(n=24, median_abs_error_pct=3.2, p90_abs_error_pct=7.5)})
    real = catalog.profile_for
    monkeypatch.setattr(catalog, "profile_for", lambda gpu_id, *a, **k: prof if gpu_id == "h200-sxm" else real(gpu_id))
    st.cache_resource.clear()
    st.cache_data.clear()
    yield prof
    st.cache_resource.clear()
    st.cache_data.clear()


def test_calibrated_profile_shows_provenance_and_changes_the_numbers(calibrated_h200):
    at = run(new_app())
    radio = at.radio(key="calib")
    assert not radio.disabled
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "vllm 0.26.0" in captions and "2026-11-29" in captions and "decode 3.2% (p90 7.5%)" in captions
    assert radio.value == "calibrated profile"  # the measured model is the default where a profile exists
    assert "latency model: calibrated profile" in " ".join(c.value for c in at.caption)
    cal_tpot = num(metric(at, "TPOT at that batch"))
    cal_ttft = num(metric(at, "TTFT (one prompt)"))
    radio.set_value("ideal roofline")
    run(at)
    assert "latency model: ideal roofline" in " ".join(c.value for c in at.caption)
    assert num(metric(at, "TTFT (one prompt)")) < cal_ttft  # the roofline's 100 % matmul efficiency: faster prefill
    assert num(metric(at, "TPOT at that batch")) != cal_tpot
    radio.set_value("calibrated profile")
    run(at)
    for view in VIEWS:
        run(at, view)
        assert not errors(at), (view, errors(at))


def test_without_its_own_profile_a_gpu_offers_the_transferred_calibration():
    at = run(new_app(gpu="l4", model="llama-3.1-8b"))
    assert not at.radio(key="calib").disabled
    assert any("Transferred calibration: measured on h200-sxm" in c.value for c in at.sidebar.caption)


def test_without_any_profile_the_calibrated_mode_is_disabled(monkeypatch):
    import streamlit as st

    from planner import catalog

    monkeypatch.setattr(catalog, "profile_for", lambda gpu_id, *a, **k: None)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = run(new_app(gpu="mi300x", model="llama-3.1-8b"))
    assert at.radio(key="calib").disabled
    assert any("No calibrated profile for" in c.value for c in at.sidebar.caption)
    st.cache_resource.clear()
    st.cache_data.clear()


# ------------------------------------------------------------------------------------ presets as data


def test_presets_are_the_seeds_three_corners():
    from planner.presets import CORNERS

    assert set(CORNERS) == {("quality", "latency"), ("quality", "throughput"), ("latency", "throughput")}
    assert CORNERS[("quality", "latency")] == "premium chat"
    assert CORNERS[("latency", "throughput")] == "autocomplete / free tier"
    chat, agents, auto = (PRESETS[n] for n in ("premium chat", "asynchronous agents", "autocomplete / free tier"))
    assert chat.tpot_slo_s < agents.tpot_slo_s and chat.ttft_slo_s < agents.ttft_slo_s  # latency matters for chat
    assert agents.prompt_tokens > chat.prompt_tokens  # agents re-send long scaffolding
    assert auto.weight_dtype in ("int4", "nf4", "mxfp4", "int8", "fp8")  # heavily quantised
    assert agents.target_users == 160  # the seeds' memory chart


def test_preset_resolution_falls_back_when_a_model_is_missing():
    from planner.presets import resolve

    vals = resolve(PRESETS["premium chat"], ["mistral-7b-v0.3"], ["a100-sxm-80gb"])
    assert vals["model_id"] == "mistral-7b-v0.3" and vals["gpu_id"] == "a100-sxm-80gb"
    none = resolve(PRESETS["premium chat"], [], [])
    assert none["model_id"] is None and none["gpu_id"] is None


def test_cost_view_row_for_the_scenario_gpu_matches_the_headline():
    at = run(new_app(), "Cost")
    table = next(d for d in nodes(at, "dataframe") if "configuration" in d.value.columns).value
    row = table[table["configuration"] == "1 × h200-sxm"].iloc[0]
    assert int(row["batch"]) == int(num(metric(at, "SLO-feasible batch")))
    assert row["$/M output"] == metric(at, "$ / M output tokens")
