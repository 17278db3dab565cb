"""Real load tests in, predicted vs measured out: the result files of ``vllm bench serve`` (``--save-result
--save-detailed``), GuideLLM's JSON report, and multi-turn records (``calibration/serve_bench.py --agentic``)
are read into one :class:`LoadTest` (per request: arrival, lengths, measured TTFT/TPOT/E2E, and for
multi-turn traffic the turn it continues and the think time before it), replayed through the simulator
with the same arrivals and lengths, and compared per percentile.

Formats (keys as the tools write them):

* ``vllm bench serve`` JSON: ``start_times`` (perf_counter s, when each request was sent), ``input_lens``,
  ``output_lens``, ``ttfts`` (s), ``itls`` (list per request of inter-token gaps, s, one per streamed
  chunk), ``max_concurrency`` (a closed loop when set), ``request_rate``.  E2E = TTFT + Σ ITL; TPOT =
  Σ ITL / (output − 1).
* GuideLLM (0.8, ``--output kind=json``): ``benchmarks[i].requests.successful[j]`` with
  ``request_start_time`` (epoch s), ``time_to_first_token_ms``, ``inter_token_latency_ms`` (= TPOT),
  ``request_latency`` (s), ``prompt_tokens``, ``output_tokens``; one load test per benchmark (rate).
* multi-turn JSON lines: ``{"type": "request", "index", "parent", "think_s", "arrival_offset_s",
  "prompt_tokens" (the whole history), "output_tokens", "shared_prefix_tokens", "prefix_group", "ttft_s",
  "tpot_s", "e2e_s"}``; a turn with ``parent`` ≥ 0 is replayed ``think_s`` after the simulated finish of
  its parent, and its prompt starts with the parent's prompt and output (what vLLM's prefix cache reuses).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from planner.io.files import read_json
from planner.serving.config import EngineConfig
from planner.serving.engine import simulate
from planner.serving.result import MeasuredVsPredicted, in_system_quarters, over_capacity, percentiles
from planner.serving.step_cost import StepCost
from planner.specs import Deployment
from planner.units import MS
from planner.serving.workloads import MAX_REQUESTS, make_requests

NAN = float("nan")
PERCENTILE_KEYS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "e2e_p50_s",
                   "e2e_p99_s", "output_tokens_per_s")


@dataclass(frozen=True)
class LoadTest:
    """One measured run: per-request arrays (seconds, tokens)."""

    name: str
    tool: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    closed_loop: int = 0
    parent: np.ndarray | None = None
    think_s: np.ndarray | None = None
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    def measured(self) -> dict:
        return stats(self.arrival_s, self.ttft_s, self.tpot_s, self.e2e_s, self.output_tokens)


def stats(arrival, ttft, tpot, e2e, output) -> dict:
    """Percentiles and throughput of one run (completed requests; makespan from first arrival to last finish)."""
    arrival, ttft, tpot, e2e, output = (np.asarray(x, dtype=float) for x in (arrival, ttft, tpot, e2e, output))
    ok = np.isfinite(e2e)
    dur = float((arrival[ok] + e2e[ok]).max() - arrival.min()) if ok.any() else 0.0
    t, p, e = percentiles(ttft[ok]), percentiles(tpot[ok]), percentiles(e2e[ok])
    return {"ttft_p50_s": t["p50"], "ttft_p90_s": t["p90"], "ttft_p99_s": t["p99"], "tpot_p50_s": p["p50"],
            "tpot_p90_s": p["p90"], "tpot_p99_s": p["p99"], "e2e_p50_s": e["p50"], "e2e_p99_s": e["p99"],
            "output_tokens_per_s": float(output[ok].sum() / dur) if dur > 0 else None,
            "requests_per_s": float(ok.sum() / dur) if dur > 0 else None, "completed": int(ok.sum()),
            **in_system_quarters(arrival, e2e)}


def _load_json(path: Path):
    """A load-test JSON file, read as :mod:`planner.io.files` reads every input (regular, bounded, UTF-8)."""
    return read_json(path)


def _float(x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise TypeError(type(x).__name__)
    return float(x)


def _floats(d: dict, key: str, where: str, n: int | None = None) -> np.ndarray:
    v = d.get(key)
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise ValueError(f"{where}: '{key}' must be a list{'' if n is None else f' of {n} numbers'}")
    try:
        a = np.array([NAN if x is None else _float(x) for x in v], dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: '{key}' holds a non-number") from None
    return a


def _whole_tokens(a: np.ndarray, what: str, where: str, lo: int = 1) -> np.ndarray:
    """Token counts as int64: finite whole numbers in [lo, 1e9] (ValueError naming the file and request)."""
    a = np.asarray(a, dtype=float)
    bad = ~(np.isfinite(a) & (a == np.round(a)) & (a >= lo) & (a <= 1e9))
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"{where}: request {k}: {what} must be a whole number >= {lo}, got {a[k]!r}")
    return a.astype(np.int64)


def _checked(test: LoadTest, where: str) -> LoadTest:
    """A load test the simulator can replay: at most 1,000,000 requests, finite arrivals within 1e9 s, whole
    token counts (a failed request with no output cannot be replayed: the error names it)."""
    n = test.arrival_s.size
    if n == 0:
        raise ValueError(f"{where}: no requests")
    if n > MAX_REQUESTS:
        raise ValueError(f"{where}: {n:,} requests, more than the {MAX_REQUESTS:,} one replay simulates")
    a = np.asarray(test.arrival_s, dtype=float)
    fin = np.isfinite(a) | (test.parent >= 0 if test.parent is not None else False)
    if not fin.all() or np.nanmax(np.abs(a)) > 1e9:
        raise ValueError(f"{where}: arrival times must be finite and within 1e9 s")
    test = replace(test, prompt_tokens=_whole_tokens(test.prompt_tokens, "prompt tokens", where),
                   output_tokens=_whole_tokens(test.output_tokens, "output tokens", where))
    try:
        _requests(test)  # what the replay will build: its checks (parents, prefixes, arrivals) name the file here
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return test


def read_vllm_bench(path: str | Path) -> LoadTest:
    """A ``vllm bench serve --save-result --save-detailed`` JSON file."""
    path = Path(path)
    d = _load_json(path)
    if not isinstance(d, dict) or "start_times" not in d:
        raise ValueError(f"{path.name}: not a vllm bench serve result with per-request timings "
                         f"(run it with --save-result --save-detailed)")
    start = _floats(d, "start_times", path.name)
    n = start.size
    inp, out, ttft = (_floats(d, k, path.name, n) for k in ("input_lens", "output_lens", "ttfts"))
    itls = d.get("itls")
    if not isinstance(itls, list) or len(itls) != n:
        raise ValueError(f"{path.name}: 'itls' must be a list of {n} lists")
    try:
        itl_sum = np.array([sum(_float(y) for y in x) if isinstance(x, list) and x else NAN for x in itls], dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{path.name}: 'itls' holds a non-number") from None
    if not np.isfinite(start).all():
        raise ValueError(f"{path.name}: 'start_times' must hold finite numbers")
    # A failed request (an 'errors' entry, or no token back) is left out of the replay and counted: one the
    # server refused (HTTP 400) never reached the engine; one that broke mid-stream did, which the count shows.
    errors = d.get("errors")
    errs = np.array([bool(e) for e in errors], dtype=bool) if isinstance(errors, list) and len(errors) == n \
        else np.zeros(n, dtype=bool)
    good = ~errs & np.isfinite(ttft) & (out >= 1)
    if not good.any():
        raise ValueError(f"{path.name}: none of its {n} requests succeeded (see its 'errors'); nothing to replay")
    start, inp, out, ttft, itl_sum = (a[good] for a in (start, inp, out, ttft, itl_sum))
    e2e = ttft + np.nan_to_num(itl_sum)
    tpot = np.where(out > 1, itl_sum / np.maximum(out - 1, 1), NAN)
    conc = d.get("max_concurrency")
    conc = int(conc) if isinstance(conc, int) and not isinstance(conc, bool) and 0 < conc <= MAX_REQUESTS else 0
    info = {"request_rate": d.get("request_rate"), "burstiness": d.get("burstiness"), "max_concurrency": conc,
            "completed": d.get("completed"), "failed": d.get("failed"), "failed_left_out": int((~good).sum())}
    return _checked(LoadTest(path.stem, "vllm bench serve", start - start.min(), inp, out, ttft, tpot, e2e,
                             closed_loop=conc, info=info), path.name)


def read_guidellm(path: str | Path) -> list[LoadTest]:
    """GuideLLM's JSON report: one load test per benchmark (rate) with its successful requests."""
    path = Path(path)
    d = _load_json(path)
    benches = d.get("benchmarks") if isinstance(d, dict) else None
    if not isinstance(benches, list):
        raise ValueError(f"{path.name}: not a GuideLLM report (no 'benchmarks' list)")
    out = []
    for i, b in enumerate(benches):
        reqs = ((b.get("requests") or {}).get("successful") or []) if isinstance(b, dict) else []
        if not reqs:
            continue
        where = f"{path.name} benchmarks[{i}]"
        try:
            start = np.array([_float(r["request_start_time"]) for r in reqs])
            ttft = np.array([_float(r["time_to_first_token_ms"]) * MS for r in reqs])
            tpot = np.array([NAN if r.get("inter_token_latency_ms") is None
                             else _float(r["inter_token_latency_ms"]) * MS for r in reqs])
            e2e = np.array([_float(r["request_latency"]) for r in reqs])
            inp = np.array([_float(r["prompt_tokens"]) for r in reqs])
            outp = np.array([_float(r["output_tokens"]) for r in reqs])
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as err:
            raise ValueError(f"{where}: request record lacks a field or holds a non-number ({str(err)[:60]})") from None
        if not np.isfinite(start).all():
            raise ValueError(f"{where}: 'request_start_time' must hold finite numbers")
        config = b.get("config") if isinstance(b.get("config"), dict) else {}
        strategy = config.get("strategy") if isinstance(config.get("strategy"), dict) else {}
        out.append(_checked(LoadTest(f"{path.stem}[{i}]", "guidellm", start - start.min(), inp, outp, ttft, tpot, e2e,
                                     info={"strategy": strategy.get("type_"), "rate": strategy.get("rate")}), where))
    if not out:
        raise ValueError(f"{path.name}: the GuideLLM report holds no successful requests")
    return out


