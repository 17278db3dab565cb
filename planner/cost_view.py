"""The one ranking the dashboard shows, and the Cost view's frames built on it.

The Cost view, the Sizing report (its table and CSV) and ``planner sweep`` name the same cheapest
configuration because they rank the same rows the same way: :func:`ranking_sweep_kwargs` is exactly
what the command :func:`sweep_command` prints asks :func:`planner.sweep.sweep` for, and :func:`ranked`
is the one ordering (:data:`RANKING_DEFINITION`).

Seam: ``planner/ranking.py`` (being written beside this) will hold the ranking for the CLI and the plan
report.  Until it lands, :func:`ranked` uses the sweep's own ``rank`` column, which orders rows the same
way; when it lands, :func:`ranked` should call it and nothing else here changes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner import catalog
from planner.charts import pareto_mask
from planner.scenario import Scenario, scenario_gpu, scenario_profile
from planner.specs import ModelSpec, Workload
from planner.sweep import sweep
from planner.units import MS, fmt_ms, fmt_usd

#: What the ranking means, in the words the dashboard shows beside every ranked list.
RANKING_DEFINITION = ("Ranked as `planner sweep` ranks (the same rows, the same order, the same CSV): configurations "
                      "that fit and meet every target (TTFT and TPOT) first, then by the all-in cost per million "
                      "output tokens (all GPU time, prefill included, over the generated tokens), cheapest first. "
                      "A configuration that misses a target is never ranked above one that meets them.")
#: How a calibration mode is marked wherever a row is shown.
MODE_MARK = {"calibrated": "calibrated (measured on this GPU)",
             "transferred": "⚠ transferred (another GPU's calibration, not measured here)",
             "ideal": "⚠ ideal roofline (no measurement)"}


def ranked(sw: pd.DataFrame) -> pd.DataFrame:
    """The sweep's rows in ranking order (:data:`RANKING_DEFINITION`): the sweep's own ``rank`` column.
    The seam for ``planner.ranking`` (module docstring)."""
    return sw.sort_values("rank", kind="stable").reset_index(drop=True)


def ranking_sweep_kwargs(sc: Scenario, same_dtypes: bool) -> dict:
    """The :func:`planner.sweep.sweep` arguments of the ranked views, beyond model, workload and profiles:
    what :func:`sweep_command` asks the CLI for (the scenario's dtypes only when ``same_dtypes``)."""
    kw: dict = {"contexts": (sc.prompt_tokens,)}
    if same_dtypes:
        kw.update(weight_dtypes=(sc.weight_dtype,), kv_dtypes=(sc.kv_cache_dtype,))
    return kw


def ranking_sweep(model: ModelSpec, sc: Scenario, same_dtypes: bool) -> pd.DataFrame:
    """The rows of the ranked views: :func:`planner.sweep.sweep` over every catalog GPU as :func:`sweep_command`
    asks, with the scenario's price override (on its GPU) and memory utilisation."""
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, ttft_slo_s=sc.ttft_slo_s,
                  tpot_slo_s=sc.tpot_slo_s)
    gpus = [scenario_gpu(g, sc.price_usd_per_hour if g == sc.gpu_id else 0.0) for g in catalog.gpus()]
    return sweep(model, wl, gpus=gpus, profile_for=lambda g: scenario_profile(g, sc.calibrated),
                 deployment_defaults={"gpu_memory_utilization": sc.gpu_memory_utilization},
                 **ranking_sweep_kwargs(sc, same_dtypes))


def sweep_key(sc: Scenario, same_dtypes: bool) -> Scenario:
    """``sc`` with only what the ranked sweep depends on (a cache key: target users, the deployment's size, and
    the dtypes or GPU when they do not matter, are blanked), so changing them does not recompute it."""
    key = sc._replace(target_users=1, num_gpus=1, tensor_parallel=1)
    if not same_dtypes:
        key = key._replace(weight_dtype="", kv_cache_dtype="")
    if sc.price_usd_per_hour <= 0:
        key = key._replace(gpu_id="")
    return key


