"""Benchmark (not a test): the Compare page in a real browser.

    OMP_NUM_THREADS=2 python benchmarks/bench_compare.py [--a assets/flat] [--b assets/hybrid] [--repeats 10]
        [--screenshot docs/compare.png]

* render: a fresh server and browser open /compare on the two checkpoints; seconds until both sides show
  their continuation and their map's path, and whether the page holds an exception;
* slider step: from a key press on the shared slider (one step to a u never shown before, after both
  models' ranges were computed ahead) to the first animation frame in which BOTH maps show the new path,
  timed in the page as bench_app times the Steer page's step; median (p50) of `repeats` (the goal: within two
  frames, <= 33 ms);
* restore: the page's URL after the steps (both checkpoints, u₁ moved, u₂ at 0.5) opened in a fresh server and
  browser: whether both models, u₁ and u₂ come back.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from browser_lab import browser, no_traceback, open_page, streamlit_server, wait_until_idle  # noqa: E402

COMPARE_ROOT = """() => {
    const host = document.querySelector('.st-key-w_instant_compare');
    const walk = (node) => {
        if (node.shadowRoot) { const r = node.shadowRoot.querySelector('.instant'); if (r) return r; }
        for (const child of node.children) { const found = walk(child); if (found) return found; }
        return null;
    };
    return host ? (host.querySelector('.instant') || walk(host)) : null;
}"""

# both sides' current paths and texts, as one string per side
SIDES = f"""() => {{
    const root = ({COMPARE_ROOT})();
    if (!root) return null;
    return [...root.querySelectorAll('.side')].map(side => {{
        const now = side.querySelector('polyline.now'), text = side.querySelector('.text');
        return (now ? now.dataset.u + ' ' + now.getAttribute('points') : '') + ' | ' + (text ? text.textContent : '');
    }});
}}"""

# keydown to the frame after both maps changed (each side's path element is watched through the whole component)
ARM = f"""() => {{
    const root = ({COMPARE_ROOT})();
    const signature = () => [...root.querySelectorAll('.side polyline.now')].map(
        p => p.dataset.u + ' ' + p.getAttribute('points'));
    if (!window.__cmpKeyListener) {{
        window.__cmpKeyListener = true;
        document.addEventListener('keydown', () => {{ window.__cmpKeyAt = performance.now(); }}, true);
    }}
    window.__cmpKeyAt = null;
    window.__cmpLatency = null;
    const before = signature();
    if (window.__cmpObserver) window.__cmpObserver.disconnect();
    window.__cmpObserver = new MutationObserver(() => {{
        const t = window.__cmpKeyAt, now = signature();
        if (t == null || window.__cmpLatency != null || now.length < 2) return;
        if (now[0] === before[0] || now[1] === before[1]) return;   // both sides, or not yet
        requestAnimationFrame(() => {{ window.__cmpLatency = performance.now() - t; }});
    }});
    window.__cmpObserver.observe(
        root, {{subtree: true, childList: true, attributes: true, attributeFilter: ['points']}});
}}"""


def wait_for_both(page, timeout: float = 600.0):
    page.wait_for_function(
        f"""() => {{ const s = ({SIDES})(); return !!(s && s.length === 2 && s.every(x => !x.startsWith(' |'))); }}""",
        timeout=timeout * 1000,
    )


def step(page, key: str = "ArrowRight", timeout: float = 120.0) -> float:
    page.evaluate(ARM)
    page.locator(".st-key-w_instant_compare input#compare-u").focus()
    page.keyboard.press(key)
    page.wait_for_function("() => window.__cmpLatency != null", timeout=timeout * 1000, polling=20)
    return page.evaluate("() => window.__cmpLatency") / 1000


def wait_for_ranges(page, timeout: float = 600.0):
    """Until the component says nothing more is being computed (both models' whole range is in the browser)."""
    page.wait_for_function(
        f"""() => {{ const r = ({COMPARE_ROOT})(); return !!r && r.querySelector('.status').textContent === ''; }}""",
        timeout=timeout * 1000,
        polling=200,
    )


def picked(page) -> dict:
    """The two models (the sides' titles), u₁ (the shared slider) and u₂ (its slider) as the page shows them."""
    shown = page.evaluate(
        f"""() => {{ const r = ({COMPARE_ROOT})();
                   return [[...r.querySelectorAll('.side .name')].map(n => n.textContent),
                           r.querySelector('.uval').textContent]; }}"""
    )
    u2 = re.findall(r"[+-]\d\.\d\d", page.locator(".st-key-w_compare_style").inner_text())
    return {"sides": shown[0], "u1": shown[1], "u2": u2[0] if u2 else None}  # the thumb, before the ends


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default="assets/flat")
    parser.add_argument("--b", default="assets/hybrid")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--screenshot", default=None, help="save the page (viewport) as this PNG")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # u₂ set by the link, u₁ by the steps: the restored view must carry both parts of the control
    query = urllib.parse.urlencode({"a": args.a, "b": args.b, "u": 0, "style": 0.5})
    result: dict = {"a": args.a, "b": args.b}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {"STEERING_CACHE": str(tmp / "cache")}
        with streamlit_server(env, tmp / "streamlit.log") as (url, _):
            with browser(tmp / "profile", width=1700, height=1300) as page:
                start = time.perf_counter()
                open_page(page, f"{url}/compare?{query}")
                wait_for_both(page)
                result["render_s"] = round(time.perf_counter() - start, 2)
                wait_until_idle(page)
                no_traceback(page)
                result["exceptions"] = page.locator('[data-testid="stException"]').count()
                wait_for_ranges(page)
                steps = []
                for _ in range(args.repeats):
                    steps.append(step(page))
                    wait_until_idle(page, quiet=0.3)
                result["step_ms"] = [round(1000 * s, 1) for s in steps]
                result["step_p50_ms"] = round(1000 * statistics.median(steps), 1)
                page.wait_for_timeout(1500)  # the component reports a settled position after 350 ms
                wait_until_idle(page)
                before = picked(page)
                link = page.url
                if args.screenshot:
                    page.screenshot(path=args.screenshot)
        result["link"] = link
        result["before"] = before
        with streamlit_server({"STEERING_CACHE": str(tmp / "cache2")}, tmp / "streamlit2.log") as (url, _):
            with browser(tmp / "profile2", width=1700, height=1300) as page:
                fresh = url + link[link.index("/compare") :]
                open_page(page, fresh)
                wait_for_both(page)
                wait_until_idle(page)
                no_traceback(page)
                result["after"] = picked(page)
    result["restored"] = result["before"] == result["after"]
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
