"""The sizing report and every format it leaves in: dict/DataFrame, CSV, JSON and the CLI's text table.

:class:`SizingReport` is what :func:`planner.plan.plan` returns.  The writers also take a
:func:`planner.sweep.sweep` DataFrame.

No formatted strings go into a file: bytes are bytes, seconds are seconds, prices are USD.  Every
file says which price it used (``price_source``, ``price_date``) and which model produced it
(``calibration_mode``: 'ideal' roofline, 'calibrated' profile, or 'transferred' from another GPU).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from planner.batching import LargestBatch, decode_context_tokens
from planner.cost import Fleet, Throughput, TokenCost
from planner.memory import KvPerRequest, MemoryBudget
from planner.phases import PhaseTime
from planner.quality import QualityEstimate
from planner.quoting import csv_cell
from planner.specs import Deployment, Workload
from planner.units import GB, GiB, fmt_gb, fmt_gib, fmt_ms, fmt_usd


@dataclass(frozen=True)
class SizingReport:
    """Everything :func:`planner.plan.plan` found, with its parts.  Raw SI numbers; ``to_dict`` / ``to_frame``
    for export (and :func:`write_csv`, :func:`report_json`, :func:`report_text` below).

    ``feasible`` is False when the model does not fit, no batch meets the SLOs, the workload's
    context exceeds the model's limit or tensor parallel does not divide the attention heads;
    ``reasons`` says why in plain sentences with numbers.  ``warnings`` say what makes the deployment as
    given miss its targets although each replica meets them (it has fewer GPUs than its rate or
    requests in flight need); ``notes`` are observations (what limits the batch, a transferred profile).
    """

    model_id: str
    model_name: str
    gpu_id: str
    gpu_name: str
    deployment: Deployment
    workload: Workload
    profile_mode: str  # 'ideal', 'calibrated' or 'transferred'
    profile_gpu_id: str | None
    profile_engine_version: str
    profile_created: str
    memory: MemoryBudget
    kv_per_request: KvPerRequest  # one whole request at P + N tokens (all GPUs together)
    kv_per_request_bytes_per_gpu: float
    max_concurrency: int  # per replica at P + N tokens
    ttft: PhaseTime  # one prompt on an idle replica
    slo: LargestBatch
    tpot: PhaseTime  # the decode step at slo.batch_size (batch 1 when it is 0), context P + N/2
    tpot_effective_s: float  # what users see: the decode step + other requests' interleaved prefills
    throughput: Throughput
    cost: TokenCost
    fleet: Fleet
    quality: QualityEstimate
    price_usd_per_hour: float  # per GPU
    price_source: str
    price_date: str
    feasible: bool
    reasons: list[str]
    notes: list[str]
    bands: dict = field(default_factory=dict)  # 'ttft' / 'tpot' / 'kv_capacity' -> planner.bands.Band
    warnings: list[str] = field(default_factory=list)
    # what admitting one such request asks free per GPU (its prompt in every sliding group, vLLM 0.26): above the KV it
    # then holds for sliding-window models, and the last request in max_concurrency counts needs it
    kv_admission_bytes_per_gpu: float = 0.0

    @property
    def batch_size(self) -> int:
        return self.slo.batch_size

    @property
    def mode(self) -> str:
        return self.profile_mode

    def to_dict(self) -> dict:
        """Flat JSON-safe dict of raw SI numbers; keys carry their unit (nan/inf become None)."""
        d, w, m, tp, c = self.deployment, self.workload, self.memory, self.throughput, self.cost
        out = {
            "model_id": self.model_id,
            "gpu_id": self.gpu_id,
            "num_gpus": d.num_gpus,
            "tensor_parallel": d.tensor_parallel,
            "pipeline_parallel": d.pipeline_parallel,
            "gpus_per_replica": d.gpus_per_replica,
            "weight_dtype": d.weight_dtype,
            "kv_cache_dtype": d.kv_cache_dtype,
            "gpu_memory_utilization": d.gpu_memory_utilization,
            "max_num_batched_tokens": d.max_num_batched_tokens,
            "max_num_seqs": d.max_num_seqs,
            "block_size_tokens": d.block_size_tokens,
            "prompt_tokens": w.prompt_tokens,
            "output_tokens": w.output_tokens,
            "context_tokens": w.context_tokens,
            "decode_context_tokens": decode_context_tokens(w),
            "concurrency": w.concurrency,
            "request_rate_per_s": w.request_rate_per_s,
            "ttft_slo_s": w.ttft_slo_s,
            "tpot_slo_s": w.tpot_slo_s,
            "calibration_mode": self.profile_mode,
            "profile_gpu_id": self.profile_gpu_id,
            "profile_engine_version": self.profile_engine_version,
            "profile_created": self.profile_created,
            "gpu_memory_bytes": m.gpu_memory_bytes,
            "usable_memory_bytes_per_gpu": m.usable_bytes,
            "weight_bytes_per_gpu": m.weight_bytes,
            "activation_bytes_per_gpu": m.activation_bytes,
            "non_torch_bytes_per_gpu": m.non_torch_bytes,
            "cudagraph_bytes_per_gpu": m.cudagraph_bytes,
            "kv_pool_bytes_per_gpu": m.kv_pool_bytes,
            "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token,
            "kv_capacity_tokens": m.kv_capacity_tokens,
            "fits": m.fits,
            "kv_bytes_per_request": self.kv_per_request.total_bytes,
            "kv_bytes_per_request_per_gpu": self.kv_per_request_bytes_per_gpu,
            "kv_admission_bytes_per_gpu": max(self.kv_admission_bytes_per_gpu, self.kv_per_request_bytes_per_gpu),
            "max_concurrency": self.max_concurrency,
            **{k: v for name, b in sorted(self.bands.items()) for k, v in b.as_dict(name).items()},
            "ttft_s": self.ttft.time_s,
            "ttft_compute_s": self.ttft.compute_s,
            "ttft_memory_s": self.ttft.memory_s,
            "ttft_comm_s": self.ttft.comm_s,
            "ttft_overhead_s": self.ttft.overhead_s,
            "bound_prefill": self.ttft.bound,
            "batch_size": self.slo.batch_size,
            "batch_limit": self.slo.batch_limit,
            "slo_binding": self.slo.binding,
            "meets_slo": self.slo.meets_slo,
            "ttft_at_batch_s": self.slo.ttft_s,
            "tpot_s": self.tpot_effective_s,
            "decode_step_s": self.tpot.time_s,
            "tpot_compute_s": self.tpot.compute_s,
            "tpot_memory_s": self.tpot.memory_s,
            "tpot_comm_s": self.tpot.comm_s,
            "tpot_overhead_s": self.tpot.overhead_s,
            "tpot_batch1_s": self.slo.tpot_batch1_s,
            "bound_decode": self.tpot.bound,
            "decode_arithmetic_intensity_flops_per_byte": float(self.tpot.arithmetic_intensity),
            "prefill_busy_s": tp.prefill_busy_s,
            "decode_busy_s": tp.decode_busy_s,
            "prefill_time_share": tp.prefill_time_share,
            "output_tokens_per_s": tp.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": tp.output_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_user": tp.output_tokens_per_s_per_user,
            "input_tokens_per_s": tp.input_tokens_per_s,
            "requests_per_s": tp.requests_per_s,
            "requests_per_s_per_gpu": tp.requests_per_s_per_gpu,
            "price_usd_per_hour": self.price_usd_per_hour,
            "price_usd_per_replica_hour": c.price_usd_per_replica_hour,
            "price_source": self.price_source,
            "price_date": self.price_date,
            "cost_usd_per_million_output_tokens": c.usd_per_million_output_tokens,
            "cost_usd_per_million_input_tokens": c.usd_per_million_input_tokens,
            "cost_usd_per_million_tokens_blended": c.usd_per_million_tokens_blended,
            "cost_usd_per_million_output_tokens_all_in": c.usd_per_million_output_tokens_all_in,
            "cost_usd_per_request": c.usd_per_request,
            "replicas_needed": self.fleet.replicas,
            "gpus_needed": self.fleet.num_gpus,
            "fleet_utilization": self.fleet.utilization,
            "quality_benchmark": self.quality.benchmark,
            "quality_published_score": self.quality.published_score,
            "quality_retention": self.quality.retention,
            "quality_score": self.quality.score,
            "context_exceeds_model_limit": self.quality.context_exceeds_limit,
            "model_max_context_tokens": self.quality.max_context_tokens,
            "feasible": self.feasible,
            "reasons": list(self.reasons),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }
        return {k: _json_safe(v) for k, v in out.items()}

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of :meth:`to_dict` (reasons/notes joined with '; ')."""
        d = self.to_dict()
        d["reasons"] = "; ".join(d["reasons"])
        d["warnings"] = "; ".join(d["warnings"])
        d["notes"] = "; ".join(d["notes"])
        return pd.DataFrame([d])


