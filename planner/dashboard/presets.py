"""The seeds' three "pick two" scenarios as data (no streamlit imports).

The workshop's trade-off triangle (seeds 000 and 004): you optimise two of quality, latency and
throughput at a time.

* premium chat — quality + latency: big model, small batches, fast responses; expensive per user.
* asynchronous agents — quality + throughput: big model, large batches, long re-sent contexts; users
  wait.
* autocomplete / free tier — latency + throughput: a smaller or heavily quantised model at high
  concurrency.

A preset names the models and GPUs it prefers, best first; the first one present in the catalog is
used (:func:`resolve`), so a preset still works on a catalog that lacks its first choice.  Its GPU count
and TP are its own fleet answer (:func:`sized_fleet`: the replicas × TP the fleet engine says its target users
need at the tail), so a preset never under-provisions its own targets; ``num_gpus`` and ``tensor_parallel`` below
are that answer on the committed catalog and profiles (a test keeps them equal).
Numbers are SI: seconds, tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Preset:
    """One scenario of the quality–latency–throughput triangle."""

    name: str
    corner: tuple[str, str]  # the two vertices it keeps, e.g. ("quality", "latency")
    summary: str  # one line in the seeds' words
    model_ids: tuple[str, ...]  # preferred models, best first
    gpu_ids: tuple[str, ...]  # preferred GPUs, best first
    num_gpus: int
    tensor_parallel: int
    weight_dtype: str
    kv_cache_dtype: str
    prompt_tokens: int
    output_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float
    target_users: int  # concurrent users the deployment should hold
    source: str  # which seed text the scenario comes from

    def as_dict(self) -> dict:
        return asdict(self)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="premium chat",
            corner=("quality", "latency"),
            summary="Quality + latency: a big model, small batches and fast responses; expensive per user.",
            model_ids=("llama-3.1-70b", "qwen2.5-72b", "qwen2.5-32b", "mistral-7b-v0.3"),
            gpu_ids=("h200-sxm", "h100-sxm", "a100-sxm-80gb"),
            num_gpus=104,  # 13 replicas of TP 8: p99 TTFT 0.5 s on 4K prompts holds each to ~2.5 requests in flight
            tensor_parallel=8,
            weight_dtype="bf16",
            kv_cache_dtype="bf16",
            prompt_tokens=4096,  # the seeds' 4K-context example: keep the useful context
            output_tokens=512,
            ttft_slo_s=0.5,
            tpot_slo_s=0.020,  # 50 tokens/s per user
            target_users=32,
            source="seeds 000 (trade-off triangle) and 004 (premium chat keeps context and fast responses)",
        ),
        Preset(
            name="asynchronous agents",
            corner=("quality", "throughput"),
            summary="Quality + throughput: a big model, large batches and long re-sent contexts; users wait.",
            model_ids=("llama-3.1-70b", "qwen2.5-72b", "qwen2.5-32b", "mistral-7b-v0.3"),
            gpu_ids=("h200-sxm", "h100-sxm", "a100-sxm-80gb"),
            num_gpus=48,  # 12 replicas of TP 4 (TP 2 also needs 48): p99 TTFT 10 s on 16K prompts, ~14 in flight each
            tensor_parallel=4,
            weight_dtype="bf16",
            kv_cache_dtype="fp8",  # fp8 KV: 'negligible accuracy loss', twice the tokens
            prompt_tokens=16384,  # agent loops keep re-sending the same scaffolding
            output_tokens=1024,
            ttft_slo_s=10.0,
            tpot_slo_s=0.100,
            target_users=160,  # the seeds' memory chart: 160 concurrent users
            source="seeds 000 (asynchronous agents), 004 (minimum batch size first; the 160-user chart)",
        ),
        Preset(
            name="autocomplete / free tier",
            corner=("latency", "throughput"),
            summary="Latency + throughput: a smaller or heavily quantised model served at high concurrency.",
            model_ids=("mistral-7b-v0.3", "llama-3.1-8b", "qwen2.5-7b"),
            gpu_ids=("l40s", "a100-sxm-80gb", "h100-sxm", "h200-sxm"),
            num_gpus=120,  # 120 replicas of one GPU: p99 TTFT 0.2 s holds each to ~1.3 requests in flight
            tensor_parallel=1,
            weight_dtype="int4",
            kv_cache_dtype="fp8",
            prompt_tokens=1024,
            output_tokens=64,
            ttft_slo_s=0.2,
            tpot_slo_s=0.025,
            target_users=160,
            source="seeds 000 (autocomplete or a free tier: smaller or quantised models, high concurrency)",
        ),
    )
}

#: Where each "pick two" corner sits on the triangle chart, and its seeds' example.
CORNERS: dict[tuple[str, str], str] = {p.corner: p.name for p in PRESETS.values()}


def first_present(preferred: Iterable[str], available: Iterable[str]) -> str | None:
    """The first id of ``preferred`` that ``available`` holds, else None."""
    have = set(available)
    return next((x for x in preferred if x in have), None)


def sized_fleet(preset: Preset, model, gpu, profile) -> tuple[int, int]:
    """``(num_gpus, tensor_parallel)`` the preset's own targets need on ``model`` / ``gpu`` (specs) under
    ``profile``: the fleet engine's answer (:func:`planner.fleet.plan_fleet`, as every other surface asks it) for its
    target users, each always waiting for an answer (no think time: ``target_users`` requests in flight), at the
    preset's weight and KV formats and tail targets, PP 1, the engine choosing the TP (replicas x TP GPUs);
    the preset's own ``(num_gpus, tensor_parallel)`` when no fleet meets the targets (the dashboard shows why)."""
    from planner.fleet import FleetQuestion, plan_fleet

    q = FleetQuestion(model_id=model.id, users=preset.target_users, prompt_tokens=preset.prompt_tokens,
                      output_tokens=preset.output_tokens, ttft_slo_s=preset.ttft_slo_s, tpot_slo_s=preset.tpot_slo_s,
                      gpu_ids=(gpu.id,), pipeline_parallels=(1,), weight_dtype=preset.weight_dtype,
                      kv_cache_dtype=preset.kv_cache_dtype)
    best = plan_fleet(q, model=model, gpus=[gpu], profile_for=lambda _gpu_id: profile).best
    if best is None:
        return preset.num_gpus, preset.tensor_parallel
    return best.replicas * best.gpus_per_replica, best.tensor_parallel


