"""``planner capacity``: demand over a day, week or year -> replicas per hour, static vs autoscaled $/month,
the autoscaling policy (replayed with the policy in the loop), the cheapest mix of GPU types and price
bases, and the break-even against an API price (see :mod:`planner.capacity`).

Command function only; :mod:`planner.cli.app` registers it.
"""

from __future__ import annotations

import csv as csv_mod
import io
import math
import re
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, cli_errors, emit_json, error_exit, table, today
from planner.cli.options import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    KvDtypeOpt,
    ModelOpt,
    ProfileOpt,
    SeedOpt,
    make_dir,
    slo_options,
    split_list,
)
from planner.capacity.engine import DEFAULT_HEADROOM
from planner.capacity.mixed import DEFAULT_RESERVED_DISCOUNT, DEFAULT_SPOT_DISCOUNT, Prices
from planner.units import MS

P99 = "the p99 over the simulated requests of one replica (the knee search), checked hour by hour in the replay"
TtftOpt, TpotOpt = slo_options(P99, required=True)
FILES = ("hourly.csv", "keda-scaledobject.yaml", "hpa.yaml", "summary.html", "summary.pdf", "capacity.json")


#: The GPU types planned when --gpu is left out (each costs a knee search, and the mixes grow with their square).
DEFAULT_GPUS = ("h200-sxm", "h100-sxm", "l40s")


def _gpus(values):
    if values and not split_list(values):
        raise typer.BadParameter("expected a GPU id or a comma-separated list", param_hint="--gpu")
    return split_list(values)


def _pct(flag: str, hi: float):
    def check(v):
        if v is not None and not (math.isfinite(v) and 0 <= v <= hi):
            raise typer.BadParameter(f"must be a percentage from 0 to {hi:g}, got {v}", param_hint=flag)
        return v
    return check


def _frac(flag: str):
    def check(v):
        if v is not None and not (math.isfinite(v) and 0 <= v <= 1):
            raise typer.BadParameter(f"must be a fraction in [0, 1], got {v}", param_hint=flag)
        return v
    return check


def _demand(demand_csv, peak_rate, trough_rate, shape, days, peak_hour, open_hour, close_hour, ramp_hours,
            weekend_factor, growth_per_month):
    from planner.capacity.demand import demand_from_csv, demand_from_shape

    if demand_csv is not None and peak_rate is not None:
        raise error_exit("--demand-csv", "give either a demand CSV or --peak-rate (a shape), not both")
    if demand_csv is not None:
        return demand_from_csv(demand_csv, growth_per_month=growth_per_month)
    if peak_rate is None:
        raise error_exit("--peak-rate", "give the demand: --peak-rate (with --trough-rate, --shape) or --demand-csv")
    return demand_from_shape(peak_rate, trough_rate, shape=shape, days=days, peak_hour=peak_hour,
                             open_hour=open_hour, close_hour=close_hour, ramp_hours=ramp_hours,
                             weekend_factor=weekend_factor, growth_per_month=growth_per_month)


def _hourly_csv(plan) -> str:
    buf = io.StringIO()
    w = csv_mod.writer(buf, lineterminator="\n")
    w.writerow(["hour", "rate_per_s", "replicas_autoscaled", "replicas_static", "attainment_replayed",
                "ready_replicas_mean_replayed"])
    r = plan.replay
    for h, (lam, n) in enumerate(zip(plan.demand.rate_per_s, plan.schedule.replicas)):
        rep = r is not None and h < r.hours
        w.writerow([h, f"{lam:.6g}", int(n), plan.schedule.static_replicas,
                    f"{r.attainment[h]:.6f}" if rep else "", f"{r.ready_mean[h]:.4g}" if rep else ""])
    return buf.getvalue()


def _write(out: Path, plan, files: dict[str, str | bytes], force: bool) -> list[str]:
    d = make_dir(out)
    clash = [n for n in files if (d / n).exists()]
    if clash and not force:
        raise error_exit("--out", f"{d} already holds {', '.join(clash)}; give another directory or --force")
    from planner.io.files import write_text

    for n, body in files.items():  # a full disk names the file
        write_text(d / n, body, "--out")
    return [str(d / n) for n in files]


