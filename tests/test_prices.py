"""GPU price tables (planner/prices.py, hardware/*.yaml prices:) and the one price basis of a fleet comparison."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from planner.cli.app import app
from planner.fleet import FleetQuestion, plan_fleet
from planner.fleet_eval import gpu_price
from planner.io import catalog
from planner.io.catalog import parse_spec
from planner.io.files import SpecError
from planner.prices import PRICE_BASES, price_for
from planner.specs import GpuSpec

runner = CliRunner()


def _doc(gpu_id: str = "h100-sxm") -> dict:
    return catalog.gpu(gpu_id).model_dump(mode="json")


@pytest.mark.parametrize("gpu_id", sorted(catalog.gpus()))
def test_every_catalog_gpu_has_an_on_demand_entry_equal_to_its_default_price(gpu_id):
    g = catalog.gpu(gpu_id)
    assert g.prices, f"{gpu_id}: no price table"
    on_demand = [p for p in g.prices if p.basis == "on-demand"]
    assert any(p.usd_per_hour == pytest.approx(g.price_usd_per_hour, rel=1e-12) for p in on_demand)
    entry, why = price_for(g, "on-demand")
    assert why == "" and entry.usd_per_hour == pytest.approx(g.price_usd_per_hour, rel=1e-12)
    for p in g.prices:
        assert p.basis in PRICE_BASES and p.url.startswith("http") and p.date[:2] == "20" and p.region


def test_no_default_price_comes_from_a_preemptible_basis():
    """The H200 was priced from Modal's preemptible serverless rate: it is a spot entry now, not the default."""
    g = catalog.gpu("h200-sxm")
    modal = [p for p in g.prices if p.provider == "Modal"]
    assert [p.basis for p in modal] == ["spot"] and g.price_usd_per_hour != modal[0].usd_per_hour


@pytest.mark.parametrize(("field", "value", "words"), [
    ("basis", "monthly", "prices.0.basis"),
    ("usd_per_hour", -1.0, "prices.0.usd_per_hour"),
    ("usd_per_hour", 0.0, "prices.0.usd_per_hour"),
    ("provider", "", "prices.0.provider"),
])
def test_a_bad_price_entry_is_refused_naming_the_field(field, value, words):
    d = _doc()
    d["prices"][0][field] = value
    with pytest.raises(SpecError, match=words.replace(".", r"\.")):
        parse_spec(GpuSpec, d, "h100-sxm.yaml")


def test_a_default_price_missing_from_the_table_is_refused():
    d = _doc()
    d["price_usd_per_hour"] = 9.87
    with pytest.raises(SpecError, match="price_usd_per_hour: 9.87 is not one of the on-demand prices"):
        parse_spec(GpuSpec, d, "h100-sxm.yaml")


def test_a_basis_price_is_the_cheapest_entry_of_that_basis_or_the_providers():
    g = catalog.gpu("h100-sxm")
    on_demand = [p.usd_per_hour for p in g.prices if p.basis == "on-demand"]
    assert price_for(g, "on-demand", "cheapest")[0].usd_per_hour == min(on_demand) < g.price_usd_per_hour
    assert price_for(g, "on-demand", "lambda")[0].usd_per_hour == 3.99  # 8x (3.99) beats 1x (4.29)
    assert price_for(g, "on-demand", "AWS")[0].region == "us-east-1"
    spot = price_for(g, "spot")[0]
    assert spot.basis == "spot" and spot.usd_per_hour == min(p.usd_per_hour for p in g.prices if p.basis == "spot")
    h200 = catalog.gpu("h200-sxm")
    assert price_for(h200, "spot")[0].provider == "Modal"  # 4.54 < Google Cloud's 6.26
    assert price_for(h200, "spot", "Google Cloud")[0].usd_per_hour == pytest.approx(6.2607)


def test_a_gpu_without_the_basis_has_no_price_and_says_why():
    entry, why = price_for(catalog.gpu("l4"), "reserved-1y")
    assert entry is None and "l4: no reserved-1y price" in why and "AWS on-demand" in why
    entry, why = price_for(catalog.gpu("h100-sxm"), "on-demand", "Vultr")
    assert entry is None and "from Vultr" in why


