"""Side-by-side comparison of pinned scenarios: a scenario and its demand as one URL-safe token (so pins travel in
the share URL as repeated ``pin`` parameters; a pin keeps its own demand) and the table of what each one answers,
its fleet the fleet engine's (:func:`planner.fleet.plan_fleet` on the pin's GPU and TP).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from planner.dashboard.headline import DEMAND_MODES, Demand, DemandAnswer
from planner.dashboard.scenario import Planned, Scenario
from planner.units import MS, fmt_gib, fmt_int, fmt_ms, fmt_usd

MAX_PINS = 3
_SEP = "~"
#: The token's fields, in order, with the type each is read back as.
_FIELDS = (("model_key", str), ("gpu_id", str), ("num_gpus", int), ("tensor_parallel", int), ("weight_dtype", str),
           ("kv_cache_dtype", str), ("gpu_memory_utilization", float), ("prompt_tokens", int), ("output_tokens", int),
           ("target_users", int), ("ttft_slo_s", float), ("tpot_slo_s", float), ("price_usd_per_hour", float),
           ("calibrated", bool))


def encode(sc: Scenario, demand: Demand | None = None) -> str:
    """``sc`` as one token: its fields joined by '~' (times in ms, ``calibrated`` as 1/0), then ``demand``'s
    (``r`` and a rate, or ``u``, users and think time) so the pin keeps its own demand."""
    vals = []
    for name, kind in _FIELDS:
        v = getattr(sc, name)
        if name == "tensor_parallel" and sc.pipeline_parallel > 1:  # "8p2": TP 8 × PP 2 (older pins: TP only)
            v = f"{v}p{sc.pipeline_parallel}"
        elif name.endswith("_slo_s"):
            v = f"{v / MS:g}"
        elif kind is bool:
            v = "1" if v else "0"
        elif kind is float:
            v = f"{v:g}"
        vals.append(str(v))
    if demand is not None:
        vals += (["u", f"{int(demand.active_users)}", f"{demand.think_s:g}"] if demand.by_users
                 else ["r", f"{demand.rate_per_s:g}", "0"])
    return _SEP.join(vals)


def decode_demand(token: str) -> Demand | None:
    """The demand a pin was made with (None: a pin of an older URL, without one, or malformed)."""
    parts = token.split(_SEP)[len(_FIELDS):]
    if len(parts) != 3 or parts[0] not in ("r", "u"):
        return None
    try:
        a, b = float(parts[1]), float(parts[2])
    except ValueError:
        return None
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b >= 0):
        return None
    if parts[0] == "u":
        return Demand(DEMAND_MODES[1], active_users=int(a), think_s=b)
    return Demand(DEMAND_MODES[0], rate_per_s=a)


def decode(token: str) -> Scenario | None:
    """The scenario of :func:`encode`'s token; None if the token is malformed (a hand-edited URL)."""
    parts = token.split(_SEP)
    if len(parts) == len(_FIELDS) + 3 and decode_demand(token) is not None:
        parts = parts[:len(_FIELDS)]
    if len(parts) != len(_FIELDS) or any(_SEP in p for p in parts):
        return None
    out = {}
    try:
        for (name, kind), raw in zip(_FIELDS, parts):
            if name == "tensor_parallel":
                v, _, pp = raw.partition("p")
                v, out["pipeline_parallel"] = int(v), int(pp or 1)
                if min(v, out["pipeline_parallel"]) < 1:
                    return None
            elif kind is bool:
                v = raw == "1"
            elif name.endswith("_slo_s"):
                v = float(raw) * MS
            else:
                v = kind(raw)
            if isinstance(v, float) and not math.isfinite(v):
                return None
            out[name] = v
    except ValueError:
        return None
    return Scenario(**out)


def add_pin(pins: Sequence[str], token: str) -> list[str]:
    """``pins`` with ``token`` last (moved there if already pinned), the oldest dropped beyond :data:`MAX_PINS`."""
    return ([p for p in pins if p != token] + [token])[-MAX_PINS:]


def read_pins(tokens: Sequence[str]) -> tuple[list[str], str | None]:
    """The pins a URL carries that can be read (at most :data:`MAX_PINS`), and a sentence if any was left out."""
    pins = [t for t in tokens if decode(t)][:MAX_PINS]
    if len(pins) == len(tokens):
        return pins, None
    return pins, f"URL parameter pin: a pinned scenario could not be read (or more than {MAX_PINS}); left out"


