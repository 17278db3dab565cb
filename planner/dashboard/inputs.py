"""The dashboard's inputs as data: each number's label, default and accepted range, and the one rule that
turns what a user typed (or a shared URL carried) into the value the planner uses — with a sentence
whenever the two differ.  Nothing is changed silently: a value outside its range, a fraction where a
whole number is needed, or a URL parameter naming something that does not exist comes back as a
warning that names the input and says what was used instead.

No streamlit import; ``app.py`` reads the widgets and ``st.query_params`` and shows the warnings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.prices import PRICE_BASES  # noqa: F401 - the price-basis selectbox's choices (app.py)
from planner.specs import PLAUSIBLE_GPU, Deployment
from planner.units import MS


@dataclass(frozen=True)
class NumberSpec:
    """One numeric input: its URL key, the label the user sees, its default and the accepted range."""

    key: str
    label: str
    default: float
    lo: float
    hi: float
    integer: bool = True
    unit: str = ""

    def show(self, v: float) -> str:
        """``v`` as the user would write it, with the unit."""
        if not math.isfinite(v):
            return str(v)
        text = f"{v:,.0f}" if float(v).is_integer() else f"{v:,.6g}"
        return f"{text} {self.unit}".strip()


#: Every numeric input of the dashboard (the URL key is the widget key).
NUMBERS: dict[str, NumberSpec] = {s.key: s for s in (
    NumberSpec("gpus", "GPUs", 1, 1, 4096),
    NumberSpec("context", "Context length", 4608, 2, 10_000_000, unit="tokens"),
    NumberSpec("output", "Output", 512, 1, 1_000_000, unit="tokens"),
    NumberSpec("users", "Concurrent users", 160, 1, 1_000_000),
    NumberSpec("ttft_ms", "TTFT target", 2000, 0.1, 3_600_000, integer=False, unit="ms"),
    NumberSpec("tpot_ms", "TPOT target", 50, 0.1, 60_000, integer=False, unit="ms"),
    NumberSpec("price", "Price override", 0, 0, PLAUSIBLE_GPU["price_usd_per_hour"][1], integer=False,
               unit="$/GPU-hour"),
    NumberSpec("rate", "Request rate", 10, 0.001, 1_000_000, integer=False, unit="requests/s"),
    NumberSpec("active_users", "Active users", 2000, 1, 1_000_000_000),
    NumberSpec("think_s", "Think time", 30, 0, 86_400, integer=False, unit="s"),
    NumberSpec("load_requests", "Requests per simulated run", 1000, 100, 20_000),
)}

TP_CHOICES = [1, 2, 4, 8, 16]


def tp_choices(gpus) -> list[int]:
    """The tensor-parallel sizes to offer: those of :data:`TP_CHOICES` that fit in one node of some GPU in
    ``gpus`` (the one start-up rule keeps TP inside a node: TP 16 fits no catalog GPU's 8-GPU node)."""
    most = max((g.max_gpus_per_node for g in gpus), default=1)
    return [t for t in TP_CHOICES if t <= most]
CALIB_CHOICES = ["ideal roofline", "calibrated profile"]
#: The choices a bare URL opens (the numbers' defaults are in :data:`NUMBERS`).
DEFAULTS = {"model": "mistral-7b-v0.3", "gpu": "h200-sxm", "tp": "auto", "pp": "auto", "wdtype": "bf16", "kvdtype": "bf16",
            "calib": CALIB_CHOICES[1], "basis": "on-demand", "demand": "requests/s", "view": "Memory", "cost_same_dtypes": True,
            "report_only_slo": False}

#: The float sliders (bound to the URL by streamlit, which drops a value outside the range).
SLIDERS: dict[str, NumberSpec] = {
    "util": NumberSpec("util", "gpu_memory_utilization", Deployment.default("gpu_memory_utilization"), 0.10, 1.00,
                       integer=False),
}
UTIL_HELP = f"Fraction of GPU memory vLLM may use (vLLM default {SLIDERS['util'].default:g})"


def clean_number(spec: NumberSpec, raw) -> tuple[float, str | None]:
    """(the value used, a sentence when it is not what was typed).

    A whole number where one is needed (``2.5`` GPUs -> 3, said so), inside ``[lo, hi]`` (−5 GPUs -> 1,
    1e9 tokens -> the limit, said so); something that is not a finite number -> the default."""
    try:
        v = float(raw)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v):
        return float(spec.default), f"{spec.label}: '{raw}' is not a number; using {spec.show(spec.default)}"
    used, why = v, ""
    if spec.integer and not v.is_integer():
        used, why = float(math.floor(v + 0.5)), "is not a whole number"
    if used < spec.lo:
        used, why = float(spec.lo), f"is below the minimum {spec.show(spec.lo)}"
    elif used > spec.hi:
        used, why = float(spec.hi), f"is above the limit {spec.show(spec.hi)}"
    if not why:
        return v, None
    return used, f"{spec.label}: {spec.show(v)} {why}; using {spec.show(used)}"


