"""The CLI's vocabulary: one flag name per concept, one default per concept, for every ``planner`` command.

README.md's "CLI vocabulary" table lists them.  A flag an older release spelled differently is refused with
its new name (:data:`RENAMED`, ``error: --context: renamed --prompt-tokens ...``, exit 2).

Exit codes (every command): 0 ok; 2 bad input, one line ``error: <flag>: <reason>``; 1 an infeasible plan
(``error: infeasible: <reason>``, after the plan itself is printed) or an internal error.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from planner.cli.common import OneLineErrorGroup, error_exit, finite
from planner.specs import Deployment

try:  # typer ≥ 0.20 vendors its own click; older versions use click itself
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

#: The workload every command assumes when none is given: a 4K-token prompt and 512 generated tokens.
DEFAULT_GPU_MEMORY_UTILIZATION = Deployment.default("gpu_memory_utilization")  # vLLM's, held by Deployment
DEFAULT_PROMPT_TOKENS = 4096
DEFAULT_OUTPUT_TOKENS = 512

#: Old flag -> its name now (the commands refuse the old one with this hint).
RENAMED = {
    "--context": "--prompt-tokens (prompt tokens per request; the request holds prompt + output tokens)",
    "--gpus": "--num-gpus for a GPU count, --gpu (repeatable or comma-separated) for GPU ids",
    "--concurrency": "--users (with --think-time-s; simulate keeps --concurrency for its closed loop)",
    "--ttft-p99-ms": "--ttft-slo-ms (its help says which percentile the command checks)",
    "--tpot-p99-ms": "--tpot-slo-ms (its help says which percentile the command checks)",
    "--target-rate": "--rate",
    "--weight-dtypes": "--weight-dtype (repeatable or comma-separated)",
    "--tensor-parallel": "--tp",
}


class PlannerGroup(OneLineErrorGroup):
    """:class:`planner.cli.common.OneLineErrorGroup` that names the new spelling of a renamed flag."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _cx.NoSuchOption as e:
            if e.option_name in RENAMED:
                raise _cx.UsageError(f"{e.option_name}: renamed {RENAMED[e.option_name]}", ctx=e.ctx) from None
            raise


# ----------------------------------------------------------------------------------- list values


