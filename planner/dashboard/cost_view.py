"""The Cost view's rows and sentences: the question it asks (every catalog GPU × TP, the scenario's dtypes or any,
every batch up to the users: :mod:`planner.choose`'s), ranked by the one ranking (:mod:`planner.ranking`), so the
Cost view, the Sizing report (its table and CSV), ``planner sweep`` / ``size`` / ``report`` and the plan report
name the same cheapest configuration; the sentence that says which, the cost-vs-speed Pareto frame, and the pick
that applies one of its points to the scenario.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.io import catalog
from planner import ranking
from planner.dashboard.charts import pareto_mask
from planner.dashboard.scenario import Scenario, scenario_gpu, scenario_profile
from planner.specs import Deployment, ModelSpec, Workload
from planner.sweep import sweep
from planner.units import fmt_ms, fmt_usd
from planner.dashboard.views import band_text, cost_grid

#: What the ranking means, in the words the dashboard shows beside every ranked list.
RANKING_DEFINITION = (f"Ranked as `planner sweep` ranks configurations (planner.ranking; fleets rank by $/month): "
                      f"{ranking.RANK_DEFINITION}. A configuration that misses a target — TTFT, TPOT, the model's "
                      "context, or more requests per replica than there are users — is never ranked above one that "
                      "meets them all.")


def ranking_sweep(model: ModelSpec, sc: Scenario, same_dtypes: bool) -> pd.DataFrame:
    """The Cost view's question as :func:`planner.dashboard.views.sweep_command` asks the CLI (every batch up to the users,
    the users capping a replica's batch), with the scenario's price override (on its GPU) and utilisation."""
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, concurrency=sc.target_users,
                  ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s)
    gpus = [scenario_gpu(g, sc.price_usd_per_hour if g == sc.gpu_id else 0.0) for g in catalog.gpus()]
    grid = cost_grid(sc, same_dtypes)
    return sweep(model, wl, gpus=gpus, weight_dtypes=grid.get("weight_dtypes"), kv_dtypes=grid.get("kv_dtypes"),
                 contexts=(sc.prompt_tokens,), batch_sizes=grid["batch_sizes"],
                 profile_for=lambda g: scenario_profile(g, sc.calibrated),
                 deployment_defaults={"gpu_memory_utilization": sc.gpu_memory_utilization})


def triangle_sweep(model: ModelSpec, sc: Scenario) -> pd.DataFrame:
    """The Triangle's candidates: every GPU × dtype × KV dtype × TP at the sweep's default batches (1, 2, 4, …,
    1,024; an exploration, not a ranking, so no users cap and no every-size grid)."""
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, ttft_slo_s=sc.ttft_slo_s,
                  tpot_slo_s=sc.tpot_slo_s)
    gpus = [scenario_gpu(g, sc.price_usd_per_hour if g == sc.gpu_id else 0.0) for g in catalog.gpus()]
    return sweep(model, wl, gpus=gpus, contexts=(sc.prompt_tokens,),
                 profile_for=lambda g: scenario_profile(g, sc.calibrated),
                 deployment_defaults={"gpu_memory_utilization": sc.gpu_memory_utilization})


def sweep_key(sc: Scenario, same_dtypes: bool | None) -> Scenario:
    """``sc`` with only what a sweep depends on (a cache key): the deployment's size always blanked, the dtypes
    when any may win, the GPU when no price override names it, the users for the Triangle (``same_dtypes``
    None), so changing those does not recompute it."""
    key = sc._replace(num_gpus=1, tensor_parallel=1, pipeline_parallel=1)
    if not same_dtypes:
        key = key._replace(weight_dtype="", kv_cache_dtype="")
    if same_dtypes is None:
        key = key._replace(target_users=1)
    if sc.price_usd_per_hour <= 0:
        key = key._replace(gpu_id="")
    return key


def overrides_note(sc: Scenario, gpu_name: str) -> str | None:
    """What the ranked views use beyond the printed command (None: they are exactly the CLI's rows)."""
    parts, util = [], Deployment.default("gpu_memory_utilization")
    if sc.price_usd_per_hour > 0:
        parts.append(f"your price of {fmt_usd(sc.price_usd_per_hour)}/GPU-hour for {gpu_name}")
    if abs(sc.gpu_memory_utilization - util) > 1e-9:
        parts.append(f"gpu_memory_utilization {sc.gpu_memory_utilization:.2f}")
    if sc.model_key.startswith("upload:"):
        parts.append("an uploaded model (save it with `planner import-hf` to use the CLI)")
    if not parts:
        return None
    return ("These rows use " + " and ".join(parts) + f"; `planner sweep` uses catalog prices and {util:g}, so its "
            "numbers differ by exactly that.")


def cheapest_sentence(top: pd.Series, gpu_name: str) -> str:
    """The ranking's first row in one sentence, marked when its latency was not measured on that GPU."""
    mode = str(top["calibration_mode"])
    mark = {"transferred": " ⚠ Its latency is transferred from another GPU's calibration (not measured on this GPU)",
            "ideal": " ⚠ Its latency is the ideal roofline (no measurement)"}.get(mode, "")
    t, d = float(top["ttft_error_band_pct"]), float(top["tpot_error_band_pct"])
    band = band_text(max(t, d) if np.isfinite(t) and np.isfinite(d) else None)
    pp = int(top.get("pipeline_parallel", 1))
    return (f"Cheapest configuration meeting every target: **{int(top['num_gpus'])} × {gpu_name} (TP "
            f"{int(top['tensor_parallel'])}{f' × PP {pp}' if pp > 1 else ''}), {top['weight_dtype']} weights, KV {top['kv_cache_dtype']}, batch "
            f"{int(top['batch_size']):,}: {fmt_usd(top['cost_usd_per_million_output_tokens_all_in'], 3)} per million "
            f"output tokens (all-in)**, TPOT {fmt_ms(top['tpot_s'])}, TTFT {fmt_ms(top['ttft_s'])} (error band "
            f"{band}); price {fmt_usd(top['price_usd_per_hour'])}/GPU-hour from {top['price_source']} "
            f"({top['price_date']}).{mark + '.' if mark else ''}")


def first_sentence(best: pd.DataFrame, gpu_names: dict[str, str]) -> str | None:
    """:func:`cheapest_sentence` of the ranking's first row (None: nothing meets the targets)."""
    if best.empty:
        return None
    top = best.iloc[0]
    return cheapest_sentence(top, gpu_names.get(str(top["gpu_id"]), str(top["gpu_id"])))


def fleet_sentence(plan, demand_text: str) -> str | None:
    """The Cost view's ranking in one sentence: the fleet engine's cheapest whole fleet for the headline's demand
    (``plan``: :class:`planner.fleet.FleetPlan` across GPUs), ranked by $/month, its $/Mtok beside it; None when
    no fleet serves the demand."""
    b = plan.best
    if b is None:
        return None
    mtok = b.usd_per_million_output_tokens
    return (f"Cheapest whole fleet for {demand_text}: **{b.replicas:,} × {b.layout()} = {b.num_gpus:,} × "
            f"{b.gpu_name}, {fmt_usd(b.usd_per_month, 0)}/month** ({b.confidence} basis"
            + (f"; {fmt_usd(mtok, 3)} per million output tokens at its operating rate" if mtok else "")
            + f"). Ranked by whole-fleet $/month ({plan.question.tail}, {plan.question.headroom:.0%} headroom, "
            f"{plan.question.price_basis} prices), as `planner size` ranks; $/Mtok is a column.")


#: Between the fleet ranking and the per-configuration one below it (which ranks, which does not).
BY_MTOK_NOTE = ("Below: one replica of each configuration at its largest batch meeting the targets, ranked by $/Mtok "
                "at full batch as `planner sweep` ranks them — no demand, no whole replicas, so not the fleet ranking "
                "above (which is by $/month).")


def nothing_meets_sentence(sc: Scenario) -> str:
    return (f"No GPU in the catalog meets TTFT ≤ {fmt_ms(sc.ttft_slo_s)} and TPOT ≤ {fmt_ms(sc.tpot_slo_s)} for "
            f"{sc.prompt_tokens:,} + {sc.output_tokens:,} tokens with this model. Loosen a target or shorten the "
            "context.")


# -------------------------------------------------------------------------------------- cost vs latency

PARETO_CAPTION = ("Colour: quality (published score × retention of the weight/KV format); ringed: the Pareto front; "
                  "diamond: transferred calibration, ×: ideal roofline. Click a point to make it the scenario.")


def scenario_speed_point(r) -> dict:
    """The scenario's own point on the cost–speed chart (NaN when no batch meets the targets)."""
    ok = r.batch_size > 0
    return {"per_user_tokens_per_s": 1.0 / r.tpot_effective_s if ok else float("nan"),
            "cost": float(r.cost.usd_per_million_output_tokens_all_in) if ok else float("nan")}



def pareto_frame(sw: pd.DataFrame, users: int | None = None, max_points: int = 150) -> pd.DataFrame:
    """Cost against per-user speed: per configuration (GPU × weights × KV × TP × PP: the sweep's, so across nodes
    where no node holds the model, as the fleet engine plans it), its rows that meet every
    target, each with ``per_user_tokens_per_s`` (1 / TPOT) and the all-in $/Mtok; ``pareto`` marks the rows
    no other row beats on both (faster for each user and cheaper).  At most ``max_points`` rows: the front
    (thinned evenly along it when dense: every batch of a configuration can lie on it), then the others thinned
    evenly (a figure of thousands of points is slow to draw)."""
    ok = sw[ranking.meets_targets(sw, users)]
    cols = ["rank", "gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel", "pipeline_parallel", "num_gpus",
            "batch_size", "tpot_s", "ttft_s", "cost_usd_per_million_output_tokens_all_in", "quality_score",
            "calibration_mode", "tpot_error_band_pct"]
    df = ok[cols].copy()
    for c in ("gpu_id", "weight_dtype", "kv_cache_dtype", "calibration_mode"):
        df[c] = df[c].astype(str)
    df["per_user_tokens_per_s"] = 1.0 / df["tpot_s"]
    df["cost"] = df["cost_usd_per_million_output_tokens_all_in"]
    df["quality"] = df["quality_score"].astype(float)
    df["pareto"] = pareto_mask(df, maximize=("per_user_tokens_per_s",), minimize=("cost",))
    pp = np.where(df["pipeline_parallel"] > 1, " × PP " + df["pipeline_parallel"].astype(str), "")
    df["label"] = (df["num_gpus"].astype(str) + " × " + df["gpu_id"] + " TP " + df["tensor_parallel"].astype(str)
                   + pp + ", " + df["weight_dtype"] + " / KV " + df["kv_cache_dtype"] + ", batch "
                   + df["batch_size"].astype(str))
    front, rest = df[df["pareto"]].sort_values("per_user_tokens_per_s"), df[~df["pareto"]]
    if len(front) > 0.6 * max_points:  # every batch of a configuration can be on the front: keep its shape
        front = front.iloc[np.unique(np.linspace(0, len(front) - 1, int(0.6 * max_points)).astype(int))]
    room = max(0, max_points - len(front))
    if len(rest) > room:
        rest = rest.iloc[np.linspace(0, len(rest) - 1, room).astype(int)] if room else rest.iloc[:0]
    return pd.concat([front, rest]).reset_index(drop=True)


#: The columns a picked Pareto point carries (plotly customdata), in order.
PICK_FIELDS = ("gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel", "pipeline_parallel")


def picked_state(points: list, gpus: float, gpus_per_replica: int) -> dict | None:
    """The widget values a pick on the cost–speed chart sets (the same number of replicas, now of the picked TP ×
    PP; ``gpus_per_replica``: the scenario's before the pick), and the picked point's label under ``picked``; None
    when nothing usable was picked."""
    cfg = picked_config(points[0]) if points else None
    if cfg is None:
        return None
    replicas = max(1, int(gpus) // max(1, int(gpus_per_replica)))
    return {**cfg, "gpus": float(cfg["tp"] * cfg["pp"] * replicas),
            "picked": str(points[0].get("text") or "").split("<br>")[0]}


def picked_config(point: dict) -> dict | None:
    """The configuration of a point picked on the Pareto chart (its customdata: :data:`PICK_FIELDS`), as scenario
    widget values (TP and PP concrete: a pick is a layout, not "auto"); None when the point carries none (a line
    or an annotation)."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) < len(PICK_FIELDS):
        return None
    vals = dict(zip(PICK_FIELDS, data))
    return {"gpu": str(vals["gpu_id"]), "wdtype": str(vals["weight_dtype"]), "kvdtype": str(vals["kv_cache_dtype"]),
            "tp": int(vals["tensor_parallel"]), "pp": int(vals["pipeline_parallel"])}
