"""The sidebar's hardware inputs: GPU, GPU count, tensor and pipeline parallel ("auto": the fleet engine chooses,
:mod:`planner.dashboard.layout`), weight and KV formats, memory utilisation.

The weight format opens at the model's native checkpoint format (gpt-oss-120b: mxfp4), as ``planner size`` plans
it, and follows the model when the model changes — until the user picks a format (in the sidebar, a preset, a
picked point, or a ``wdtype`` URL parameter): then it stays as picked.

No streamlit import: ``app.py`` passes its ``st`` (the module) in, with its number-input helper.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.dashboard import inputs, layout
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.units import cdiv, fmt_layout

#: session_state key: True once the user chose a weight format (it then no longer follows the model).
WDTYPE_CHOSEN = "wdtype_chosen"


def _choose(s) -> None:
    s[WDTYPE_CHOSEN] = True


def weight_default(s, native_dtype: str) -> int:
    """The weight selectbox's index: the native format; a value the model no longer sets is dropped (so the
    selectbox reopens at the new model's native format) unless the user chose it."""
    wd = list(WEIGHT_BITS)
    native = native_dtype if native_dtype in wd else inputs.DEFAULTS["wdtype"]
    if not s.get(WDTYPE_CHOSEN) and s.get("wdtype", native) != native:
        del s["wdtype"]
    return wd.index(native)


def hardware_section(st, gpus: dict, native_dtype: str, num: Callable, warnings: list[str],
                     bind: dict) -> tuple[dict, object]:
    """The hardware widgets -> (the scenario's hardware fields, the GPU caption's placeholder).  TP or PP "auto"
    is 0 in the fields; the GPU count is rounded to whole replicas here only when both are given."""
    s = st.session_state
    ids = list(gpus)
    d = inputs.DEFAULTS
    gpu_id = st.selectbox("GPU", ids, index=ids.index(d["gpu"]) if d["gpu"] in ids else 0, key="gpu",
                          help="A catalog id (hardware/*.yaml)", **bind)
    gpu_caption = st.empty()  # filled once the latency model is known (it decides the memory CUDA reports)
    n = num(st, "gpus", 1, "GPUs in the deployment the views examine; replicas = GPUs ÷ (TP × PP)")
    c1, c2 = st.columns(2)
    tp = layout.as_int(c1.selectbox("Tensor parallel", layout.tp_options(gpus.values()), key="tp", help="GPUs one "
                                    "replica spans (two all-reduces per layer per step; up to one node); auto: the "
                                    "fleet engine picks the cheapest fleet's", **bind))
    pp = layout.as_int(c2.selectbox("Pipeline parallel", layout.pp_options(), key="pp", help="Stages one replica "
                                    "is split into (across nodes when TP fills one); auto: more stages only when "
                                    "no single-node layout starts", **bind))
    per = tp * pp
    if per and n % per:  # whole replicas only: 3 GPUs at TP 2 would be priced as 2
        name = fmt_layout(tp, pp)
        label = f"tensor parallel {tp}" if pp == 1 else f"{name} ({per} GPUs)"
        whole = cdiv(n, per) * per
        warnings.append(f"GPUs: {n:,} is " + (f"fewer than {label}; using {per} GPUs (one replica)" if per > n
                        else f"not a whole number of {name} replicas; using {whole}"))
        n = whole
    c1, c2 = st.columns(2)
    wd, kd = list(WEIGHT_BITS), list(KV_BYTES)
    weight_dtype = c1.selectbox("Weights", wd, index=weight_default(s, native_dtype), key="wdtype", **bind,
                                on_change=_choose, args=(s,), help="Weight format (int4 = group-wise with 16-bit "
                                "scales, 4.125 bits); opens at the checkpoint's native format")
    kv_dtype = c2.selectbox("KV cache", kd, index=kd.index(d["kvdtype"]), key="kvdtype", **bind,
                            help="fp8 KV halves the cache: roughly twice the tokens")
    util = st.slider("gpu_memory_utilization", min_value=(u := inputs.SLIDERS["util"]).lo, max_value=u.hi, step=0.01,
                     value=u.default, key="util", help=inputs.UTIL_HELP, **bind)
    hw = {"gpu_id": gpu_id, "num_gpus": n, "tensor_parallel": tp, "pipeline_parallel": pp,
          "weight_dtype": weight_dtype, "kv_cache_dtype": kv_dtype, "gpu_memory_utilization": float(util)}
    return hw, gpu_caption
