"""How long each dashboard view takes, in a real browser, from a widget change to the page settling.

`python app.py` (as `make app`: the opening page warmed, then `streamlit run`) on a free local port; headless
Chromium (playwright, /usr/bin/chromium, no download) opens every view at 1440×900 and changes sidebar inputs
(target users, the context length, the TPOT target), each time to a value not seen before, so the caches that
depend on that input miss.  A change is timed from the key press that submits it to the later of

* the server's ``script_finished`` message on the websocket (the rerun is over), and
* the last DOM mutation before the page stays quiet for ``--quiet-ms`` (Plotly has drawn, tables are
  laid out): the browser's share — serialising and drawing a figure of thousands of points — counts.

The Load view's simulation runs on request; it is timed apart: press **Simulate** (5,000 requests) ->
the first progress bar, and -> the result drawn.  Target: every view's median change < 1 s, and a
progress bar within 1 s wherever the work is longer.  Prints a line per view and the worst view;
exits 1 on a miss.

    .venv/bin/python benchmarks/app_rerun.py [--changes 4] [--views Memory,Cost]
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
TARGET_S = 1.0
VIEWS = ["Memory", "Latency", "Roofline", "Triangle", "Cost", "Sizing report", "Load", "Compare", "Deploy"]

#: Mutation clock in the page: the time of the last DOM change, on the page's performance.now() clock.
OBSERVER_JS = """() => {
  if (window.__mutObs) return;
  window.__lastMut = performance.now();
  window.__mutObs = new MutationObserver(() => { window.__lastMut = performance.now(); });
  window.__mutObs.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
QUIET_JS = "() => [performance.now() - window.__lastMut, !!document.querySelector('[data-testid=\"stStatusWidget\"] " \
           "[data-testid=\"stStatusWidgetRunningIcon\"]') || /Running/.test((document.querySelector(" \
           "'[data-testid=\"stStatusWidget\"]') || {}).innerText || '')]"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app: Path, log_path: Path | None = None) -> tuple[subprocess.Popen, str, object]:
    """``(process, url, log)``: ``python app`` (as ``make app``) on a free local port, headless, once its health check
    answers; its output goes to ``log_path`` (default: a temporary file).  Stop it with :func:`stop_server`."""
    port = _free_port()
    cmd = [sys.executable, str(app),  # as `make app`: the opening page warmed, then served (planner.dashboard.warm)
           "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    log = (log_path.open("w") if log_path is not None  # closed by stop_server
           else tempfile.NamedTemporaryFile("w", prefix="app_rerun-", suffix=".log", delete=False))  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=app.parent, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read().strip() == b"ok":
                return proc, url, log
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            stop_server(proc, log)
            raise RuntimeError(f"streamlit did not start; see {log.name}")
        time.sleep(0.3)


def stop_server(proc: subprocess.Popen, log) -> None:
    """Ends a :func:`start_server` process (killed if it has not exited 10 s after SIGTERM) and closes its log."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


class Page:
    """A Chromium page on the app that knows when a rerun has finished and when the DOM went quiet."""

    def __init__(self, page, quiet_ms: float):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.page, self.quiet_ms, self.finished_at, self.server_s = page, quiet_ms, [], []

        def on_frame(payload):
            if isinstance(payload, (bytes, bytearray)):
                msg = ForwardMsg()
                try:
                    msg.ParseFromString(bytes(payload))
                except Exception:  # noqa: BLE001 — not a ForwardMsg: ignore
                    return
                if msg.WhichOneof("type") == "script_finished":
                    self.finished_at.append(time.perf_counter())

        page.on("websocket", lambda ws: ws.on("framereceived", on_frame))

    def settle(self, since: float, timeout_s: float = 120.0) -> float:
        """Seconds from ``since`` (perf_counter) to the later of the script's end and the last DOM change."""
        self.page.evaluate(OBSERVER_JS)
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            quiet_ms, running = self.page.evaluate(QUIET_JS)
            now = time.perf_counter()
            done = [t for t in self.finished_at if t >= since]
            if done and not running and quiet_ms >= self.quiet_ms:
                last_mut = now - quiet_ms / 1e3
                self.server_s.append(done[-1] - since)
                return max(done[-1], last_mut) - since
            time.sleep(0.05)
        raise TimeoutError("the page did not settle")

    def open(self, url: str) -> float:
        """Load ``url``; seconds to the page settling."""
        t0 = time.perf_counter()
        self.page.goto(url)
        self.page.wait_for_selector('[data-testid="stSidebar"]', state="attached")
        return self.settle(t0)

    def change(self, key: str, value) -> float:
        box = self.page.locator(f".st-key-{key} input").first
        box.fill(str(value))
        self.page.evaluate(OBSERVER_JS)
        t0 = time.perf_counter()
        box.press("Enter")
        return self.settle(t0)


