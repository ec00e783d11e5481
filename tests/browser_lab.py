"""Running the lab in a real browser: start `streamlit run app.py`, drive Debian's chromium with Playwright.

Shared by tests/test_browser.py and benchmarks/bench_app.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# the Steer page's component (steering/figures/instant_steer.py) draws in a shadow root: Playwright's
# locators pierce it, document.querySelector does not (INSTANT_ROOT finds it for page.evaluate)
INSTANT = ".st-key-w_instant_steer"
CONTINUATION = f"{INSTANT} [data-testid=instant-text]"
INSTANT_ROOT = """() => {
    const host = document.querySelector('.st-key-w_instant_steer');
    const walk = (node) => {
        if (node.shadowRoot) { const r = node.shadowRoot.querySelector('.instant'); if (r) return r; }
        for (const child of node.children) { const found = walk(child); if (found) return found; }
        return null;
    };
    return host ? (host.querySelector('.instant') || walk(host)) : null;
}"""


_SERVERS: dict[str, tuple[subprocess.Popen, Path]] = {}  # base URL -> the server process and its log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(env: dict[str, str], log_path: Path, timeout: float = 180.0):
    """`streamlit run app.py` on a free local port; yields (base URL, seconds until healthy)."""
    # PYTHONFAULTHANDLER: on SIGABRT the server writes every thread's stack to its log (server_stacks)
    full_env = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHONFAULTHANDLER": "1",
        **env,
    }
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for attempt in range(3):  # a port found free can be taken before streamlit binds it (tests run in parallel)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = log_path.open("w")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            while proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        # and the answer is this server's, not another's on a port both took
                        if r.status == 200 and "You can now view" in log_path.read_text(errors="replace"):
                            break
                except OSError:
                    pass
                if time.perf_counter() - start > timeout:
                    raise TimeoutError(f"streamlit did not answer within {timeout:.0f} s; see {log_path}")
                time.sleep(0.1)
            if proc.poll() is None:
                _SERVERS[url] = (proc, log_path)
                yield url, time.perf_counter() - start
                return
            taken = f"Port {port} is not available" in log_path.read_text(errors="replace")  # streamlit's words
            if attempt == 2 or not taken:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log_path}")
        finally:
            _SERVERS.pop(url, None)
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


@contextmanager
def lab_server(root: Path, log_path: Path):
    """Small lab checkpoints built under root (tests/lab_checkpoints.py) and the app on them: yields its URL."""
    from lab_checkpoints import build_lab_checkpoints, lab_environment

    with streamlit_server(lab_environment(build_lab_checkpoints(root)), log_path) as (url, _):
        yield url


def server_stacks(url: str, lines: int = 400) -> str:
    """For a test that is about to fail on a wait: stop the server with SIGABRT, so that it writes every thread's
    stack to its log (PYTHONFAULTHANDLER); return the log's last lines before the stacks, then the stacks. The
    server is gone afterwards."""
    proc, log_path = _SERVERS[url]
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    text = log_path.read_text(errors="replace").splitlines()
    cut = max((i for i, line in enumerate(text) if line.startswith("Fatal Python error")), default=len(text))
    stacks = [line for line in text[cut:] if not line.startswith("Extension modules:")]
    return "\n".join(text[max(0, cut - 30) : cut] + stacks[:lines])


@contextmanager
def explained_timeout(page, url: str, what: str):
    """A Playwright wait inside that times out fails with what the page shows (its sidebar and title) and where
    every thread of the server stood: a timeout on CI, where nothing else is kept, says why."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        yield
    except (PlaywrightTimeout, TimeoutError) as err:
        sidebar = page.locator('[data-testid="stSidebar"]').all_inner_texts()
        heading = page.locator("h1").all_inner_texts()
        raise AssertionError(
            f"{what}: {err}\nURL: {page.url}\nh1: {heading}\nsidebar: {sidebar}\n"
            f"the server's threads and log:\n{server_stacks(url)}"
        ) from err


@contextmanager
def browser(profile_dir: Path, width: int = 1600, height: int = 1000):
    """A fresh chromium profile (the user-data-dir) and one page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": width, "height": height},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def wait_until_idle(page, timeout: float = 120.0, quiet: float = 0.8):
    """Until the app has stopped running (no status widget, no spinner) for `quiet` seconds."""
    deadline = time.perf_counter() + timeout
    calm_since = None
    while time.perf_counter() < deadline:
        busy = page.locator('[data-testid="stStatusWidget"], [data-testid="stSpinner"]').count() > 0
        if busy:
            calm_since = None
        elif calm_since is None:
            calm_since = time.perf_counter()
        elif time.perf_counter() - calm_since >= quiet:
            return
        time.sleep(0.1)
    raise TimeoutError("the app kept running")


def full_page_screenshot(page, path, max_height: int = 16_000):
    """The whole page, not just the viewport: Streamlit scrolls inside its main element, so Playwright's
    full_page=True stops at the first screen. Grow the viewport to the content's height, shoot, restore."""
    size = page.viewport_size
    height = page.evaluate(
        """() => { const main = document.querySelector('[data-testid="stMain"]');
                   return Math.max(document.scrollingElement.scrollHeight, main ? main.scrollHeight : 0); }"""
    )
    page.set_viewport_size({"width": size["width"], "height": min(max(height, size["height"]), max_height)})
    try:
        wait_until_idle(page)
        page.wait_for_timeout(500)  # plotly relayouts to the new size
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(size)


