"""The least-squares driver of the staged latency fit (:func:`calibration.families.fit_stage`): well-posed and
deterministic, so that a refit of the committed raw records predicts what the committed profile predicts on
any machine.  (Issue #20: on another CPU a start of the dense stage stopped on ``xtol`` unconverged at a lower
cost and won, and data scaled by 1 ± 1e-12 sent that start to four different ends.)

1. A stage is solved in the scaled space z = (value − lo) / (hi − lo) ∈ [0, 1] (:class:`FitParam`), robust
   (soft-L1, ``F_SCALE``) on log(predicted / measured), with the roofs combined by a smooth max
   (:func:`smooth_roofs`, p = ``SEARCH_P``): the hard max(compute, memory) has a kink wherever a point
   changes roof, and a solver stalls on it.  Predictions keep the hard max.
2. Starts: the documented one (each FitParam's ``start``), then six seeded random ones (with two, on an Intel Xeon
   data scaled by 1 − 1e-12 sent the fp8 weight stage's documented start and both random ones to a minimum 0.3 %
   above the one the unscaled data's documented start found, and the refit moved by 0.005), each with central
   differences.  Only a start that converged counts: scipy status > 0 (not ``max_nfev``) and a first-order
   optimality (the projected gradient that scipy compares with ``gtol``) at most ``OPTIMALITY_RTOL`` ×
   max(cost, 1e-3).  A start that stopped on ``xtol`` on a slope is restarted from there (a fresh trust
   region, up to ``RESTARTS`` times) and discarded if it still has not converged (if no start converged, all
   are candidates).
3. The winner: the lowest cost; costs within ``TIE_RTOL`` of it are a tie, won by the earlier start.
4. Polish: from the winner, a sharper max (p = ``POLISH_P``) and tight tolerances.  The stage's objective
   (the profile's ``fit.objective``) is then the cost at the answer with the hard max.
5. Identification: a coefficient that ends on a bound (within ``BOUND_TOL`` of its range), or whose Jacobian
   column is ~0 (moving it over its whole range moves no log prediction by more than ``FLAT_TOL``, linearly),
   is not identified by the stage's points.  It is fixed — at that bound, or at its documented start — the
   rest are polished again, and the profile's ``fit.fixed`` names it with its value and why.

BLAS/OpenMP run on one thread while fitting (threadpoolctl) and :func:`toolchain` goes into the profile.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from planner.roofline import ROOF_P

F_SCALE = 0.05  # soft-L1: residuals (log ratios) beyond ~5 % count linearly, not quadratically
SEARCH_P = 64.0  # smooth max while searching: ≤ 1.1 % above the hard max where compute = memory
POLISH_P = 1024.0  # while polishing: ≤ 0.07 %
OPTIMALITY_RTOL = 1e-3
TIE_RTOL = 1e-6
BOUND_TOL = 1e-6
FLAT_TOL = 1e-6
RANDOM_STARTS = 6
RESTARTS = 3
SEED = 0
METHOD = (f"scipy least_squares (trf, soft_l1 f_scale={F_SCALE}) on log(predicted/measured) in [0,1]-scaled "
          f"coordinates; smooth roof max p={SEARCH_P:g}; the documented start + {RANDOM_STARTS} seeded random "
          f"starts, converged ones only (optimality <= {OPTIMALITY_RTOL:g} x cost), ties within {TIE_RTOL:g} to "
          f"the earlier start; polished at p={POLISH_P:g} with central differences; coefficients on a bound or "
          f"with a ~0 Jacobian column fixed (fit.fixed); BLAS on 1 thread")


class FitParam(NamedTuple):
    """One fitted coefficient of a stage's table (:mod:`calibration.families`).

    ``path``: a top-level profile field, or ``<section>.<field>`` into a nested coefficient object
    (``weight_formats.<fmt>.…``, ``moe.…``, ``allreduce.…``); ``lo``/``hi``: its bounds (the fit is solved in
    [lo, hi] scaled to [0, 1]); ``start``: the documented first start, and the value it is fixed at when the
    stage's points cannot move it (see :func:`solve`)."""

    path: str
    lo: float
    hi: float
    start: float


