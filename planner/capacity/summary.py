"""The one-page executive summary of a :class:`~planner.capacity.plan.CapacityPlan`: the recommendation, two
or three alternatives with $/month and their risk, the confidence of each number, the assumptions and the
prices with their dates — as HTML (every value escaped) and PDF (fpdf2, imported only here).

:func:`summary_sections` holds the words once; :func:`summary_html` and :func:`summary_pdf` only lay them out.
"""

from __future__ import annotations

import html

from planner.capacity.plan import CapacityPlan

__all__ = ["summary_html", "summary_pdf", "summary_sections"]


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def summary_sections(plan: CapacityPlan) -> dict:
    """{title, headline, recommendation: [lines], alternatives: [(option, $/month, risk)], confidence: [lines],
    assumptions: [lines]} — plain text, not yet escaped."""
    s, k, p = plan.schedule, plan.knee, plan.policy
    d = plan.demand
    cheapest = plan.mixes[0] if plan.mixes else None
    auto = s.usd_per_month_autoscaled
    head = (f"Serve {plan.model_name} for {d.hours:,} hours of demand (peak {d.peak_rate_per_s:,.3g} req/s, mean "
            f"{d.mean_rate_per_s:,.3g}) within p99 TTFT {k.ttft_slo_s * 1e3:,.0f} ms and TPOT "
            f"{k.tpot_slo_s * 1e3:,.0f} ms: {s.min_replicas}–{s.max_replicas} replicas of {k.label()}, autoscaled, "
            f"{_usd(auto)}/month ({s.savings_fraction:.0%} below the static peak fleet's "
            f"{_usd(s.usd_per_month_static)}).")
    rec = [f"Autoscale on completed requests/s: one replica per {p.target_rate_per_s:.3g} req/s (the knee "
           f"{k.knee_rate_per_s:.3g} less {k.headroom:.0%} headroom), and on running + waiting requests above "
           f"{p.threshold_in_system:.1f} per replica (its load at the knee) as the overload alarm; min "
           f"{p.min_replicas}, max {p.max_replicas} replicas (KEDA ScaledObject or HPA written beside).",
           f"A new replica serves {p.lead.total_s:.0f} s after demand rises (boot {p.lead.boot_s:.0f} s measured, "
           f"weights {p.lead.weight_load_s:.0f} s, detection {p.lead.detection_s:.0f} s, node "
           f"{p.lead.node_provision_s:.0f} s).",
           f"Utilisation of the SLO capacity: {s.utilisation_autoscaled:.0%} autoscaled vs "
           f"{s.utilisation_static:.0%} static."]
    if plan.replay is not None:
        r = plan.replay
        rec.append(f"Replayed {r.hours} h ({r.total_requests:,} requests) with the policy in the loop: "
                   f"{r.overall_attainment:.2%} of requests within the targets; "
                   f"{r.hours_below_target.size} hour(s) below {r.target_attainment:.0%}.")
        ramp = plan.ramp()
        if ramp is not None and ramp["rise_rate_per_s"] > 0 and ramp["ttft_p99_max_s"] is not None:
            rec.append(f"During the steepest ramp (hour {ramp['hour']}, +{ramp['rise_rate_per_s']:,.3g} req/s) p99 "
                       f"TTFT reaches {ramp['ttft_p99_max_s'] * 1e3:,.0f} ms; {ramp['attainment']:.2%} within the "
                       f"targets.")
    if plan.breakeven is not None:
        rec.append("Against the API: " + plan.breakeven.verdict() + ".")
    alts = [(f"Static peak fleet: {s.static_replicas} × {k.label()}", _usd(s.usd_per_month_static),
             "no scaling risk; pays for the peak through every trough")]
    for m in plan.mixes[:2]:
        alts.append((m.label, _usd(m.usd_per_month), m.risk))
    for other in plan.schedules:
        if other is not s and len(alts) < 4:
            alts.append((f"Autoscaled {other.knee.label()}", _usd(other.usd_per_month_autoscaled),
                         f"calibration {other.knee.mode}, knee confidence {other.knee.confidence}"))
    conf = [f"Knee {k.knee_rate_per_s:.3g} req/s per replica: simulator, {k.mode} latency model, "
            f"steady-state confidence {k.confidence}.",
            f"Boot time: {p.lead.boot_basis}.",
            "Costs: exact arithmetic on the prices below; mixes' spot attainment is a binomial model of reclaims."]
    if cheapest is not None:
        conf.append(f"Cheapest mix found: {cheapest.label}, {_usd(cheapest.usd_per_month)}/month.")
    prices = sorted({(kk.gpu_name, kk.price_usd_per_gpu_hour, kk.price_source) for kk in plan.knees})
    assume = [f"{g}: ${pr:.2f}/GPU-hour, {src}" for g, pr, src in prices]
    pz = plan.prices
    assume.append(f"Reserved {pz.reserved_discount:.0%} and spot {pz.spot_discount:.0%} below those; spot reclaim "
                  f"{pz.spot_interruption_per_hour:.1%} per replica-hour ({pz.basis_note}).")
    assume.append(f"Workload: {plan.workload}; demand from {d.source}; months of 730 hours.")
    return {"title": f"Capacity plan: {plan.model_name}" + (f" ({plan.date})" if plan.date else ""),
            "headline": head, "recommendation": rec, "alternatives": alts, "confidence": conf, "assumptions": assume}