def _json_safe(v):
    if isinstance(v, np.ndarray):
        v = v.item() if v.ndim == 0 else v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


#: Columns every exported file must carry.
PROVENANCE_COLUMNS: tuple[str, ...] = ("price_source", "price_date", "calibration_mode")


def reports_frame(reports: Iterable[SizingReport]) -> pd.DataFrame:
    """One row per report (the columns of :meth:`SizingReport.to_dict`)."""
    frames = [r.to_frame() for r in reports]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def memory_frame(report: SizingReport) -> pd.DataFrame:
    """Per-GPU memory split (part, bytes_per_gpu) — what the KV pool is left from, for a bar chart."""
    m = report.memory
    rows = [
        ("weights", m.weight_bytes),
        ("activations", m.activation_bytes),
        ("non_torch", m.non_torch_bytes),
        ("cuda_graphs", m.cudagraph_bytes),
        ("kv_pool", max(m.kv_pool_bytes, 0.0)),
        ("reserved_headroom", m.gpu_memory_bytes - m.usable_bytes),
    ]
    return pd.DataFrame(rows, columns=["part", "bytes_per_gpu"])


def latency_frame(report: SizingReport) -> pd.DataFrame:
    """TTFT (batch 1) and TPOT (chosen batch) split into compute/memory/comm/overhead seconds."""
    rows = []
    for name, ph in (("ttft", report.ttft), ("tpot", report.tpot)):
        rows.append({"phase": name, "time_s": float(ph.time_s), "compute_s": float(ph.compute_s),
                     "memory_s": float(ph.memory_s), "comm_s": float(ph.comm_s),
                     "overhead_s": float(ph.overhead_s), "bound": str(ph.bound)})
    return pd.DataFrame(rows)


