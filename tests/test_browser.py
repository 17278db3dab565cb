"""The dashboard in a real browser: `streamlit run app.py` on a free local port, headless Debian
Chromium (playwright, no browser download) loads it, changes widgets, checks the numbers and the URL
follow, visits every view, downloads the sweep CSV, and saves screenshots under tests/artifacts/.

Skips only when /usr/bin/chromium is missing (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
VIEWS = ["Memory", "Latency", "Roofline", "Triangle", "Cost", "Sizing report", "Load"]
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    streamlit = Path(sys.executable).with_name("streamlit")
    launcher = [str(streamlit)] if streamlit.exists() else [sys.executable, "-m", "streamlit"]
    cmd = [*launcher, "run", str(ROOT / "app.py"), "--server.port", str(port), "--server.address", "127.0.0.1",
           "--server.headless", "true", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / "streamlit.log").open("w")  # closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read().strip() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start; see {ARTIFACTS / 'streamlit.log'}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def page(server):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        pg = browser.new_page(viewport={"width": 1600, "height": 1200}, accept_downloads=True)
        pg.set_default_timeout(30_000)
        yield pg
        browser.close()


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label)
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_idle(page) -> None:
    """Wait until the script run has finished (the status widget says nothing is running)."""
    page.wait_for_timeout(300)
    page.wait_for_function("""() => {
        const w = document.querySelector('[data-testid="stStatusWidget"]');
        return !w || !w.innerText.includes('Running');
    }""")
    page.wait_for_timeout(300)


def wait_metric_change(page, label: str, old: str, timeout_s: float = 30) -> str:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = metric_value(page, label)
        if value != old:
            return value
        time.sleep(0.2)
    raise AssertionError(f"metric {label!r} stayed at {old!r}")


def no_exceptions(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert not [e for e in errors if "Could not compute" in e], errors


def users(text: str) -> int:
    return int(text.replace(",", ""))


def test_dashboard_loads_changes_and_follows_in_a_real_browser(page, server):
    page.goto(server)
    page.wait_for_selector('[data-testid="stMetric"]')
    wait_idle(page)
    no_exceptions(page)
    before = metric_value(page, "Max concurrent users")
    assert users(before) > 0

    # a widget change: longer prompts -> fewer concurrent users, and the URL carries it
    box = page.locator(".st-key-prompt input")
    box.fill("16384")
    box.press("Enter")
    after = wait_metric_change(page, "Max concurrent users", before)
    assert users(after) < users(before)
    page.wait_for_function("() => window.location.search.includes('prompt=16384')")

    # fp8 KV cache -> more users
    page.locator(".st-key-kvdtype").click()
    page.get_by_role("option", name="fp8", exact=True).click()
    fp8 = wait_metric_change(page, "Max concurrent users", after)
    assert users(fp8) > users(after)
    wait_idle(page)
    no_exceptions(page)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

    # a preset moves several widgets at once, and the URL follows
    page.get_by_role("button", name="premium chat (quality + latency)").click()
    preset = wait_metric_change(page, "Max concurrent users", fp8)
    page.wait_for_function("() => window.location.search.includes('model=llama-3.1-70b')")
    assert users(preset) > 0
    wait_idle(page)
    no_exceptions(page)
    page.screenshot(path=str(ARTIFACTS / "preset-premium-chat.png"), full_page=True)
    fp8 = preset

    # the URL reopens the same scenario in a fresh page
    shared = page.url
    page.goto(shared)
    page.wait_for_selector('[data-testid="stMetric"]')
    wait_idle(page)
    assert metric_value(page, "Max concurrent users") == fp8


def test_every_view_renders_without_an_exception_box(page, server):
    page.goto(server)
    page.wait_for_selector('[data-testid="stMetric"]')
    wait_idle(page)
    for view in VIEWS:
        page.get_by_role("tab", name=view, exact=True).click()
        wait_idle(page)
        if view == "Load":  # the simulator runs on request
            page.get_by_role("button", name="Simulate", exact=True).click()
            page.get_by_text("(the knee)").wait_for()
        if view != "Sizing report":
            page.locator(".js-plotly-plot").first.wait_for()
        no_exceptions(page)
        page.screenshot(path=str(ARTIFACTS / f"view-{view.lower().replace(' ', '-')}.png"), full_page=True)


def test_downloaded_csv_is_what_planner_sweep_csv_writes(page, server, tmp_path):
    from typer.testing import CliRunner

    from planner.cli import app as cli

    page.goto(f"{server}/?view=Sizing+report")
    page.get_by_text("Download the sweep as CSV").wait_for()
    wait_idle(page)
    with page.expect_download() as info:
        page.get_by_text("Download the sweep as CSV").click()
    got = tmp_path / "download.csv"
    info.value.save_as(got)
    want = tmp_path / "cli.csv"
    res = CliRunner().invoke(cli, ["sweep", "-m", "mistral-7b-v0.3", "--prompt-tokens", "4096", "--output-tokens", "512",
                                   "--ttft-slo-ms", "2000", "--tpot-slo-ms", "50", "--profile", "auto",
                                   "--csv", str(want)])
    assert res.exit_code == 0, res.output
    assert got.read_bytes() == want.read_bytes()