def summary_html(plan: CapacityPlan) -> str:
    """A self-contained one-page HTML document; every value passes through :func:`html.escape`."""
    sec = summary_sections(plan)
    e = html.escape

    def items(lines):
        return "".join(f"<li>{e(x)}</li>" for x in lines)

    rows = "".join(f"<tr><td>{e(a)}</td><td class='n'>{e(b)}</td><td>{e(c)}</td></tr>"
                   for a, b, c in sec["alternatives"])
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{e(sec['title'])}</title><style>body{{font-family:sans-serif;max-width:52em;margin:2em auto;"
        "font-size:14px;line-height:1.4}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}"
        ".n{text-align:right;white-space:nowrap}h2{font-size:16px;margin-top:1.2em}</style></head><body>"
        f"<h1>{e(sec['title'])}</h1><p><strong>{e(sec['headline'])}</strong></p>"
        f"<h2>Recommendation</h2><ul>{items(sec['recommendation'])}</ul>"
        f"<h2>Alternatives</h2><table><tr><th>option</th><th>$/month</th><th>risk</th></tr>{rows}</table>"
        f"<h2>Confidence</h2><ul>{items(sec['confidence'])}</ul>"
        f"<h2>Assumptions and prices</h2><ul>{items(sec['assumptions'])}</ul>"
        "<p><small>Written by planner capacity (llm-capacity-planner).</small></p></body></html>\n")


def _latin1(text: str) -> str:
    """fpdf2's core fonts are Latin-1: the few other characters we write, spelled out."""
    for a, b in (("–", "-"), ("—", "-"), ("×", "x"), ("≤", "<="), ("≥", ">="), ("…", "..."), ("’", "'"),
                 ("÷", "/"), ("±", "+/-")):
        text = text.replace(a, b)
    return text.encode("latin-1", "replace").decode("latin-1")


def summary_pdf(plan: CapacityPlan) -> bytes:
    """The same page as PDF (A4, fpdf2's core Helvetica font)."""
    from fpdf import FPDF

    sec = summary_sections(plan)
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(True, margin=12)
    pdf.set_margins(14, 12, 14)
    pdf.add_page()
    w = pdf.w - pdf.l_margin - pdf.r_margin

    def para(text, size=8.5, style=""):
        pdf.set_font("Helvetica", style, size)
        pdf.multi_cell(w, size * 0.5, _latin1(text), new_x="LMARGIN", new_y="NEXT")

    def heading(text):
        pdf.ln(1.5)
        para(text, 10.5, "B")

    para(sec["title"], 14, "B")
    para(sec["headline"], 9, "B")
    heading("Recommendation")
    for x in sec["recommendation"]:
        para("- " + x)
    heading("Alternatives ($/month, risk)")
    for a, b, c in sec["alternatives"]:
        para(f"- {a}: {b}/month; {c}")
    heading("Confidence")
    for x in sec["confidence"]:
        para("- " + x)
    heading("Assumptions and prices")
    for x in sec["assumptions"]:
        para("- " + x, 7.5)
    return bytes(pdf.output())
