"""The cheapest configuration for a workload, when the user names no GPU: ``planner size`` / ``planner report``
without ``--gpu`` and :mod:`planner.plan_report`.

It asks the same question as the dashboard's Cost view and ``planner sweep --users``: every catalog GPU
(or those given) × tensor parallel × the given dtypes, at every batch from 1 to the users
(:func:`planner.ranking.batch_grid`), ranked by :func:`planner.ranking.rank`; the first row that meets
every target is the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from planner.profile import CalibrationProfile
from planner.ranking import batch_grid, cheapest, describe, meets_targets
from planner.specs import GpuSpec, ModelSpec, Workload
from planner.sweep import sweep
from planner.units import MS

__all__ = ["Choice", "choose_configuration", "question_command"]


@dataclass(frozen=True)
class Choice:
    """The ranked candidates and the winner (``row`` None when no candidate meets every target)."""

    row: pd.Series | None
    frame: pd.DataFrame  # every candidate row, in ranking order
    users: int | None

    @property
    def meeting(self) -> int:
        """Candidate rows that meet every target."""
        return int(meets_targets(self.frame, self.users).sum())

    @property
    def configurations(self) -> int:
        """Distinct configurations (GPU × TP × dtypes) considered."""
        cols = ["gpu_id", "tensor_parallel", "weight_dtype", "kv_cache_dtype"]
        return int(self.frame[cols].astype(str).drop_duplicates().shape[0]) if len(self.frame) else 0

    def sentence(self) -> str:
        """How the configuration was chosen, in one line."""
        if self.row is None:
            return (f"none of {self.configurations:,} configurations (GPU × TP × dtypes, every batch up to "
                    f"{'the users' if self.users else '1,024'}) meets every target")
        return (f"chosen: {describe(self.row)} — the cheapest of {self.configurations:,} configurations "
                f"({self.meeting:,} rows meet every target), ranked by all-in $ per million output tokens "
                f"(all GPU time, prefill included, over the generated tokens)")


def choose_configuration(model: ModelSpec, workload: Workload, *, gpus: Sequence[GpuSpec] | None = None,
                         weight_dtypes: Sequence[str] | None = None, kv_dtypes: Sequence[str] | None = None,
                         tensor_parallels: Sequence[int] | None = None,
                         profile_for: Callable[[str], CalibrationProfile] | None = None,
                         deployment_defaults: dict | None = None) -> Choice:
    """The cheapest configuration meeting every target of ``workload`` (``workload.concurrency``: the users,
    a replica's batch cap).  Arguments as :func:`planner.sweep.sweep`'s; the batch grid is every size to the
    users (to 1,024 without users)."""
    users = workload.concurrency
    df = sweep(model, workload, gpus=gpus, weight_dtypes=weight_dtypes, kv_dtypes=kv_dtypes,
               tensor_parallels=tensor_parallels, contexts=[workload.prompt_tokens], batch_sizes=batch_grid(users),
               profile_for=profile_for, deployment_defaults=deployment_defaults)
    return Choice(cheapest(df, users), df, users)


def question_command(command: str, model_id: str, *, prompt_tokens: int, output_tokens: int,
                     ttft_slo_s: float | None, tpot_slo_s: float | None, users: int | None, weight_dtype: str,
                     kv_dtype: str, calibrated: bool = True) -> str:
    """The ``planner sweep`` / ``size`` / ``report`` call that asks this question (every GPU × TP at these dtypes,
    every batch up to the users): its rank 1, or the configuration it chooses, is the dashboard Cost view's
    cheapest (``tests/test_consistency.py``).  E.g. for the dashboard to show beside the Cost view."""
    if command not in ("sweep", "size", "report"):
        raise ValueError(f"command: expected sweep, size or report, got '{command}'")
    parts = ["planner", command, "-m", model_id, "--prompt-tokens", str(prompt_tokens), "--output-tokens",
             str(output_tokens)]
    for flag, v in (("--ttft-slo-ms", ttft_slo_s), ("--tpot-slo-ms", tpot_slo_s)):
        if v is not None:
            parts += [flag, f"{v / MS:g}"]
    if users is not None:
        parts += ["--users", str(users)]
    parts += ["--weight-dtype", weight_dtype, "--kv-dtype", kv_dtype, "--profile", "auto" if calibrated else "none"]
    return " ".join(parts)
