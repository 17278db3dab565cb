"""The Streamlit dashboard through streamlit.testing's AppTest: every view, every preset, widget changes
that move numbers the right way, the URL round trip, the fleet headline, pins, the Deploy view, and hostile
inputs that must end in a plain message (st.error / st.warning) naming what was used instead, never an
exception.  tests/test_browser.py drives the same pages in Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from planner.dashboard.presets import PRESETS
from planner.io import catalog

APP = str(Path(__file__).resolve().parents[1] / "app.py")
VIEWS = ["Memory", "Latency", "Roofline", "Triangle", "Cost", "Sizing report", "Load", "Compare", "Deploy",
         "Capacity"]

#: Mistral-7B-v0.3's config.json (the keys the importer reads), for the upload path.
MISTRAL_CONFIG = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


# ------------------------------------------------------------------------------------------ helpers


def new_app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)  # a new scenario's fleet simulates its knees (cold)
    for k, v in query.items():
        at.query_params[k] = str(v)
    return at


def run(at: AppTest, view: str | None = None) -> AppTest:
    """Run the script, first switching to ``view`` (the tabs are bound to the URL: both must say it)."""
    if view is not None:
        at.session_state["view"] = view
        at.query_params["view"] = view
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


def warnings(at: AppTest) -> str:
    return " ".join(w.value for w in at.warning)


def figure_titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in nodes(at, "plotly_chart")]


@pytest.fixture
def app() -> AppTest:
    """TP 1 × PP 1: the widget-change tests compare one replica's numbers at one layout (with TP/PP auto the
    fleet engine would choose another layout as the inputs change)."""
    return run(new_app(tp=1, pp=1))


# ------------------------------------------------------------------------------------ default + views


def test_default_scenario_shows_the_fleet_then_every_replica_metric_with_units(app):
    labels = [m.label for m in app.metric]
    # the fleet engine's best fleet across every GPU first (issue #19), then the sidebar's replica
    assert labels == ["Best fleet", "Replicas", "GPUs", "$ / month", "Max concurrent users",
                      "KV cache pool / GPU", "TTFT (one prompt)", "SLO-feasible batch", "TPOT at that batch",
                      "$ / M output tokens"]
    assert metric(app, "KV cache pool / GPU").endswith("GiB")
    assert metric(app, "TTFT (one prompt)").endswith(" ms")
    assert metric(app, "$ / M output tokens").startswith("$") and metric(app, "$ / month").startswith("$")
    assert num(metric(app, "Max concurrent users")) > 0
    assert not errors(app)
    # 160 users on one GPU (TPOT holds a replica to 139): the CLI warns that the deployment as given misses its
    # targets; here the headline is that fleet answer itself (2 replicas = 2 GPUs), so no banner repeats it
    assert not warnings(app) and (metric(app, "Replicas"), metric(app, "GPUs")) == ("2", "2")


def test_fleet_headline_follows_the_demand(app):
    """The headline is the fleet engine's best fleet across GPUs: 5× the rate never costs less; users + think
    time are said with the rate they send; the caption names the `planner size` call that prints the same."""
    before = num(metric(app, "$ / month"))
    app.number_input(key="rate").set_value(50.0)
    run(app)
    assert num(metric(app, "$ / month")) >= before and num(metric(app, "GPUs")) >= num(metric(app, "Replicas"))
    caption = " ".join(c.value for c in app.caption)
    assert "for 50 req/s" in caption and "knee" in caption
    cmd = " ".join(c.value for c in app.code)
    assert "planner size -m mistral-7b-v0.3 --weight-dtype bf16" in cmd and "--rate 50" in cmd
    app.radio(key="demand").set_value("users + think time")
    run(app)
    app.number_input(key="active_users").set_value(20000.0)
    app.number_input(key="think_s").set_value(10.0)
    run(app)
    caption = " ".join(c.value for c in app.caption)
    assert "for 20,000 users thinking 10 s: " in caption
    assert "--users 20000 --think-time-s 10" in " ".join(c.value for c in app.code)


def test_memory_view_says_whether_the_model_fits_each_gpu():
    at = run(new_app(model="llama-3.1-70b", tp=1, pp=1), "Memory")
    [fits] = [t.value for t in at.table if "fits" in t.value.columns]
    assert fits.loc["NVIDIA H200 SXM 141GB", "fits"] == "❌ does not fit"  # 70B bf16 on one GPU
    assert fits.loc["AMD Instinct MI300X 192GB", "fits"] == "✅ fits"
    assert fits["sentence"].str.contains("needs").all()


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
    [fleet] = [s.value for s in at.success]  # what ranks: the engine's whole fleet for the headline's demand
    assert fleet.startswith("Cheapest whole fleet for 10 requests/s: **") and "/month**" in fleet
    assert "Ranked by whole-fleet $/month" in fleet and "$/Mtok is a column" in fleet
    [msg] = [s.value for s in at.info]
    assert msg.startswith("Cheapest configuration meeting every target:") and "all-in" in msg and " × " in msg
    assert "Ranked as `planner sweep` ranks configurations" in " ".join(c.value for c in at.caption)


def _report_first(at: AppTest):
    return next(d for d in nodes(at, "dataframe") if "rank" in d.value.columns and "gpu_id" in d.value.columns).value


@pytest.mark.parametrize("same", [True, False])
def test_cost_view_and_sizing_report_name_the_same_cheapest_configuration(same):
    """#13 defect 2: the Cost view ranked by the decode-share $/Mtok over its own grid, the report and the CLI
    by the all-in cost: they named different winners.  Now both show the same rows in the same ranking."""
    at = run(new_app(), "Cost")
    at.toggle(key="cost_same_dtypes").set_value(same)
    run(at)
    [msg] = [s.value for s in at.info]
    table = next(d for d in nodes(at, "dataframe") if "calibration" in d.value.columns).value
    first = table.iloc[0]
    run(at, "Sizing report")
    assert at.toggle(key="cost_same_dtypes").value is same
    row = _report_first(at).iloc[0]
    assert int(row["rank"]) == int(first["rank in CSV"]) == 1 and bool(row["meets_slo"])
    assert (int(row["tensor_parallel"]), str(row["weight_dtype"]), int(row["batch_size"])) == (
        int(first["TP"]), first["weights"], int(first["batch"]))
    assert f"batch {int(row['batch_size']):,}" in msg and f"(TP {int(row['tensor_parallel'])})" in msg
    code = " ".join(c.value for c in nodes(at, "code") if c.value.startswith("planner sweep"))  # the Cost view's
    assert ("--weight-dtype bf16 --kv-dtype bf16" in code) is same


def test_sizing_report_offers_the_cli_csv_and_the_plan_report():
    at = run(new_app(), "Sizing report")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download the sweep as CSV", "Download the plan report (Markdown)"]
    code = " ".join(c.value for c in nodes(at, "code"))
    assert ("planner sweep -m mistral-7b-v0.3 --prompt-tokens 4096 --output-tokens 512 --ttft-slo-ms 2000 "
            "--tpot-slo-ms 50 --users 160 --weight-dtype bf16 --kv-dtype bf16 --profile auto --csv sweep.csv") in code
    assert len(_report_first(at)) > 100


def simulate_load(at: AppTest) -> AppTest:
    run(at, "Load")
    at.button(key="load_run").click()
    return run(at)


def test_load_view_with_a_prompt_too_long_for_one_request_says_why():
    """#13 defect 6: "rate: must be a finite number > 0, got np.float64(0.0)" reached the Load view."""
    at = run(new_app(context=1_000_512), "Load")
    assert "Nothing to simulate: context (prompt + output) 1,000,512 tokens exceeds the model's 32,768-token limit" \
        in warnings(at)
    assert not [b for b in at.button if b.key == "load_run"]  # nothing to press