@cli_errors
def capacity_cmd(
    model: ModelOpt,
    ttft_slo_ms: TtftOpt,
    tpot_slo_ms: TpotOpt,
    gpu: Annotated[list[str] | None, typer.Option("--gpu", "-g", callback=_gpus, help=(
        f"GPU types to plan and mix; repeat it or give a comma-separated list (default: {', '.join(DEFAULT_GPUS)})."
    ))] = None,
    demand_csv: Annotated[Path | None, typer.Option("--demand-csv", help=(
        "Hourly demand: a CSV with a rate_per_s (or requests_per_hour) column, one row per hour, optional hour "
        "column 0, 1, 2, …"))] = None,
    peak_rate: Annotated[float | None, typer.Option("--peak-rate", help="Peak hour's mean rate, requests/s.")] = None,
    trough_rate: Annotated[float, typer.Option("--trough-rate", help="Quietest hour's rate, requests/s.")] = 0.0,
    shape: Annotated[str, typer.Option("--shape", help="diurnal (cosine), business (ramps), flat.")] = "diurnal",
    days: Annotated[int, typer.Option("--days", help="Days of the shaped curve (7: a week, 365: a year).")] = 1,
    peak_hour: Annotated[float, typer.Option("--peak-hour", help="diurnal: hour of the peak, 0–24.")] = 14.0,
    open_hour: Annotated[float, typer.Option("--open-hour", help="business: ramp up from this hour.")] = 8.0,
    close_hour: Annotated[float, typer.Option("--close-hour", help="business: ramped down by this hour.")] = 20.0,
    ramp_hours: Annotated[float, typer.Option("--ramp-hours", help="business: hours of each ramp (> 0).")] = 2.0,
    weekend_factor: Annotated[float, typer.Option("--weekend-factor", help="Saturday/Sunday × this.")] = 1.0,
    growth_per_month: Annotated[float, typer.Option("--growth-per-month", help=(
        "Demand growth per month, a fraction (0.1 = 10 %), compounded hourly."))] = 0.0,
    workload: Annotated[str | None, typer.Option("--workload", help="chat or rag preset, not fixed lengths.")] = None,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", min=1, help="Prompt tokens per request.")
                             ] = DEFAULT_PROMPT_TOKENS,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1, help="Output tokens per request.")
                             ] = DEFAULT_OUTPUT_TOKENS,
    weight_dtype: Annotated[str | None, typer.Option("--weight-dtype", help=(
        "Weight dtype of every GPU type (default: the model's own, as planner size)."))] = None,
    kv_dtype: KvDtypeOpt = "bf16",
    tp: Annotated[int | None, typer.Option("--tp", min=1, help="TP per replica (default: the smallest that starts).")
                  ] = None,
    headroom_pct: Annotated[float, typer.Option("--headroom-pct", callback=_pct("--headroom-pct", 90), help=(
        "Plan each replica this many percent below its knee."))] = 100 * DEFAULT_HEADROOM,
    min_replicas: Annotated[int, typer.Option("--min-replicas", min=0, help="Autoscaler's minimum.")] = 1,
    max_replicas: Annotated[int | None, typer.Option("--max-replicas", min=1, help=(
        "Autoscaler's maximum (default: what the peak hour needs)."))] = None,
    reserved_discount_pct: Annotated[float, typer.Option("--reserved-discount-pct", callback=_pct(
        "--reserved-discount-pct", 99), help="Reserved price: this many percent off the catalog's (an assumption: "
                                              "give yours).")] = 100 * DEFAULT_RESERVED_DISCOUNT,
    spot_discount_pct: Annotated[float, typer.Option("--spot-discount-pct", callback=_pct("--spot-discount-pct", 99),
                                                     help="Spot price: this many percent off the catalog's.")
                                 ] = 100 * DEFAULT_SPOT_DISCOUNT,
    spot_interruption_rate: Annotated[float, typer.Option("--spot-interruption-rate", callback=_frac(
        "--spot-interruption-rate"), help="Probability a spot replica is reclaimed in an hour, 0–1.")] = 0.02,
    api_usd_per_mtok: Annotated[float | None, typer.Option("--api-usd-per-mtok", help=(
        "An API's price per million output tokens: the break-even."))] = None,
    api_usd_per_mtok_input: Annotated[float, typer.Option("--api-usd-per-mtok-input", help=(
        "The API's price per million input tokens."))] = 0.0,
    node_provision_s: Annotated[float, typer.Option("--node-provision-s", help=(
        "Seconds to get a GPU node (0: nodes wait in the pool)."))] = 0.0,
    polling_interval_s: Annotated[float, typer.Option("--polling-interval-s", help="KEDA pollingInterval.")] = 30.0,
    cooldown_s: Annotated[float, typer.Option("--cooldown-s", help="Scale-down stabilisation, s.")] = 300.0,
    replay_hours: Annotated[int, typer.Option("--replay-hours", min=0, help=(
        "Hours replayed with the policy in the loop (0: none; at most 744)."))] = 24,
    target_attainment: Annotated[float, typer.Option("--target-attainment", callback=_frac("--target-attainment"),
                                                     help="Share of requests to serve within the targets.")] = 0.99,
    prometheus_url: Annotated[str, typer.Option("--prometheus-url", help="Prometheus for KEDA's trigger.")] = (
        "http://prometheus-operated.monitoring.svc:9090"),
    namespace: Annotated[str | None, typer.Option("--namespace", help="Namespace of the manifests.")] = None,
    seed: SeedOpt = 0,
    profile: ProfileOpt = "auto",
    out: Annotated[Path | None, typer.Option("--out", help=(
        "Write hourly.csv, keda-scaledobject.yaml, hpa.yaml, summary.html, summary.pdf, capacity.json here."))] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite those files in --out.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Capacity over time and money: replicas per hour for a demand curve, static vs autoscaled $/month, the
    autoscaling policy replayed through the simulator, the cheapest GPU mix and price basis, the break-even.

    Exits 1 (error: infeasible) when no GPU meets the targets at any rate."""
    from planner.capacity.engine import workload_maker
    from planner.capacity.plan import plan_capacity
    from planner.io import catalog

    if not re.fullmatch(r"https?://[A-Za-z0-9._:/\-\[\]]+", prometheus_url):
        raise error_exit("--prometheus-url", "an http(s) URL of letters, digits and . _ : / - only")
    demand = _demand(demand_csv, peak_rate, trough_rate, shape, days, peak_hour, open_hour, close_hour, ramp_hours,
                     weekend_factor, growth_per_month)
    m = catalog.model(model)
    gs = [catalog.gpu(x) for x in dict.fromkeys(gpu or DEFAULT_GPUS)]
    gpus = [(g, catalog.resolve_profile(profile, g.id, field="--profile")[0]) for g in gs]
    make = workload_maker(prompt_tokens, output_tokens, preset=workload, seed=seed)
    prices = Prices(reserved_discount_pct / 100, spot_discount_pct / 100, spot_interruption_rate)
    try:
        plan = plan_capacity(m, gpus, demand, make, ttft_slo_ms * MS, tpot_slo_ms * MS, weight_dtype=weight_dtype,
                             kv_cache_dtype=kv_dtype, tensor_parallel=tp, headroom=headroom_pct / 100,
                             min_replicas=min_replicas, max_replicas=max_replicas, prices=prices,
                             api_usd_per_mtok_output=api_usd_per_mtok, api_usd_per_mtok_input=api_usd_per_mtok_input,
                             node_provision_s=node_provision_s, polling_interval_s=polling_interval_s,
                             cooldown_s=cooldown_s, replay_hours=replay_hours, target_attainment=target_attainment,
                             seed=seed, date=today())
    except ValueError as err:
        msg = str(err)
        if msg.startswith("infeasible: "):
            raise error_exit("infeasible", msg.removeprefix("infeasible: "), code=1) from None
        raise
    written: list[str] = []
    notes: list[str] = []
    if out is not None:
        from planner.capacity.summary import summary_html, summary_pdf
        from planner.deploy.autoscale import autoscale_files

        files: dict[str, str | bytes] = {"hourly.csv": _hourly_csv(plan)}
        files.update(autoscale_files(plan.policy, model_id=m.id, namespace=namespace, prometheus_url=prometheus_url))
        files["summary.html"] = summary_html(plan)
        try:
            files["summary.pdf"] = summary_pdf(plan)
        except ImportError:
            notes.append("summary.pdf not written: fpdf2 (a dependency) is not installed")
        import json
        files["capacity.json"] = json.dumps(plan.as_dict(hourly=True), indent=2, allow_nan=False, default=str) + "\n"
        written = _write(out, plan, files, force)
    if json_out:
        emit_json({**plan.as_dict(hourly=False), "files": written, "notes": notes})
        return
    _print(plan, written)
    for n in notes:
        typer.echo(f"note: {n}")


def _print(plan, written: list[str]) -> None:
    d, s, k, p = plan.demand, plan.schedule, plan.knee, plan.policy
    typer.echo(f"{plan.model_id}: {d.hours:,} h of demand from {d.source}: peak {d.peak_rate_per_s:,.3g} req/s, mean "
               f"{d.mean_rate_per_s:,.3g} req/s ({d.requests_per_month:,.0f} requests/month); workload {plan.workload}")
    table(["gpu", "TP", "knee req/s", "target req/s", "mode", "confidence", "static", "peak auto", "$/mo static",
           "$/mo autoscaled", "util auto"],
          [[x.knee.gpu_id, x.knee.tensor_parallel, f"{x.knee.knee_rate_per_s:,.3g}", f"{x.knee.target_rate_per_s:,.3g}",
            x.knee.mode, x.knee.confidence, x.static_replicas, int(x.replicas.max()),
            f"${x.usd_per_month_static:,.0f}", f"${x.usd_per_month_autoscaled:,.0f}",
            f"{x.utilisation_autoscaled:.0%}"] for x in plan.schedules])
    typer.echo(f"Recommended: {k.label()} autoscaled {s.min_replicas}–{s.max_replicas} replicas, "
               f"${s.usd_per_month_autoscaled:,.0f}/month ({s.savings_fraction:.0%} below static "
               f"${s.usd_per_month_static:,.0f}); {s.gpu_hours_autoscaled:,.0f} vs {s.gpu_hours_static:,.0f} GPU-hours")
    typer.echo(f"Autoscale on completed requests/s > {p.target_rate_per_s:.3g} per replica, and running + waiting > "
               f"{p.threshold_in_system:.1f} per replica (its load at the knee; KV usage there "
               f"{p.kv_usage_at_knee:.0%}, "
               f"{p.kv_usage_at_target:.0%} at the target); lead time {p.lead.total_s:.0f} s ({p.lead.boot_basis})")
    if plan.replay is not None:
        r = plan.replay
        worst = int(r.attainment.argmin())
        typer.echo(f"Replay of {r.hours} h with the policy in the loop: {r.total_requests:,} requests, "
                   f"{r.overall_attainment:.2%} within the targets; worst hour {worst} at {r.attainment[worst]:.2%}; "
                   f"{r.hours_below_target.size} hour(s) below {r.target_attainment:.0%}")
        ramp = plan.ramp()
        if ramp is not None and ramp["rise_rate_per_s"] > 0:
            tail = "—" if ramp["ttft_p99_max_s"] is None else f"{ramp['ttft_p99_max_s'] * 1e3:,.0f} ms"
            typer.echo(f"Steepest ramp: hour {ramp['hour']} (+{ramp['rise_rate_per_s']:,.3g} req/s): p99 TTFT up to "
                       f"{tail}, {ramp['attainment']:.2%} within the targets")
    table(["mix", "$/month", "attainment", "risk"],
          [[mx.label, f"${mx.usd_per_month:,.0f}", f"{mx.expected_attainment:.2%}", mx.risk] for mx in plan.mixes])
    if plan.breakeven is not None:
        b = plan.breakeven
        vol = b.breakeven_output_tokens_per_month
        typer.echo(f"Break-even: {b.verdict()}; self-hosting wins above "
                   + (f"{vol / 1e6:,.0f} M output tokens/month" if vol is not None else "no volume on the grid"))
    for f in written:
        typer.echo(f"wrote {f}")
