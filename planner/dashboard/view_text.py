"""The dashboard's words: what each view explains, and the sentences that say what a view's numbers mean
(from :mod:`planner.dashboard.views`' frames).  No streamlit import."""

from __future__ import annotations

from planner.report import SizingReport
from planner.dashboard.scenario import Planned
from planner.units import fmt_ms
from planner.dashboard.views import LatencyFrames, LoadView

#: The dashboard's views, in tab order, each with the sentence that explains what it shows.
VIEW_BLURBS = {
    "Memory": "Weights are a fixed cost; the **KV cache** is the variable one: whatever memory the weights and "
              "overheads leave becomes the KV pool, and context length × users must fit in it.",
    "Latency": "**Prefill** processes the prompt in parallel and sets **TTFT** (compute-bound); **decode** makes one "
               "token per step for the whole batch and sets **TPOT/ITL** (memory-bound: it streams the weights and "
               "every sequence's KV cache). Shaded: the error band measured for this kind of prediction.",
    "Roofline": "Arithmetic intensity (FLOPs per byte read) decides the bound: left of the ridge a step is "
                "**memory-bound**, right of it **compute-bound**. Prefill sits right, decode far left.",
    "Triangle": "Quality, latency, throughput: pick two. Every configuration of this model (GPU × weight dtype × "
                "KV dtype × TP × batch), latency = TTFT + TPOT × output, quality = published score × quantisation "
                "retention.",
    "Cost": "$/Mtok at the largest batch that meets the TTFT and TPOT targets: a pricier GPU can be cheaper per "
            "token if its useful throughput rises enough. Pick a point on the cost–speed chart to apply it.",
    "Sizing report": "The full sweep (every GPU × dtype × KV dtype × TP × batch) as `planner sweep` computes it, in "
                     "the same ranking as the Cost view; download the CSV or the plan report.",
    "Load": "Queueing under a Poisson request stream: TTFT and TPOT/ITL percentiles as the request rate rises, "
            "and the knee where the latency targets break.",
    "Compare": "Pinned scenarios side by side (up to three: **Pin this scenario** under the headline); the pins "
               "travel in the share URL.",
    "Deploy": "The chosen plan as `planner deploy` writes it: one replica's exact `vllm serve` command with what "
              "it is predicted to do, and the Kubernetes / Helm files.",
    "Capacity": "Demand over a day or a week: replicas hour by hour, autoscaled against a static peak fleet, the "
                "autoscaling policy replayed through the simulator (share of requests within the targets per hour), "
                "reserved / on-demand / spot mixes and the break-even against an API price (`planner capacity`).",
}


VIEW_FAILED = ("The {} view cannot be drawn for this scenario; the headline above still holds. Try a shorter context, "
               "another GPU or fewer GPUs per replica.")
LOAD_PRESS = ("Press **Simulate** to run the serving simulator on this scenario (a progress bar shows how far it is; "
              "1,000 requests take about a second, 5,000 several).")
LOAD_CAPTION = ("Discrete-event simulation of a vLLM-style engine (continuous batching, chunked prefill, paged KV with "
                "preemption, prefix caching) with the same roofline step times; planner.serving.")



def scenario_caption(p: Planned, latency_label: str, extra_notes: list[str]) -> str:
    """The scenario in one caption under the headline: what is planned, the memory sentence and the notes."""
    d, w, r = p.deployment, p.workload, p.report
    # the cold-start note (a warm-up recipe) is said in the Sizing report and Deploy views, not under the headline
    notes = [n[0].upper() + n[1:] for n in [*r.notes, *extra_notes] if not n.startswith("cold start")]
    return (f"{p.model.name} on {d.num_gpus} × {p.gpu.name} (TP {d.tensor_parallel}), weights {d.weight_dtype}, KV "
            f"{d.kv_cache_dtype}; {w.prompt_tokens:,} prompt + {w.output_tokens:,} output tokens; latency model: "
            f"{latency_label}. Memory: {r.memory.explain()}." + (" " + ". ".join(notes) + "." if notes else ""))


def load_sentence(res: LoadView, p: Planned, num_requests: int) -> str:
    """What the Load view's curve says, in one sentence."""
    w, d = p.workload, p.deployment
    targets = f"p99 TTFT ≤ {fmt_ms(w.ttft_slo_s)} and p99 TPOT ≤ {fmt_ms(w.tpot_slo_s)}"
    if res.knee is None:
        return (f"Even the lightest simulated load ({res.lightest_rate:,.3f} requests/s) misses {targets} on one "
                "replica.")
    if not res.found_miss:
        return (f"One replica meets {targets} even at **{res.knee:,.2f} requests/s**, the highest rate searched: the "
                "knee lies above that.")
    return (f"One replica ({d.tensor_parallel} × {p.gpu.name}) keeps {targets} up to about **{res.knee:,.2f} "
            f"requests/s** (the knee); the deployment's {d.replicas} replica(s): **{res.deployment_knee:,.2f} "
            f"requests/s**. (For scale: {num_requests:,} requests arriving at once finish at {res.burst_rate:,.2f} "
            "requests/s.)")


def latency_sentence(f: LatencyFrames, r: SizingReport) -> str:
    w = r.workload
    if f.crossing:
        return (f"The TPOT target {fmt_ms(w.tpot_slo_s)} is crossed above **batch {f.crossing:,}** (decode at "
                f"{f.decode_context_tokens:,.0f} tokens of context); the KV cache holds {r.max_concurrency:,} requests "
                "per replica.")
    return (f"Even one sequence takes {fmt_ms(r.slo.tpot_batch1_s)} per output token: the TPOT target "
            f"{fmt_ms(w.tpot_slo_s)} cannot be met on this GPU.")


def memory_sentence(p: Planned, max_context: int | None) -> str:
    w, d = p.workload, p.deployment
    where = f"{d.num_gpus} × {p.gpu.name}"
    if max_context:
        return (f"For **{w.concurrency:,} concurrent users** on {where}, each request's context must stay at or below "
                f"**{max_context:,} tokens** (KV {d.kv_cache_dtype}).")
    return (f"**{w.concurrency:,} concurrent users** do not fit at any context length on {where}: "
            f"{p.report.memory.explain()}.")


def triangle_caption(r: SizingReport, n_fit: int, n_front: int, n_drawn: int) -> str:
    q, d = r.quality, r.deployment
    return (f"Quality: {q.benchmark or 'no published score'} {q.published_score:.1f} × retention {q.retention:.3f} "
            f"(weights {d.weight_dtype}, KV {d.kv_cache_dtype}) = {q.score:.1f} for this scenario; source "
            f"{q.score_source_url or '—'}; retention factors: planner.quality (cited per dtype). {n_fit:,} candidates "
            f"fit, {n_front:,} on the Pareto front (no other is at least as good on all three and better on one); "
            f"{n_drawn:,} drawn (the whole front, the rest thinned to one per cell of the chart).")
