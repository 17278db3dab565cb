"""One set of planning flags, :class:`PlanFlags`, shared by ``planner size``, ``report`` and ``deploy``.

The flags are declared once (:data:`PLAN_OPTIONS`: name, typer annotation, default); :func:`plan_flags` puts
them in front of a command's own options and hands the command one validated :class:`PlanFlags` as
``flags`` instead of nineteen keywords.  :meth:`PlanFlags.question` is the fleet engine's question
(:class:`planner.fleet.FleetQuestion`).
"""

from __future__ import annotations

import inspect
import typing
from typing import Annotated, Literal

import typer
from pydantic import BaseModel, ConfigDict

from planner.cli.common import error_exit, finite
from planner.cli.options import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    CudagraphCaptureOpt,
    GpuChoiceOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    OutputTokensOpt,
    PrefixCachingOpt,
    PriceBasisOpt,
    PriceProviderOpt,
    PromptTokensOpt,
    RateOpt,
    ThinkTimeOpt,
    UsersOpt,
)
from planner.units import MS

__all__ = ["PLAN_OPTIONS", "PlanFlags", "plan_flags"]

TAIL_HELP = ("the percentile of simulated requests (Poisson arrivals at the replica's operating rate, queueing "
             "included) given by --tail (p99 by default)")

#: (name, annotation, default) of every planning flag, in the order --help lists them.
PLAN_OPTIONS: tuple[tuple[str, object, object], ...] = (
    ("model", ModelOpt, inspect.Parameter.empty),
    ("gpu", GpuChoiceOpt, None),
    ("num_gpus", Annotated[int | None, typer.Option("--num-gpus", min=1, help=(
        "GPUs you have: the plan says whether they hold the fleet the demand needs (default: the fleet)."))], None),
    ("tp", Annotated[int | None, typer.Option("--tp", min=1, help=(
        "Tensor-parallel GPUs per replica (default: chosen, 1, 2, 4 or 8 within a node, with --gpu too)."))], None),
    ("pp", Annotated[int | None, typer.Option("--pp", min=1, help=(
        "Pipeline stages per replica, across nodes (default: 1, more only when no node holds the model)."))], None),
    ("weight_dtype", Annotated[str | None, typer.Option("--weight-dtype", help=(
        "bf16, fp16, fp8, int8, int4, nf4, mxfp4 (default: the checkpoint's native format)."))], None),
    ("kv_dtype", KvDtypeOpt, "bf16"),
    ("prompt_tokens", PromptTokensOpt, DEFAULT_PROMPT_TOKENS),
    ("output_tokens", OutputTokensOpt, DEFAULT_OUTPUT_TOKENS),
    ("ttft_slo_ms", Annotated[float | None, typer.Option("--ttft-slo-ms", callback=finite("--ttft-slo-ms"),
                                                          help=f"Time-to-first-token target, ms; at {TAIL_HELP}.")],
     None),
    ("tpot_slo_ms", Annotated[float | None, typer.Option("--tpot-slo-ms", callback=finite("--tpot-slo-ms"),
                                                          help=f"Time-per-output-token target, ms; at {TAIL_HELP}.")],
     None),
    ("tail", Annotated[str, typer.Option("--tail", help="The percentile the targets hold at: p99, p95 or p50.")],
     "p99"),
    ("headroom_pct", Annotated[float, typer.Option("--headroom-pct", callback=finite("--headroom-pct", allow_zero=True),
                                                   help="Run each replica this far below its knee, % (0-99).")], 20.0),
    ("n_plus_one", Annotated[bool, typer.Option("--n-plus-one", help="One replica more than the demand needs.")],
     False),
    ("rank_by", Annotated[str, typer.Option("--rank-by", help=(
        "expected: by $/month; pessimistic: by the $/month at the band's pessimistic edge."))], "expected"),
    ("rate", RateOpt, None),
    ("users", UsersOpt, None),
    ("think_time_s", ThinkTimeOpt, 0.0),
    ("gpu_memory_utilization", Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", callback=finite("--gpu-memory-utilization"),
        help="Fraction of GPU memory vLLM may use (0-1]; default vLLM's.")], None),
    ("max_num_batched_tokens", MaxNumBatchedTokensOpt, None),
    ("max_num_seqs", MaxNumSeqsOpt, None),
    ("max_cudagraph_capture_size", CudagraphCaptureOpt, None),
    ("prefix_caching", PrefixCachingOpt, None),
    ("price_usd_per_hour", Annotated[float | None, typer.Option(
        "--price-usd-per-hour", callback=finite("--price-usd-per-hour"),
        help="Override the catalog price per GPU-hour, USD (needs --gpu).")], None),
    ("discount_pct", Annotated[float, typer.Option("--discount-pct", callback=finite("--discount-pct", allow_zero=True),
                                                   help="Discount off every GPU's price, % (0-99).")], 0.0),
    ("price_basis", PriceBasisOpt, "on-demand"),
    ("price_provider", PriceProviderOpt, None),
    ("profile", Annotated[str, typer.Option("--profile", help=(
        "Latency model: auto (the GPU's own calibration, else the newest transferred), none (ideal roofline) "
        "or a profile YAML path."))], "auto"),
)