def input_keys(page) -> list[str]:
    """The sidebar inputs changed on every view (the context box is 'context', or 'prompt' before it)."""
    page.wait_for_selector(".st-key-users input", state="attached")
    keys = ["users"]
    keys.append("context" if page.locator(".st-key-context input").count() else "prompt")
    keys.append("tpot_ms")
    return keys


def values(key: str, i: int):
    return {"users": 100 + 7 * i, "context": 4608 + 64 * i, "prompt": 4096 + 64 * i, "tpot_ms": 45.0 + 0.5 * i}[key]


def time_simulation(p: Page) -> tuple[float | None, float]:
    """Load view: Simulate with 5,000 requests -> (seconds to the first progress bar, seconds to the result)."""
    page = p.page
    box = page.locator(".st-key-load_requests input")
    if not box.count():
        return None, float("nan")
    box.fill("5000")
    box.press("Enter")
    p.settle(time.perf_counter() - 0.001)
    seen = []
    page.evaluate("""() => { window.__progressAt = null; const o = new MutationObserver(() => {
        if (window.__progressAt === null && document.querySelector('[data-testid="stProgress"]'))
          window.__progressAt = performance.now(); }); o.observe(document.body, {subtree: true, childList: true}); }""")
    start_page = page.evaluate("() => performance.now()")
    t0 = time.perf_counter()
    page.get_by_role("button", name="Simulate", exact=True).click()
    total = p.settle(t0, timeout_s=300)
    at = page.evaluate("() => window.__progressAt")
    if at is not None:
        seen.append((at - start_page) / 1e3)
    return (seen[0] if seen else None), total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=4, help="changes per input per view")
    ap.add_argument("--views", default=",".join(VIEWS))
    ap.add_argument("--app", default=str(ROOT / "app.py"))
    ap.add_argument("--quiet-ms", type=float, default=400.0)
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    proc, url, log = start_server(Path(args.app).resolve())
    worst, worst_view, missed = 0.0, "", []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.set_default_timeout(120_000)
            p = Page(page, args.quiet_ms)
            p.open(url)  # warm: imports, catalog, first figures
            print(f"widget change -> page settled (script finished + DOM quiet {args.quiet_ms:.0f} ms), headless "
                  f"Chromium {args.width}x{args.height}, {args.changes} changes per input; target median < "
                  f"{TARGET_S * 1e3:.0f} ms")
            for k, view in enumerate(v for v in args.views.split(",") if v):
                p.open(f"{url}/?view={view.replace(' ', '+')}")
                if not page.get_by_role("tab", name=view, exact=True).count():
                    print(f"  {view:<14} (no such view)")
                    continue
                per_key = {}
                p.server_s.clear()
                for key in input_keys(page):
                    per_key[key] = [p.change(key, values(key, 40 * k + i + 1)) for i in range(args.changes)]
                meds = {key: statistics.median(t) for key, t in per_key.items()}
                view_worst = max(meds.values())
                slowest = max(max(t) for t in per_key.values())
                if view_worst > worst:
                    worst, worst_view = view_worst, view
                ok = view_worst < TARGET_S
                if not ok:
                    missed.append(view)
                print(f"  {view:<14} " + "  ".join(f"{key} {m * 1e3:6.0f}" for key, m in meds.items())
                      + f"   (ms, median; slowest {slowest * 1e3:,.0f}; script alone: median "
                        f"{statistics.median(p.server_s) * 1e3:,.0f})   {'ok' if ok else 'MISS'}")
                if view == "Load":
                    first, total = time_simulation(p)
                    if first is None and not math.isnan(total):
                        print(f"  Load simulate 5,000 requests: {total * 1e3:,.0f} ms, no progress bar   "
                              f"{'ok' if total < TARGET_S else 'MISS'}")
                        if total >= TARGET_S:
                            missed.append("Load simulation")
                    elif first is not None:
                        ok = first < TARGET_S
                        print(f"  Load simulate 5,000 requests: progress bar after {first * 1e3:,.0f} ms, result "
                              f"after {total * 1e3:,.0f} ms   {'ok' if ok else 'MISS'}")
                        if not ok:
                            missed.append("Load simulation")
            browser.close()
    finally:
        stop_server(proc, log)
    print(f"app_rerun_browser_ms_worst_view={worst * 1e3:.0f} ({worst_view})")
    if missed:
        print("missed: " + ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