def test_load_view_simulates_on_request_and_finds_the_knee():
    at = run(new_app(tp=1, pp=1), "Load")  # one layout (TP auto may choose another for a stricter target)
    assert any("Press **Simulate**" in i.value for i in at.info)
    assert not nodes(at, "plotly_chart")  # nothing heavy until asked
    simulate_load(at)
    text = " ".join(m.value for m in at.markdown)
    assert "(the knee)" in text and "requests/s" in text
    spec = json.loads(nodes(at, "plotly_chart")[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == {"TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"}
    knee = float(text.split("up to about **")[1].split()[0].replace(",", ""))
    # a stricter TTFT target moves the knee down
    at.number_input(key="ttft_ms").set_value(300.0)
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
    assert at.session_state["context"] == p.prompt_tokens + p.output_tokens
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
    app.number_input(key="context").set_value(16896.0)
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
    app.number_input(key="gpus").set_value(4.0)
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
    app.number_input(key="context").set_value(32512.0)
    assert num(metric(run(app), "TTFT (one prompt)")) > 4 * before


def test_price_override_scales_the_cost(app):
    before = num(metric(app, "$ / M output tokens"))
    catalog_price = catalog.gpu("h200-sxm").price_usd_per_hour
    app.number_input(key="price").set_value(2 * catalog_price)
    assert num(metric(run(app), "$ / M output tokens")) == pytest.approx(2 * before, rel=0.1)


# --------------------------------------------------------------------------------------------- the URL


def test_url_query_params_reopen_a_scenario():
    at = run(new_app(context=16896, kvdtype="fp8", gpus=2, tp=2, gpu="h100-sxm", model="llama-3.1-8b"))
    assert at.session_state["context"] == 16896
    assert at.session_state["kvdtype"] == "fp8"
    assert at.session_state["gpu"] == "h100-sxm" and at.session_state["model"] == "llama-3.1-8b"
    via_url = users(at)
    at2 = run(new_app())
    at2.selectbox(key="model").set_value("llama-3.1-8b")
    at2.selectbox(key="gpu").set_value("h100-sxm")
    at2.number_input(key="gpus").set_value(2.0)
    at2.selectbox(key="tp").set_value(2)
    at2.number_input(key="context").set_value(16896.0)
    at2.selectbox(key="kvdtype").set_value("fp8")
    assert users(run(at2)) == via_url


def test_links_from_before_the_context_input_still_open():
    at = run(new_app(prompt=16384, output=512))
    assert at.session_state["context"] == 16896
    assert "= **16,384** prompt" in " ".join(c.value for c in at.sidebar.caption)


def test_every_input_that_changes_an_answer_is_bound_to_the_url(app):
    """The browser writes bound widgets to the URL (tests/test_browser.py checks that end to end); here: every
    scenario widget, the demand, the Cost view's dtype toggle, the report's filter, the Load view's request
    count and the view tabs carry a query-parameter key (#13 defect 5: the dtype toggle did not)."""
    widgets = [*app.selectbox, *app.number_input, *app.slider, *app.radio]
    bound = {w.proto.query_param_key for w in widgets}
    assert bound >= {"model", "gpu", "gpus", "tp", "wdtype", "kvdtype", "util", "context", "output", "users",
                     "ttft_ms", "tpot_ms", "price", "calib", "demand", "rate"}
    [tabs] = nodes(app, "tab_container")
    assert tabs.proto.tab_container.query_param_key == "view"
    run(app, "Cost")
    assert app.toggle(key="cost_same_dtypes").proto.query_param_key == "cost_same_dtypes"
    run(app, "Sizing report")
    assert app.toggle(key="report_only_slo").proto.query_param_key == "report_only_slo"
    run(app, "Load")
    assert app.number_input(key="load_requests").proto.query_param_key == "load_requests"


def test_cost_toggle_reopens_from_the_url():
    at = run(new_app(view="Cost", cost_same_dtypes="false"))
    assert at.toggle(key="cost_same_dtypes").value is False
    sweep = [c.value for c in nodes(run(at, "Sizing report"), "code") if c.value.startswith("planner sweep")]
    assert sweep and "--weight-dtype" not in " ".join(sweep)  # the headline's `planner size` call is another


def test_view_reopens_from_the_url():
    at = run(new_app(view="Roofline"))
    assert any(t.startswith("Roofline") for t in figure_titles(at))


# ------------------------------------------------------------------------------------------- hostile


@pytest.mark.parametrize("key,value,fragment", [
    ("context", 0.0, "Context length: 0 tokens is below the minimum 2 tokens; using 2 tokens"),
    ("output", 0.0, "Output: 0 tokens is below the minimum 1 tokens; using 1 tokens"),
    ("users", 0.0, "Concurrent users: 0 is below the minimum 1; using 1"),
    ("gpus", -5.0, "GPUs: -5 is below the minimum 1; using 1"),
    ("context", 1e9, "Context length: 1,000,000,000 tokens is above the limit 10,000,000 tokens; using 10,000,000"),
    ("ttft_ms", 0.0, "TTFT target: 0 ms is below the minimum 0.1 ms; using 0.1 ms"),
    ("tpot_ms", 0.0, "TPOT target: 0 ms is below the minimum 0.1 ms; using 0.1 ms"),
    ("gpus", 2.5, "GPUs: 2.5 is not a whole number; using 3"),
])
def test_typed_values_out_of_range_are_used_as_said(app, key, value, fragment):
    """#13 defect 7: 1e9 prompt tokens became 1, −5 GPUs kept 1 GPU behind a red icon; each now shows a warning
    naming the input and what was used instead."""
    app.number_input(key=key).set_value(value)
    run(app)
    assert fragment in warnings(app), warnings(app)
    assert not app.exception


def test_huge_context_explains_with_numbers(app):
    app.number_input(key="context").set_value(10_000_000.0)
    run(app)
    errs = " ".join(errors(app))
    assert "exceeds the model's 32,768-token limit" in errs
    assert "GiB" in errs  # one request needs X GiB of KV, the pool has Y GiB
    assert users(app) == 0
    for view in VIEWS:
        run(app, view)
        assert "cannot be drawn" not in warnings(app), view


@pytest.mark.parametrize("query", [{"model": "llama-3.1-405b", "gpu": "rtx-4090"}, {"util": 0.1},
                                   {"model": "deepseek-v3"}, {"model": "llama-3.1-405b", "gpu": "l4"}])
def test_model_that_does_not_fit_says_needs_and_has_on_every_view(query):
    """#13 defect 6: these showed "array of sample points is empty" in the Memory view."""
    at = run(new_app(tp=1, pp=1, **query))  # one GPU (TP/PP auto would plan 405B across nodes of 4090s)
    errs = " ".join(errors(at))
    assert "does not fit: needs" in errs and "GiB" in errs and "has" in errs
    for view in VIEWS:
        run(at, view)
        text = " ".join([*errors(at), warnings(at), *(m.value for m in at.markdown)])
        assert "array of sample points" not in text and "cannot be drawn" not in text, (view, text)
    run(at, "Memory")
    assert "do not fit at any context length" in " ".join(m.value for m in at.markdown)


def test_tensor_parallel_larger_than_gpu_count_uses_one_replica(app):
    app.selectbox(key="tp").set_value(8)
    run(app)
    assert "GPUs: 1 is fewer than tensor parallel 8; using 8 GPUs (one replica)" in warnings(app)
    assert "8 × NVIDIA H200" in " ".join(c.value for c in app.caption)


def test_tp16_is_not_offered_and_a_url_asking_for_it_is_told():
    """#13 defect 1 (/?gpus=16&tp=16&view=Latency crashed) and #20 item 9: no catalog GPU's node holds 16 GPUs, so
    the sidebar offers TP up to 8 only (every TP it offers can start); a shared URL asking for TP 16 is told so and
    uses TP 1 (16 GPUs = 16 replicas), every chart drawn."""
    at = run(new_app(gpus=16, tp=16), "Latency")
    assert at.selectbox(key="tp").options == ["auto", "1", "2", "4", "8"]
    assert "URL parameter tp=16: tensor parallel '16' is not one of auto, 1, 2, 4, 8; using auto" in warnings(at)
    assert not errors(at) and at.session_state["tp"] == "auto" and len(figure_titles(at)) >= 3


def test_gpu_count_is_whole_replicas(app):
    """#20 item 9: 3 GPUs at TP 2 were priced as 2 under a '3 ×' title; the sidebar uses 4 and says so."""
    app.number_input(key="gpus").set_value(3.0)
    app.selectbox(key="tp").set_value(2)
    run(app)
    assert "GPUs: 3 is not a whole number of TP 2 replicas; using 4" in warnings(app)
    assert "4 × NVIDIA H200" in " ".join(c.value for c in app.caption)


def test_impossible_tpot_target_is_explained(app):
    app.number_input(key="tpot_ms").set_value(0.5)
    run(app)
    assert any("TPOT target 0.5 ms is below" in e for e in errors(app)), errors(app)
    assert "No fleet can be sized" in " ".join(c.value for c in app.caption)
    run(app, "Cost")
    assert any("No GPU in the catalog meets" in w.value for w in app.warning)


def test_huge_gpu_count_and_tiny_utilization_do_not_crash(app):
    app.number_input(key="gpus").set_value(4096.0)
    app.slider(key="util").set_value(0.1)
    run(app)
    for view in VIEWS:
        run(app, view)
        assert "cannot be drawn" not in warnings(app), view


def test_hostile_url_values_are_replaced_and_said():
    """#13 defect 7: bad URL parameters were silently replaced by defaults."""
    at = run(new_app(context="-5", gpu="no-such-gpu", util="7", tp="3", model="../../etc/passwd", view="Nope",
                     gpus="-3"))
    assert at.session_state["gpu"] == "h200-sxm" and at.session_state["model"] == "mistral-7b-v0.3"
    w = warnings(at)
    for fragment in ("URL parameter gpu=no-such-gpu: gpu 'no-such-gpu' is not one of the 11 in the catalog",
                     "using h200-sxm",
                     "URL parameter util=7: gpu_memory_utilization must lie in 0.10–1.00; using 0.92",
                     "URL parameter tp=3: tensor parallel '3' is not one of auto, 1, 2, 4, 8; using auto",
                     "URL parameter model=../../etc/passwd: model",
                     "URL parameter view=Nope: view 'Nope' is not one of",
                     "Context length: -5 tokens is below the minimum 2 tokens; using 2 tokens",
                     "GPUs: -3 is below the minimum 1; using 1"):
        assert fragment in w, (fragment, w)
    assert not at.exception


def test_url_warning_goes_once_the_input_is_changed():
    at = run(new_app(tp="3"))
    assert "tp=3" in warnings(at)
    at.selectbox(key="tp").set_value(2)
    at.number_input(key="gpus").set_value(2.0)
    assert "tp=3" not in warnings(run(at))


# ------------------------------------------------------------------------------------ pins and Deploy


def test_pinned_scenarios_compare_side_by_side_and_travel_in_the_url(app):
    app.button(key="pin_btn").click()
    run(app)
    app.selectbox(key="kvdtype").set_value("fp8")
    run(app)
    app.button(key="pin_btn").click()
    run(app, "Compare")
    table = next(d for d in nodes(app, "dataframe") if "quantity" in d.value.columns).value
    assert list(table.columns)[:2] == ["quantity", "now"] and len(table.columns) == 4
    pins = app.query_params["pin"]
    assert len(pins) == 2
    at = new_app(view="Compare")
    at.query_params["pin"] = pins
    at = run(at)
    again = next(d for d in nodes(at, "dataframe") if "quantity" in d.value.columns).value
    assert list(again.columns)[2:] == list(table.columns)[2:]


def test_one_bad_pin_does_not_break_the_compare_view():
    """#20 item 9: a pin whose model left the catalog, or whose layout vLLM refuses, is named with its reason;
    the good pin is still compared beside the scenario."""
    from planner.dashboard import compare
    from planner.dashboard.scenario import Scenario

    good = Scenario("mistral-7b-v0.3", "h200-sxm", 1, 1, "bf16", "bf16", 0.92, 2048, 256, 8, 0.5, 0.05, 0.0, True)
    gone = good._replace(model_key="no-such-model")
    bad_tp = good._replace(num_gpus=3, tensor_parallel=3)
    at = new_app(view="Compare")
    at.query_params["pin"] = [compare.encode(x) for x in (gone, good, bad_tp)]
    at = run(at)
    table = next(d for d in nodes(at, "dataframe") if "quantity" in d.value.columns).value
    assert list(table.columns)[:2] == ["quantity", "now"] and len(table.columns) == 3  # now + the good pin
    text = warnings(at)
    assert "Pin 1. no-such-model" in text and "model: unknown id 'no-such-model'" in text
    assert "Pin 3." in text and "TP 3 does not divide" in text


def test_price_beyond_the_planners_range_names_the_input(app):
    """#20 item 9: a price above 1,000 $/h was 'cannot be planned' naming nothing: the input is named."""
    app.number_input(key="price").set_value(5000.0)
    run(app)
    assert "Price override: 5,000 $/GPU-hour is above the limit 1,000 $/GPU-hour; using 1,000" in warnings(app)
    assert not errors(app)
    app.number_input(key="price").set_value(0.001)
    run(app)
    assert errors(app) and "Price override must be 0 (the catalog's price) or 0.01–1,000 $ per GPU-hour" in errors(app)[0]


def test_deploy_view_shows_the_command_with_its_predictions_and_files():
    at = run(new_app(), "Deploy")
    code = " ".join(c.value for c in nodes(at, "code"))
    assert "vllm serve" in code and "--gpu-memory-utilization" in code
    [pred] = [t.value for t in at.table if "KV cache pool per GPU" in t.value.index]
    assert {"KV cache pool per GPU", "max concurrency at max-model-len", "TPOT"} <= set(pred.index)
    labels = [b.label for b in at.get("download_button")]
    assert labels[0] == "Download every file (zip)" and "serve.sh" in labels and "predictions.json" in labels


def test_sweep_is_not_recomputed_when_only_the_target_users_change(monkeypatch):
    """#13 defect 8: the Triangle recomputed everything on every change; the ranked sweep is cached on what it
    depends on (not target users or the deployment's size)."""
    import streamlit as st

    from planner.dashboard import cost_view

    calls = []
    real = cost_view.triangle_sweep
    monkeypatch.setattr(cost_view, "triangle_sweep", lambda *a, **k: calls.append(1) or real(*a, **k))
    st.cache_resource.clear()
    at = run(new_app(), "Triangle")
    n = len(calls)
    assert n == 1
    at.number_input(key="users").set_value(333.0)
    run(at)
    at.number_input(key="gpus").set_value(3.0)
    run(at)
    assert len(calls) == n
    at.number_input(key="context").set_value(5000.0)
    run(at)
    assert len(calls) == n + 1
    st.cache_resource.clear()


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

    from planner.io import catalog
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
    # #13 defect 9: the caption follows the choice
    at.radio(key="calib").set_value("ideal roofline")
    run(at)
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "Ideal roofline (speed of light)" in captions and "Transferred calibration" not in captions


def test_without_any_profile_the_calibrated_mode_is_disabled(monkeypatch):
    import streamlit as st

    from planner.io import catalog

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
    from planner.dashboard.presets import CORNERS

    assert set(CORNERS) == {("quality", "latency"), ("quality", "throughput"), ("latency", "throughput")}
    assert CORNERS[("quality", "latency")] == "premium chat"
    assert CORNERS[("latency", "throughput")] == "autocomplete / free tier"
    chat, agents, auto = (PRESETS[n] for n in ("premium chat", "asynchronous agents", "autocomplete / free tier"))
    assert chat.tpot_slo_s < agents.tpot_slo_s and chat.ttft_slo_s < agents.ttft_slo_s  # latency matters for chat
    assert agents.prompt_tokens > chat.prompt_tokens  # agents re-send long scaffolding
    assert auto.weight_dtype in ("int4", "nf4", "mxfp4", "int8", "fp8")  # heavily quantised
    assert agents.target_users == 160  # the seeds' memory chart


def test_preset_resolution_falls_back_when_a_model_is_missing():
    from planner.dashboard.presets import resolve

    vals = resolve(PRESETS["premium chat"], ["mistral-7b-v0.3"], ["a100-sxm-80gb"])
    assert vals["model_id"] == "mistral-7b-v0.3" and vals["gpu_id"] == "a100-sxm-80gb"
    none = resolve(PRESETS["premium chat"], [], [])
    assert none["model_id"] is None and none["gpu_id"] is None


def test_premium_preset_landing_on_int4_is_warned_and_the_preset_travels_in_the_url():
    at = run(new_app())
    at.button(key="preset-premium chat").click()
    run(at)
    assert at.query_params["preset"] in ("premium chat", ["premium chat"])
    assert "keeps quality" not in warnings(at)
    at.selectbox(key="wdtype").set_value("int4")
    run(at)
    assert "The premium chat preset keeps quality, but this configuration serves int4 weights" in warnings(at)
    shared = run(new_app(preset="premium chat", wdtype="int4", model="llama-3.1-70b", gpus=4, tp=4))
    assert "The premium chat preset keeps quality" in warnings(shared)
    assert "URL parameter preset" not in warnings(run(new_app(preset="nonsense")))


# ------------------------------------------------------------------ issue #19: native format, TP/PP auto, cost


def layout_note(at: AppTest) -> str:
    [note] = [c.value for c in at.caption if "the fleet engine chose TP" in c.value] or [""]
    return note


def test_weight_format_opens_at_the_models_native_format_and_follows_the_model():
    """gpt-oss-120b is published in MXFP4: it opens in mxfp4 and fits an H200 (bf16 did not); the default follows
    the model until the user picks a format, which then stays."""
    at = run(new_app(model="gpt-oss-120b", gpu="h200-sxm"))
    assert at.session_state["wdtype"] == "mxfp4" and at.selectbox(key="wdtype").value == "mxfp4"
    assert not errors(at) and "mxfp4" in metric(at, "Best fleet") and num(metric(at, "Max concurrent users")) > 0
    at.selectbox(key="model").set_value("llama-3.1-8b")
    assert run(at).session_state["wdtype"] == "bf16"
    at.selectbox(key="model").set_value("gpt-oss-120b")
    assert run(at).session_state["wdtype"] == "mxfp4"
    at.selectbox(key="wdtype").set_value("fp8")
    run(at)
    at.selectbox(key="model").set_value("llama-3.1-8b")
    assert run(at).session_state["wdtype"] == "fp8"  # chosen: kept


def test_a_weight_format_in_the_url_is_a_choice_that_stays():
    at = run(new_app(model="gpt-oss-120b", wdtype="bf16"))
    assert at.session_state["wdtype"] == "bf16" and not warnings(at)
    at.selectbox(key="model").set_value("llama-3.1-8b")
    assert run(at).session_state["wdtype"] == "bf16"
    bad = run(new_app(model="gpt-oss-120b", wdtype="fp5"))
    assert "URL parameter wdtype=fp5: weight format 'fp5' is not one of" in warnings(bad)
    assert "using mxfp4" in warnings(bad) and bad.session_state["wdtype"] == "mxfp4"


def test_llama_70b_on_h200_opens_feasible_with_tp_auto():
    """Issue #19: TP 1 opened Llama-3.1-70B on an H200 as "Infeasible"; TP auto lets the fleet engine choose it, and
    the views that need one TP use that one and say so."""
    at = run(new_app(model="llama-3.1-70b", gpu="h200-sxm"))
    assert at.session_state["tp"] == "auto" and at.session_state["pp"] == "auto"
    assert not errors(at) and not any("Infeasible" in e for e in errors(at))
    note = layout_note(at)
    tp = int(note.split("chose TP ")[1].split()[0])
    assert note.startswith("TP and PP auto: the fleet engine chose TP") and tp >= 2 and "× PP 1 on h200-sxm" in note
    assert f"(TP {tp}, bf16 weights" in " ".join(m.value for m in at.markdown)  # the Memory view's fits table
    assert num(metric(at, "SLO-feasible batch")) > 0
    run(at, "Deploy")
    code = " ".join(c.value for c in nodes(at, "code"))
    assert f"--tensor-parallel-size {tp}" in code and layout_note(at) == note


@pytest.mark.parametrize("query, tp, pp", [({"tp": "auto", "pp": "2"}, "auto", 2),
                                           ({"tp": "2", "pp": "auto"}, 2, "auto"),
                                           ({"tp": "auto", "pp": "auto"}, "auto", "auto")])
def test_tp_and_pp_choices_round_trip_through_the_url(query, tp, pp):
    at = run(new_app(model="llama-3.1-8b", **query))
    assert (at.session_state["tp"], at.session_state["pp"]) == (tp, pp)
    assert (at.selectbox(key="tp").value, at.selectbox(key="pp").value) == (tp, pp)
    assert not errors(at) and "URL parameter" not in warnings(at)
    note = layout_note(at)
    assert note.startswith({("auto", 2): "TP auto:", (2, "auto"): "PP auto:"}.get((tp, pp), "TP and PP auto:"))
    if pp == 2:
        assert "× PP 2 on" in note
    if tp == 2:
        assert "chose TP 2 × PP" in note


def test_an_unknown_pp_in_the_url_is_named_and_replaced():
    at = run(new_app(pp="5"))
    assert "URL parameter pp=5: pipeline parallel '5' is not one of auto, 1, 2, 3, 4, 6, 8; using auto" in warnings(at)
    assert at.session_state["pp"] == "auto" and not errors(at)


def test_deepseek_v3_bf16_on_h200_is_planned_across_nodes_with_pp():
    """Issue #19: DeepSeek-V3 in bf16 does not fit one 8-GPU H200 node; PP auto plans it across nodes."""
    at = run(new_app(model="deepseek-v3", wdtype="bf16", gpu="h200-sxm", view="Deploy"))
    assert not errors(at)
    note = layout_note(at)
    pp = int(note.split("× PP ")[1].split()[0])
    assert "chose TP 8 × PP" in note and pp >= 2 and "cheapest whole fleet for the demand" in note
    code = " ".join(c.value for c in nodes(at, "code"))
    assert f"--pipeline-parallel-size {pp}" in code and "--tensor-parallel-size 8" in code


def test_the_headline_across_gpus_answers_at_the_pinned_pp():
    """Issue #19: with PP pinned to 2 in the sidebar (TP auto) the headline's best fleet across every GPU was still
    the engine's own PP 1 layout.  It now answers at PP 2 on every GPU — the `planner size --pp 2` it shows — and
    its caption says so; the Cost view's fleet sentence is that fleet."""
    at = run(new_app(pp=2), "Cost")
    assert not errors(at) and at.session_state["tp"] == "auto"
    best = metric(at, "Best fleet")
    assert " × PP 2 " in best and int(num(metric(at, "GPUs"))) % 2 == 0
    assert "--pp 2" in " ".join(c.value for c in at.code) and " --tp " not in " ".join(c.value for c in at.code)
    assert any("at PP 2, as the sidebar pins it" in c.value for c in at.caption)
    assert any(f"× {best} = " in s.value for s in at.success)


def test_cost_view_ranks_by_the_headlines_whole_fleet():
    """Issue #19: the Cost view's cheapest is the fleet engine's whole fleet by $/month for the headline's demand
    (the headline's own best fleet), with $/Mtok a column; the $/Mtok-at-full-batch ranking is said to be the other."""
    at = run(new_app(), "Cost")
    [fleet] = [s.value for s in at.success]
    assert f"{metric(at, '$ / month')}/month**" in fleet and f"{metric(at, 'Best fleet')} = " in fleet
    table = [t.value for t in at.table if "$/month" in t.value.columns][-1]  # the headline's expander has it too
    assert "$/Mtok" in table.columns and table["$/month"].dropna().is_monotonic_increasing
    assert any("not the fleet ranking" in c.value for c in at.caption)
