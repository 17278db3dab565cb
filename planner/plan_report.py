"""A plan report a manager can act on: one configuration, its engine flags, the fleet for a demand, its latency
percentiles, cost, quality and where every number comes from — as Markdown, HTML and a CSV in human units.

:func:`plan_report` is pure (no files, no network; the simulation is seeded): ``planner report`` writes its
three texts, and the dashboard can offer them for download::

    from planner.cli.flags import PlanFlags
    from planner.cli.plan import plan_from_flags
    from planner.plan_report import plan_report

    fp = plan_from_flags(PlanFlags(model="llama-3.1-70b", gpu="h200-sxm", users=160, ttft_slo_ms=1000))
    pr = plan_report(fp.model, fp.gpu, fp.report, fp.fleet, fp.profile, calibration_note=fp.mode_line)
    pr.markdown(), pr.html(), pr.csv_text()      # str each; pr.as_dict() for JSON

What it holds: model, GPU, TP/PP, dtypes, the ``vllm serve`` command of one replica
(:func:`planner.deploy.serve_command`, vLLM 0.26 flags), the demand (users and think time, or the rate), the
fleet engine's answer (replicas, GPUs, $/hour, $/month, the band's range, the basis: :mod:`planner.fleet`), the
knee and the TTFT and TPOT tails at the operating rate from the simulator (the same trials that sized the
fleet) with the error bands of :mod:`planner.bands`, the planned
steady-state latencies, all-in $ per million output tokens (the ranking key, :mod:`planner.ranking`), quality,
and the calibration mode with its source.  The raw sweep CSV (:func:`planner.report.write_csv`) is another file.
"""

from __future__ import annotations

import csv
import html as html_mod
import io
import math
from dataclasses import dataclass, field

from planner.fleet import HOURS_PER_MONTH, FleetPlan
from planner.profile import CalibrationProfile
from planner.quoting import csv_cell, md_code_block, md_text
from planner.ranking import RANK_DEFINITION
from planner.report import SizingReport
from planner.specs import GpuSpec, ModelSpec
from planner.units import MS, GiB

__all__ = ["PlanReport", "plan_report"]



