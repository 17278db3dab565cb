"""The transfer checked against published measurements: every row of calibration/data/public/
public_measurements.csv predicted by the planner and compared.

    python -m calibration.public_check     # writes calibration/data/public/comparison.csv, prints the tables

Each row is predicted for its GPU, dtypes, TP and scenario with the H200 vLLM 0.26 profile *transferred* to
that GPU (:meth:`CalibrationProfile.transferred_to`; the calibrated profile itself for the h200-sxm control
rows).  Pure Python + numpy, no torch; all 188 rows in a few seconds.

Models: a row's model is a catalog id, or a published name mapped to a catalog model of the same
architecture.  Rule: the same layers, hidden size, attention heads, KV heads and FFN width; only the
vocabulary or the context limit may differ, by at most a few percent of the weight bytes.

| published model | catalog model | why |
| --- | --- | --- |
| meta-llama/Llama-3.3-70B-Instruct | llama-3.1-70b | identical config.json shapes (80 layers, 8,192 hidden, 64/8 heads, FFN 28,672, vocab 128,256, 128K context): a post-training update |
| meta-llama/Meta-Llama-3-70B | llama-3.1-70b | same shapes; 8K context and no RoPE scaling: identical costs at <= 8,192 tokens |
| meta-llama/Meta-Llama-3-8B | llama-3.1-8b | same shapes (32 layers, 4,096 hidden, 32/8 heads, FFN 14,336, vocab 128,256); 8K context |
| meta-llama/Llama-2-70b-hf, -chat-hf | llama-3.1-70b (approx.) | same layers, heads (GQA, 8 KV heads) and FFN; vocab 32,000 vs 128,256: 1.58 B fewer embedding/LM-head parameters (68.98 B vs 70.55 B, -2.2 %), KV bytes identical; our prediction carries <= 2.2 % extra weight bytes |
| meta-llama/Llama-2-7b-hf, TheBloke/Llama-2-7B-GPTQ | none: not comparable | multi-head attention (32 KV heads: 4x the KV bytes of Llama-3-8B per token), FFN 11,008, 6.7 B parameters (-16 % vs llama-3.1-8b) |
| Qwen/Qwen3-8B | none: not comparable | 36 layers, FFN 12,288, vocab 151,936: no catalog model shares its layer shapes (qwen2.5-7b: 28 layers, 3,584 hidden, 4 KV heads) |

Scenarios (per replica; a system of ``num_gpus`` runs ``num_gpus / (TP·PP)`` replicas, its throughput =
per replica × replicas, the rate per replica = rate / replicas):

* ``single_request_latency``: TTFT = :func:`planner.phases.prefill_time` (batch 1, request overhead included);
  decode speed of ``tg N`` = N / Σ :func:`planner.phases.decode_step_time` (batch 1) over contexts P+1 … P+N.
* ``fixed_batch``: the batch of B requests, all at t = 0, through the simulator (a closed loop of B with B
  requests: what a static batch or ``benchmark_latency`` runs); e2e latency = the batch's makespan.
* ``fixed_concurrency``: closed loop of C (:func:`planner.serving.workloads.make_requests` ``closed_loop=C``), the
  source's prompt count if it states one, else max(4·C, 200) requests (fixed lengths keep the loop in
  lock-step: every wave's prompts are prefilled together; the data README's caveats say what that costs).
* ``offline_throughput``: a burst at t = 0 of the stated prompt count, else max(4 × max_num_seqs, 200).
* ``request_rate``: Poisson arrivals (:func:`planner.serving.workloads.poisson_arrivals`), the stated count else 500.

vLLM 0.26 ``serve`` defaults for the GPU (:meth:`Deployment.for_gpu`), except ``max_num_seqs`` raised to a
row's batch or concurrency when it is larger (the measured engine ran that many at once).  KV dtype not
stated: bf16 (vLLM's default); weight dtype not stated but the engine's default is: bf16.  NVFP4 is modelled
as MXFP4 (both E2M1 4-bit floats with block scales; NVFP4's 16-element FP8-scaled blocks are 4.5 bits per
weight, MXFP4 4.25: ~6 % fewer weight bytes than the real checkpoint).  Lengths of variable-length datasets:
ShareGPT as :data:`planner.serving.workloads.CHAT_PROMPT` / ``CHAT_OUTPUT`` (the vLLM paper's means), or with the
means the source states; other datasets whose input lengths the source does not state are not comparable.

Metric → regime: decode (``decode_tokens_per_s_per_seq``, ``tpot_s``, ``itl_s``, and ``e2e_latency_s`` of a
fixed batch: every such row here generates >= 128 tokens from <= 128-token prompts), prefill (``ttft_s``),
throughput (``output_tokens_per_s[_per_gpu]``, ``total_tokens_per_s``, ``requests_per_s``).  ``tpot_s`` is
the per-request mean of (finish − first token) / (outputs − 1), except TGI's, which is its own per-token
latency (E2E / outputs, prefill included); ``itl_s`` is token-weighted.  Family: the weight format first
(``fp8``, ``int4``, ``mxfp4`` incl. NVFP4: their GEMMs have their own coefficients, or none), then ``moe``,
else ``dense``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from calibration.public_data import (
    CSV_PATH,
    OUT_PATH,
    REGIME,
    PublicDataError,
    PublicRow,
    read_public,
    write_comparison,
)
from planner.io import catalog
from planner.memory import memory_budget
from planner.phases import decode_step_time, prefill_time
from planner.profile import CalibrationProfile, ErrorBand
from planner.serving import engine_setup, simulate
from planner.specs import Deployment
from planner.serving.workloads import CHAT_OUTPUT, CHAT_PROMPT, make_requests, poisson_arrivals

__all__ = ["CSV_PATH", "Comparison", "PublicDataError", "PublicRow", "compare", "read_public", "transfer_bands"]

#: published name -> (catalog id, why): the module docstring's table
EQUIVALENT = {
    "meta-llama/Llama-3.3-70B-Instruct": ("llama-3.1-70b", "same architecture (Llama-3.3-70B = Llama-3.1-70B shapes)"),
    "meta-llama/Meta-Llama-3-70B": ("llama-3.1-70b", "same shapes; 8K context"),
    "meta-llama/Meta-Llama-3-8B": ("llama-3.1-8b", "same shapes; 8K context"),
    "meta-llama/Llama-2-70b-hf": ("llama-3.1-70b", "approx.: Llama-2-70B shapes with a 128K vocabulary (+2.2 % weights)"),
    "meta-llama/Llama-2-70b-chat-hf": ("llama-3.1-70b",
                                       "approx.: Llama-2-70B shapes with a 128K vocabulary (+2.2 % weights)"),
}
NO_EQUIVALENT = {
    "meta-llama/Llama-2-7b-hf": "Llama-2-7B (MHA, 32 KV heads, FFN 11,008, 6.7 B) has no catalog equivalent",
    "TheBloke/Llama-2-7B-GPTQ": "Llama-2-7B (MHA, 32 KV heads, FFN 11,008, 6.7 B) has no catalog equivalent",
    "Qwen/Qwen3-8B": "Qwen3-8B (36 layers, FFN 12,288) has no catalog equivalent",
}


def map_model(name: str) -> tuple[str | None, str]:
    """(catalog id or None, why): a catalog id maps to itself; see the module docstring's table."""
    if name in EQUIVALENT:
        return EQUIVALENT[name]
    if name in NO_EQUIVALENT:
        return None, NO_EQUIVALENT[name]
    if name in catalog.models():
        return name, "catalog id"
    return None, f"{name} is not a catalog model and has no documented equivalent"


