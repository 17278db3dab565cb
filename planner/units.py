"""Units and display formatters.

This is the only module that spells out 1e9 or 2**30.  Everything inside the planner is in SI base
units (bytes, seconds, FLOP/s, bytes/s, USD); the constants below are for reading catalogs and for
display only.  GB (1e9 bytes, what GPU vendors print) and GiB (2**30 bytes, what vLLM and
nvidia-smi print) are never mixed silently: each formatter says which one it shows.
"""

from __future__ import annotations

import math
from contextvars import ContextVar

import numpy as np

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30

TFLOPS = 1e12  # FLOP/s
PFLOPS = 1e15
GB_PER_S = 1e9  # bytes/s
GBIT_PER_S = 1e9 / 8  # bytes/s in one gigabit per second (network line rates)
TB_PER_S = 1e12

MS = 1e-3  # seconds
US = 1e-6

MILLION = 1e6
BILLION = 1e9  # counts (parameters), not bytes
SECONDS_PER_HOUR = 3600.0


def cdiv(a: int, b: int) -> int:
    """Ceil-division of integers, ⌈a / b⌉ (vLLM's ``cdiv``): the blocks ``a`` tokens take in blocks of ``b``."""
    return -(a // -b)


class ScalarMath:
    """numpy's ``maximum``/``minimum``/``where`` for Python floats, so one formula can run on numpy arrays
    (``xp=np``) and on floats (``xp=SCALAR``, where a numpy ufunc on a scalar would cost ~1 µs)."""

    maximum = staticmethod(max)
    minimum = staticmethod(min)

    @staticmethod
    def where(cond, a, b):
        return a if cond else b


SCALAR = ScalarMath()


#: p of the smooth roof max that the calibration fit sets (calibration.solve.smooth_roofs); 0: the hard max.
ROOF_P: ContextVar[float] = ContextVar("roof_p", default=0.0)


def roof_max(a, b):
    """max(compute, memory) of a kernel family; while the calibration fit sets ROOF_P = p, the p-norm
    (a^p + b^p)^(1/p) instead: smooth (no kink where a point changes roof), scale-free, ≤ 2^(1/p) × max (at
    a = b), -> max as p -> ∞.  E.g. p = 64: a = 1, b = 0.5 -> 1 + 8.5e-22; a = b = 1 -> 2^(1/64) = 1.0109."""
    p = ROOF_P.get()
    if not p:
        return np.maximum(a, b)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    m = np.maximum(a, b)
    unit = np.where(m > 0, m, 1.0)
    return m * (np.clip(a / unit, 0.0, 1.0) ** p + np.clip(b / unit, 0.0, 1.0) ** p) ** (1.0 / p)


def _finite(x: float) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def positive_number(name: str, x, *, allow_zero: bool = False) -> float:
    """``x`` as a float when it is a finite real number > 0 (≥ 0 with ``allow_zero``), else ValueError naming
    ``name``: ``rate: must be a finite number > 0, got 0``.  The one check of the arrival rate and the demand
    curve's numbers (the CLI's flags have :func:`planner.cli.common.finite`, which reads the same)."""
    real = isinstance(x, (int, float, np.integer, np.floating))
    if not (real and math.isfinite(x) and (x > 0 or (allow_zero and x == 0))):
        raise ValueError(f"{name}: must be a finite number {'≥' if allow_zero else '>'} 0, "
                         f"got {format(x, 'g') if real else repr(x)}")
    return float(x)


def fmt_gb(num_bytes: float, digits: int = 1) -> str:
    """Bytes as decimal gigabytes, e.g. '14.5 GB' (1 GB = 1e9 bytes)."""
    return f"{num_bytes / GB:,.{digits}f} GB" if _finite(num_bytes) else "—"


def fmt_gib(num_bytes: float, digits: int = 1) -> str:
    """Bytes as binary gibibytes, e.g. '13.5 GiB' (1 GiB = 2**30 bytes)."""
    return f"{num_bytes / GiB:,.{digits}f} GiB" if _finite(num_bytes) else "—"


def fmt_bytes(num_bytes: float) -> str:
    """A human size in decimal units (B, kB, MB, GB, TB)."""
    if not _finite(num_bytes):
        return "—"
    for unit, scale in (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)):
        if abs(num_bytes) >= scale:
            return f"{num_bytes / scale:,.1f} {unit}"
    return f"{num_bytes:,.0f} B"


def fmt_ms(seconds: float, digits: int = 1) -> str:
    """Seconds shown as milliseconds, e.g. '38.2 ms'."""
    return f"{seconds / MS:,.{digits}f} ms" if _finite(seconds) else "—"


def fmt_tflops(flops_per_s: float, digits: int = 0) -> str:
    return f"{flops_per_s / TFLOPS:,.{digits}f} TFLOP/s" if _finite(flops_per_s) else "—"


def fmt_bandwidth(bytes_per_s: float, digits: int = 2) -> str:
    return f"{bytes_per_s / TB_PER_S:,.{digits}f} TB/s" if _finite(bytes_per_s) else "—"


def fmt_usd(usd: float, digits: int = 2) -> str:
    return f"${usd:,.{digits}f}" if _finite(usd) else "—"


def fmt_int(x: float) -> str:
    return f"{int(x):,}" if _finite(x) else "—"


def fmt_layout(tensor_parallel: int, pipeline_parallel: int = 1, *, always_pp: bool = False) -> str:
    """A replica's parallel layout: 'TP 4', 'TP 8 × PP 2' (PP shown when > 1, or always with ``always_pp``)."""
    pp = f" × PP {pipeline_parallel}" if always_pp or pipeline_parallel > 1 else ""
    return f"TP {tensor_parallel}{pp}"