@dataclass(frozen=True)
class PlanReport:
    """The report's rows (section, quantity, value in ``unit``, unit, band/note), its headline and command."""

    title: str
    headline: list[str]
    rows: list[tuple[str, str, object, str, str]]
    serve_command: str
    feasible: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def sections(self) -> dict[str, list[tuple[str, object, str, str]]]:
        out: dict[str, list] = {}
        for sec, q, v, unit, note in self.rows:
            out.setdefault(sec, []).append((q, v, unit, note))
        return out

    def value(self, quantity: str):
        """The value of the first row named ``quantity`` (KeyError if none)."""
        for _, q, v, _, _ in self.rows:
            if q == quantity:
                return v
        raise KeyError(quantity)

    def as_dict(self) -> dict:
        return {"title": self.title, "headline": list(self.headline), "serve_command": self.serve_command,
                "feasible": self.feasible, "reasons": list(self.reasons), "warnings": list(self.warnings),
                "notes": list(self.notes),
                "rows": [{"section": s, "quantity": q, "value": _json(v), "unit": u, "band_or_note": n}
                         for s, q, v, u, n in self.rows]}

    def csv_text(self) -> str:
        """One row per quantity: section, quantity, value (in the unit of its row), unit, band or note."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["section", "quantity", "value", "unit", "band_or_note"])
        for s, q, v, u, n in self.rows:
            # text cells a spreadsheet would evaluate get an apostrophe; numbers are written as numbers
            value = _cell(v, plain=True)
            w.writerow([csv_cell(s), csv_cell(q), csv_cell(value) if isinstance(v, str) else value,
                        csv_cell(u), csv_cell(n)])
        return buf.getvalue()

    def _engine_heading(self) -> str:
        return "Engine (one replica)" + ("" if self.feasible else " — as planned, which would not start or serve: "
                                                                   "see Infeasible")

    def markdown(self) -> str:
        m = md_text  # every text from outside (names, sources, notes) HTML-escaped, one line
        lines = [f"# {m(self.title)}", "",
                 *[f"**{m(h)}**  " if i == 0 else m(h.strip()) for i, h in enumerate(self.headline)], ""]
        lines += [f"> **Infeasible:** {m(r)}" for r in self.reasons]
        lines += [f"> **Warning:** {m(w)}" for w in self.warnings]
        lines += ["", f"## {self._engine_heading()}", "", *md_code_block(self.serve_command, "bash"), ""]
        for sec, rows in self.sections().items():
            lines += [f"## {m(sec)}", "", "| quantity | value | unit | band / note |", "| --- | ---: | --- | --- |"]
            lines += [f"| {m(q)} | {m(_cell(v))} | {m(u)} | {m(n)} |" for q, v, u, n in rows]
            lines.append("")
        if self.notes:
            lines += ["## Notes", "", *[f"- {m(n)}" for n in self.notes], ""]
        return "\n".join(lines)

    def html(self) -> str:
        e = html_mod.escape
        body = [f"<h1>{e(self.title)}</h1>", *[f"<p>{'<strong>' if i == 0 else ''}{e(h.strip())}"
                                              f"{'</strong>' if i == 0 else ''}</p>" for i, h in enumerate(self.headline)]]
        body += [f'<p class="bad"><strong>Infeasible:</strong> {e(r)}</p>' for r in self.reasons]
        body += [f'<p class="warn"><strong>Warning:</strong> {e(w)}</p>' for w in self.warnings]
        body += [f"<h2>{e(self._engine_heading())}</h2>", f"<pre><code>{e(self.serve_command)}</code></pre>"]
        for sec, rows in self.sections().items():
            body += [f"<h2>{e(sec)}</h2>", "<table>",
                     "<tr><th>quantity</th><th>value</th><th>unit</th><th>band / note</th></tr>"]
            body += [f"<tr><td>{e(q)}</td><td class=\"num\">{e(_cell(v))}</td><td>{e(u)}</td><td>{e(n)}</td></tr>"
                     for q, v, u, n in rows]
            body.append("</table>")
        if self.notes:
            body += ["<h2>Notes</h2>", "<ul>", *[f"<li>{e(n)}</li>" for n in self.notes], "</ul>"]
        style = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
                 "table{border-collapse:collapse;margin-bottom:1rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
                 "text-align:left}td.num{text-align:right}pre{background:#f4f4f4;padding:.5rem;white-space:pre-wrap}"
                 ".bad{color:#a00}.warn{color:#a60}")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{e(self.title)}</title><style>{style}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")


def _finite_or_none(v):
    return None if v is None or not math.isfinite(v) else v


def _json(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _cell(v, plain: bool = False) -> str:
    """A value as text: 4 significant digits (whole numbers from 1,000), thousands separated unless ``plain``
    (the CSV: numbers a spreadsheet reads), '—' for none."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "" if plain else "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    sep = "" if plain else ","
    if isinstance(v, float):
        return f"{v:{sep}.4g}" if abs(v) < 1000 else f"{v:{sep}.0f}"
    if isinstance(v, int):
        return f"{v:{sep}}"
    return str(v)


def _calibration_source(profile: CalibrationProfile) -> str:
    if profile.mode == "ideal":
        return "datasheet roofline, no measurement"
    used = f" on {', '.join(profile.models_used)}" if profile.models_used else ""
    src = f"{profile.engine or 'engine'} {profile.engine_version or '?'}, fitted {profile.created[:10] or '?'}{used}"
    if profile.mode == "transferred":
        return f"measured on {profile.transferred_from} ({src}), applied to {profile.gpu_id}'s datasheet roofs"
    return f"measured on {profile.gpu_id} ({src})"


