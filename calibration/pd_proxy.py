"""The prefill → decode proxy in front of a 1P1D pair, for the measurement campaign (standard library only: the
GPU machine has no network, so vLLM's own toy proxy from its test tree cannot be fetched there).

It speaks the protocol of vLLM's ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` (the proxy
``planner deploy --disaggregated`` names in k8s-disaggregated.yaml), request for request:

1. POST the client's body to a prefill engine (round robin) with ``kv_transfer_params =
   {"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": null, "remote_block_ids": null,
   "remote_host": null, "remote_port": null}``, ``stream = false``, ``max_tokens = 1`` (and
   ``max_completion_tokens = 1`` if given), without ``stream_options``, ``min_tokens`` and
   ``min_completion_tokens``; one ``X-Request-Id`` for both legs;
2. put the ``kv_transfer_params`` the prefill engine returned into the original body and stream the decode
   engine's answer (round robin) back unchanged.

``GET /healthcheck`` answers ``{"status": "ok", …}``.  Each request's two legs are logged to ``--log``
(JSON lines: the prefill leg's seconds, when the decode leg started and its first byte), so the measured
prefill → decode hop can be read apart from the engines' own times.

    python3 -m calibration.pd_proxy --port 8000 --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}


def prefill_body(body: dict) -> dict:
    """The prefill leg's body (toy_proxy_server.send_request_to_service's changes)."""
    b = dict(body)
    b["kv_transfer_params"] = dict(PREFILL_PARAMS)
    b["stream"] = False
    b["max_tokens"] = 1
    if "max_completion_tokens" in b:
        b["max_completion_tokens"] = 1
    for k in ("stream_options", "min_tokens", "min_completion_tokens"):
        b.pop(k, None)
    return b


def decode_body(body: dict, prefill_answer: dict) -> dict:
    """The decode leg's body: the client's, with the prefill engine's ``kv_transfer_params`` if it sent any."""
    b = dict(body)
    params = prefill_answer.get("kv_transfer_params") if isinstance(prefill_answer, dict) else None
    if params:
        b["kv_transfer_params"] = params
    return b


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--prefill", action="append", required=True, help="a prefill engine's base URL (repeatable)")
    ap.add_argument("--decode", action="append", required=True, help="a decode engine's base URL (repeatable)")
    ap.add_argument("--log", default="", help="JSON-lines file for each request's legs")
    return ap.parse_args(argv)


class _Upstream:
    """Round robin over base URLs ('http://host:port'), one HTTP connection per leg."""

    def __init__(self, urls: list[str]):
        self.hosts = []
        for u in urls:
            parts = urlsplit(u)
            if parts.scheme != "http" or not parts.hostname or not parts.port:
                raise SystemExit(f"error: --prefill/--decode: expected http://HOST:PORT, got {u!r}")
            self.hosts.append((parts.hostname, parts.port))
        self._next = itertools.cycle(range(len(self.hosts)))
        self._lock = threading.Lock()

    def connect(self) -> http.client.HTTPConnection:
        with self._lock:
            host, port = self.hosts[next(self._next)]
        return http.client.HTTPConnection(host, port, timeout=3600)


def make_server(host: str, port: int, prefill_urls: list[str], decode_urls: list[str],
                log_path: str = "") -> ThreadingHTTPServer:
    """The proxy as a threading HTTP server (call ``serve_forever``)."""
    pre, dec = _Upstream(prefill_urls), _Upstream(decode_urls)
    log_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # no per-request line on stderr
            pass

        def _json(self, status: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # http.server's name
            if self.path == "/healthcheck":
                self._json(200, {"status": "ok", "prefill_instances": len(pre.hosts),
                                 "decode_instances": len(dec.hosts)})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self):
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"error": "not found"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError:
                self._json(400, {"error": "body is not JSON"})
                return
            rid = str(uuid.uuid4())
            headers = {"Content-Type": "application/json", "X-Request-Id": rid}
            t0 = time.perf_counter()
            c = pre.connect()
            try:
                c.request("POST", self.path, json.dumps(prefill_body(body)), headers)
                r = c.getresponse()
                raw = r.read()
                if r.status != 200:
                    self._json(r.status, {"error": "prefill engine", "body": raw.decode("utf-8", "replace")[:2000]})
                    return
                answer = json.loads(raw)
            finally:
                c.close()
            t1 = time.perf_counter()
            c = dec.connect()
            first = None
            try:
                c.request("POST", self.path, json.dumps(decode_body(body, answer)), headers)
                r = c.getresponse()
                self.send_response(r.status)
                self.send_header("Content-Type", r.getheader("Content-Type", "application/json"))
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while chunk := r.read1(65536):
                    first = first or time.perf_counter()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            finally:
                c.close()
            if log_path:
                rec = {"id": rid, "prefill_leg_s": t1 - t0, "decode_first_byte_s": (first or t1) - t1,
                       "total_s": time.perf_counter() - t0}
                with log_lock, open(log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec) + "\n")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv=None) -> int:
    ns = parse_args(argv)
    make_server(ns.host, ns.port, ns.prefill, ns.decode, ns.log).serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
