"""The dashboard's Deploy panel and plan report: the chosen plan as ``planner deploy`` would write it
(:func:`planner.deploy.deployment_bundle`), its predictions beside the command, the files as one zip, and the
plan report ``planner report`` writes (:func:`planner.plan_report.plan_report`) for the scenario and its demand.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

import pandas as pd

from planner.io import catalog
from planner.deploy import DeployBundle, DeployRefused, deployment_bundle
from planner.dashboard.headline import DemandAnswer
from planner.plan_report import plan_report
from planner.dashboard.scenario import Planned
from planner.specs import Workload
from planner.units import fmt_gib, fmt_int, fmt_ms, fmt_usd


@dataclass(frozen=True)
class DeployPanel:
    """A bundle, or the plain sentence saying why the plan cannot be deployed as it stands."""

    bundle: DeployBundle | None
    refusal: str | None = None


def fleet_args(da) -> tuple[float, int | None, object]:
    """(rate, replicas, operating point) of the fleet engine's answer for the sidebar's GPU and TP in ``da`` (a
    :class:`planner.dashboard.headline.DemandAnswer`), as :func:`deploy_panel` takes them: the steady state's rate
    and no replicas where the engine has no answer."""
    from planner.fleet_eval import operating_point

    own = da.own.best if da.own is not None else None
    if own is None:
        return da.fleet.request_rate_per_s or 0.0, None, None
    return own.demand_rate_per_s or 0.0, own.replicas, operating_point(da.own.question, own)


def deploy_panel(p: Planned, rate_per_s: float | None, replicas: int | None = None,
                 operating=None) -> DeployPanel:
    """``planner deploy`` for the scenario as chosen (its TP and dtypes; ``replicas`` the fleet engine's for
    ``rate_per_s``, ``operating`` its operating point: :func:`planner.fleet_eval.operating_point`)."""
    w = p.workload
    wl = Workload(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, ttft_slo_s=w.ttft_slo_s,
                  tpot_slo_s=w.tpot_slo_s, request_rate_per_s=rate_per_s if rate_per_s and rate_per_s > 0 else None)
    try:
        b = deployment_bundle(p.model, p.gpu, p.deployment, wl, profile=p.profile, calibration_note=_note(p),
                              auto_layout=False, replicas=replicas, operating=operating)
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
        *([("at the fleet's operating point", b.operating.sentence())] if b.operating is not None else []),
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


def plan_report_markdown(p: Planned, answer: DemandAnswer) -> str:
    """The plan report of the scenario's fleet for its demand (the fleet engine's, on the sidebar's GPU and TP),
    as ``planner report --gpu … --tp …`` writes it (Markdown)."""
    if answer.own is None or answer.own.best is None:
        return f"# No fleet\n\n{answer.own.sentence() if answer.own else 'No demand given.'}\n"
    return plan_report(p.model, p.gpu, answer.report, answer.own, p.profile, calibration_note=_note(p)).markdown()


def _note(p: Planned) -> str:
    if p.profile.mode == "ideal":
        return ""
    try:
        return catalog.resolve_profile("auto", p.gpu.id)[1]
    except catalog.SpecError:
        return ""


def render(st, panel: DeployPanel, model_id: str) -> None:
    """The Deploy view laid out on ``st`` (streamlit, handed in by app.py: no streamlit import here)."""
    if panel.bundle is None:
        st.warning(panel.refusal)
        return
    b = panel.bundle
    left, right = st.columns([3, 2])
    left.markdown(f"One replica of **{b.layout.describe()}**; {b.replicas:,} replica(s) for the demand above:")
    left.code(b.serve_command, language="bash", wrap_lines=True)
    right.table(deploy_predictions(b).set_index("predicted"))
    c = st.container(horizontal=True)
    c.download_button("Download every file (zip)", files_zip(b.files), file_name=f"deploy-{model_id}.zip",
                      mime="application/zip", key="dl-zip", on_click="ignore", type="primary")
    for name, text in sorted(b.files.items()):
        c.download_button(name, text, file_name=name, key=f"dl-{name}", on_click="ignore")
    if b.notes:
        st.caption("Notes: " + "; ".join(b.notes) + ".")