def shows_chart_under(page, heading: str) -> bool:
    """True when a heading with this text is on the page and a drawn plotly chart follows it."""
    return page.evaluate(
        """(text) => {
        const heads = [...document.querySelectorAll('h1, h2, h3')].filter(h => h.innerText.includes(text));
        if (!heads.length) return false;
        const after = (el) => heads[0].compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING;
        return [...document.querySelectorAll('.js-plotly-plot .main-svg')].some(
            svg => after(svg) && svg.getBoundingClientRect().height > 100);
    }""",
        heading,
    )


def no_traceback(page):
    """No exception element and no traceback text anywhere in the app."""
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.locator('[data-testid="stApp"]').inner_text()


def steer_text(page) -> str:
    return page.locator(CONTINUATION).inner_text()


def map_signature(page) -> list | None:
    """The current path in the Steer map: its u and its points, read from the page's SVG."""
    return page.evaluate(
        f"""() => {{
        const root = ({INSTANT_ROOT})();
        const now = root && root.querySelector('polyline.now');
        return now && now.getAttribute('points') ? [now.dataset.u, now.getAttribute('points')] : null;
    }}"""
    )


def wait_for_steer_page(page, timeout: float = 300.0):
    page.wait_for_selector(CONTINUATION, timeout=timeout * 1000)
    page.wait_for_function(
        f"""() => {{ const root = ({INSTANT_ROOT})();
                   const now = root && root.querySelector('polyline.now');
                   return !!(now && now.getAttribute('points')); }}""",
        timeout=timeout * 1000,
    )


def sentiment_slider(page):
    return page.locator(f"{INSTANT} input#instant-u")


def wait_for_map_change(page, before: list | None, timeout: float = 60.0):
    page.wait_for_function(
        f"""(old) => {{
        const root = ({INSTANT_ROOT})();
        const now = root && root.querySelector('polyline.now');
        if (!now || !now.getAttribute('points')) return false;
        return !old || now.dataset.u !== old[0] || now.getAttribute('points') !== old[1];
    }}""",
        arg=before,
        timeout=timeout * 1000,
        polling="raf",
    )


# Measured in the page itself: from the key's keydown event to the first animation frame after the
# map's current path changed (what the user sees), so the harness's own round trips (Playwright polling
# several pages in turn) do not count. The observer watches the whole component, not the path element:
# a payload that changes the map's size redraws the backdrop and replaces that element, and an observer
# on the old one then never fired (bench_app stopped with "no frame in 60 s" about one run in three)
ARM_LATENCY = f"""() => {{
    const root = ({INSTANT_ROOT})();
    const signature = () => {{
        const now = root.querySelector('polyline.now');
        return now ? now.dataset.u + ' ' + now.getAttribute('points') : null;
    }};
    if (!window.__steerKeyListener) {{
        window.__steerKeyListener = true;
        document.addEventListener('keydown', () => {{ window.__steerKeyAt = performance.now(); }}, true);
    }}
    window.__steerKeyAt = null;
    window.__steerLatency = null;
    const before = signature();
    if (window.__steerObserver) window.__steerObserver.disconnect();
    window.__steerObserver = new MutationObserver(() => {{
        const t = window.__steerKeyAt;
        if (t == null || window.__steerLatency != null || signature() === before) return;
        requestAnimationFrame(() => {{ window.__steerLatency = performance.now() - t; }});
    }});
    window.__steerObserver.observe(root, {{
        subtree: true, childList: true, attributes: true, attributeFilter: ['points']
    }});
}}"""

# what the page shows when a step's frame never came (for the timeout's message)
STEER_STATE = f"""() => {{
    const root = ({INSTANT_ROOT})();
    const now = root && root.querySelector('polyline.now');
    const slider = root && root.querySelector('input[type=range]');
    return {{slider: slider && slider.value, path_u: now && now.dataset.u, key_seen: window.__steerKeyAt != null}};
}}"""


def press_and_arm(page, key: str):
    """Arm the in-page latency probe and press a key on the sentiment slider."""
    page.evaluate(ARM_LATENCY)
    slider = sentiment_slider(page)
    slider.focus()
    page.keyboard.press(key)


def latency_seconds(page, timeout: float = 60.0) -> float:
    """Seconds from the last armed key press to the updated map, as the page measured them."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function("() => window.__steerLatency != null", timeout=timeout * 1000, polling=20)
    except PlaywrightTimeout:
        shown = page.evaluate(STEER_STATE)
        raise TimeoutError(f"no updated map within {timeout:.0f} s of the key press; the page: {shown}") from None
    return page.evaluate("() => window.__steerLatency") / 1000


def move_sentiment(page, key: str, timeout: float = 60.0) -> float:
    """Press a key on the sentiment slider; seconds until the map shows the new path (measured in the page)."""
    before = map_signature(page)
    press_and_arm(page, key)
    seconds = latency_seconds(page, timeout)
    wait_for_map_change(page, before, timeout)
    return seconds


def open_page(page, url: str, timeout: float = 180.0):
    page.goto(url, timeout=timeout * 1000, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout * 1000)


@contextmanager
def browser_sessions(count: int, width: int = 1600, height: int = 1000):
    """`count` pages in separate browser contexts of one chromium: separate Streamlit sessions at once."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield [chromium.new_context(viewport={"width": width, "height": height}).new_page() for _ in range(count)]
        finally:
            chromium.close()


def change_prompt(page, text: str):
    """Type a new prompt in the sidebar and apply it (Ctrl+Enter, as the text area says)."""
    box = page.locator(".st-key-w_prompt textarea")
    box.fill(text)
    box.press("Control+Enter")