def sweep_command(sc: Scenario, model_id: str, same_dtypes: bool = False) -> str:
    """The ``planner sweep`` command whose rows (and CSV) the ranked views show."""
    dtypes = f"--weight-dtype {sc.weight_dtype} --kv-dtype {sc.kv_cache_dtype} " if same_dtypes else ""
    return (f"planner sweep -m {model_id} --context {sc.prompt_tokens} --output-tokens {sc.output_tokens} "
            f"--ttft-slo-ms {sc.ttft_slo_s / MS:g} --tpot-slo-ms {sc.tpot_slo_s / MS:g} {dtypes}"
            f"--profile {'auto' if sc.calibrated else 'none'} --csv sweep.csv")


def overrides_note(sc: Scenario, gpu_name: str) -> str | None:
    """What the ranked views use that ``planner sweep`` has no flag for (None: they are the CLI's rows)."""
    parts = []
    if sc.price_usd_per_hour > 0:
        parts.append(f"your price of {fmt_usd(sc.price_usd_per_hour)}/GPU-hour for {gpu_name}")
    if abs(sc.gpu_memory_utilization - 0.92) > 1e-9:
        parts.append(f"gpu_memory_utilization {sc.gpu_memory_utilization:.2f}")
    if sc.model_key.startswith("upload:"):
        parts.append("an uploaded model (save it with `planner import-hf` to use the CLI)")
    if not parts:
        return None
    return ("These rows use " + " and ".join(parts) + "; `planner sweep` uses catalog prices and 0.92, so its "
            "numbers differ by exactly that.")


# -------------------------------------------------------------------------------------------- per GPU


def _label(df: pd.DataFrame) -> pd.Series:
    return (df["num_gpus"].astype(str) + " × " + df["gpu_id"].astype(str) + " (TP " + df["tensor_parallel"].astype(str)
            + ")")


def cheapest_per_gpu(sw: pd.DataFrame) -> pd.DataFrame:
    """Per GPU type, its best-ranked configuration among those that meet every target, in ranking order
    (so the first row is the ranking's first row)."""
    r = ranked(sw)
    ok = r[r["meets_slo"] & ~r["context_exceeds_model_limit"]]
    if ok.empty:
        return ok
    best = ok.groupby("gpu_id", observed=True, sort=False).head(1)
    return best.assign(label=_label(best)).reset_index(drop=True)


def band_text(pct) -> str:
    return "no measured basis" if pct is None or not np.isfinite(pct) else f"±{pct:.0f} %"


def cost_table(best: pd.DataFrame, gpu_names: dict[str, str]) -> pd.DataFrame:
    """:func:`cheapest_per_gpu`'s rows for the user: rank, configuration, TP, dtypes, cost, latency with its
    error band, quality, calibration mode (transferred and ideal rows marked), price and its source."""
    tpot_band = np.fmax(best["tpot_error_band_pct"].astype(float), best["ttft_error_band_pct"].astype(float))
    missing = best["tpot_error_band_pct"].isna() | best["ttft_error_band_pct"].isna()
    return pd.DataFrame({
        "rank": best["rank"].astype(int),
        "GPU": best["gpu_id"].astype(str).map(lambda g: gpu_names.get(g, g)),
        "GPUs": best["num_gpus"].astype(int), "TP": best["tensor_parallel"].astype(int),
        "weights": best["weight_dtype"].astype(str), "KV": best["kv_cache_dtype"].astype(str),
        "batch": best["batch_size"].astype(int),
        "$/M output (all-in)": best["cost_usd_per_million_output_tokens_all_in"].map(lambda x: fmt_usd(x, 3)),
        "TTFT": best["ttft_s"].map(fmt_ms), "TPOT": best["tpot_s"].map(fmt_ms),
        "error band": [band_text(None if m else b) for b, m in zip(tpot_band, missing)],
        "quality": best["quality_score"].map(lambda q: "—" if not np.isfinite(q) else f"{q:.1f}"),
        "calibration": best["calibration_mode"].astype(str).map(lambda m: MODE_MARK.get(m, m)),
        "$/GPU-hour": best["price_usd_per_hour"].map(fmt_usd),
        "price source": best["price_source"].astype(str) + " (" + best["price_date"].astype(str) + ")",
    })


