"""The measured vLLM boots the planner reads (planner.boots.MEASURED_BOOTS: the capacity plan's scale-up lead time,
the plan's cold-start note).

Every ``serve_bench.jsonl`` under calibration/data that holds a boot record (``calibration/serve_bench.py``: container
start to ``/health`` answering, dummy weights, vLLM 0.26.0 on lent H200s and H100s) gives one: its model, GPU and
tensor parallel (:func:`calibration.serving_points.recorded_deployment`), ``boot_s``, ``init_engine_s`` (the engine's
log line "init engine (profile, create kv cache, warmup model) took … s"), the date of its campaign folder and its
path. The table is written to ``planner/data/measured_boots_vllm-0.26.0.json`` (the planner reads no calibration data
at run time), and ``tests/test_capacity_autoscale.py`` checks it is exactly what this collects from the committed files.

    python -m calibration.boots            # print the table; exit 1 if the committed one differs
    python -m calibration.boots --write    # write it
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from calibration.serving_points import recorded_deployment, served_engines
from planner.boots import BOOTS_TABLE

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "calibration" / "data"


def collect(data: Path = DATA) -> list[dict]:
    """The boot of every serve_bench.jsonl under ``data`` that has one, in path order."""
    out = []
    for folder, deploy, boot in served_engines(data):
        f, dep = folder / "serve_bench.jsonl", recorded_deployment(deploy, boot["model"])  # the engine it started
        date = re.search(r"(\d{4}-\d{2}-\d{2})", str(f.relative_to(data)))
        out.append({"model_id": boot["model"], "gpu_id": dep.gpu_id, "tensor_parallel": dep.tensor_parallel,
                    "boot_s": round(float(boot["boot_s"]), 1), "init_engine_s": round(float(boot["init_engine_s"]), 2),
                    "date": date.group(1) if date else "", "source": str(f.relative_to(ROOT)),
                    # an engine with more CUDA graphs than vLLM's default captures longer: said, and kept apart
                    **({"max_cudagraph_capture_tokens": dep.max_cudagraph_capture_tokens}
                       if dep.max_cudagraph_capture_tokens else {})})
    return out


def table(data: Path = DATA) -> dict:
    return {"vllm_version": "0.26.0", "weights": "dummy (--load-format dummy): the checkpoint's read is added apart",
            "collected_by": "python -m calibration.boots --write", "boots": collect(data)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    t = table()
    text = json.dumps(t, indent=1) + "\n"
    if "--write" in args:
        BOOTS_TABLE.write_text(text)
        print(f"wrote {len(t['boots'])} boots to {BOOTS_TABLE.relative_to(ROOT)}")
        return 0
    for b in t["boots"]:
        print(f"{b['model_id']:22s} TP {b['tensor_parallel']}  boot {b['boot_s']:6.1f} s  "
              f"init {b['init_engine_s']:6.2f} s  {b['source']}")
    same = BOOTS_TABLE.exists() and BOOTS_TABLE.read_text() == text
    print(f"{len(t['boots'])} boots; {BOOTS_TABLE.relative_to(ROOT)} "
          f"{'matches' if same else 'DIFFERS (run with --write)'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