def test_the_fleet_price_is_the_basis_price_less_the_discount_and_names_its_origin():
    g = catalog.gpu("h200-sxm")
    q = FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, price_basis="spot", discount_pct=10)
    price, where = gpu_price(q, g)
    assert price == pytest.approx(4.54 * 0.9)
    assert where.startswith("Modal spot, not stated, 2026-09-09 (https://modal.com/pricing)") and "less 10 %" in where
    default, where = gpu_price(FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0), g)
    assert default == g.price_usd_per_hour and "Nebius on-demand" in where
    assert gpu_price(q.model_copy(update={"price_basis": "reserved-3y"}), g) == (None, price_for(g, "reserved-3y")[1])
    over = FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, gpu_ids=("l4",), price_basis="spot",
                         price_usd_per_gpu_hour=2.0)
    assert gpu_price(over, catalog.gpu("l4"))[0] == 2.0  # the command line's price overrides any basis


def test_gpus_without_the_basis_are_left_out_with_their_reason():
    q = FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, gpu_ids=("l4", "a10g"), price_basis="reserved-1y")
    fp = plan_fleet(q)
    assert fp.best is None and not fp.candidates
    assert any(r.startswith("l4: no reserved-1y price") for r in fp.reasons())
    assert any(r.startswith("a10g: no reserved-1y price") for r in fp.reasons())


def test_a_bad_price_basis_is_refused_by_the_question():
    with pytest.raises(ValueError, match="price_basis"):
        FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, price_basis="hourly")


@pytest.mark.parametrize("cmd", ["size", "report", "deploy"])
def test_cli_bad_price_basis_exits_2_naming_the_flag(cmd):
    r = runner.invoke(app, [cmd, "--model", "llama-3.1-8b", "--rate", "1", "--price-basis", "hourly"])
    assert r.exit_code == 2 and "--price-basis" in r.output and "reserved-1y" in r.output


def test_slo_search_bad_price_basis_exits_2_naming_the_flag():
    r = runner.invoke(app, ["slo-search", "--model", "llama-3.1-8b", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "50",
                            "--price-basis", "monthly"])
    assert r.exit_code == 2 and "--price-basis" in r.output


def test_cli_blank_price_provider_exits_2_naming_the_flag():
    r = runner.invoke(app, ["size", "--model", "llama-3.1-8b", "--rate", "1", "--price-provider", " "])
    assert r.exit_code == 2 and "--price-provider" in r.output


def test_cli_basis_no_gpu_has_is_infeasible_with_the_reason():
    r = runner.invoke(app, ["size", "--model", "llama-3.1-8b", "--gpu", "l4", "--rate", "1",
                            "--price-basis", "reserved-3y"])
    assert r.exit_code == 1 and "no reserved-3y price" in r.output


def test_the_h100_reserved_1y_market_rate_prices_only_the_h100_on_that_basis():
    """The one sourced reserved price (SemiAnalysis' one-year H100 contract rate, 2.35 USD/GPU-hour, March 2026):
    reserved-1y prices the H100 SXM from it, 20 % off is 2.35 x 0.8 = 1.88; the H200 has no such entry and is left
    out, never priced on another basis."""
    g = catalog.gpu("h100-sxm")
    entry, why = price_for(g, "reserved-1y")
    assert why == "" and entry.usd_per_hour == 2.35 and entry.provider == "SemiAnalysis market index"
    q = FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, price_basis="reserved-1y", discount_pct=20)
    assert gpu_price(q, g)[0] == pytest.approx(1.88)
    assert price_for(catalog.gpu("h200-sxm"), "reserved-1y")[0] is None


def test_a_reserved_entry_prices_its_gpu_on_that_basis_only():
    """A table with a reserved entry is priced from it on its own basis and term, the on-demand default unchanged.
    The entry is a test fixture, not a price: an 8-GPU instance at 16 USD/h is 2 USD per GPU-hour (cheaper than
    the 2.35 market-rate entry, so the cheapest of the basis is the fixture)."""
    d = _doc("h100-sxm")
    d["prices"].append({"provider": "Fixture Cloud", "basis": "reserved-1y", "region": "test",
                        "usd_per_hour": 16.0 / 8, "url": "https://example.test/prices", "date": "2026-01-01",
                        "note": "test fixture: 8-GPU instance 16 USD/h / 8"})
    g = parse_spec(GpuSpec, d, "h100-sxm.yaml")
    entry, why = price_for(g, "reserved-1y")
    assert why == "" and entry.provider == "Fixture Cloud" and entry.usd_per_hour == 2.0
    assert price_for(g, "reserved-3y")[0] is None  # a 1-year price is not a 3-year one
    assert price_for(g, "on-demand")[0].usd_per_hour == catalog.gpu("h100-sxm").price_usd_per_hour
    q = FleetQuestion(model_id="llama-3.1-8b", rate_per_s=1.0, price_basis="reserved-1y", discount_pct=20)
    price, where = gpu_price(q, g)
    assert price == pytest.approx(1.6) and where.startswith("Fixture Cloud reserved-1y, test, 2026-01-01")