def pinned_items(pins: Sequence[str], planned: Callable[[Scenario], Planned],
                 fleet: Callable[[Scenario, str], object], label: Callable[[Planned], str]
                 ) -> tuple[list[tuple[str, Planned, FleetAnswer, str]], list[str]]:
    """(:func:`compare_frame`'s items for the pins that can be planned, a sentence for each that cannot);
    ``fleet(pin, token)`` answers the pin's own demand (the token carries it).
    Each pin is planned on its own: one whose model left the catalog, whose layout vLLM refuses or whose
    planning fails is named with its reason, and the others are still compared."""
    from planner.dashboard.scenario import scenario_problems

    items, problems = [], []
    for i, token in enumerate(pins, 1):
        pin = decode(token)
        name = f"{i}. {pin_name(pin)}" if pin is not None else f"{i}."
        try:
            why = ["it could not be read"] if pin is None else scenario_problems(pin)
            if not why:
                p = planned(pin)
                items.append((name, p, fleet(pin, token), label(p)))
        except Exception as err:  # noqa: BLE001 - any failure of one pin is that pin's, said beside the others
            why = [" ".join(str(err).split())[:300] or type(err).__name__]
        if why:
            problems.append(f"Pin {name} cannot be compared: {'; '.join(why)}")
    return items, problems


def pin_name(sc: Scenario) -> str:
    """A short column heading: model on GPUs × GPU, dtypes."""
    return (f"{sc.model_key.removeprefix('upload:')} · {sc.num_gpus}×{sc.gpu_id} TP{sc.tensor_parallel}"
            f"{f' PP{sc.pipeline_parallel}' if sc.pipeline_parallel > 1 else ''} · "
            f"{sc.weight_dtype}/{sc.kv_cache_dtype} · {sc.context_tokens:,} tok")


def _band(r, key: str) -> str:
    b = r.bands.get(key)
    return "" if b is None else f" ({b.text()})"


def compare_frame(items: Sequence[tuple[str, Planned, DemandAnswer, str]]) -> pd.DataFrame:
    """One column per scenario (name, its planner objects, its demand's answer — the fleet engine's fleet on its
    GPU and TP — and its latency model's label), one row per quantity; formatted with units."""
    rows: dict[str, list[str]] = {}

    def add(label: str, values: list[str]) -> None:
        rows[label] = values

    cols = [name for name, *_ in items]
    ps = [p for _, p, _, _ in items]
    das = [d for _, _, d, _ in items]
    fl = [d.own.best if d.own is not None else None for d in das]
    add("model", [p.model.name for p in ps])
    add("GPUs (TP)", [f"{p.deployment.num_gpus} × {p.gpu.name} (TP {p.deployment.tensor_parallel}"
                          f"{f' × PP {p.deployment.pipeline_parallel}' if p.deployment.pipeline_parallel > 1 else ''})"
                          for p in ps])
    add("weights / KV cache", [f"{p.deployment.weight_dtype} / {p.deployment.kv_cache_dtype}" for p in ps])
    add("context (prompt + output)", [f"{p.workload.context_tokens:,} ({p.workload.prompt_tokens:,} + "
                                      f"{p.workload.output_tokens:,}) tokens" for p in ps])
    add("targets", [f"TTFT ≤ {fmt_ms(p.workload.ttft_slo_s)}, TPOT ≤ {fmt_ms(p.workload.tpot_slo_s)}" for p in ps])
    add("memory", ["fits" if p.report.memory.fits else p.report.memory.explain() for p in ps])
    add("KV cache pool per GPU", [fmt_gib(max(p.report.memory.kv_pool_bytes, 0.0)) for p in ps])
    add("max concurrent users (deployment)",
        [fmt_int(p.report.max_concurrency * p.deployment.replicas) for p in ps])
    add("TTFT, one prompt", [fmt_ms(p.report.ttft.time_s) + _band(p.report, "ttft") for p in ps])
    add("SLO-feasible batch per replica", [fmt_int(p.report.batch_size) for p in ps])
    add("TPOT at that batch", [(fmt_ms(p.report.tpot_effective_s) + _band(p.report, "tpot"))
                               if p.report.batch_size else "—" for p in ps])
    add("$ / M output tokens (all-in)",
        [fmt_usd(float(p.report.cost.usd_per_million_output_tokens_all_in), 3) if p.report.batch_size else "—"
         for p in ps])
    add("demand", [d.demand.describe() for d in das])
    add("fleet for the demand", [f"{f.replicas:,} replicas = {f.num_gpus:,} GPUs" if f is not None
                                 else "none: no replica meets the targets" for f in fl])
    add("fleet $ / month", [fmt_usd(f.usd_per_month, 0) if f is not None else "—" for f in fl])
    add("fleet basis", [f"{f.confidence} ({f.band_basis})" if f is not None else "—" for f in fl])
    add("quality (approx.)", [f"{p.report.quality.score:.1f}" if math.isfinite(p.report.quality.score) else "—"
                              for p in ps])
    add("latency model", [label for *_, label in items])
    add("feasible", ["yes" if p.report.feasible else "no: " + "; ".join(p.report.reasons) for p in ps])
    return pd.DataFrame(rows, index=cols).T.reset_index(names="quantity")
