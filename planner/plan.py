"""Sizing one deployment: :func:`plan` ``(model, gpu, deployment, workload, profile) -> SizingReport``.

Memory (max concurrency at P + N tokens) from :mod:`planner.memory`, TTFT on an idle replica from
:mod:`planner.phases`, the largest batch under the TTFT/TPOT targets from :mod:`planner.batching`,
throughput, $/Mtok and the fleet at that batch from :mod:`planner.cost`, quality from
:mod:`planner.quality`; then feasibility and notes in plain sentences.  The report and its export
formats are in :mod:`planner.report`; every configuration at once is :func:`planner.sweep.sweep`.
All numbers are SI (bytes, seconds, USD); ``profile_mode`` says whether the ideal roofline or a
calibrated profile produced them.
"""

from __future__ import annotations

import numpy as np

from planner.compile_keys import cold_start_note
from planner.bands import band, prefill_regime
from planner.batching import check_workload_tokens, decode_context_tokens, largest_batch_under_slo
from planner.cost import effective_tpot_s, fleet_for, prefill_busy_costs, throughput, token_cost
from planner.memory import (admission_kv_bytes_per_gpu, kv_bytes_per_request, kv_pool_concurrency, memory_budget,
                            request_kv_bytes_per_gpu)
from planner.phases import decode_step_costs, graph_note, prefill_time_costs, routing_note
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.quality import quality_estimate
from planner.report import SizingReport
from planner.roofline import hw_coeffs, model_costs
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload
from planner.startup import startup_check
from planner.units import fmt_gib, fmt_ms

__all__ = ["BINDING_TARGETS", "batch_limit_phrase", "plan", "shortfall_warning"]

#: An SLO binding of :class:`planner.batching.LargestBatch` -> the subject of the note that says so.
BINDING_TARGETS = {"tpot": "TPOT target holds", "ttft": "TTFT target holds", "tpot+ttft": "TPOT and TTFT targets hold"}


def batch_limit_phrase(slo, workload: Workload) -> str:
    """What ``slo.batch_limit`` counts, with its number: the requests in flight the workload asks for (when
    they are fewer than memory and max_num_seqs allow), the requests that fit in memory (the KV pool at
    prompt + output tokens), or max_num_seqs.  E.g. ``160 requests in flight the workload asks for (memory
    holds 555, max_num_seqs 256 per replica)``."""
    limit = slo.batch_limit
    if workload.concurrency is not None and limit == workload.concurrency and limit < min(slo.max_concurrency,
                                                                                            slo.max_num_seqs):
        cap = f"memory holds {slo.max_concurrency:,}" + (f", max_num_seqs {slo.max_num_seqs:,}"
                                                          if slo.max_num_seqs < slo.max_concurrency else "")
        return f"{limit:,} requests in flight the workload asks for ({cap} per replica)"
    if slo.max_concurrency <= slo.max_num_seqs:
        return f"{limit:,} that fit in memory"
    return f"{limit:,} that max_num_seqs allows"


#: How :func:`shortfall_warning` ends (the dashboard, whose headline is the fleet answer, leaves it out).
SHORTFALL_END = "as given it misses its targets"


def shortfall_warning(fleet, deployment: Deployment) -> str:
    """The warning of a deployment with fewer GPUs than its own fleet answer: what it needs and why."""
    why = []
    if fleet.request_rate_per_s:
        why.append(f"{fleet.request_rate_per_s:,.3g} req/s at {fleet.requests_per_s_per_replica:,.3g} per replica")
    if fleet.concurrency:
        why.append(f"{fleet.concurrency:,} requests in flight at {fleet.batch_size_per_replica:,} per replica")
    return (f"the deployment has {deployment.num_gpus:,} GPU(s) but the workload needs {fleet.replicas:,} "
            f"replica(s) = {fleet.num_gpus:,} GPUs ({'; '.join(why)}): {SHORTFALL_END}")


def _f(x) -> float:
    return float(np.asarray(x))


