"""Stand-in for ``python -m vllm.entrypoints.cli.main serve|bench serve`` used ONLY to exercise
calibration.serve_bench's plumbing in CI (process start, /health, /metrics, completions, the bench
result file).  Its timings are synthetic and nothing it yields is ever reported as a measurement."""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _opt(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def serve(argv):
    port = int(_opt(argv, "--port", 8000))
    print("(EngineCore pid=1) INFO Model loading took 14.99 GiB and 2.0 seconds", flush=True)
    print("(EngineCore pid=1) INFO Available KV cache memory: 100.00 GiB", flush=True)
    print("(EngineCore pid=1) INFO GPU KV cache size: 819,200 tokens", flush=True)

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body, ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.end_headers()
            self.wfile.write(body.encode())

        def do_GET(self):
            if self.path == "/health":
                return self._send(200, "")
            if self.path == "/metrics":
                return self._send(200, 'vllm:cache_config_info{block_size="16",num_gpu_blocks="51200"} 1.0\n'
                                       'vllm:prefix_cache_queries_total{model_name="m"} 100.0\n'
                                       'vllm:prefix_cache_hits_total{model_name="m"} 90.0\n', "text/plain")
            self._send(404, "{}")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            n = int(body.get("max_tokens", 16))
            if not body.get("stream"):
                return self._send(200, json.dumps({"choices": [{"text": " w5" * n}],
                                                   "usage": {"completion_tokens": n}}))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _ in range(n):
                time.sleep(0.001)
                self.wfile.write(b'data: {"choices": [{"text": " w7"}]}\n\n')
            self.wfile.write(('data: ' + json.dumps({"choices": [], "usage": {"completion_tokens": n}}) + '\n\n').encode())
            self.wfile.write(b"data: [DONE]\n\n")

    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()


def bench(argv):
    n = int(_opt(argv, "--num-prompts"))
    out = Path(_opt(argv, "--result-dir")) / _opt(argv, "--result-filename")
    i, o = int(_opt(argv, "--random-input-len")), int(_opt(argv, "--random-output-len"))
    out.write_text(json.dumps({"num_prompts": n, "request_rate": _opt(argv, "--request-rate"), "completed": n,
                               "input_lens": [i] * n, "output_lens": [o] * n, "ttfts": [0.02] * n,
                               "itls": [[0.005] * (o - 1)] * n, "start_times": [100.0 + 0.1 * k for k in range(n)],
                               "fake": True}))


if __name__ == "__main__":
    a = sys.argv[1:]
    serve(a[1:]) if a[0] == "serve" else bench(a[2:])