def family_of(model_id: str | None, weight_dtype: str) -> str:
    """fp8 / int8 / int4 / mxfp4 (NVFP4 included) by weight format, else moe or dense by architecture."""
    fmt = {"fp8": "fp8", "int8": "int8", "int4": "int4", "nf4": "int4", "mxfp4": "mxfp4", "nvfp4": "mxfp4"}
    if weight_dtype in fmt:
        return fmt[weight_dtype]
    return "moe" if model_id and catalog.model(model_id).moe is not None else "dense"


@dataclass(frozen=True)
class Comparison:
    """One public row and the planner's prediction of it (``predicted`` None when not comparable)."""

    row: PublicRow
    catalog_model: str
    family: str
    regime: str
    comparable: bool
    reason: str
    profile_mode: str
    predicted: float | None
    assumptions: str

    @property
    def error_pct(self) -> float | None:
        """Signed error, percent of the measurement (positive: the planner predicts more)."""
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted - self.row.value) / self.row.value


class NotComparable(Exception):
    """Raised inside a prediction: the row cannot be predicted; the message says why."""


# ------------------------------------------------------------------------------------------- workloads


def _stated_count(note: str) -> int | None:
    m = re.search(r"(\d[\d,]*)\s+(?:ShareGPT\s+)?prompts", note)
    return int(m.group(1).replace(",", "")) if m else None


