"""The one place :mod:`planner.capacity` asks the fleet engine what one replica serves.

Everything in this package plans with :class:`ReplicaKnee`: the highest request rate one replica of a GPU
type sustains within the p99 TTFT and TPOT targets (the serving simulator's knee,
:func:`planner.serving.load.fleet_candidates` → :func:`~planner.serving.load.max_rate_under_slo`), and the
rate the plans size on, ``knee × (1 − headroom)``.  When the rewritten fleet engine (issue #19:
``plan_fleet``, the knee at the stated tail with headroom, whole replicas, cost) lands, :func:`replica_knee`
is the only function to switch over.

``make_requests(rate, num_requests=n)`` is the workload at a rate with a fixed seed, as
:func:`~planner.serving.load.max_rate_under_slo` expects; :func:`workload_maker` builds one for fixed
lengths or a preset (``chat``, ``rag``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.profile import CalibrationProfile
from planner.serving.config import EngineConfig, engine_setup
from planner.serving.load import fleet_candidates
from planner.serving.step_cost import StepCost
from planner.specs import Deployment, GpuSpec, ModelSpec

__all__ = ["DEFAULT_HEADROOM", "ReplicaKnee", "replica_knee", "workload_maker"]

#: Plans size replicas this fraction below the knee (a replica at its knee has no margin for a burst or the
#: model's error).  The fleet engine of issue #19 will own this default; until then it lives here.
DEFAULT_HEADROOM = 0.2
PRESETS = ("chat", "rag")


def workload_maker(prompt_tokens: int, output_tokens: int, *, preset: str | None = None,
                   burstiness_cv: float = 1.0, seed: int = 0):
    """``make(rate, num_requests=2000)``: fixed lengths (Poisson, or gamma with ``burstiness_cv``), or the
    ``chat`` / ``rag`` preset of :mod:`planner.serving.workloads`; one seed, so every trial is the same
    arrival pattern scaled in time."""
    from planner.serving import workloads as wl

    if preset is not None and preset not in PRESETS:
        raise ValueError(f"--workload: unknown workload {preset!r}; known: {', '.join(PRESETS)}")

    def make(rate=None, num_requests: int = 2000):
        if preset is not None:
            return wl.PRESETS[preset](num_requests, rate_per_s=rate, cv=burstiness_cv, seed=seed)
        return wl.synthetic(num_requests, prompt_tokens, output_tokens, rate_per_s=rate, cv=burstiness_cv,
                            seed=seed)

    make.description = preset or f"{prompt_tokens} prompt + {output_tokens} output tokens"
    return make


@dataclass(frozen=True)
class ReplicaKnee:
    """One replica of one GPU type under the targets: its knee and the rate plans size on (SI, USD)."""

    model_id: str
    gpu_id: str
    gpu_name: str
    weight_dtype: str
    kv_cache_dtype: str
    tensor_parallel: int
    knee_rate_per_s: float  # highest rate meeting p99 TTFT and TPOT (0: none does)
    saturation_rate_per_s: float
    headroom: float
    price_usd_per_gpu_hour: float
    price_source: str
    mode: str  # calibration mode: calibrated, transferred, ideal
    confidence: str  # the knee trial's steady state: high, low, none
    ttft_p99_s: float
    tpot_p99_s: float
    ttft_slo_s: float
    tpot_slo_s: float
    output_tokens_per_request: float
    prompt_tokens_per_request: float
    cost: StepCost | None = None
    config: EngineConfig | None = None
    make_requests: object = None

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel

    @property
    def target_rate_per_s(self) -> float:
        """What a replica is planned to carry: the knee less the headroom."""
        return self.knee_rate_per_s * (1.0 - self.headroom)

    @property
    def usd_per_replica_hour(self) -> float:
        return self.price_usd_per_gpu_hour * self.gpus_per_replica

    def replicas_for(self, rate_per_s: float) -> int:
        """Whole replicas for ``rate_per_s`` at the target rate: ⌈rate ÷ target⌉ (0 for no demand)."""
        if rate_per_s <= 0:
            return 0
        return math.ceil(rate_per_s / self.target_rate_per_s - 1e-9)

    def label(self) -> str:
        tp = f" TP {self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        return f"{self.gpu_name}{tp} ({self.weight_dtype})"

    def as_dict(self) -> dict:
        return {"gpu": self.gpu_id, "gpu_name": self.gpu_name, "weight_dtype": self.weight_dtype,
                "kv_cache_dtype": self.kv_cache_dtype, "tensor_parallel": self.tensor_parallel,
                "gpus_per_replica": self.gpus_per_replica, "knee_rate_per_s": self.knee_rate_per_s,
                "target_rate_per_s": self.target_rate_per_s, "headroom": self.headroom,
                "saturation_rate_per_s": self.saturation_rate_per_s,
                "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour, "price_source": self.price_source,
                "mode": self.mode, "confidence": self.confidence,
                "ttft_p99_s_at_knee": self.ttft_p99_s if math.isfinite(self.ttft_p99_s) else None,
                "tpot_p99_s_at_knee": self.tpot_p99_s if math.isfinite(self.tpot_p99_s) else None}


def replica_knee(model: ModelSpec, gpu: GpuSpec, profile: CalibrationProfile, make_requests, ttft_slo_s: float,
                 tpot_slo_s: float, *, weight_dtype: str | None = None, kv_cache_dtype: str = "bf16",
                 tensor_parallel: int | None = None, headroom: float = DEFAULT_HEADROOM,
                 enable_prefix_caching: bool | None = None, max_model_len: int | None = None) -> ReplicaKnee:
    """The knee of one replica (the smallest TP that starts when ``tensor_parallel`` is None), from the
    simulator via :func:`planner.serving.load.fleet_candidates`.  ValueError naming the flag for a headroom
    outside [0, 0.9]; a replica that does not start, or meets the targets at no rate, is returned with
    ``knee_rate_per_s`` 0 and the reason in ``confidence`` ('none: …').  ``weight_dtype``: the model's own format
    (``native_dtype``, as every other surface) unless given."""
    weight_dtype = weight_dtype or model.native_dtype
    if not (math.isfinite(headroom) and 0 <= headroom <= 0.9):
        raise ValueError(f"--headroom-pct: must be from 0 to 90 %, got {100 * headroom:g}")
    probe = make_requests(1.0, num_requests=2000)
    longest = int((probe.prompt_tokens + probe.output_tokens).max())
    rows = fleet_candidates(model, [(gpu, profile)], [weight_dtype], kv_cache_dtype,
                            None if tensor_parallel is None else [tensor_parallel], make_requests, ttft_slo_s,
                            tpot_slo_s, enable_prefix_caching=enable_prefix_caching,
                            max_model_len=max_model_len or longest)
    row = rows[0]
    tp = int(row["tensor_parallel"])
    cost = cfg = None
    if row["fits"]:
        dep = Deployment.for_gpu(gpu, num_gpus=tp, tensor_parallel=tp, weight_dtype=weight_dtype,
                                 kv_cache_dtype=kv_cache_dtype)
        cost, cfg = engine_setup(model, gpu, dep, profile, enable_prefix_caching=enable_prefix_caching)
    knee = float(row["max_rate_per_s"] or 0.0)
    conf = row["confidence"] if knee > 0 else f"none: {row['note'] or 'misses the targets at any rate'}"
    src = gpu.price_source
    return ReplicaKnee(model.id, gpu.id, gpu.name, weight_dtype, kv_cache_dtype, tp, knee,
                       float(row["saturation_rate_per_s"] or 0.0), float(headroom), float(gpu.price_usd_per_hour),
                       f"{src.url} ({src.date})", profile.mode, conf,
                       float(row["ttft_p99_s"] or math.inf), float(row["tpot_p99_s"] or math.inf),
                       float(ttft_slo_s), float(tpot_slo_s), float(probe.output_tokens.mean()),
                       float(probe.prompt_tokens.mean()), cost, cfg, make_requests)
