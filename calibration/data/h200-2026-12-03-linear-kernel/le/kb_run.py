import sys
from pathlib import Path
from calibration.records import append_record, read_records
from calibration.run import environment, _stream
from calibration.kernel_benches import kernel_benches
from calibration.linear_kernel_fit import fit_linear_kernel
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
raw = out / "h200-sxm-vllm0.26.0-2026-12-03.jsonl"
append_record(raw, environment("h200-sxm"))
ran = kernel_benches(raw, out, "h200-sxm", [], [{"model": "llama-3.1-8b", "weights": "fp8", "kv": "auto", "mixed": False, "role": "fit"}], _stream)
print("ran", ran)
law = fit_linear_kernel(read_records(raw), "h200-sxm", str(raw))
d = law.dtypes["fp8"]
print("knots", [(int(t), round(f, 3)) for t, f in zip(d.tokens, d.factor)])
print("residuals", {k: (v.n, round(v.median_abs_error_pct, 2), round(v.p90_abs_error_pct, 2)) for k, v in law.residuals.items()})