def _check_raw(df: pd.DataFrame) -> None:
    missing = [c for c in PROVENANCE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"report: missing provenance column(s) {', '.join(missing)}")


def write_csv(data: SizingReport | Iterable[SizingReport] | pd.DataFrame, path: str | Path) -> Path:
    """Write a sizing report (one report, several, or a :func:`planner.sweep.sweep` frame) as CSV."""
    if isinstance(data, SizingReport):
        df = data.to_frame()
    elif isinstance(data, pd.DataFrame):
        df = data
    else:
        df = reports_frame(data)
    _check_raw(df)
    path = Path(path)
    text_cols = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    if text_cols:  # a text cell a spreadsheet would evaluate (a name '=HYPERLINK(…)') gets an apostrophe
        df = df.assign(**{c: df[c].map(csv_cell) for c in text_cols})
    df.to_csv(path, index=False, float_format="%.10g")
    return path


def csv_bytes(data: SizingReport | Iterable[SizingReport] | pd.DataFrame) -> bytes:
    """The bytes :func:`write_csv` writes for ``data`` (a download button's file)."""
    with tempfile.TemporaryDirectory() as d:
        return write_csv(data, Path(d) / "sweep.csv").read_bytes()


def report_json(data: SizingReport | Iterable[SizingReport]) -> str:
    """JSON text: an object for one report, a list for several (raw SI numbers, null for nan/inf)."""
    if isinstance(data, SizingReport):
        return json.dumps(data.to_dict(), indent=2, allow_nan=False)
    return json.dumps([r.to_dict() for r in data], indent=2, allow_nan=False)


