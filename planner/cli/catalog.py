"""``planner models``, ``planner gpus`` and ``planner import-hf``: the catalog and how a model enters it.

Command functions only; :mod:`planner.cli.app` registers them on its app."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, cli_errors, emit_json, error_exit, finite, table
from planner.units import BILLION, GB, TB_PER_S, TFLOPS, fmt_gb, fmt_gib, fmt_int, fmt_usd

# ------------------------------------------------------------------------------------------ models


@cli_errors
def models_cmd(json_out: JsonOpt = False) -> None:
    """List the model catalog (models/*.yaml)."""
    from planner.io import catalog
    from planner.memory import kv_bytes_per_token
    from planner.specs import count_params

    rows = []
    for m in catalog.models().values():
        p = count_params(m)
        rows.append({
            "id": m.id,
            "name": m.name,
            "total_params": p.total,
            "active_params": p.active,
            "num_layers": m.num_layers,
            "attention_kind": m.attention.kind,
            "kv_bytes_per_token_bf16": kv_bytes_per_token(m, "bf16"),
            "max_context_tokens": m.max_context_tokens,
            "moe": m.is_moe,
            "quality_benchmark": m.quality.benchmark if m.quality else None,
            "quality_score": m.quality.score if m.quality else None,
        })
    if json_out:
        emit_json(rows)
        return
    table(
        ["id", "params", "active", "layers", "attn", "KV B/token (bf16)", "max ctx", "quality"],
        [[r["id"], f"{r['total_params'] / BILLION:,.1f}B", f"{r['active_params'] / BILLION:,.1f}B", r["num_layers"],
          r["attention_kind"], fmt_int(r["kv_bytes_per_token_bf16"]), fmt_int(r["max_context_tokens"]),
          f"{r['quality_score']:.1f} {r['quality_benchmark']}" if r["quality_score"] is not None else "—"]
         for r in rows],
    )


# -------------------------------------------------------------------------------------------- gpus


@cli_errors
def gpus_cmd(json_out: JsonOpt = False) -> None:
    """List the GPU catalog (hardware/*.yaml) with prices and their sources."""
    from planner.io import catalog

    rows = []
    for g in catalog.gpus().values():
        rows.append({
            "id": g.id,
            "name": g.name,
            "memory_bytes": g.memory_bytes,
            "memory_marketed": g.memory_marketed,
            "hbm_bandwidth_bytes_per_s": g.hbm_bandwidth_bytes_per_s,
            "peak_flops_per_s": dict(g.peak_flops_per_s),
            "interconnect": g.interconnect,
            "interconnect_bandwidth_bytes_per_s": g.interconnect_bandwidth_bytes_per_s,
            "max_gpus_per_node": g.max_gpus_per_node,
            "price_usd_per_hour": g.price_usd_per_hour,
            "price_source": g.price_source.url,
            "price_date": g.price_source.date,
        })
    if json_out:
        emit_json(rows)
        return
    table(
        ["id", "memory (GB | GiB)", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "link GB/s", "per node", "$/GPU-h",
         "price date"],
        [[r["id"], f"{fmt_gb(r['memory_bytes'])} | {fmt_gib(r['memory_bytes'])}",
          f"{r['hbm_bandwidth_bytes_per_s'] / TB_PER_S:.2f}",
          f"{r['peak_flops_per_s'].get('bf16', r['peak_flops_per_s'].get('fp16', 0)) / TFLOPS:,.0f}",
          f"{r['peak_flops_per_s']['fp8'] / TFLOPS:,.0f}" if "fp8" in r["peak_flops_per_s"] else "—",
          f"{r['interconnect_bandwidth_bytes_per_s'] / GB:,.0f}", r["max_gpus_per_node"],
          fmt_usd(r["price_usd_per_hour"]), r["price_date"]] for r in rows],
    )


# --------------------------------------------------------------------------------------- import-hf


@cli_errors
def import_hf_cmd(
    config: Annotated[Path, typer.Argument(help="Path to a Hugging Face config.json (no network access).")],
    model_id: Annotated[str | None, typer.Option("--id", help="Catalog id (default: from the config's name).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Display name.")] = None,
    params: Annotated[float | None, typer.Option("--params", callback=finite("--params"),
                                                 help="Published total parameter count (e.g. 7.248e9).")] = None,
    hf_repo: Annotated[str | None, typer.Option("--hf-repo", help="Hub repo id, e.g. mistralai/Mistral-7B-v0.3.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the YAML here (default: print it).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Turn a Hugging Face config.json into a models/<id>.yaml entry."""
    from planner.io.files import MAX_CONFIG_BYTES, check_writable, read_json
    from planner.io.hf_import import hf_config_to_model_dict, model_dict_to_yaml
    from planner.quoting import control_char_problem

    for flag, value in (("--id", model_id), ("--name", name), ("--hf-repo", hf_repo)):
        if value is not None and control_char_problem(value):
            raise error_exit(flag, control_char_problem(value))
    if out is not None:
        check_writable(out, "--out")
    cfg = read_json(config, MAX_CONFIG_BYTES)  # a regular UTF-8 file of at most 16 MiB; errors name it
    if model_id is None:
        raw = cfg.get("_name_or_path", "") if isinstance(cfg, dict) else ""
        model_id = re.sub(r"[^a-z0-9.\-]+", "-", str(raw).rstrip("/").split("/")[-1].lower()).strip("-.")
        if not model_id:
            raise error_exit("--id", "cannot derive an id from config.json (no _name_or_path); pass --id")
    d = hf_config_to_model_dict(cfg, model_id, name, params, hf_repo=hf_repo)
    text = model_dict_to_yaml(d)
    if out is not None:
        try:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise error_exit("--out", f"cannot write '{out}': {err.strerror or err}") from None
    if json_out:
        emit_json(d)
    elif out is not None:
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)