def read_multiturn(path: str | Path, run: str | None = None) -> LoadTest:
    """Multi-turn request records (module docstring); ``run`` picks one run's records."""
    from planner.io.jsonl import read_jsonl

    path = Path(path)
    rows = [r for r in read_jsonl(path) if r.get("type") == "request" and "parent" in r
            and (run is None or r.get("run") == run)]
    if not rows:
        raise ValueError(f"{path.name}: no multi-turn request records (with 'parent')")
    for r in rows:
        for key in ("index", "parent"):
            if not isinstance(r.get(key), int) or isinstance(r.get(key), bool):
                raise ValueError(f"{path.name} line {r.line}: '{key}' must be a whole number, "
                                 f"got {str(r.get(key))[:40]!r}")
    rows.sort(key=lambda r: r["index"])
    index = {r["index"]: k for k, r in enumerate(rows)}
    parent = np.array([index.get(r["parent"], -1) if r["parent"] >= 0 else -1 for r in rows])
    if np.any(parent >= np.arange(len(rows))):
        raise ValueError(f"{path.name}: a turn's parent must come before it (by 'index')")

    def col(key, default=NAN):
        try:
            return np.array([default if r.get(key) is None else _float(r[key]) for r in rows], dtype=float)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{path.name}: '{key}' holds a non-number") from None

    think, group, pre = col("think_s", 0.0), col("prefix_group", -1), col("shared_prefix_tokens", 0)
    if not (np.isfinite(think).all() and (think >= 0).all() and (think <= 1e9).all()):
        raise ValueError(f"{path.name}: 'think_s' must hold finite numbers >= 0")
    return _checked(LoadTest(run or path.stem, "multi-turn", col("arrival_offset_s"), col("prompt_tokens"),
                             col("output_tokens"), col("ttft_s"), col("tpot_s"), col("e2e_s"), parent=parent,
                             think_s=think, prefix_group=_whole_tokens(group, "prefix_group", path.name, lo=-1),
                             prefix_tokens=_whole_tokens(pre, "shared_prefix_tokens", path.name, lo=0),
                             info={"run": run}), path.name)