class PlanFlags(BaseModel):
    """The planning flags as one validated value (CLI units: ms, %; :meth:`question` converts to SI)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    gpu: str | None = None
    num_gpus: int | None = None
    tp: int | None = None
    pp: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str = "bf16"
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    tail: str = "p99"
    headroom_pct: float = 20.0
    n_plus_one: bool = False
    rank_by: str = "expected"
    rate: float | None = None
    users: int | None = None
    think_time_s: float = 0.0
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_cudagraph_capture_size: int | None = None
    prefix_caching: bool | None = None
    price_usd_per_hour: float | None = None
    discount_pct: float = 0.0
    price_basis: str = "on-demand"
    price_provider: str | None = None
    profile: str = "auto"

    def check(self) -> PlanFlags:
        """Exit 2 naming the flag for a contradictory or out-of-range combination."""
        from planner.dtypes import KV_BYTES, WEIGHT_BITS
        from planner.prices import PRICE_BASES
        from planner.serving.load import TAILS

        if self.rate is not None and self.users is not None:
            raise error_exit("--users", "give either --rate or --users (with --think-time-s), not both")
        if self.think_time_s and self.users is None:
            raise error_exit("--think-time-s", "a think time needs --users")
        if self.tail not in TAILS:
            raise error_exit("--tail", f"expected one of {', '.join(TAILS)}, got '{self.tail}'")
        if self.rank_by not in ("expected", "pessimistic"):
            raise error_exit("--rank-by", f"expected 'expected' or 'pessimistic', got '{self.rank_by}'")
        if not 0 <= self.headroom_pct < 100:
            raise error_exit("--headroom-pct", f"must be in [0, 100), got {self.headroom_pct:g}")
        if not 0 <= self.discount_pct < 100:
            raise error_exit("--discount-pct", f"must be in [0, 100), got {self.discount_pct:g}")
        if self.price_basis not in PRICE_BASES:
            raise error_exit("--price-basis", f"expected one of {', '.join(PRICE_BASES)}, got '{self.price_basis}'")
        if self.price_provider is not None and not self.price_provider.strip():
            raise error_exit("--price-provider", "give a provider's name (e.g. Lambda) or 'cheapest'")
        if self.weight_dtype is not None and self.weight_dtype not in WEIGHT_BITS:
            raise error_exit("--weight-dtype", f"unknown dtype '{self.weight_dtype}'; known: {', '.join(WEIGHT_BITS)}")
        if self.kv_dtype not in KV_BYTES:
            raise error_exit("--kv-dtype", f"unknown dtype '{self.kv_dtype}'; known: {', '.join(KV_BYTES)}")
        if self.gpu is None:
            for flag, given in (("--num-gpus", self.num_gpus is not None),
                                ("--price-usd-per-hour", self.price_usd_per_hour is not None)):
                if given:
                    raise error_exit(flag, "give --gpu with it (without --gpu the cheapest fleet is chosen)")
        per = (self.tp or 1) * (self.pp or 1)
        if self.num_gpus is not None and self.tp is not None and self.num_gpus % per:
            n = self.num_gpus - self.num_gpus % per  # 3 GPUs of TP 2 were priced as 2 under a "3 ×" title
            raise error_exit("--num-gpus", f"num_gpus = {self.num_gpus} is not a whole number of replicas of "
                             f"tensor_parallel × pipeline_parallel = {per} GPUs; give {n} or {n + per}")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise error_exit("--gpu-memory-utilization", f"must be in (0, 1], got {self.gpu_memory_utilization:g}")
        return self

    def question(self, **override):
        """The fleet engine's question for these flags (SI units); ``override`` replaces fields."""
        from planner.fleet import FleetQuestion
        from planner.prices import PriceBasis

        q = dict(
            model_id=self.model, rate_per_s=self.rate, users=self.users, think_time_s=self.think_time_s,
            prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
            ttft_slo_s=self.ttft_slo_ms * MS if self.ttft_slo_ms is not None else None,
            tpot_slo_s=self.tpot_slo_ms * MS if self.tpot_slo_ms is not None else None,
            tail=self.tail, headroom=self.headroom_pct / 100, n_plus_one=self.n_plus_one,
            gpu_ids=(self.gpu,) if self.gpu else None, tensor_parallels=(self.tp,) if self.tp else None,
            pipeline_parallels=(self.pp,) if self.pp else None, weight_dtype=self.weight_dtype,
            kv_cache_dtype=self.kv_dtype, gpu_memory_utilization=self.gpu_memory_utilization,
            max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
            max_cudagraph_capture_tokens=self.max_cudagraph_capture_size,
            enable_prefix_caching=self.prefix_caching, price_usd_per_gpu_hour=self.price_usd_per_hour,
            discount_pct=self.discount_pct,
            price_basis=typing.cast(PriceBasis, self.price_basis), price_provider=self.price_provider,
            rank_by=typing.cast(Literal["expected", "pessimistic"], self.rank_by), profile=self.profile)
        return FleetQuestion(**{**q, **override})


def plan_flags(fn):
    """Decorator: ``fn(flags: PlanFlags, **own_options)`` becomes a typer command taking every
    :data:`PLAN_OPTIONS` flag first, then ``fn``'s own options (``fn``'s ``flags`` parameter left out)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in inspect.signature(fn).parameters.values()
           if p.name != "flags"]
    names = {name for name, _, _ in PLAN_OPTIONS}
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
              for name, ann, default in PLAN_OPTIONS]
    params += [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    def command(**kwargs):
        flags = PlanFlags(**{k: v for k, v in kwargs.items() if k in names}).check()
        return fn(flags, **{k: v for k, v in kwargs.items() if k not in names})

    command.__name__, command.__qualname__, command.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    command.__module__ = fn.__module__
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command
