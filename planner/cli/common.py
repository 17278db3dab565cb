"""What every ``planner`` command module shares: the one-line errors, option callbacks and types, spec
validation that names the flag, JSON and table output.

Exit codes: 0 ok, 2 bad input (one line ``error: <field>: <reason>`` on stderr), 1 a plan that cannot start
where the command says so (``deploy``, ``simulate``: one line ``error: <flag>: <reason>``) or an internal error
(``internal error: ...``).  Every numeric option is bounded here, by name, for every command
(:func:`check_option_bounds`), so no command meets an infinite, astronomically large or negative seed.
Imports no command module and not :mod:`planner.cli.app` (which imports the command modules).
"""

from __future__ import annotations

import datetime
import errno
import functools
import json
import math
import os
import re
import stat
import sys
import warnings
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

from planner.serving.workloads import MAX_BURSTINESS_CV, MAX_REQUESTS

try:  # typer ≥ 0.20 vendors its own click; older versions use click itself
    from typer._click import exceptions as _cx
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import exceptions as _cx
    from click import get_current_context

# ------------------------------------------------------------------------------------ error helpers


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space."""
    return re.sub(r"\s+", " ", str(text)).strip()


def error_exit(field: str | None, reason: str, code: int = 2) -> typer.Exit:
    """Print ``error: <field>: <reason>`` (one line) on stderr; return the Exit to raise."""
    msg = f"{field}: {reason}" if field else reason
    typer.echo(f"error: {one_line(msg)}", err=True)
    return typer.Exit(code)


#: Integer options: |value| at most this (a token count, a batch, a TP size beyond it is a typo, not a plan).
MAX_INT_OPTION = 10**9
#: Float options: finite and |value| at most this.
MAX_FLOAT_OPTION = 1e15
#: Repeatable options: at most this many values.
MAX_LIST_VALUES = 64
#: Tighter (lo, hi) bounds by parameter name, inclusive; the error names the flag.
OPTION_BOUNDS: dict[str, tuple[float, float]] = {
    "seed": (0, 2**32 - 1),
    "num_requests": (1, MAX_REQUESTS),
    "burstiness_cv": (0.01, MAX_BURSTINESS_CV),
    "spec_acceptance": (0.0, 1.0),
    "spec_draft_cost": (0.0, 10.0),
    "price_usd_per_hour": (0.01, 1000.0),
    "gpu_memory_utilization": (1e-3, 1.0),
}


def _fmt_bound(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def check_option_bounds(params, values: dict) -> None:
    """Refuse a numeric option outside its bounds with ``error: <flag>: <reason>`` (exit 2): every float
    finite and within ±:data:`MAX_FLOAT_OPTION`, every int within ±:data:`MAX_INT_OPTION`, the names of
    :data:`OPTION_BOUNDS` within theirs, at most :data:`MAX_LIST_VALUES` values of a repeatable option.
    ``params``: the click parameters of the command (their names and flags); ``values``: name -> value."""
    for p in params:
        v = values.get(p.name)
        flag = (p.opts[0] if getattr(p, "opts", None) else p.name) or p.name
        items = list(v) if isinstance(v, (list, tuple)) else [v]
        if isinstance(v, (list, tuple)) and len(items) > MAX_LIST_VALUES:
            raise error_exit(flag, f"at most {MAX_LIST_VALUES} values, got {len(items):,}")
        for x in items:
            if isinstance(x, os.PathLike):
                _check_path_option(flag, os.fspath(x))
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                continue
            lo, hi = OPTION_BOUNDS.get(p.name, (None, None))
            if isinstance(x, float) and not math.isfinite(x):
                raise error_exit(flag, f"must be a finite number, got {x}")
            limit = MAX_INT_OPTION if isinstance(x, int) else MAX_FLOAT_OPTION
            if lo is None and abs(x) > limit:
                raise error_exit(flag, f"{x:,} is out of range (at most {_fmt_bound(limit)} in size)")
            if lo is not None and not lo <= x <= hi:
                raise error_exit(flag, f"must be between {_fmt_bound(lo)} and {_fmt_bound(hi)}, got {x:,}")


def _check_path_option(flag: str, path: str) -> None:
    """A path no command can use without hanging or failing obscurely: a NUL byte, or a named pipe / socket
    outside /dev (opening a FIFO with no reader or writer waits forever; /dev/stdout, /dev/fd/N are explicit)."""
    if "\x00" in path:
        raise error_exit(flag, "a file name cannot hold a NUL byte")
    if path.startswith("/dev/"):
        return
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise error_exit(flag, f"{path} is a named pipe or socket (it could wait forever); give a regular file")


#: Write errors that carry no file name: with every file written through planner.io.files.write_text (which
#: names its file), one of these is stdout's (``planner size > /dev/full``).
_STDOUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def cli_errors(fn):
    """Decorator for command functions: the options are bounded first (:func:`check_option_bounds`);
    SpecError / ValueError / pydantic ValidationError / an unreadable or unwritable file become the exit-2
    one-liner; any other exception becomes ``internal error: ...`` with exit 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from planner.io.catalog import format_validation_error

        ctx = get_current_context(silent=True)
        if ctx is not None and ctx.command is not None:
            check_option_bounds(ctx.command.params, kwargs)
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, _cx.ClickException):
            raise
        except BrokenPipeError:  # `planner models | head -1`: the reader has what it wanted
            _quiet_broken_pipe()
            raise typer.Exit(0) from None
        except ValidationError as err:
            raise error_exit(None, format_validation_error(err)) from None
        except ValueError as err:  # SpecError is a ValueError
            raise error_exit(None, str(err)) from None
        except FileNotFoundError as err:
            raise error_exit(err.filename, "no such file") from None
        except OSError as err:  # a directory given as a file, no permission, disk full
            if err.filename is None and err.errno in _STDOUT_ERRNOS:  # every file writer names its file
                _quiet_broken_pipe()  # (planner/io/files.write_text): this was stdout; stop writing to it
                raise error_exit("standard output", err.strerror or type(err).__name__) from None
            raise error_exit(err.filename, err.strerror or type(err).__name__) from None
        except RecursionError:
            raise error_exit(None, "input nested too deeply") from None
        except MemoryError:
            raise error_exit(None, "out of memory: the inputs ask for more than this machine has") from None
        except Exception as err:  # noqa: BLE001 - the CLI's last line of defence
            typer.echo(f"internal error: {type(err).__name__}: {one_line(err)}", err=True)
            raise typer.Exit(1) from None

    return wrapper


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``planner models | head -1``): stop quietly, as `cat` would.  Later
    writes (the interpreter's final flush) go to /dev/null instead of raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (CliRunner): nothing to redirect
        pass


class OneLineErrorGroup(TyperGroup):
    """Click usage errors (unknown flag, bad value, missing option) as one line naming the flag."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            with warnings.catch_warnings():  # numpy RuntimeWarnings are not the CLI's one-line errors
                warnings.simplefilter("ignore")
                rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                  standalone_mode=False, **extra)
        except BrokenPipeError:
            if not standalone_mode:
                raise
            _quiet_broken_pipe()
            sys.exit(0)
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
    "max_cudagraph_capture_tokens": "--max-cudagraph-capture-size",
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


def flag_of(field: str, flags: dict[str, str] | None = None) -> str:
    """The flag that sets a spec field: ``flags`` first, then :data:`FLAG_OF_FIELD`, else ``--field-name``."""
    if field.startswith("-"):
        return field
    return (flags or {}).get(field) or FLAG_OF_FIELD.get(field) or "--" + field.replace("_", "-")


def refuse_unless_starts(check, flags: dict[str, str] | None = None) -> None:
    """A deployment :func:`planner.startup.startup_check` says would not start: exit 1 with one line
    ``error: infeasible: <flag>: <reason>`` (the one prefix every impossible plan gets; every problem, each
    with its flag) -- the plan is impossible, not the input malformed (that is exit 2)."""
    if check.ok:
        return
    first = check.problems[0]
    rest = "; ".join(f"{flag_of(p.field, flags)}: {p.reason}" for p in check.problems[1:])
    text = first.reason + (f"; also {rest}" if rest else "")
    raise error_exit("infeasible", f"{flag_of(first.field, flags)}: " + text
                     + ("" if "start" in text else " (vLLM would not start this)"), code=1)


def today() -> str:
    """Today's date, ISO 8601 (the date of a command-line override's source)."""
    return datetime.date.today().isoformat()


# --------------------------------------------------------------------------------- shared options

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]
# Every other shared option (one name per concept) is in planner.cli.options.


# ------------------------------------------------------------------------------------------ output


def emit_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout; NaN/inf become null (:func:`json_safe`), never invalid JSON."""
    from planner.io.jsonl import json_safe

    typer.echo(json.dumps(json_safe(obj), indent=2, allow_nan=False, default=str))


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