def read_load_test(path: str | Path) -> list[LoadTest]:
    """Any of the three formats, recognised by content; every error is a ValueError naming the file."""
    path = Path(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return [read_multiturn(path)]
    d = _load_json(path)
    if isinstance(d, dict) and "benchmarks" in d:
        return read_guidellm(path)
    return [read_vllm_bench(path)]


# ------------------------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class LoadTestComparison(MeasuredVsPredicted):
    name: str
    tool: str
    num_requests: int
    measured: dict
    predicted: dict
    #: the compile keys the simulated engine had at the end (planner.compile_keys): a later run on the same engine
    #: starts with them
    compiled_step_keys: frozenset = frozenset()

    def as_dict(self) -> dict:
        return {"name": self.name, "tool": self.tool, "num_requests": self.num_requests, "measured": self.measured,
                "predicted": self.predicted, "error_pct": {k: self.error_pct(k) for k in PERCENTILE_KEYS},
                "over_capacity": {"measured": over_capacity(self.measured), "predicted": over_capacity(self.predicted)}}


def _requests(test: LoadTest):
    """The test's requests as the simulator takes them (multi-turn turns released by their parents)."""
    n = test.arrival_s.size
    parent = test.parent if test.parent is not None else np.full(n, -1)
    arrival = np.where(parent >= 0, NAN, test.arrival_s) if test.parent is not None else test.arrival_s
    group = test.prefix_group if test.prefix_group is not None else np.full(n, -1)
    prefix = test.prefix_tokens if test.prefix_tokens is not None else np.zeros(n, dtype=int)
    think = test.think_s if test.think_s is not None else np.zeros(n)
    return make_requests(test.prompt_tokens, test.output_tokens, None if test.closed_loop else arrival,
                         prefix_group=np.where(prefix > 0, group, -1), prefix_tokens=prefix, parent=parent,
                         think_s=think, closed_loop=test.closed_loop, name=test.name)


def replay_load_test(test: LoadTest, cost: StepCost, config: EngineConfig) -> LoadTestComparison:
    """The same requests (arrivals or closed loop; multi-turn turns released by their parents) through the
    simulator; measured vs predicted percentiles and throughput."""
    n = test.arrival_s.size
    reqs = _requests(test)
    res = simulate(reqs, cost, config)
    predicted = stats(res.arrival_s, res.ttft_s, res.tpot_s, res.e2e_s, res.output_tokens)
    predicted["prefix_cache_hit_rate"] = res.prefix_cache_hit_rate
    predicted["preemptions"] = res.num_preemptions
    predicted["compile_stalls"] = res.num_compile_stalls
    return LoadTestComparison(test.name, test.tool, n, test.measured(), predicted, res.compiled_step_keys)


def engine_hints(path: str | Path) -> dict:
    """What a ``serve_bench.jsonl`` beside a load-test file says about the engine that served it: its KV pool
    (vLLM's block count less the null block), scheduler limits, prefix caching and the served model's name
    (``served_model``, from ``--served-model-name``); {} if there is none."""
    from planner.io.jsonl import read_jsonl

    rec_path = Path(path).parent / "serve_bench.jsonl"
    if not rec_path.is_file():
        return {}
    recs = read_jsonl(rec_path)
    out: dict = {}

    def whole(v, what) -> int:
        try:
            x = int(v) if not isinstance(v, (bool, float)) or float(v).is_integer() else None
        except (TypeError, ValueError, OverflowError):
            x = None
        if x is None or not 1 <= x <= 10**9:
            raise ValueError(f"{rec_path.name}: {what} must be a whole number between 1 and 1e9, got {str(v)[:40]!r}")
        return x

    boot = next((r for r in recs if r.get("type") == "boot"), None)
    if boot and boot.get("num_gpu_blocks"):
        size = whole(boot.get("block_size", Deployment.default("block_size_tokens")), "block_size")
        blocks = whole(boot["num_gpu_blocks"], "num_gpu_blocks")
        if blocks > 1:
            out["kv_capacity_tokens"] = (blocks - 1) * size
    deploy = next((r for r in recs if r.get("type") == "deploy"), None)
    argv = deploy.get("argv", []) if deploy else []
    argv = [str(a) for a in argv] if isinstance(argv, list) else []
    for flag, key in (("--max-num-seqs", "max_num_seqs"), ("--max-num-batched-tokens", "max_num_batched_tokens"),
                      ("--max-cudagraph-capture-size", "max_cudagraph_capture_tokens")):
        if flag in argv:
            i = argv.index(flag) + 1
            out[key] = whole(argv[i] if i < len(argv) else None, flag)
    if argv:
        out["prefix_caching"] = "--no-enable-prefix-caching" not in argv
    if "--served-model-name" in argv and argv.index("--served-model-name") + 1 < len(argv):
        out["served_model"] = argv[argv.index("--served-model-name") + 1][:200]
    bench = next((r for r in recs if r.get("type") == "bench" and r.get("file") == Path(path).name), None)
    spec = bench.get("spec") if bench else None
    if isinstance(spec, dict) and spec.get("prefix"):  # vllm bench serve --random-prefix-len: one prefix for all
        out["shared_prefix_tokens"] = whole(spec["prefix"], "the run's prefix")
    return out


def with_shared_prefix(test: LoadTest, prefix_tokens: int | None) -> LoadTest:
    """``test`` with every request starting with the same ``prefix_tokens`` tokens (one prefix group), as
    ``vllm bench serve --random-prefix-len`` sends them; unchanged when it already says its prefixes or when
    ``prefix_tokens`` is 0/None."""
    if not prefix_tokens or test.prefix_tokens is not None or test.parent is not None:
        return test
    n = test.arrival_s.size
    return replace(test, prefix_group=np.zeros(n, dtype=np.int64),
                   prefix_tokens=np.minimum(int(prefix_tokens), test.prompt_tokens).astype(np.int64))