def cheapest_sentence(top: pd.Series, gpu_name: str) -> str:
    """The ranking's first row in one sentence, marked when its latency was not measured on that GPU."""
    mode = str(top["calibration_mode"])
    mark = {"transferred": " ⚠ Its latency is transferred from another GPU's calibration (not measured on this GPU)",
            "ideal": " ⚠ Its latency is the ideal roofline (no measurement)"}.get(mode, "")
    band = band_text(max(top["ttft_error_band_pct"], top["tpot_error_band_pct"])
                     if np.isfinite(top["ttft_error_band_pct"]) and np.isfinite(top["tpot_error_band_pct"]) else None)
    return (f"Cheapest configuration meeting every target: **{int(top['num_gpus'])} × {gpu_name} (TP "
            f"{int(top['tensor_parallel'])}), {top['weight_dtype']} weights, KV {top['kv_cache_dtype']}, batch "
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



def pareto_frame(sw: pd.DataFrame, max_points: int = 150) -> pd.DataFrame:
    """Cost against per-user speed: per configuration (GPU × weights × KV × TP), its rows that meet every
    target, each with ``per_user_tokens_per_s`` (1 / TPOT) and the all-in $/Mtok; ``pareto`` marks the rows
    no other row beats on both (faster for each user and cheaper).  At most ``max_points`` rows: the front,
    then the others thinned evenly (a figure of thousands of points is slow to draw)."""
    ok = sw[sw["meets_slo"] & ~sw["context_exceeds_model_limit"]]
    cols = ["rank", "gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel", "num_gpus", "batch_size",
            "tpot_s", "ttft_s", "cost_usd_per_million_output_tokens_all_in", "quality_score", "calibration_mode",
            "tpot_error_band_pct"]
    df = ok[cols].copy()
    for c in ("gpu_id", "weight_dtype", "kv_cache_dtype", "calibration_mode"):
        df[c] = df[c].astype(str)
    df["per_user_tokens_per_s"] = 1.0 / df["tpot_s"]
    df["cost"] = df["cost_usd_per_million_output_tokens_all_in"]
    df["quality"] = df["quality_score"].astype(float)
    df["pareto"] = pareto_mask(df, maximize=("per_user_tokens_per_s",), minimize=("cost",))
    df["label"] = (df["num_gpus"].astype(str) + " × " + df["gpu_id"] + " TP " + df["tensor_parallel"].astype(str)
                   + ", " + df["weight_dtype"] + " / KV " + df["kv_cache_dtype"] + ", batch "
                   + df["batch_size"].astype(str))
    front, rest = df[df["pareto"]], df[~df["pareto"]]
    room = max(0, max_points - len(front))
    if len(rest) > room:
        rest = rest.iloc[np.linspace(0, len(rest) - 1, room).astype(int)] if room else rest.iloc[:0]
    return pd.concat([front, rest]).reset_index(drop=True)


#: The columns a picked Pareto point carries (plotly customdata), in order.
PICK_FIELDS = ("gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel")


def picked_state(points: list, gpus: float, tp: int) -> dict | None:
    """The widget values a pick on the cost–speed chart sets (the same number of replicas at the new TP), and the
    picked point's label under ``picked``; None when nothing usable was picked."""
    cfg = picked_config(points[0]) if points else None
    if cfg is None:
        return None
    replicas = max(1, int(gpus) // max(1, int(tp)))
    return {**cfg, "gpus": float(cfg["tp"] * replicas), "picked": str(points[0].get("text") or "").split("<br>")[0]}


def picked_config(point: dict) -> dict | None:
    """The configuration of a point picked on the Pareto chart (its customdata), as scenario widget values;
    None when the point carries none (a line or an annotation)."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) < len(PICK_FIELDS):
        return None
    vals = dict(zip(PICK_FIELDS, data))
    return {"gpu": str(vals["gpu_id"]), "wdtype": str(vals["weight_dtype"]), "kvdtype": str(vals["kv_cache_dtype"]),
            "tp": int(vals["tensor_parallel"])}
