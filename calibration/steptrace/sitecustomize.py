"""Device side: time every engine step inside a real ``vllm serve`` (issue #21: the client's token timestamps
cannot time single steps, and the in-process probes do not run the server's processes and threads).

Put this folder first on ``PYTHONPATH`` and set ``PLANNER_STEP_TRACE=PREFIX``: every Python process started with
that environment (the API server, the engine core) patches, when vLLM imports them,

* ``Scheduler.schedule`` -> one record per call: wall and ``perf_counter`` time at entry and exit, the tokens
  scheduled, the requests by kind (new, decoding = 1 token, prefill chunks = their sizes and computed contexts),
  the decoding requests' computed contexts summed (``dctx``, from 2026-12-02's fourth campaign on), running and
  waiting.  The contexts are read when ``schedule`` returns, which has already advanced them by the step's tokens
  (vLLM 0.26 ``_update_after_schedule``): a chunk's ``ctx`` is where it ends, a decode's its context and itself;
* ``Scheduler.update_from_output`` -> its entry/exit ``perf_counter`` (the step's output back on the CPU);
* ``UniProcExecutor.execute_model`` / ``sample_tokens`` -> their call durations (the CPU launching the step);
* a request's way in (from 2026-12-05 on; each record carries the request's ``arrival_time``, ``arr``, which the
  OpenAI server stamps and the engine core keeps, so the three match): ``InputProcessor.process_inputs`` in the
  server (``k`` "i": entry/exit, the prompt rendered and tokenised), ``EngineCore.preprocess_add_request`` in the
  engine core's input thread ("p": entry/exit, once the request came over ZMQ) and ``Scheduler.add_request`` in its
  busy loop ("a": when the loop took it from the input queue).  Read by :mod:`calibration.intake`.

Records go to ``PREFIX.<pid>.jsonl`` in batches of 64 lines (and at exit).  Consecutive ``schedule`` entries are
one engine-loop period apart (asynchronous scheduling schedules once per step).  Read with
``python -m calibration.serve_steps --trace PREFIX.<pid>.jsonl`` (pure).  ``PLANNER_SWITCH_INTERVAL_S`` sets
``sys.setswitchinterval`` in those processes (the GIL hand-over interval; Python's default is 5 ms).
"""

import os
import sys

_PREFIX = os.environ.get("PLANNER_STEP_TRACE", "")
if os.environ.get("PLANNER_SWITCH_INTERVAL_S"):
    sys.setswitchinterval(float(os.environ["PLANNER_SWITCH_INTERVAL_S"]))

if _PREFIX:
    import atexit
    import importlib.abc
    import importlib.util
    import json
    import time

    _buf: list = []
    _last: dict = {}

    def _flush() -> None:
        recs = _buf[:]  # the engine core's input thread emits too: take what is there, keep what comes meanwhile
        if recs:
            del _buf[:len(recs)]
            with open(f"{_PREFIX}.{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))

    def _emit(rec: dict) -> None:
        _buf.append(rec)
        if len(_buf) >= 64:
            _flush()

    atexit.register(_flush)

    def _patch_scheduler(mod) -> None:
        cls = mod.Scheduler
        schedule, update = cls.schedule, cls.update_from_output

        def traced_schedule(self, *a, **k):
            wall, t0 = time.time(), time.perf_counter()
            out = schedule(self, *a, **k)
            t1 = time.perf_counter()
            sizes = list(out.num_scheduled_tokens.values())
            new_ids = {r.req_id for r in out.scheduled_new_reqs}
            _emit({"k": "s", "wall": wall, "t0": t0, "t1": t1, "tok": out.total_num_scheduled_tokens,
                   "new": len(new_ids), "dec": sum(1 for n in sizes if n == 1),
                   "chunks": [n for n in sizes if n > 1],
                   "ctx": [self.requests[r].num_computed_tokens for r, n in out.num_scheduled_tokens.items()
                           if n > 1 and r in self.requests],
                   "dctx": sum(self.requests[r].num_computed_tokens for r, n in out.num_scheduled_tokens.items()
                               if n == 1 and r in self.requests),
                   "run": len(self.running), "wait": len(self.waiting), **_last})
            _last.clear()
            return out

        def traced_update(self, *a, **k):
            t0 = time.perf_counter()
            out = update(self, *a, **k)
            _last["u0"], _last["u1"] = t0, time.perf_counter()
            return out

        cls.schedule, cls.update_from_output = traced_schedule, traced_update
        add = getattr(cls, "add_request", None)
        if add is not None:
            def traced_add(self, request, *a, **k):
                _emit({"k": "a", "t": time.perf_counter(), "arr": getattr(request, "arrival_time", None)})
                return add(self, request, *a, **k)

            cls.add_request = traced_add

    def _timed(cls, name: str, kind: str, arrival) -> None:
        """``cls.name`` emitting {k: kind, t0, t1, wall, arr: arrival(args, result)} per call (either absent, as in
        another vLLM release: left as it is)."""
        fn = getattr(cls, name, None) if cls is not None else None
        if fn is None:
            return

        def timed(self, *a, **k):
            wall, t0 = time.time(), time.perf_counter()
            out = fn(self, *a, **k)
            _emit({"k": kind, "t0": t0, "t1": time.perf_counter(), "wall": wall, "arr": arrival(a, out)})
            return out

        setattr(cls, name, timed)

    def _patch_input_processor(mod) -> None:  # the OpenAI server: the prompt rendered, tokenised, stamped
        _timed(getattr(mod, "InputProcessor", None), "process_inputs", "i",
               lambda a, out: getattr(out, "arrival_time", None))

    def _patch_engine_core(mod) -> None:  # the engine core's input thread, the request off the socket
        def arrival(a, out):
            return getattr(a[0], "arrival_time", None) if a else None

        _timed(getattr(mod, "EngineCore", None), "preprocess_add_request", "p", arrival)

    def _patch_executor(mod) -> None:
        cls = mod.UniProcExecutor
        for name, key in (("execute_model", "x"), ("sample_tokens", "y")):
            fn = getattr(cls, name)

            def traced(self, *a, _fn=fn, _key=key, **k):
                t0 = time.perf_counter()
                out = _fn(self, *a, **k)
                _last[_key] = time.perf_counter() - t0
                return out

            setattr(cls, name, traced)

    _TARGETS = {"vllm.v1.core.sched.scheduler": _patch_scheduler,
                "vllm.v1.executor.uniproc_executor": _patch_executor,
                "vllm.v1.engine.input_processor": _patch_input_processor,
                "vllm.v1.engine.core": _patch_engine_core}

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            patch = _TARGETS.get(name)
            if patch is None:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            exec_module = spec.loader.exec_module

            def run(module):
                exec_module(module)
                patch(module)

            spec.loader.exec_module = run
            return spec

    sys.meta_path.insert(0, _Finder())
