"""Where a served request waits between its client's send and the engine step that schedules it (pure: no torch/vLLM).

At ~3,600 streamed tokens a second the committed traces put requests 150-280 ms (p90) between their client's send and
the step that scheduled them while the engine's own queue stayed empty, and a second OpenAI server process took only
10-18 ms off that (calibration/data/README.md, 'Requests held back before the engine').  Those traces time the two
ends only.  From 2026-12-05 on the step trace (calibration/steptrace/sitecustomize.py) also stamps each request on its
way in, every record with the ``arrival_time`` the server gives it (``arr``), so a request's path splits into:

* ``server_s``: the client's send to the server's ``InputProcessor.process_inputs`` returning (HTTP, the handler,
  rendering and tokenising the prompt; the send matched first-come first-served to the calls' starts, as
  :func:`calibration.trace_points.client_lags` matches sends to steps);
* ``transport_s``: to the engine core's input thread starting ``preprocess_add_request`` (ZMQ; the thread waiting for
  the GIL behind the busy loop's launch);
* ``preprocess_s``: that call (the Request built, its block hashes);
* ``queued_s``: to the busy loop taking it from the input queue (``Scheduler.add_request``, between two steps);
* ``schedule_s``: to the start of the next ``schedule`` call (the step that takes it).

All are ``perf_counter`` differences on one machine (system-wide on Linux).  Campaign:
calibration/campaigns/h200-intake.sh.

    for s in intake_segments(folder): print(s.run, s.pct_ms(90))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.serving_points import trace_files
from planner.io.jsonl import read_jsonl

SEGMENTS = ("server_s", "transport_s", "preprocess_s", "queued_s", "schedule_s")


@dataclass(frozen=True)
class IntakeSegments:
    """One ``bench`` run's requests on their way in (module docstring), each list in the requests' send order."""

    run: str
    server_s: list[float]
    transport_s: list[float]
    preprocess_s: list[float]
    queued_s: list[float]
    schedule_s: list[float]

    def pct_ms(self, q: float) -> dict[str, float]:
        """Each segment's ``q``-th percentile, ms."""
        return {k: 1e3 * float(np.percentile(getattr(self, k), q)) if getattr(self, k) else float("nan")
                for k in SEGMENTS}


def intake_records(folder: Path) -> dict[str, list[dict]]:
    """The ``i``, ``p`` and ``a`` records (those with an ``arr``) and the ``s`` (schedule) records of a traced
    folder's ``steps.*.jsonl`` files (every process), by kind."""
    out: dict[str, list[dict]] = {"i": [], "p": [], "a": [], "s": []}
    for r in (r for recs in trace_files(folder) for r in recs):
        if r.get("k") in out and (r["k"] == "s" or r.get("arr") is not None):
            out[r["k"]].append(r)
    return out


def intake_segments(folder: Path) -> list[IntakeSegments]:
    """:class:`IntakeSegments` of every ``bench`` run of a folder traced with the intake records; [] for a trace
    without them (before 2026-12-05).  A request is followed by its ``arr``; one missing a record is left out."""
    folder = Path(folder)
    recs = intake_records(folder)
    if not recs["i"]:
        return []
    by_arr = {k: {r["arr"]: r for r in recs[k]} for k in ("p", "a")}
    starts = np.sort(np.asarray([s["t0"] for s in recs["s"]], dtype=float))
    out = []
    for bench in (r for r in read_jsonl(folder / "serve_bench.jsonl") if r.get("type") == "bench"):
        if not bench.get("file") or "wall_start" not in bench:
            continue
        sent = np.sort(np.asarray(json.loads((folder / bench["file"]).read_text(encoding="utf-8"))["start_times"],
                                  dtype=float))
        calls = sorted((r for r in recs["i"] if bench["wall_start"] <= r["wall"] <= bench["wall_end"]),
                       key=lambda r: r["t0"])
        seg: dict[str, list[float]] = {k: [] for k in SEGMENTS}
        for t_sent, i in zip(sent, calls):
            p, a = by_arr["p"].get(i["arr"]), by_arr["a"].get(i["arr"])
            if p is None or a is None:
                continue
            k = int(np.searchsorted(starts, a["t"]))
            if k == len(starts):
                continue
            for name, value in zip(SEGMENTS, (i["t1"] - t_sent, p["t0"] - i["t1"], p["t1"] - p["t0"], a["t"] - p["t1"],
                                              starts[k] - a["t"])):
                seg[name].append(float(value))
        out.append(IntakeSegments(Path(bench["file"]).stem, **seg))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.intake FOLDER...``: each run's segments, p50 / p90 / p99 ms."""
    import sys

    for folder in (argv if argv is not None else sys.argv[1:]):
        if not (Path(folder) / "serve_bench.jsonl").is_file():
            print(f"error: {folder}: not a served run's folder (no serve_bench.jsonl)", file=sys.stderr)
            return 2
        runs = intake_segments(Path(folder))
        if not runs:
            print(f"{folder}: no intake records (traced before 2026-12-05?)")
        for s in runs:
            q = [s.pct_ms(p) for p in (50, 90, 99)]
            print(f"{folder} {s.run} ({len(s.server_s)} requests): " + ", ".join(
                f"{k[:-2]} {q[0][k]:.1f}/{q[1][k]:.1f}/{q[2][k]:.1f}" for k in SEGMENTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