@dataclass
class Solution:
    """A stage's answer: each coefficient's value, the cost with the hard max, and what was fixed (path -> why)."""

    values: dict[str, float]
    cost: float
    optimality: float
    fixed: dict[str, str] = field(default_factory=dict)


@contextmanager
def smooth_roofs(p: float):
    """Within this block (this thread only) the roofline combines compute and memory by the smooth p-norm
    (:func:`planner.roofline.roof_max`) instead of the hard max."""
    token = ROOF_P.set(float(p))
    try:
        yield
    finally:
        ROOF_P.reset(token)


@contextmanager
def pinned_threads():
    """BLAS and OpenMP pools on one thread (threadpoolctl, when installed): a fit does not depend on how many
    cores the machine has."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency; an old env still fits
        yield
        return
    # scipy's own OpenBLAS loads with scipy.optimize: loaded inside the limits, it kept its default pool (the fit's
    # threads depended on whether anything had imported scipy before)
    import scipy.optimize  # noqa: F401

    with threadpool_limits(limits=1):
        yield


def toolchain() -> dict[str, str]:
    """What the numbers depend on: python, numpy, scipy, the BLAS (and the CPU kernel it picked), platform."""
    import scipy

    out = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
           "platform": f"{platform.system()} {platform.machine()}"}
    try:
        from threadpoolctl import threadpool_info

        def owner(path: str) -> str:  # the package that ships the library: numpy.libs/..., scipy.libs/...
            return next((p for p in ("numpy", "scipy") if f"{p}." in path or f"/{p}/" in path), "other")

        blas = sorted({f"{owner(str(i.get('filepath', '')))}: {i.get('internal_api')} {i.get('version')} "
                       f"({i.get('architecture', '?')} kernels)" for i in threadpool_info() if i.get("user_api") == "blas"})
        out["blas"] = "; ".join(blas) or "none loaded"
        out["threads"] = "1 while fitting (threadpoolctl)"
    except ImportError:  # pragma: no cover
        try:
            deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            out["blas"] = f"{deps.get('name')} {deps.get('version')}"
        except Exception:  # noqa: BLE001 - old numpy: the version alone
            out["blas"] = "unknown"
        out["threads"] = "not pinned (threadpoolctl missing)"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            out["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        out["cpu"] = platform.processor() or "unknown"
    return out


def _least_squares(f, z0, p: float, polish: bool):
    from scipy.optimize import least_squares

    tol = 1e-12 if polish else 1e-10
    with smooth_roofs(p):
        return least_squares(f, z0, bounds=(0.0, 1.0), loss="soft_l1", f_scale=F_SCALE, jac="3-point",
                             diff_step=1e-6, ftol=tol, xtol=tol, gtol=tol, max_nfev=100 * (len(z0) + 1))


def _converge(f, z0):
    """One start, restarted from where it stopped (a fresh trust region) while it has not converged and still
    gains: trf can stop on ``xtol`` near a bound with the projected gradient still large."""
    r = _least_squares(f, z0, SEARCH_P, polish=False)
    for _ in range(RESTARTS):
        if converged(r):
            break
        again = _least_squares(f, r.x, SEARCH_P, polish=False)
        if again.cost > r.cost or np.array_equal(again.x, r.x):
            break
        r = again
    return r


def converged(r) -> bool:
    """A start counts when scipy stopped on a tolerance (status > 0, not max_nfev) at a stationary point: its
    first-order optimality, or the largest gradient of the coordinates that are not on a bound (those are fixed
    there, step 5; a finite difference at 1e-9 from a bound can give the wrong sign), is small."""
    if r.status <= 0:
        return False
    free = (r.x > BOUND_TOL) & (r.x < 1.0 - BOUND_TOL)
    off_bounds = float(np.max(np.abs(np.asarray(r.grad)[free]), initial=0.0))
    return min(r.optimality, off_bounds) <= OPTIMALITY_RTOL * max(r.cost, 1e-3)


def pick(results: list) -> int:
    """Index of the winner: the lowest cost among the converged results (all of them if none converged);
    costs within TIE_RTOL of the lowest are a tie, won by the earliest."""
    pool = [i for i, r in enumerate(results) if converged(r)] or list(range(len(results)))
    best = min(results[i].cost for i in pool)
    return min(i for i in pool if results[i].cost <= best * (1.0 + TIE_RTOL) + 1e-300)


def solve(resid: Callable[[np.ndarray], np.ndarray], params: list, stage: str = "") -> Solution:
    """Fit ``params`` (FitParam, or bare (path, lo, hi, start) tuples) so that ``resid(values)`` (log ratios,
    values in real units in the table's order) is small — the procedure in the module docstring."""
    params = [FitParam(*p) for p in params]
    lo = np.array([p.lo for p in params], dtype=float)
    scale = np.array([p.hi - p.lo for p in params], dtype=float)
    z = np.clip((np.array([p.start for p in params]) - lo) / scale, 0.001, 0.999)
    free = list(range(len(params)))

    def f(zf: np.ndarray) -> np.ndarray:
        full = z.copy()
        full[free] = zf
        return resid(lo + full * scale)

    with pinned_threads():
        rng = np.random.default_rng(SEED)
        starts = [z.copy()] + [rng.uniform(0.05, 0.95, len(params)) for _ in range(RANDOM_STARTS)]
        results = [_converge(f, z0) for z0 in starts]
        z = results[pick(results)].x.copy()
        fixed: dict[str, str] = {}
        r = None
        for _ in range(len(params) + 1):
            r = _least_squares(f, z[free], POLISH_P, polish=True)
            z[free] = r.x
            newly = _unidentified(f, z, free, params, stage)
            if not newly:
                break
            for j, (value, why) in newly.items():
                z[j] = value
                fixed[params[j].path] = why
            free = [j for j in free if j not in newly]
            if not free:
                break
        z = np.clip(z, 0.0, 1.0)
        f_all = resid(lo + z * scale)
    rho = 2.0 * (np.sqrt(1.0 + (f_all / F_SCALE) ** 2) - 1.0) * F_SCALE**2  # scipy's soft_l1, times f_scale²
    return Solution({p.path: float(v) for p, v in zip(params, lo + z * scale)}, float(0.5 * rho.sum()),
                    float(r.optimality) if r is not None and free else 0.0, fixed)


def _unidentified(f, z: np.ndarray, free: list[int], params: list[FitParam], stage: str) -> dict[int, tuple]:
    """{index: (scaled value to fix it at, why)} of the free coefficients the stage's points do not identify."""
    out = {}
    for k, j in enumerate(free):
        p = params[j]
        h = 1e-4
        zp, zm = z[free].copy(), z[free].copy()
        zp[k], zm[k] = min(1.0, z[j] + h), max(0.0, z[j] - h)
        with smooth_roofs(POLISH_P):
            col = (f(zp) - f(zm)) / (zp[k] - zm[k])
        # a flat coefficient first: where no point depends on it the solver may drift anywhere, a bound included
        # (the MXFP4 stage's expert streaming ended at 1.2 on data scaled by 1 + 1e-12, at 0.8 on the data as it is)
        if np.max(np.abs(col)) < FLAT_TOL:
            start = float(np.clip((p.start - p.lo) / (p.hi - p.lo), 0.0, 1.0))
            out[j] = (start, f"{p.start:g} (its documented start): no {stage} fit point depends on it")
        elif z[j] <= BOUND_TOL or z[j] >= 1.0 - BOUND_TOL:
            at, side = (0.0, "lower") if z[j] <= BOUND_TOL else (1.0, "upper")
            out[j] = (at, f"{p.lo if at == 0.0 else p.hi:g} (its {side} bound): the {stage} fit ended there")
    return out