def frame_json(df: pd.DataFrame) -> str:
    """JSON list of row objects from a DataFrame (nan → null)."""
    return df.to_json(orient="records", double_precision=10)


def write_json(data: SizingReport | Iterable[SizingReport] | pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    text = frame_json(data) if isinstance(data, pd.DataFrame) else report_json(data)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _band(r: SizingReport, name: str) -> str:
    b = r.bands.get(name)
    return "" if b is None else f"[{b.text()}]"


def band_lines(r: SizingReport) -> list[str]:
    """Where each error band comes from (one line per quantity)."""
    return [f"  {name}: {b.text()} — {b.basis}" for name, b in sorted(r.bands.items())]



#: What stopped the batch (:attr:`planner.batching.LargestBatch.binding`), in words: "limited by ...".
LIMIT_TEXT = {"memory": "memory (max concurrency)", "max_num_seqs": "--max-num-seqs",
              "concurrency": "the requests in flight (--users)", "tpot": "TPOT target", "ttft": "TTFT target",
              "tpot+ttft": "TPOT and TTFT targets", "none": "nothing fits",
              "throughput": "the best throughput (a larger batch serves less)"}

def report_text(r: SizingReport, mode_line: str = "") -> str:
    """The human-readable sizing table of a report (what ``planner size`` prints)."""
    d, w, mem = r.deployment, r.workload, r.memory
    slo = []
    if w.ttft_slo_s is not None:
        slo.append(f"TTFT ≤ {fmt_ms(w.ttft_slo_s)}")
    if w.tpot_slo_s is not None:
        slo.append(f"TPOT ≤ {fmt_ms(w.tpot_slo_s)}")
    lines = [
        (f"{r.model_name} on {d.num_gpus} × {r.gpu_name}  (TP {d.tensor_parallel}, PP {d.pipeline_parallel}, "
         f"weights {d.weight_dtype}, KV cache {d.kv_cache_dtype})"),
        (f"Workload: {w.prompt_tokens:,} prompt + {w.output_tokens:,} output = {w.context_tokens:,} tokens "
         f"per request; SLO: {', '.join(slo) if slo else 'none'}"),
        f"Mode: {mode_line or r.profile_mode}",
        "",
        "Memory per GPU                       GB (1e9 B)   GiB (2^30 B)",
    ]

    def mem_row(label: str, b: float) -> str:
        return f"  {label:<33}{b / GB:>10,.2f}   {b / GiB:>12,.2f}"

    lines += [
        mem_row("GPU memory", mem.gpu_memory_bytes),
        mem_row(f"usable ({mem.gpu_memory_utilization:.0%} utilization)", mem.usable_bytes),
        mem_row("− weights", mem.weight_bytes),
        mem_row("− activations (peak)", mem.activation_bytes),
        mem_row("− non-torch (CUDA context, NCCL)", mem.non_torch_bytes),
        mem_row("− CUDA graphs", mem.cudagraph_bytes),
        mem_row("= KV-cache pool", mem.kv_pool_bytes),
        f"  KV per token per GPU             {mem.kv_bytes_per_token:>10,.0f} B",
        (f"  KV per request ({w.context_tokens:,} tokens)     {fmt_gb(r.kv_per_request_bytes_per_gpu, 3)} "
         f"= {fmt_gib(r.kv_per_request_bytes_per_gpu, 3)} per GPU"),
        *([f"    of it recurrent state            {fmt_gb(state, 3)} (its linear layers', whatever the context)"]
          if (state := r.kv_per_request.state_bytes * r.kv_per_request_bytes_per_gpu
              / (r.kv_per_request.total_bytes or 1.0)) else []),
        *([f"    admitting one asks free          {fmt_gb(ask, 3)} (its prompt in every sliding-window group too)"]
          if (ask := r.kv_admission_bytes_per_gpu) > r.kv_per_request_bytes_per_gpu else []),
        f"  KV capacity                      {mem.kv_capacity_tokens:>10,} tokens",
        f"  Max concurrency                  {r.max_concurrency:>10,} requests per replica  {_band(r, 'kv_capacity')}",
        "",
        "Latency",
        f"  TTFT, one prompt                 {fmt_ms(r.ttft.time_s):>12}   {r.ttft.bound}-bound  {_band(r, 'ttft')}",
    ]
    s = r.slo
    limit_text = LIMIT_TEXT.get(s.binding, s.binding)
    lines.append(f"  Batch (requests in flight)       {s.batch_size:>12,}   limited by {limit_text}")
    if s.batch_size:
        lines.append(f"  TTFT joining {max(s.batch_size - 1, 0):<6,} running seqs {fmt_ms(s.ttft_s):>11}")
    lines += [
        (f"  TPOT at batch {max(s.batch_size, 1):<19,}{fmt_ms(r.tpot_effective_s):>12}   mean, with the other "
         f"requests' prefills mixed in  {_band(r, 'tpot')}"),
        (f"    decode step alone              {fmt_ms(r.tpot.time_s):>12}   {r.tpot.bound}-bound "
         f"(context {w.prompt_tokens + w.output_tokens / 2:,.0f} tokens)"),
        "",
    ]
    t, c = r.throughput, r.cost
    if s.batch_size:
        lines += [
            "Throughput                         per replica        per GPU",
            f"  output tokens/s                {float(t.output_tokens_per_s):>14,.1f} {float(t.output_tokens_per_s_per_gpu):>14,.1f}",
            f"  requests/s                     {float(t.requests_per_s):>14,.3f} {float(t.requests_per_s_per_gpu):>14,.3f}",
            f"  per user (1 / TPOT)            {float(t.output_tokens_per_s_per_user):>14,.1f} tokens/s",
            "",
            f"Cost at {fmt_usd(r.price_usd_per_hour)}/GPU-hour (price: {r.price_source}, {r.price_date})",
            (f"  $ per million output tokens, all-in {fmt_usd(float(c.usd_per_million_output_tokens_all_in), 4):>9}"
             f"   the ranking key: all GPU time, prefill included, ÷ generated tokens"),
            f"  $ per million output tokens    {fmt_usd(float(c.usd_per_million_output_tokens), 4):>14}   decode share",
            f"  $ per million input tokens     {fmt_usd(float(c.usd_per_million_input_tokens), 4):>14}",
            f"  $ per million tokens (blended) {fmt_usd(float(c.usd_per_million_tokens_blended), 4):>14}",
            f"  prefill share of GPU time      {float(t.prefill_time_share):>14.1%}",
        ]
        lines.append("")
    q = r.quality
    if q.benchmark:
        lines.append(f"Quality: {q.benchmark} {q.published_score:.1f} × retention {q.retention:.3f} "
                     f"= {q.score:.1f} (approximate)")
    if r.bands:
        lines += ["Expected error (p90 of |error| on measurements; see planner/bands.py)", *band_lines(r), ""]
    lines.append(f"Feasible: {'yes' if r.feasible else 'NO'}")
    lines += [f"  - {x}" for x in r.reasons]
    lines += [f"  warning: {x}" for x in r.warnings]
    lines += [f"  note: {x}" for x in r.notes]
    return "\n".join(lines)