def launch_note(lr, tails_s, nominal_s: float) -> str:
    """'; a-b ms with the launch 0.79-1.25× the profile's, as measured on other hosts and runs' for a tail that moves
    with the CPU launch of the steps above the CUDA graphs (planner.fleet_eval.LaunchRange: the tail at both ends of
    the spread, and ``nominal_s`` at the profile's own launch); '' without one, or where it moves the tail less than
    1 %."""
    if lr is None:
        return ""
    tails = (*tails_s, nominal_s)
    if not all(map(math.isfinite, tails)) or max(tails) <= 1.01 * min(tails):
        return ""
    return (f"; {min(tails) / MS:,.1f}-{max(tails) / MS:,.1f} ms with the CPU launch of the steps above the CUDA "
            f"graphs at {lr.factors[0]:.2f}-{lr.factors[1]:.2f}× the profile's, as measured on other hosts and runs")


def plan_report(model: ModelSpec, gpu: GpuSpec, report: SizingReport, fleet: FleetPlan,
                profile: CalibrationProfile, *, calibration_note: str = "") -> PlanReport:
    """The :class:`PlanReport` of the fleet engine's answer ``fleet`` (:func:`planner.fleet.plan_fleet`; its
    best candidate) and ``report``, that candidate's replica at the steady state (the explanation)."""
    from planner.deploy import serve_command

    d, w, q, c = report.deployment, report.workload, report.quality, report.cost
    best, fq = fleet.best, fleet.question
    bands = {k: (b.text() if b is not None else "no band") for k, b in
             ((k, report.bands.get(k)) for k in ("ttft", "tpot", "kv_capacity"))}
    serve = serve_command(model, gpu, d, max_model_len=w.context_tokens, profile=profile)
    rows: list[tuple[str, str, object, str, str]] = []

    def add(section, quantity, value, unit="", note=""):
        rows.append((section, quantity, value, unit, note))

    cfg = "Configuration"
    add(cfg, "model", f"{model.name} ({model.id})")
    add(cfg, "GPU", f"{gpu.name} ({gpu.id})")
    add(cfg, "tensor parallel", d.tensor_parallel, "GPUs")
    add(cfg, "pipeline parallel", d.pipeline_parallel, "stages")
    add(cfg, "weights", d.weight_dtype)
    add(cfg, "KV cache", d.kv_cache_dtype)
    add(cfg, "gpu_memory_utilization", d.gpu_memory_utilization)
    add(cfg, "max_num_seqs", d.max_num_seqs, "sequences")
    add(cfg, "max_num_batched_tokens", d.max_num_batched_tokens, "tokens")
    add(cfg, "chosen", fleet.sentence())

    dem = "Demand"
    if fq.users is not None:
        add(dem, "users", fq.users)
        add(dem, "think time", fq.think_time_s, "s")
    add(dem, "request rate", best.demand_rate_per_s if best else fq.rate_per_s, "req/s",
        "what the users send: users / (think time + E2E)" if fq.users is not None else "")
    add(dem, "prompt tokens", w.prompt_tokens, "tokens")
    add(dem, "output tokens", w.output_tokens, "tokens")
    add(dem, f"TTFT target ({fq.tail})", None if fq.ttft_slo_s is None else fq.ttft_slo_s / MS, "ms")
    add(dem, f"TPOT target ({fq.tail})", None if fq.tpot_slo_s is None else fq.tpot_slo_s / MS, "ms")

    if best is not None:
        k = best.knee
        fl = "Fleet"
        band = (f"±{best.band_pct:.0f} %: up to {best.replicas_high:,} replicas" if best.replicas_high is not None
                else f"no error band: {best.band_basis}")
        add(fl, "replicas", best.replicas, "", band + ("; N+1" if fq.n_plus_one else ""))
        add(fl, "GPUs", best.num_gpus)
        add(fl, "cost per hour", round(best.usd_per_hour, 2), "USD")
        add(fl, "cost per month", round(best.usd_per_month), "USD", f"{HOURS_PER_MONTH:g} hours")
        add(fl, "confidence", best.confidence, "", best.band_basis)
        alt = fleet.best_measured
        if alt is not None:
            add(fl, "cheapest measured alternative", f"{alt.replicas:,} × {alt.layout()}", "",
                f"{alt.num_gpus:,} GPUs, {round(alt.usd_per_month):,} USD/month")
        lat = f"Latency, simulated at the {fq.tail}"
        how = f"one replica under Poisson arrivals, steady state ({k.trial_requests:,}-request trials)"
        add(lat, "knee (per replica)", k.knee_rate_per_s, "req/s", f"highest rate holding the targets ({k.confidence})")
        add(lat, "operating rate (per replica)", k.usable_rate_per_s, "req/s", f"{fq.headroom:.0%} below the knee")
        lr = fleet.launch_range
        add(lat, f"TTFT {fq.tail}", k.ttft_tail_s / MS, "ms",
            bands["ttft"] + launch_note(lr, lr and lr.ttft_tail_s, k.ttft_tail_s))
        one = report.workload.output_tokens <= 1  # no time per output token
        no_tpot = "none: one output token per request has no time per output token"
        add(lat, f"TPOT {fq.tail}", None if one else k.tpot_tail_s / MS, "ms",
            no_tpot if one else bands["tpot"] + launch_note(lr, lr and lr.tpot_tail_s, k.tpot_tail_s))
        add(lat, "TTFT p50", k.ttft_p50_s / MS, "ms")
        add(lat, "TPOT p50", None if one else k.tpot_p50_s / MS, "ms", no_tpot if one else "")
        add(lat, "E2E mean", k.e2e_mean_s, "s", how)
        add(lat, "requests in flight per replica", k.in_flight, "requests")
        ok = all(t is None or v <= t for v, t in ((k.ttft_tail_s, fq.ttft_slo_s), (k.tpot_tail_s, fq.tpot_slo_s)))
        add(lat, f"{fq.tail} meets the targets", ok, "", "at the operating rate")
    steady = "Latency, planned steady state"
    add(steady, "TTFT joining the batch", report.slo.ttft_s / MS if report.batch_size else None, "ms", bands["ttft"])
    add(steady, "TPOT (mean)", report.tpot_effective_s / MS if report.batch_size else None, "ms", bands["tpot"])
    add(steady, "max concurrency (KV cache)", report.max_concurrency, "requests", bands["kv_capacity"])
    add(steady, "KV pool per GPU", round(report.memory.kv_pool_bytes / GiB, 2), "GiB")

    cost = "Cost"
    if best is not None and best.usd_per_million_output_tokens is not None:
        add(cost, "$ per million output tokens", best.usd_per_million_output_tokens, "USD",
            "all GPU time at the operating rate over the generated tokens")
    add(cost, "$ per million output tokens (steady state, all-in)", float(c.usd_per_million_output_tokens_all_in),
        "USD", RANK_DEFINITION.split(";")[0])
    add(cost, "price per GPU-hour", report.price_usd_per_hour, "USD", f"{report.price_source}, {report.price_date}")

    qual = "Quality"
    if q.benchmark:
        add(qual, q.benchmark, round(q.score, 1), "%", f"published {q.published_score:.1f} × retention "
            f"{q.retention:.3f} for {d.weight_dtype} weights / {d.kv_cache_dtype} KV ({q.score_source_url})")
    else:
        add(qual, "benchmark", None, "", "no published score in the catalog")

    cal = "Calibration"
    add(cal, "mode", report.profile_mode, "", calibration_note)
    add(cal, "source", _calibration_source(profile))

    title = f"Plan: {model.name} on {gpu.name}"
    feasible = best is not None
    headline = (fleet.lines() if feasible else
                [f"No fleet: {model.name} on {gpu.name} cannot serve this plan (the reasons below)"])
    return PlanReport(title=title, headline=headline, rows=rows, serve_command=serve.shell(),
                      feasible=feasible, reasons=[] if feasible else [fleet.sentence()],
                      warnings=list(report.warnings),
                      notes=list(report.notes) + list(serve.notes))