def _lengths(row: PublicRow, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(prompt tokens, output tokens, what was assumed) for ``n`` requests of this row."""
    p, o = row.input_tokens, row.output_tokens
    if p and o:
        return np.full(n, p), np.full(n, o), ""
    if "sharegpt" not in row.note.lower():
        raise NotComparable("variable-length dataset whose input lengths the source does not state")
    rng = np.random.default_rng(0)
    prompt, output, said = CHAT_PROMPT, CHAT_OUTPUT, "ShareGPT lengths as workloads.chat (vLLM paper means 161/338)"
    tot = re.search(r"([\d,]+) input / ~?([\d,.]+)k generated tokens in total", row.note)
    count = _stated_count(row.note)
    if tot and count:
        mi, mo = int(tot.group(1).replace(",", "")) / count, float(tot.group(2)) * 1000 / count
        prompt, output = replace(CHAT_PROMPT, mean=mi), replace(CHAT_OUTPUT, mean=mo)
        said = f"ShareGPT lengths with the stated means {mi:.0f}/{mo:.0f} (sigma as workloads.chat)"
    pt = prompt.sample(n, rng)
    ot = np.full(n, o) if o else np.minimum(output.sample(n, rng), np.maximum(2048 - pt, 1))
    return pt, ot, said + (f"; outputs {o}" if o else "")


def _requests(row: PublicRow, replicas: int, max_num_seqs: int):
    """(Requests for one replica, assumptions)."""
    b, stated = row.batch_size_or_concurrency, _stated_count(row.note)
    if row.scenario == "fixed_batch":
        n, loop = b, b
    elif row.scenario == "fixed_concurrency":
        n, loop = stated or max(4 * b, 200), b
    elif row.scenario == "offline_throughput":
        n, loop = stated or max(4 * max_num_seqs, 200), 0
    else:
        if row.request_rate_per_s is None:
            raise NotComparable("request rate not stated")
        n, loop = stated or 500, 0
    p, o, said = _lengths(row, n)
    if row.scenario == "request_rate":
        arr = poisson_arrivals(n, row.request_rate_per_s / replicas, seed=0)
    else:
        arr = np.full(n, np.nan) if loop else None
    return make_requests(p, o, arr, closed_loop=loop), f"{n} requests simulated" + (f"; {said}" if said else "")


def _stat(x: np.ndarray, statistic: str) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float({"median": np.median, "p99": lambda a: np.percentile(a, 99)}.get(statistic, np.mean)(x))


def _from_sim(row: PublicRow, res, replicas: int) -> float:
    done, m, s = res.completed, row.metric, row.statistic
    if m == "output_tokens_per_s":
        return res.output_tokens_per_s * replicas
    if m == "output_tokens_per_s_per_gpu":
        return res.output_tokens_per_s * replicas / row.num_gpus
    if m == "total_tokens_per_s":
        return float((res.prompt_tokens[done] + res.output_tokens[done]).sum() / res.duration_s) * replicas
    if m == "requests_per_s":
        return res.requests_per_s * replicas
    if m == "ttft_s":
        return _stat(res.ttft_s[done], s)
    if m == "e2e_latency_s":
        return res.duration_s if row.scenario == "fixed_batch" else _stat(res.e2e_s[done], s)
    if m == "tpot_s" and row.engine == "tgi":
        return _stat(res.e2e_s[done] / res.output_tokens[done], s)
    if m == "itl_s" and s == "mean":
        gaps = (res.finish_s - res.first_token_s)[done]
        return float(gaps.sum() / (res.output_tokens[done] - 1).sum())
    if m in ("tpot_s", "itl_s"):
        return _stat(res.tpot_s[done], s)
    raise NotComparable(f"{m} is not predicted for scenario {row.scenario}")


# ----------------------------------------------------------------------------------------- prediction


def _deployment(row: PublicRow, gpu) -> tuple[Deployment, list[str]]:
    said = []
    if row.tensor_parallel is None or not (row.weight_dtype or row.engine == "vllm"):
        raise NotComparable("weight dtype or tensor parallelism not stated")
    wd = row.weight_dtype or "bf16"
    if not row.weight_dtype:
        said.append("weight dtype not stated: bf16 (vLLM's default for a bf16 checkpoint)")
    if wd == "nvfp4":
        wd = "mxfp4"
        said.append("NVFP4 modelled as MXFP4 (4.25 vs 4.5 bits/weight)")
    kv = row.kv_cache_dtype or "bf16"
    if not row.kv_cache_dtype:
        said.append("KV dtype not stated: bf16")
    if row.num_gpus % row.tensor_parallel:
        raise NotComparable(f"num_gpus {row.num_gpus} is not a multiple of TP {row.tensor_parallel}")
    dep = Deployment.for_gpu(gpu, num_gpus=row.num_gpus, tensor_parallel=row.tensor_parallel, weight_dtype=wd,
                             kv_cache_dtype=kv)
    b = row.batch_size_or_concurrency or 0
    if row.scenario in ("fixed_batch", "fixed_concurrency") and b > dep.max_num_seqs:
        dep = dep.replace(max_num_seqs=b)
        said.append(f"max_num_seqs raised to {b}")
    return dep, said


def predict(row: PublicRow, model, gpu, profile: CalibrationProfile, cache: dict | None = None) -> tuple[float, str]:
    """(the planner's value of ``row.metric``, the assumptions made); raises :class:`NotComparable`."""
    dep, said = _deployment(row, gpu)
    mb = memory_budget(model, gpu, dep, profile)
    if not mb.fits:
        raise NotComparable(f"{model.id} at TP{dep.tensor_parallel} on {gpu.id}: {mb.explain()}")
    if row.scenario == "single_request_latency":
        p = row.input_tokens or 0
        if row.metric == "ttft_s" and p:
            value = prefill_time(model, gpu, dep, p, 1, profile).time_s
        elif row.metric == "decode_tokens_per_s_per_seq" and row.output_tokens:
            ctx = p + np.arange(1, row.output_tokens + 1)
            value = row.output_tokens / float(np.sum(decode_step_time(model, gpu, dep, 1, ctx, profile).time_s))
        else:
            raise NotComparable(f"{row.metric} of a single request needs its input/output tokens")
        return float(value), "; ".join(said)
    replicas = dep.replicas
    key = (model.id, gpu.id, dep, profile.mode, row.scenario, row.batch_size_or_concurrency, row.request_rate_per_s,
           row.input_tokens, row.output_tokens, row.note if not (row.input_tokens and row.output_tokens) else "")
    if cache is None or key not in cache:
        reqs, how = _requests(row, replicas, dep.max_num_seqs)
        cost, cfg = engine_setup(model, gpu, dep, profile)
        res = simulate(reqs, cost, cfg)
        if res.num_rejected:
            raise NotComparable(f"{res.num_rejected} simulated requests do not fit the KV pool")
        if cache is not None:
            cache[key] = (res, how)
    else:
        res, how = cache[key]
    if replicas > 1:
        said.append(f"{replicas} replicas of TP{dep.tensor_parallel}")
    return _from_sim(row, res, replicas), "; ".join([*said, how])


def profile_for_row(gpu_id: str, base: CalibrationProfile | None) -> CalibrationProfile:
    """The calibrated profile on its own GPU, transferred on any other (``base``: the H200 profile to use;
    None: the committed one through :func:`planner.io.catalog.profile_for`)."""
    if base is None:
        prof = catalog.profile_for(gpu_id, transfer=True)
        if prof is None:
            raise NotComparable("no calibration profile to transfer")
        return prof
    return base if base.gpu_id == gpu_id else base.transferred_to(gpu_id)


def compare(rows: list[PublicRow], base: CalibrationProfile | None = None) -> list[Comparison]:
    """One :class:`Comparison` per row, in order: predicted, or not comparable with the reason."""
    out, cache = [], {}
    for row in rows:
        model_id, why = map_model(row.model)
        family, regime = family_of(model_id, row.weight_dtype), REGIME[row.metric]
        mode, predicted, reason, said = "", None, "", why if model_id and why != "catalog id" else ""
        if model_id is None:
            reason = why
        else:
            try:
                prof = profile_for_row(row.gpu, base)
                mode = prof.mode
                predicted, more = predict(row, catalog.model(model_id), catalog.gpu(row.gpu), prof, cache)
                said = "; ".join(x for x in (said, more) if x)
            except NotComparable as err:
                reason = str(err)
        out.append(Comparison(row, model_id or "", family, regime, predicted is not None, reason, mode, predicted,
                              said))
    return out


# ---------------------------------------------------------------------------------------- error bands


def _band(group: list[Comparison]) -> ErrorBand:
    err = np.abs([c.error_pct for c in group])
    engines = ", ".join(sorted({c.row.engine for c in group}))
    sources = len({c.row.source_url for c in group})
    return ErrorBand(pct=round(float(np.percentile(err, 90)), 2), median_pct=round(float(np.median(err)), 2),
                     n=len(group), basis=f"public: {engines} ({len(group)} points, {sources} source{'s' * (sources != 1)})")


def transfer_bands(comparison_rows: list[Comparison], *, min_points: int = 3) -> dict[str, ErrorBand]:
    """'<gpu_id>/<regime>' -> ErrorBand (p90 and median |error|) of the transferred profile on the public
    vLLM points of that GPU and regime (decode, prefill, throughput), where there are at least ``min_points``
    comparable points.  Only vLLM rows make a band: the planner predicts vLLM, and the other engines' rows
    measure their engine as much as the transfer (they are in comparison.csv and the README's tables).  The
    calibrated GPU's own rows are the control, not a transfer: they give no band."""
    groups: dict[str, list[Comparison]] = {}
    for c in comparison_rows:
        if c.comparable and c.profile_mode == "transferred" and c.row.engine == "vllm":
            groups.setdefault(f"{c.row.gpu}/{c.regime}", []).append(c)
    return {k: _band(g) for k, g in sorted(groups.items()) if len(g) >= min_points}


def error_table(comparison_rows: list[Comparison], by: tuple[str, ...]) -> list[dict]:
    """Rows of n, median and p90 |error| and median signed error per group of the comparable points;
    ``by`` names fields: gpu, engine, regime, family, profile_mode or 'engines' (vllm vs other)."""
    def key(c: Comparison) -> tuple:
        get = {"gpu": c.row.gpu, "engine": c.row.engine, "regime": c.regime, "family": c.family,
               "profile_mode": c.profile_mode, "engines": "vllm" if c.row.engine == "vllm" else "other engines"}
        return tuple(get[k] for k in by)

    groups: dict[tuple, list[float]] = {}
    for c in comparison_rows:
        if c.comparable:
            groups.setdefault(key(c), []).append(c.error_pct)
    out = []
    for k, e in sorted(groups.items()):
        a = np.asarray(e)
        out.append({**dict(zip(by, k)), "n": len(e), "median_abs_pct": float(np.median(np.abs(a))),
                    "p90_abs_pct": float(np.percentile(np.abs(a), 90)), "median_signed_pct": float(np.median(a))})
    return out


def markdown(table: list[dict]) -> str:
    """A table of :func:`error_table` as Markdown."""
    if not table:
        return "(no comparable points)"
    keys = [k for k in table[0] if k not in ("n", "median_abs_pct", "p90_abs_pct", "median_signed_pct")]
    lines = ["| " + " | ".join(keys) + " | n | median abs err | p90 abs err | median signed |",
             "|" + " --- |" * len(keys) + " ---: | ---: | ---: | ---: |"]
    for r in table:
        lines.append("| " + " | ".join(str(r[k]) for k in keys) + f" | {r['n']} | {r['median_abs_pct']:.0f} % | "
                     f"{r['p90_abs_pct']:.0f} % | {r['median_signed_pct']:+.0f} % |")
    return "\n".join(lines)


def control_pairs(comparison_rows: list[Comparison]) -> list[dict]:
    """Transferred rows with a twin on the calibrated GPU (same engine and version, model, weight dtype,
    scenario, batch, rate, lengths, metric and statistic; TP may differ): the transfer's own error with the
    engine's offset removed, (predicted/measured on the GPU) ÷ (predicted/measured on the control) − 1."""
    def key(c: Comparison) -> tuple:
        r = c.row
        return (r.engine, r.engine_version, c.catalog_model, r.weight_dtype, r.scenario, r.batch_size_or_concurrency,
                r.request_rate_per_s, r.input_tokens, r.output_tokens, r.metric, r.statistic)

    control = {key(c): c for c in comparison_rows if c.comparable and c.profile_mode == "calibrated"}
    out = []
    for c in comparison_rows:
        twin = control.get(key(c)) if c.comparable and c.profile_mode == "transferred" else None
        if twin is not None:
            rel = 100.0 * ((1 + c.error_pct / 100) / (1 + twin.error_pct / 100) - 1)
            out.append({"gpu": c.row.gpu, "engine": c.row.engine, "line": c.row.line, "control_line": twin.row.line,
                        "error_pct": c.error_pct, "control_error_pct": twin.error_pct, "relative_error_pct": rel})
    return out


# -------------------------------------------------------------------------------------------- output


def check(path: str | Path = CSV_PATH, base: CalibrationProfile | None = None,
          out: str | Path | None = OUT_PATH) -> tuple[list[Comparison], dict[str, ErrorBand]]:
    """Read, compare, write comparison.csv (unless ``out`` is None); (the comparisons, the transfer bands)."""
    rows = compare(read_public(path), base)
    if out is not None:
        write_comparison(rows, out)
    return rows, transfer_bands(rows)


def main() -> int:
    try:
        rows, bands = check()
    except PublicDataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    n_ok = sum(c.comparable for c in rows)
    print(f"wrote {OUT_PATH}: {len(rows)} rows, {n_ok} compared, {len(rows) - n_ok} not comparable")
    print(markdown(error_table(rows, ("gpu", "regime"))))
    for k, b in bands.items():
        print(f"  band {k:26s} ±{b.pct:6.1f}% (median {b.median_pct:5.1f}%, n={b.n}, {b.basis})")
    for p in control_pairs(rows):
        print(f"  line {p['line']} {p['gpu']} vs h200 line {p['control_line']} ({p['engine']}): {p['error_pct']:+.1f}% vs "
              f"{p['control_error_pct']:+.1f}% -> relative {p['relative_error_pct']:+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
