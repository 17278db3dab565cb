"""The dashboard's Deploy panel and plan report: the chosen plan as ``planner deploy`` would write it
(:func:`planner.deploy.deployment_bundle`), its predictions beside the command, the files as one zip, and
the plan report as Markdown.

Seam: ``planner/plan_report.py`` (the CLI's plan report, being written beside this) will be the one plan
report.  Until it lands, :func:`plan_report_markdown` builds the report from the sizing report's own text
(:func:`planner.report.report_text`), the fleet answer and the ranking's first row; when it lands,
:func:`plan_report_markdown` should return its text instead.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

import pandas as pd

from planner import catalog
from planner.deploy import DeployBundle, DeployRefused, deployment_bundle
from planner.headline import FleetAnswer
from planner.report import band_lines, report_text
from planner.scenario import Planned
from planner.specs import Workload
from planner.units import fmt_gib, fmt_int, fmt_ms, fmt_usd


@dataclass(frozen=True)
class DeployPanel:
    """A bundle, or the plain sentence saying why the plan cannot be deployed as it stands."""

    bundle: DeployBundle | None
    refusal: str | None = None


def deploy_panel(p: Planned, rate_per_s: float | None) -> DeployPanel:
    """``planner deploy`` for the scenario as chosen (its TP and dtypes; the fleet sized for ``rate_per_s``)."""
    w = p.workload
    wl = Workload(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, ttft_slo_s=w.ttft_slo_s,
                  tpot_slo_s=w.tpot_slo_s, request_rate_per_s=rate_per_s if rate_per_s and rate_per_s > 0 else None)
    note = ""
    if p.profile.mode != "ideal":
        try:
            note = catalog.resolve_profile("auto", p.gpu.id)[1]
        except catalog.SpecError:
            note = ""
    try:
        b = deployment_bundle(p.model, p.gpu, p.deployment, wl, profile=p.profile, calibration_note=note,
                              auto_layout=False)
    except DeployRefused as e:
        return DeployPanel(None, f"vLLM would not start this plan as chosen ({e.field}): {e.reason}.")
    except ValueError as e:
        return DeployPanel(None, f"This plan cannot be written as a deployment: {e}.")
    return DeployPanel(b)


def deploy_predictions(b: DeployBundle) -> pd.DataFrame:
    """What the planner predicts the command will do, beside it (quantity, value)."""
    pr, r = b.predictions, b.report
    rows = [
        ("KV cache pool per GPU", fmt_gib(pr["kv_pool_bytes_per_gpu"]) + f" ({pr['kv_capacity_tokens']:,} tokens)"),
        ("max concurrency at max-model-len", fmt_int(pr["max_concurrency_at_max_model_len"])),
        ("batch per replica (meets the targets)", fmt_int(pr["batch_size_per_replica"])),
        ("TTFT idle / under load", f"{fmt_ms(pr['ttft_idle_s'])} / {fmt_ms(pr['ttft_under_load_s'])}"
                                   + (f" ({r.bands['ttft'].text()})" if "ttft" in r.bands else "")),
        ("TPOT", fmt_ms(pr["tpot_s"]) + (f" ({r.bands['tpot'].text()})" if "tpot" in r.bands else "")),
        ("replicas × GPUs each", f"{pr['replicas']:,} × {pr['gpus_per_replica']:,} = {pr['gpus']:,} GPUs"),
        ("fleet $ / hour", fmt_usd(pr["usd_per_hour"])),
        ("boot estimate", f"{pr['boot_estimate_s']:,.0f} s"),
        ("latency model", str(pr["calibration_mode"])),
    ]
    return pd.DataFrame(rows, columns=["predicted", "value"])


def files_zip(files: dict[str, str], folder: str = "deploy") -> bytes:
    """Every file of the bundle in one zip (``folder/name``), what ``planner deploy --out folder`` writes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in sorted(files.items()):
            info = zipfile.ZipInfo(f"{folder}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".sh") else 0o644) << 16
            z.writestr(info, text)
    return buf.getvalue()


def plan_report_markdown(p: Planned, fleet: FleetAnswer, demand_text: str, cheapest: str | None,
                         sweep_command: str, latency_label: str) -> str:
    """The plan report a manager can forward (Markdown): the answer, the fleet, the ranking's first row,
    the sizing table and where each error band comes from.  The seam for ``planner.plan_report``."""
    r = p.report
    lines = [f"# Plan: {p.model.name} on {p.gpu.name}", "",
             f"**Demand:** {demand_text}.", ""]
    if fleet.reason:
        lines += [f"**Fleet:** {fleet.reason}", ""]
    else:
        answer = (f"**Fleet:** {fleet.replicas:,} replica(s) of {fleet.gpus_per_replica} × {p.gpu.name} = "
                  f"**{fleet.gpus:,} GPUs**, {fmt_usd(fleet.usd_per_hour)}/hour, **{fmt_usd(fleet.usd_per_month, 0)}"
                  f"/month** (at {fmt_usd(fleet.price_usd_per_gpu_hour)}/GPU-hour, {r.price_source}, {r.price_date}).")
        lines += [answer, "", fleet.band_sentence(), ""]
    if cheapest:
        lines += ["**Cheapest configuration in the catalog meeting every target** (the ranking of `planner sweep`):",
                  "", cheapest.replace("**", ""), "", f"    {sweep_command}", ""]
    lines += [f"Latency model: {latency_label}.", "", "## Sizing report (`planner size`)", "", "```",
              report_text(r, latency_label), "```", ""]
    if r.bands:
        lines += ["## Error bands", "", *[f"- {x.strip()}" for x in band_lines(r)], ""]
    return "\n".join(lines)