def _default_profile(gpu_id: str):
    """The dashboard's default latency model for a GPU: ``--profile auto`` (ideal where none can be read)."""
    from planner.io import catalog
    from planner.profile import IDEAL_PROFILE

    try:
        return catalog.resolve_profile("auto", gpu_id)[0]
    except catalog.SpecError:
        return IDEAL_PROFILE


def resolve(preset: Preset, model_ids: Iterable[str], gpu_ids: Iterable[str]) -> dict:
    """The preset as scenario fields, its model and GPU chosen from what the catalog holds
    (``None`` where none of its preferences is present: keep the current choice).

    Given the catalog's specs (``{id: ModelSpec}``, ``{id: GpuSpec}``, as ``catalog.models()`` /
    ``catalog.gpus()`` return them), ``num_gpus`` and ``tensor_parallel`` are :func:`sized_fleet` on the chosen model
    and GPU (the preset may have fallen back to another one); given ids only, the preset's own."""
    model_id = first_present(preset.model_ids, model_ids)
    gpu_id = first_present(preset.gpu_ids, gpu_ids)
    num_gpus, tp = preset.num_gpus, preset.tensor_parallel
    if model_id and gpu_id and isinstance(model_ids, Mapping) and isinstance(gpu_ids, Mapping):
        num_gpus, tp = sized_fleet(preset, model_ids[model_id], gpu_ids[gpu_id], _default_profile(gpu_id))
    return {
        "model_id": model_id,
        "gpu_id": gpu_id,
        "num_gpus": num_gpus,
        "tensor_parallel": tp,
        "weight_dtype": preset.weight_dtype,
        "kv_cache_dtype": preset.kv_cache_dtype,
        "prompt_tokens": preset.prompt_tokens,
        "output_tokens": preset.output_tokens,
        "ttft_slo_s": preset.ttft_slo_s,
        "tpot_slo_s": preset.tpot_slo_s,
        "target_users": preset.target_users,
    }
