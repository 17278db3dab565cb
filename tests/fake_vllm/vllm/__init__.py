"""A stand-in for the `vllm` package used ONLY to exercise calibration.probes' plumbing in CI
(argument handling, record writing, resume, failure handling).  It produces no measurement that is
ever reported: timings are synthetic and every record it yields is discarded by the tests."""

import sys
import time
from types import SimpleNamespace

__version__ = "0.0.0-fake"


class SamplingParams:
    def __init__(self, max_tokens=16, **kw):
        self.max_tokens = max_tokens


class _Core:
    def shutdown(self, timeout=None):
        pass


class _Engine:
    """add_request / step / abort_request like vLLM V1's LLMEngine: every step gives each running request
    one token and stamps its outputs with one synthetic engine timestamp."""

    def __init__(self, cfg):
        self.vllm_config, self.engine_core, self.reqs, self.clock = cfg, _Core(), {}, 1000.0

    def add_request(self, rid, prompt, sp):
        self.reqs[rid] = {"prompt": len(prompt["prompt_token_ids"]), "n": sp.max_tokens, "gen": 0, "first": None,
                          "new": True}

    def step(self):
        new = sum(r["prompt"] for r in self.reqs.values() if r["new"])
        self.clock += 0.005 + 1e-6 * new
        outs = []
        for rid, r in list(self.reqs.items()):
            r["gen"] += 1
            r["new"] = False
            r["first"] = r["first"] or self.clock
            m = SimpleNamespace(num_generation_tokens=r["gen"], scheduled_ts=self.clock - 0.005,
                                first_token_ts=r["first"], last_token_ts=self.clock)
            outs.append(SimpleNamespace(request_id=rid, outputs=[SimpleNamespace(token_ids=list(range(r["gen"])))],
                                        metrics=m))
            if r["gen"] >= r["n"]:
                del self.reqs[rid]
        return outs

    def abort_request(self, ids):
        for i in ids:
            self.reqs.pop(i, None)

    def has_unfinished_requests(self):
        return bool(self.reqs)


class LLM:
    def __init__(self, model, **kw):
        self.kw = kw
        cfg = SimpleNamespace(
            cache_config=SimpleNamespace(num_gpu_blocks=50_000, block_size=16,
                                         gpu_memory_utilization=kw.get("gpu_memory_utilization", 0.92)),
            scheduler_config=SimpleNamespace(max_num_batched_tokens=kw.get("max_num_batched_tokens", 16384),
                                             max_num_seqs=kw.get("max_num_seqs", 1024)),
        )
        self.llm_engine = _Engine(cfg)
        print("(EngineCore pid=1) INFO Model loading took 13.5 GiB and 2.0 seconds", file=sys.stderr, flush=True)
        print("(EngineCore pid=1) INFO GPU KV cache size: 800,000 tokens", file=sys.stderr, flush=True)

    def generate(self, prompts, sp, use_tqdm=False):
        if any(len(p["prompt_token_ids"]) == 12000 for p in prompts):
            raise RuntimeError("synthetic failure for a test")
        now = time.monotonic()
        outs = []
        for p in prompts:
            n = sp.max_tokens
            m = SimpleNamespace(num_generation_tokens=n, scheduled_ts=now, first_token_ts=now + 0.01,
                                last_token_ts=now + 0.01 + 0.001 * (n - 1))
            outs.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(range(n)))], metrics=m))
        return outs
