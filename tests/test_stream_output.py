"""The OpenAI server's output handling per running request (issue #21), from the recorded traces of vllm serve
(calibration.trace_points.first_token_deliveries / stream_output_slope; calibration/data/README.md, 'First tokens
wait behind the other streams').  A first token reaches its client after the engine core took its step's outputs
(the start of the step two on: vLLM 0.26's async scheduling) plus the server's streaming of every running request's
token: on Llama-3.1-8B (served-steps/q) 2.7 ms at 10 running, 4.0 at 26, 8.0 at 78; one server at 183 running 23.7 ms,
two servers 16.2 ms.  The line through the profile's 13 floor-trace runs: 110 us per running request + 1.8 ms."""

from __future__ import annotations

import pytest

from calibration.refit import DATA, STREAM_OUTPUT_FIT
from calibration.trace_points import first_token_deliveries, stream_output_slope
from planner.io import catalog


def by_run(folder: str) -> dict:
    return {d.run: d for d in first_token_deliveries(DATA / folder)}


def test_first_tokens_wait_longer_the_more_requests_are_running():
    q = by_run("h200-2026-12-02-served-steps/q/serve-llama-steps")
    sizes = {r: len(d.delivery_s) for r, d in q.items()}
    assert sizes == {"chat10": 200, "chat20": 400, "chat28": 560, "prefix20": 300}
    for run, running, ms in (("chat10", 10.0, 2.676), ("chat20", 26.0, 3.990), ("chat28", 77.5, 8.027),
                             ("prefix20", 9.0, 2.843)):
        assert q[run].median_running == running
        assert 1e3 * q[run].median_delivery_s == pytest.approx(ms, abs=1e-3)
    # (8.027 - 2.676) ms over 67.5 more running: 79 us each on this host
    assert (q["chat28"].median_delivery_s - q["chat10"].median_delivery_s) / 67.5 == pytest.approx(79.3e-6, abs=0.1e-6)


def test_a_second_openai_server_process_takes_a_third_off_the_delivery():
    one = by_run("h200-2026-12-02-api-servers/x1/serve-llama-api1")
    two = by_run("h200-2026-12-02-api-servers/x2/serve-llama-api2")
    for run, a, b in (("chat24", 10.375, 6.780), ("chat36", 23.668, 16.219), ("chat40", 33.983, 22.186)):
        assert 1e3 * one[run].median_delivery_s == pytest.approx(a, abs=1e-3)
        assert 1e3 * two[run].median_delivery_s == pytest.approx(b, abs=1e-3)
        assert 0.6 < b / a < 0.7


def test_the_profiles_slope_is_the_line_through_its_floor_traces():
    slope, intercept, runs = stream_output_slope([DATA / f for f in STREAM_OUTPUT_FIT])
    assert runs == 13
    assert slope == pytest.approx(110.13e-6, abs=0.01e-6) and intercept == pytest.approx(1.792e-3, abs=1e-6)
    assert catalog.profile_for("h200-sxm", "0.26.0").stream_output_overhead_s == pytest.approx(slope, rel=1e-9)


def test_a_line_needs_enough_runs_at_two_loads():
    one_engine = [DATA / "h200-2026-12-02-calibrate-serve/llama/serve-llama-3.1-8b-trace"]
    with pytest.raises(ValueError, match="needs 2 traced runs at different loads, got 1"):
        stream_output_slope(one_engine)
    with pytest.raises(ValueError, match="needs 3 traced runs"):
        stream_output_slope([*one_engine, DATA / "h200-2026-12-02-calibrate-serve/qwen3/serve-qwen3-30b-a3b-trace"],
                            min_runs=3)


def test_a_serve_job_keeps_the_profiles_slope_when_its_host_traced_too_few_runs():
    """A calibrate +serve host traces one chat run per engine (two here): not a line, so the profile's slope stays
    and the log says why."""
    from calibration.serve_floor import traced_engines, with_traces

    cs = DATA / "h200-2026-12-02-calibrate-serve"
    committed = catalog.profile_for("h200-sxm", "0.26.0")
    logs: list[str] = []
    host = with_traces(committed, traced_engines(cs / "llama") + traced_engines(cs / "qwen3"), log=logs.append)
    assert host.stream_output_overhead_s == committed.stream_output_overhead_s
    assert any("output handling: the profile's kept" in line and "got 2" in line for line in logs)


def test_a_serve_job_fits_its_hosts_slope_from_three_runs():
    """served-steps q (Llama, four runs) and s (Moonlight, three): the host's own line."""
    from calibration.serve_floor import with_traces

    base = DATA / "h200-2026-12-02-served-steps"
    committed = catalog.profile_for("h200-sxm", "0.26.0")
    logs: list[str] = []
    traces = [(base / "q/serve-llama-steps", "llama-3.1-8b"),
              (base / "s/serve-moonlight-16b-a3b-steps", "moonlight-16b-a3b")]
    host = with_traces(committed, traces, log=logs.append)
    slope, _, runs = stream_output_slope([f for f, _ in traces])
    assert runs == 7 and host.stream_output_overhead_s == pytest.approx(slope, rel=1e-12)
    assert 60e-6 < slope < 120e-6
    assert any(f"{slope * 1e6:.0f} us per running request (7 runs)" in line for line in logs)


def test_the_line_holds_on_a_host_it_was_not_fitted_on():
    """calibration/data/h200-2026-12-04-stream-check (COMMAND.md): the served-steps commands again on another host.
    Each run's median delivery against 1.79 ms + 110 us x its median running: within 2.6 ms on all ten runs (Llama
    chat28, 70 running: 7.0 ms measured, 9.5 on the line)."""
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    _, intercept, _ = stream_output_slope([DATA / f for f in STREAM_OUTPUT_FIT])
    base = DATA / "h200-2026-12-04-stream-check"
    got = {}
    for folder in ("q/serve-llama-steps", "r/serve-qwen3-30b-a3b-steps", "s/serve-moonlight-16b-a3b-steps"):
        for d in first_token_deliveries(base / folder):
            got[f"{folder[0]}/{d.run}"] = (d.median_running, round(1e3 * d.median_delivery_s, 1))
    assert got == {"q/chat10": (10.0, 3.0), "q/chat20": (25.0, 3.7), "q/chat28": (70.0, 7.0), "q/prefix20": (9.0, 3.5),
                   "r/chat8": (25.0, 4.6), "r/chat14": (59.0, 9.1), "r/chat20": (72.0, 8.4),
                   "s/chat10": (9.0, 2.9), "s/chat20": (41.0, 6.6), "s/chat30": (125.0, 16.2)}
    errs = {k: 1e3 * (intercept + prof.stream_output_overhead_s * n) - ms for k, (n, ms) in got.items()}
    assert max(abs(e) for e in errs.values()) < 2.6 and errs["q/chat28"] == pytest.approx(2.5, abs=0.05)
