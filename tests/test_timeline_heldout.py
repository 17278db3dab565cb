"""The fresh held-out serving runs of calibration/data/h200-2026-12-02-timeline (COMMAND.md): three traced engines on a
host none of the profile's terms came from, measured after the simulator took vLLM 0.26's async-scheduling timeline
from the earlier traces (planner/serving/engine.py: step N+1 scheduled when step N's launch call returns, step N's
tokens sent when step N+1's call returns).  Their traced floors are pinned, and the replays with each run's own floor
(what ``planner calibrate +serve`` fits on a host) are pinned where the timeline moved them."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.serve_floor import served_terms
from calibration.serving_points import replay_folder
from calibration.trace_points import launch_floor, stalls
from planner.io import catalog

FRESH = Path(__file__).resolve().parent.parent / "calibration/data/h200-2026-12-02-timeline"
RUNS = {"llama-3.1-8b": "c/serve-llama-trace", "qwen3-30b-a3b": "m/serve-qwen3-30b-a3b-warmed",
        "moonlight-16b-a3b": "o/serve-moonlight-16b-a3b-trace2"}


@pytest.mark.parametrize("model_id, floor_ms, call_ms, eager, graph", [
    ("llama-3.1-8b", 21.43, 22.85, 537, 6696), ("qwen3-30b-a3b", 57.83, 59.82, 285, 734),
    ("moonlight-16b-a3b", 81.89, 83.88, 522, 3579)])
def test_the_fresh_hosts_floors(model_id, floor_ms, call_ms, eager, graph):
    """floor = median eager execute_model call − median CUDA-graph call (calibration/trace_points.launch_floor); this
    host's Qwen3 floor is 0.76 of the committed profile's 75.8 ms (0.66 of the one host's 87.8 ms it carried before the
    six hosts' median), its Llama floor 0.89 of 24.0 ms."""
    f = launch_floor(FRESH / RUNS[model_id], model_id)
    assert (f.eager_steps, f.graph_steps) == (eager, graph)
    assert 1e3 * f.seconds == pytest.approx(floor_ms, abs=0.01)
    assert 1e3 * f.eager_call_s == pytest.approx(call_ms, abs=0.01)


def test_the_cold_moonlight_engine_stalled_where_the_compile_keys_say():
    """One stall on the first step above the graphs of a new key (chat10), one more in chat30 the rule does not predict
    (MLA's own kernel, as on the other Moonlight and DeepSeek-V2-Lite engines), none in chat20."""
    st = stalls(FRESH / RUNS["moonlight-16b-a3b"])
    assert [st[r]["stalls"] for r in ("chat10", "chat30", "chat20")] == [1, 1, 0]


def own_floor_errors(model_id: str) -> dict:
    folder = FRESH / RUNS[model_id]
    prof = served_terms(catalog.profile_for("h200-sxm", "0.26.0"), [launch_floor(folder, model_id)], log=lambda _: None)
    return {c.name: c for c in replay_folder(folder, model_id, prof)}


def test_served_mla_ttft_with_the_hosts_floor():
    """Moonlight (MLA, held out of every fit) with this host's floor: TTFT p50 chat10 +4.4 %, chat20 +3.4 % (+3.8 and
    +3.6 % before a chunk on MLA's decode pathway attended in the absorbed form; +2.6 and +3.5 % before MLA's piecewise
    launch of its own, 0.424 ms a layer where the dense 0.212 stood; +1.4 and
    +2.8 % before the OpenAI server's time per prompt token; +0.4 and -0.1 % before its output handling, stream_output_overhead_s; +0.6 and -0.7 % before the per-layer
    step term; +2.9 and +0.3 % before the fused-MoE kernel law; +4.1 and +2.0 % with the HTTP overhead fitted before the served floors,
    6.0 ms instead of 0; −32.2 and −25.3 % when the simulator sent tokens at their step's end and scheduled the next
    step at the last one's start)."""
    runs = own_floor_errors("moonlight-16b-a3b")
    assert runs["bench-chat10"].error_pct("ttft_p50_s") == pytest.approx(4.4, abs=0.5)
    assert runs["bench-chat20"].error_pct("ttft_p50_s") == pytest.approx(3.4, abs=0.5)
    assert all(abs(c.error_pct("output_tokens_per_s")) < 2 for c in runs.values())


def test_dense_chat_with_the_hosts_floor_at_light_load():
    """Llama-3.1-8B with this host's floor and the committed HTTP overhead, now fitted on the engine as finally
    simulated (0: bench-r12 leaves −3.3 ms): TTFT p50 chat10 +3.0 %, chat24 +15.9 % (−0.5 / +13.6 % before the OpenAI
    server's time per prompt token; −2.2 / +6.8 % before its output handling, stream_output_overhead_s, which adds 4-5 ms at chat24's 40 running; −2.0 / +4.8 % before
    the per-layer step term, +9.4 / +10.6 % with the 6.0 ms fitted before the served floors).  TPOT p50 +1.2 / +4.5 %
    (+4.4 before the output handling; within 1.5 % on
    both before the layer term: its eager steps' per-layer cost rose 0.078 -> 0.103 ms).  Its shared-prefix run (256
    new tokens after a cached 2,048) is under-predicted instead, −8.5 % (−19.4 % before the server's time per prompt
    token, which its 2,304-token prompts pay twice chat's; −22.5 before the output handling, −22.9 %
    before the layer term, −23.8 % before the piecewise prompt steps' launch, scaled here
    with the host's eager floor, 0.89x the profile's): the first token's fixed cost is not one number."""
    runs = own_floor_errors("llama-3.1-8b")
    assert runs["bench-chat10"].error_pct("ttft_p50_s") == pytest.approx(3.0, abs=0.5)
    assert runs["bench-chat24"].error_pct("ttft_p50_s") == pytest.approx(15.9, abs=0.5)
    assert runs["bench-prefix20"].error_pct("ttft_p50_s") == pytest.approx(-8.5, abs=0.5)
    assert [round(runs[r].error_pct("tpot_p50_s"), 1) for r in ("bench-chat10", "bench-chat24")] == [1.2, 4.5]