def plan(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    workload: Workload,
    profile: CalibrationProfile = IDEAL_PROFILE,
) -> SizingReport:
    """Size one deployment of ``model`` on ``gpu`` for ``workload``.

    ``profile`` defaults to the ideal roofline ("speed of light"); the report's ``profile_mode`` says
    which was used.  Raises :class:`planner.io.catalog.SpecError` (a ValueError) when the inputs
    contradict each other (e.g. ``deployment.gpu_id`` is not ``gpu.id``); an infeasible but valid
    plan is returned with ``feasible=False`` and its ``reasons``.
    """
    from planner.io.catalog import SpecError

    if deployment.gpu_id != gpu.id:
        raise SpecError(f"deployment.gpu_id: '{deployment.gpu_id}' does not match the GPU '{gpu.id}'")
    check_workload_tokens(workload)
    reasons: list[str] = []
    notes: list[str] = []

    budget = memory_budget(model, gpu, deployment, profile)
    per_req_gpu = request_kv_bytes_per_gpu(model, deployment, workload.context_tokens)
    ask_gpu = admission_kv_bytes_per_gpu(model, deployment, workload.context_tokens)
    conc = kv_pool_concurrency(budget.kv_pool_bytes, per_req_gpu, budget.fits, ask_gpu)
    kv_req = kv_bytes_per_request(model, deployment.kv_cache_dtype, workload.context_tokens,
                                  deployment.block_size_tokens)
    mc, hw = model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model)
    ttft = prefill_time_costs(mc, hw, workload.prompt_tokens, 1, deployment.max_num_batched_tokens)
    slo = largest_batch_under_slo(model, gpu, deployment, workload, profile, max_concurrency=conc)
    b = max(slo.batch_size, 1)
    tpot = decode_step_costs(mc, hw, b, decode_context_tokens(workload))
    busy = _f(prefill_busy_costs(mc, hw, workload.prompt_tokens, b, deployment.max_num_batched_tokens))
    tpot_eff = float(effective_tpot_s(tpot.time_s, b, busy, workload.output_tokens))
    thr = throughput(b, _f(tpot.time_s), busy, workload.prompt_tokens, workload.output_tokens,
                     deployment.gpus_per_replica)
    cost = token_cost(thr, gpu.price_usd_per_hour)
    served = slo.batch_size > 0
    fleet = fleet_for(workload.request_rate_per_s, _f(thr.requests_per_s) if served else 0.0,
                      deployment.gpus_per_replica, slo.batch_size, workload.concurrency)
    quality = quality_estimate(model, deployment.weight_dtype, deployment.kv_cache_dtype, workload.context_tokens)

    # ---- feasibility, in plain sentences: first whether vLLM would start it at all (the one rule every
    # command shares, max_model_len = prompt + output), then the SLO
    check = startup_check(model, gpu, deployment, workload.context_tokens, profile, budget=budget)
    reasons += [f"context (prompt + output) {p.reason}" if p.kind == "context" else p.reason for p in check.problems]
    if budget.fits and conc == 0 and not any(p.field == "max_model_len" and p.kind == "memory" for p in check.problems):
        reasons.append(
            f"one request of {workload.context_tokens:,} tokens needs {fmt_gib(per_req_gpu)} of KV per GPU, "
            f"the pool has {fmt_gib(budget.kv_pool_bytes)}"
        )
    if conc > 0 and slo.batch_size == 0:
        if workload.tpot_slo_s is not None and slo.tpot_batch1_s > workload.tpot_slo_s:
            reasons.append(
                f"TPOT target {fmt_ms(workload.tpot_slo_s)} is below the {fmt_ms(slo.tpot_batch1_s)} "
                f"of a single sequence"
            )
        if workload.ttft_slo_s is not None and slo.ttft_batch1_s > workload.ttft_slo_s:
            reasons.append(
                f"TTFT target {fmt_ms(workload.ttft_slo_s)} is below the {fmt_ms(slo.ttft_batch1_s)} "
                f"prefill of one {workload.prompt_tokens:,}-token prompt"
            )
    feasible = not reasons

    # ---- notes
    if profile.mode == "calibrated" and profile.gpu_id not in (None, gpu.id):
        notes.append(f"calibration profile is for '{profile.gpu_id}', applied to '{gpu.id}'")
    if profile.mode == "transferred":
        notes.append(f"latency uses {profile.transferred_from}'s measured efficiencies on {gpu.id}'s datasheet "
                     f"roofs (transferred, not measured on this GPU)")
    if served and slo.binding in BINDING_TARGETS and slo.batch_limit > slo.batch_size:
        notes.append(f"the {BINDING_TARGETS[slo.binding]} the batch to {slo.batch_size:,} of the "
                     f"{batch_limit_phrase(slo, workload)}")
    if served and slo.binding == "throughput":
        notes.append(f"batch {slo.batch_size:,} serves more output tokens per second than any larger batch under the "
                     f"targets (a step-cost cliff above it), so the plan runs there, not at the largest")
    if feasible:
        notes.append(cold_start_note(model, deployment, profile, workload.context_tokens))  # the planned max_model_len
        if note := routing_note(model, gpu, deployment, profile, b, decode_context_tokens(workload),
                                 _f(tpot.time_s)):
            notes.append(note)
        if note := graph_note(model, gpu, deployment, profile, b, decode_context_tokens(workload),
                              workload.prompt_tokens):
            notes.append(note)
    warnings: list[str] = []
    if served and fleet.num_gpus > deployment.num_gpus and (workload.request_rate_per_s or workload.concurrency):
        warnings.append(shortfall_warning(fleet, deployment))

    return SizingReport(
        model_id=model.id, model_name=model.name, gpu_id=gpu.id, gpu_name=gpu.name, deployment=deployment,
        workload=workload, profile_mode=profile.mode, profile_gpu_id=profile.gpu_id,
        profile_engine_version=profile.engine_version, profile_created=profile.created,
        memory=budget, kv_per_request=kv_req, kv_per_request_bytes_per_gpu=per_req_gpu, max_concurrency=conc,
        ttft=ttft, slo=slo, tpot=tpot, tpot_effective_s=tpot_eff, throughput=thr, cost=cost, fleet=fleet,
        quality=quality, price_usd_per_hour=gpu.price_usd_per_hour, price_source=gpu.price_source.url,
        price_date=gpu.price_source.date, feasible=feasible, reasons=reasons, notes=notes, warnings=warnings,
        bands={"ttft": band(profile, model, deployment, prefill_regime(workload.prompt_tokens)),
               "tpot": band(profile, model, deployment, "decode"),
               "kv_capacity": band(profile, model, deployment, "kv_capacity")},
        kv_admission_bytes_per_gpu=ask_gpu,
    )
