"""What every ``planner`` command module shares: the one-line errors, option callbacks and types, spec
validation that names the flag, JSON and table output.

Exit codes: 0 ok, 2 bad input (one line ``error: <field>: <reason>`` on stderr), 1 internal error.
Imports no command module and not :mod:`planner.cli` (which imports the command modules).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

try:  # typer ≥ 0.20 vendors its own click; older versions use click itself
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

# ------------------------------------------------------------------------------------ error helpers


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space."""
    return re.sub(r"\s+", " ", str(text)).strip()


def error_exit(field: str | None, reason: str, code: int = 2) -> typer.Exit:
    """Print ``error: <field>: <reason>`` (one line) on stderr; return the Exit to raise."""
    msg = f"{field}: {reason}" if field else reason
    typer.echo(f"error: {one_line(msg)}", err=True)
    return typer.Exit(code)


def cli_errors(fn):
    """Decorator for command functions: SpecError / ValueError / pydantic ValidationError become the
    exit-2 one-liner; any other exception becomes ``internal error: ...`` with exit 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from planner.catalog import format_validation_error

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, _cx.ClickException):
            raise
        except ValidationError as err:
            raise error_exit(None, format_validation_error(err)) from None
        except ValueError as err:  # SpecError is a ValueError
            raise error_exit(None, str(err)) from None
        except FileNotFoundError as err:
            raise error_exit(err.filename, "no such file") from None
        except Exception as err:  # noqa: BLE001 - the CLI's last line of defence
            typer.echo(f"internal error: {type(err).__name__}: {one_line(err)}", err=True)
            raise typer.Exit(1) from None

    return wrapper


class OneLineErrorGroup(TyperGroup):
    """Click usage errors (unknown flag, bad value, missing option) as one line naming the flag."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except _cx.UsageError as e:
            if not standalone_mode:
                raise
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `planner`: show the help
                e.show()
                sys.exit(0)
            field = None
            param = getattr(e, "param", None)
            if param is not None:
                field = (param.opts[0] if getattr(param, "opts", None) else param.name) or None
            elif isinstance(e, _cx.NoSuchOption):
                field = e.option_name
                e.message = "no such option" + (
                    f" (did you mean {', '.join(e.possibilities)}?)" if getattr(e, "possibilities", None) else "")
            reason = e.message if (field and e.message) else e.format_message()
            if isinstance(e, _cx.MissingParameter):
                reason = "missing (required)"
            typer.echo(f"error: {one_line(f'{field}: {reason}' if field else reason)}", err=True)
            sys.exit(2)
        except _cx.ClickException as e:
            if not standalone_mode:
                raise
            typer.echo(f"error: {one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


# --------------------------------------------------------------------------------- option helpers


def finite(name: str, positive: bool = True, allow_zero: bool = False):
    """A typer callback rejecting nan/inf (and ≤ 0 unless allowed) with the flag's name."""

    def check(value):
        if value is None:
            return value
        if not math.isfinite(value) or (positive and (value < 0 or (value == 0 and not allow_zero))):
            raise typer.BadParameter(f"must be a finite number {'≥' if allow_zero else '>'} 0, got {value}",
                                     param_hint=name)
        return value

    return check


#: Spec field -> the flag that sets it, so a validation error names what the user typed.
FLAG_OF_FIELD = {
    "prompt_tokens": "--prompt-tokens",
    "output_tokens": "--output-tokens",
    "ttft_slo_s": "--ttft-slo-ms",
    "tpot_slo_s": "--tpot-slo-ms",
    "request_rate_per_s": "--rate",
    "concurrency": "--users",
    "num_gpus": "--num-gpus",
    "tensor_parallel": "--tp",
    "pipeline_parallel": "--pp",
    "weight_dtype": "--weight-dtype",
    "kv_cache_dtype": "--kv-dtype",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
}


def build(make, data: dict, root_flag: str):
    """Validate CLI values as a spec, ``make(**data)`` (a spec class, or a constructor such as
    ``Deployment.for_gpu`` with its GPU bound); errors name the flag (``--tp: ...``)."""
    try:
        return make(**data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = [str(x) for x in e["loc"]]
        field = FLAG_OF_FIELD.get(loc[0], loc[0]) if loc else root_flag
        msg = e["msg"].removeprefix("Value error, ")
        raise error_exit(field, msg) from None


def today() -> str:
    """Today's date, ISO 8601 (the date of a command-line override's source)."""
    return datetime.date.today().isoformat()


# --------------------------------------------------------------------------------- shared options

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]
# Every other shared option (one name per concept) is in planner.cli_options.


# ------------------------------------------------------------------------------------------ output


def emit_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (NaN/inf refused: the caller maps them to null)."""
    typer.echo(json.dumps(obj, indent=2, allow_nan=False, default=str))


def table(headers: list[str], rows: list[list]) -> None:
    """A plain-text table on stdout: first column left-aligned, the others right-aligned."""
    cells = [[str(x) for x in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        return "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    typer.echo(line(headers))
    typer.echo("  ".join("-" * w for w in widths))
    for r in cells:
        typer.echo(line(r))