def split_context(context_tokens: int, output_tokens: int) -> tuple[int, int, str | None]:
    """(prompt, output, warning): the one context length split into prompt + output tokens.  The output
    must leave at least one prompt token; if not, it is shortened (and said so)."""
    if output_tokens < context_tokens:
        return context_tokens - output_tokens, output_tokens, None
    out = max(1, context_tokens - 1)
    why = (f"Output: {output_tokens:,} tokens leave no prompt in a {context_tokens:,}-token context; using {out:,} "
           "output tokens")
    return context_tokens - out, out, why


def url_warnings(params: Mapping[str, str], choices: Mapping[str, Sequence], defaults: Mapping[str, object],
                 labels: Mapping[str, str] | None = None) -> dict[str, tuple[str, object]]:
    """What a shared URL asked for that does not exist, per key: (sentence, the value used instead).

    ``choices``: key -> the options a selectbox/radio/toggle offers (compared as text, as the URL holds
    them); numbers (:data:`NUMBERS`) only need to parse (their range is checked on every run by
    :func:`clean_number`); sliders (:data:`SLIDERS`) must parse and lie in range (streamlit drops
    them otherwise)."""
    labels = labels or {}
    out: dict[str, tuple[str, object]] = {}
    for key, raw in params.items():
        raw = raw[-1] if isinstance(raw, (list, tuple)) else raw
        name = labels.get(key, key)
        if key in choices:
            opts = [str(o).lower() if isinstance(o, bool) else str(o) for o in choices[key]]
            if str(raw) not in opts:
                shown = ", ".join(opts) if len(opts) <= 9 else f"the {len(opts)} in the catalog"
                why = f"URL parameter {key}={raw}: {name} '{raw}' is not one of {shown}; using {defaults[key]}"
                out[key] = (why, defaults[key])
        elif key in SLIDERS or key in NUMBERS:
            spec = SLIDERS.get(key) or NUMBERS[key]
            try:
                v = float(raw)
            except ValueError:
                v = math.nan
            if not math.isfinite(v):
                why = f"URL parameter {key}={raw}: {spec.label} is not a number; using {spec.show(spec.default)}"
                out[key] = (why, spec.default)
            elif key in SLIDERS and not spec.lo <= v <= spec.hi:
                why = (f"URL parameter {key}={raw}: {spec.label} must lie in {spec.lo:.2f}–{spec.hi:.2f}; using "
                       f"{spec.default:.2f}")
                out[key] = (why, spec.default)
    return out


#: How a URL key is named in its warning (the widget's label, where the key is terse).
URL_LABELS = {"tp": "tensor parallel", "pp": "pipeline parallel", "wdtype": "weight format", "kvdtype": "KV-cache format",
              "calib": "latency model", "cost_same_dtypes": "keep the dtypes",
              "report_only_slo": "only rows meeting the targets"}


def legacy_context(params: Mapping[str, str]) -> float | None:
    """The context length of a link made before the one context input (``prompt`` + ``output``), or None."""
    if "prompt" not in params or "context" in params:
        return None
    try:
        return float(int(float(params["prompt"])) + int(float(params.get("output", NUMBERS["output"].default))))
    except ValueError:
        return None


def still_shown(warnings: Mapping[str, tuple[str, object]], state: Mapping) -> list[str]:
    """The opening URL's warnings whose input still holds the value used instead (gone once changed)."""
    def same(a, b) -> bool:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return str(a) == str(b)
    return [msg for key, (msg, used) in warnings.items() if used is None or same(state.get(key, used), used)]


def preset_state(v: Mapping) -> dict:
    """The widget values a preset sets (:func:`planner.dashboard.presets.resolve`'s dict), numbers as the inputs hold them."""
    out = {"gpus": float(v["num_gpus"]), "tp": v["tensor_parallel"], "pp": 1, "wdtype": v["weight_dtype"],
           "kvdtype": v["kv_cache_dtype"], "context": float(v["prompt_tokens"] + v["output_tokens"]),
           "output": float(v["output_tokens"]), "users": float(v["target_users"]),
           "ttft_ms": float(v["ttft_slo_s"] / MS), "tpot_ms": float(v["tpot_slo_s"] / MS)}
    out.update({k: v[f] for k, f in (("model", "model_id"), ("gpu", "gpu_id")) if v[f]})
    return out