def split_list(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated values as one list (``--gpu a,b --gpu c`` -> a, b, c); None if none."""
    if not values:
        return None
    out = [x.strip() for v in values for x in str(v).split(",") if x.strip()]
    return out or None


def _list_callback(flag: str):
    def check(values):
        if values and not split_list(values):
            raise typer.BadParameter("expected a value or a comma-separated list", param_hint=flag)
        return split_list(values)
    return check


def int_list(values: list[str] | None, flag: str) -> list[int] | None:
    """:func:`split_list` as integers ≥ 1 (exit 2 naming ``flag`` otherwise)."""
    items = split_list(values)
    if items is None:
        return None
    try:
        out = [int(x) for x in items]
    except ValueError:
        raise error_exit(flag, f"expected whole numbers, got '{','.join(items)}'") from None
    if any(x < 1 for x in out):
        raise error_exit(flag, f"must be >= 1, got {out}")
    return out


# ----------------------------------------------------------------------------------------- options

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model id (see `planner models`).")]
GpuOpt = Annotated[str, typer.Option("--gpu", "-g", help="GPU id (see `planner gpus`).")]
GpuChoiceOpt = Annotated[str | None, typer.Option("--gpu", "-g", help=(
    "GPU id (see `planner gpus`); left out: the cheapest configuration (GPU × TP) of the catalog that meets "
    "every target, by the one ranking (all-in $ per million output tokens, planner/ranking.py)."))]
GpuListOpt = Annotated[list[str] | None, typer.Option("--gpu", "-g", callback=_list_callback("--gpu"), help=(
    "GPU id; repeat it or give a comma-separated list (default: every GPU in the catalog)."))]
NumGpusOpt = Annotated[int | None, typer.Option("--num-gpus", min=1, help=(
    "GPUs in the deployment (default: the fleet the --rate or --users need, else one replica of TP × PP)."))]
TpOpt = Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel GPUs per replica.")]
TpListOpt = Annotated[list[str] | None, typer.Option("--tp", help=(
    "Tensor-parallel GPUs per replica; repeat it or give a comma-separated list."))]
PpOpt = Annotated[int, typer.Option("--pp", min=1, help="Pipeline-parallel stages per replica.")]
WeightDtypeOpt = Annotated[str | None, typer.Option("--weight-dtype", help="bf16, fp16, fp8, int8, int4, nf4, mxfp4 "
                                                                         "(default: the model's published dtype).")]
WeightDtypeListOpt = Annotated[list[str] | None, typer.Option(
    "--weight-dtype", callback=_list_callback("--weight-dtype"),
    help="Weight dtype(s): repeat it or give a comma-separated list.")]
KvDtypeOpt = Annotated[str, typer.Option("--kv-dtype", help="KV-cache dtype: bf16, fp16, fp8.")]
KvDtypeListOpt = Annotated[list[str] | None, typer.Option(
    "--kv-dtype", callback=_list_callback("--kv-dtype"),
    help="KV-cache dtype(s): repeat it or give a comma-separated list.")]
PromptTokensOpt = Annotated[int, typer.Option("--prompt-tokens", min=1, help=(
    "Prompt (input) tokens per request; a request holds prompt + output tokens of KV at its end."))]
PromptTokensListOpt = Annotated[list[int] | None, typer.Option("--prompt-tokens", min=1, help=(
    f"Prompt tokens per request; repeat it for several (default {DEFAULT_PROMPT_TOKENS:,})."))]
OutputTokensOpt = Annotated[int, typer.Option("--output-tokens", min=1, help="Generated tokens per request.")]
RateOpt = Annotated[float | None, typer.Option("--rate", callback=finite("--rate"), help=(
    "Request rate to serve, requests/s (Poisson arrivals): sizes the fleet."))]
UsersOpt = Annotated[int | None, typer.Option("--users", min=1, help=(
    "Concurrent users: each sends a request, waits for the answer, thinks --think-time-s, sends the next; "
    "rate = users / (think time + E2E), sizes the fleet. No replica holds more requests than there are users."))]
ThinkTimeOpt = Annotated[float, typer.Option("--think-time-s", callback=finite("--think-time-s", allow_zero=True),
                                             help="Seconds a user waits between an answer and their next request.")]
GpuMemoryUtilizationOpt = Annotated[float, typer.Option(
    "--gpu-memory-utilization", callback=finite("--gpu-memory-utilization"),
    help=f"Fraction of GPU memory vLLM may use (0-1]; vLLM's default {DEFAULT_GPU_MEMORY_UTILIZATION:g}.")]
MaxNumBatchedTokensOpt = Annotated[int | None, typer.Option("--max-num-batched-tokens", min=1, help=(
    "Chunked-prefill token budget per step (default: vLLM serve's for the GPU: 8192, or 2048 below 70 GiB "
    "and on A100)."))]
CudagraphCaptureOpt = Annotated[int | None, typer.Option("--max-cudagraph-capture-size", min=1, help=(
    "vLLM's largest CUDA graph, tokens per step (default vLLM's: 512, 1024 for gpt-oss). Steps above it launch "
    "every kernel from the CPU (60-90 ms a step for a MoE model on an H200's host); up to "
    "--max-num-batched-tokens every prompt-carrying step runs as piecewise graphs (boot captures each size)."))]
MaxNumSeqsOpt = Annotated[int | None, typer.Option("--max-num-seqs", min=1, help=(
    "Max sequences per step (default: vLLM serve's for the GPU: 1024, or 256)."))]
PrefixCachingOpt = Annotated[bool | None, typer.Option("--prefix-caching/--no-prefix-caching", help=(
    "vLLM automatic prefix caching (default: vLLM 0.26's for the model: on, off for a model with Mamba / "
    "linear-attention layers, where vLLM keeps it opt-in)."))]
ProfileOpt = Annotated[str, typer.Option("--profile", help=(
    "Latency model: 'auto' (the GPU's own committed calibration profile; a GPU without one borrows the newest "
    "profile's measured efficiencies on its own datasheet roofs, labelled 'transferred'; the ideal roofline "
    "only when no profile exists at all), 'none' (the ideal roofline) or a profile YAML path."))]
ProfileAutoNoneOpt = Annotated[str, typer.Option("--profile", help=(
    "Latency model per GPU: 'auto' (each GPU's own committed profile, else the newest profile transferred to "
    "its datasheet roofs, 'transferred') or 'none' (the ideal roofline)."))]
CsvOpt = Annotated[Path | None, typer.Option("--csv", help=(
    "Write the rows as CSV (raw SI numbers, unit-suffixed columns) to this path; '-' = stdout instead of the table."))]
NumRequestsOpt = Annotated[int, typer.Option("--num-requests", "-n", min=1, help="Requests to simulate.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed of arrivals and lengths.")]


def longest_request(reqs) -> int:
    """Tokens of the longest request (prompt + output): the max_model_len vLLM must be started with."""
    return int((reqs.prompt_tokens + reqs.output_tokens).max())


def _price_basis(value: str) -> str:
    from planner.prices import PRICE_BASES

    if value not in PRICE_BASES:
        raise typer.BadParameter(f"expected one of {', '.join(PRICE_BASES)}, got '{value}'", param_hint="--price-basis")
    return value


PriceBasisOpt = Annotated[str, typer.Option("--price-basis", callback=_price_basis, help=(
    "The one price basis every GPU is priced on: on-demand, reserved-1y, reserved-3y or spot; a GPU with no sourced "
    "price of that basis (hardware/*.yaml prices:) is left out, and said so."))]
PriceProviderOpt = Annotated[str | None, typer.Option("--price-provider", help=(
    "Price every GPU at this provider's price of the basis (e.g. Lambda, AWS), or 'cheapest' of any provider "
    "(default: the catalog's on-demand price; the cheapest entry for the other bases)."))]

#: Which percentile each command checks its latency targets at (the help of --ttft-slo-ms / --tpot-slo-ms).
STEADY = ("the steady-state value at the planned batch (no queueing: a new request joining the batch, the mean "
          "TPOT with other prompts' prefills mixed in)")
P99_SIMULATED = "the p99 over the simulated requests (Poisson arrivals, queueing included)"
P99_MEASURED = "the p99 of the requests measured on this GPU (vllm bench serve); the knee predicted at p99"


def slo_options(checked: str, *, required: bool = False) -> tuple:
    """The ``--ttft-slo-ms`` and ``--tpot-slo-ms`` option types of a command whose targets are checked against
    ``checked`` (:data:`STEADY`, :data:`P99_SIMULATED`, ...); ``required``: the command has no default for them."""
    kind = float if required else float | None
    targets = (("--ttft-slo-ms", "Time-to-first-token"), ("--tpot-slo-ms", "Time-per-output-token"))
    return tuple(Annotated[kind, typer.Option(flag, callback=finite(flag),
                                              help=f"{what} target, ms; checked against {checked}.")]
                 for flag, what in targets)


# ------------------------------------------------------------------------------------------- output


def writes_stdout(path: Path | str | None) -> bool:
    """Does writing ``path`` write standard output?  ``-``, ``/dev/stdout``, ``/dev/fd/1``, or the very file
    stdout is (``sweep --csv out.csv --json > out.csv``): CSV and JSON (or a table) would interleave there."""
    if path is None:
        return False
    text = str(path)
    if text in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        return True
    try:
        return os.path.samestat(os.stat(text), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # no such file yet, or no real stdout
        return False


def write_csv_out(data: pd.DataFrame | str, path: Path, flag: str = "--csv") -> None:
    """A frame (through :func:`planner.report.write_csv`: raw numbers, provenance columns) or CSV text to
    ``path``; ``-`` writes it on stdout.  A path that cannot be written is bad input (exit 2 naming ``flag``)."""
    from planner.io.files import write_text
    from planner.report import csv_bytes, write_csv

    if writes_stdout(path):
        typer.echo(data if isinstance(data, str) else csv_bytes(data).decode("utf-8"), nl=False)
        return
    try:
        if isinstance(data, str):
            write_text(path, data, flag)
        else:
            write_csv(data, path)
    except OSError as err:
        raise error_exit(flag, f"cannot write '{path}': {err.strerror or err}") from None


def make_dir(path: Path, flag: str = "--out") -> Path:
    """``path`` as a directory (made with its parents); one that cannot be made is bad input (exit 2)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise error_exit(flag, f"cannot create '{path}': {err.strerror or err}") from None
    return Path(path)


def infeasible_exit(reasons: list[str]) -> typer.Exit:
    """Print ``error: infeasible: <first reason> (and N more)`` on stderr; the Exit (code 1) to raise."""
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return error_exit("infeasible", (reasons[0] if reasons else "no configuration meets the targets") + more, code=1)
