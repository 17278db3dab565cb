"""Writes planner/data/vllm_fused_moe_configs_0.26.0.json: the tuned Triton fused-MoE configurations vLLM 0.26.0
ships (vllm/model_executor/layers/fused_moe/configs/*.json of the wheel in the bundle of ../shared/device), kept as
vLLM reads them: per file, per token count M, the kernel configuration (``get_moe_configs`` drops
``triton_version``; ``try_get_optimal_moe_config`` takes the key nearest M).  The planner reads which configuration
a step of M tokens runs with, so which steps share a compiled kernel (planner.compile_keys).

    cat vllm026_site.tar.xz.part0* | xz -dc | tar -x -C /tmp/cfg --wildcards '*/fused_moe/configs/*'
    python -m calibration.moe_configs /tmp/cfg/vllm/model_executor/layers/fused_moe/configs
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from planner.fused_moe_configs import FUSED_MOE_CONFIGS

ABOUT = ("The tuned Triton fused-MoE kernel configurations vLLM 0.26.0 ships: vllm/model_executor/layers/fused_moe/"
         "configs/*.json of the vllm-0.26.0 wheel in the bundle built by ../shared/device/build_vllm_bundle.sh, "
         "written by `python -m calibration.moe_configs DIR` on {day}. A name is E=<experts>,N=<expert FFN width per "
         "GPU>,device_name=<torch.cuda.get_device_name with '_' for ' '>[,dtype=<fp8_w8a8|int8_w8a16|...>]"
         "[,block_shape=[..]].json; without a file for its shape, GPU and dtype vLLM runs the fused MoE with its "
         "default configuration (fused_moe.get_default_config). 'files' maps each name to {{token count M: index "
         "into 'configs'}} ('triton_version' dropped, as get_moe_configs does); a step of M tokens runs the config "
         "of the key nearest M, the smaller on a tie. planner.kernel_families.fused_moe_tuned and "
         "planner.compile_keys read it.")


def collect(folder: Path) -> dict:
    configs: list[dict] = []
    index: dict[str, int] = {}
    files = {}
    for path in sorted(folder.glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        table.pop("triton_version", None)
        by_m = {}
        for m, cfg in sorted(table.items(), key=lambda kv: int(kv[0])):
            text = json.dumps(cfg, sort_keys=True)
            if text not in index:
                index[text] = len(configs)
                configs.append(json.loads(text))
            by_m[str(int(m))] = index[text]
        files[path.name] = by_m
    return {"_about": ABOUT.format(day=date.today().isoformat()), "vllm_version": "0.26.0", "count": len(files),
            "files": files, "configs": configs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.moe_configs", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="vLLM's fused_moe/configs folder")
    ap.add_argument("--out", type=Path, default=FUSED_MOE_CONFIGS)
    ns = ap.parse_args(argv)
    if not ns.folder.is_dir():
        print(f"error: folder: {ns.folder} is not a folder", file=sys.stderr)
        return 2
    data = collect(ns.folder)
    ns.out.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{data['count']} files, {len(data['configs'])} distinct configurations -> {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
