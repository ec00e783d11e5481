"""The docs' lab screenshots on the shipped model, in headless chromium (tests/browser_lab.py):

    .venv/bin/python scripts/ship/docs_screenshots.py [--checkpoint assets/hybrid] [--out docs]

- steer.png: the Steer page at u = -1, 1500x1000 (the README's first picture);
- presenter-1920x1080.png, presenter-1280x720.png: the Steer page in presenter mode at u = 1.5 on both screens;
- bend.png: the Trajectories page in its bend view at u = 1.5, 1500x1100 (the paths' bend at its true size).
One server for all four, started and stopped here. docs/regimes.png (scripts/regimes_screenshot.py) and
docs/compare.png (benchmarks/bench_compare.py) have scripts of their own.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from browser_lab import (  # noqa: E402
    INSTANT_ROOT,
    browser,
    no_traceback,
    open_page,
    streamlit_server,
    wait_for_steer_page,
    wait_until_idle,
)


def shoot(page, path: Path):
    wait_until_idle(page, timeout=600)
    no_traceback(page)  # a picture of an exception must not land in the docs
    page.wait_for_timeout(1000)  # plotly's last relayout
    page.screenshot(path=str(path))
    print(f"wrote {path}", flush=True)


def steer_page_settled(page):
    """The Steer page with its whole range computed: no "computing the rest of the range…" in the picture."""
    wait_for_steer_page(page, timeout=600)
    page.wait_for_function(
        f"() => {{ const r = ({INSTANT_ROOT})(); return r && !r.textContent.includes('computing the rest'); }}",
        timeout=600_000,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(ROOT / "assets" / "hybrid"))
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="docs-shots-"))
    env = {"STEERING_CHECKPOINT": args.checkpoint, "STEERING_CACHE": str(work / "cache")}
    start = time.perf_counter()
    with streamlit_server(env, work / "server.log") as (url, _), browser(work / "profile", 1500, 1000) as page:
        open_page(page, f"{url}/?u=-1", timeout=600)
        steer_page_settled(page)
        shoot(page, args.out / "steer.png")

        page.set_viewport_size({"width": 1920, "height": 1080})
        open_page(page, f"{url}/?u=1.5&presenter=1", timeout=600)
        steer_page_settled(page)
        shoot(page, args.out / "presenter-1920x1080.png")
        page.set_viewport_size({"width": 1280, "height": 720})  # the charts take the height the screen leaves
        shoot(page, args.out / "presenter-1280x720.png")

        page.set_viewport_size({"width": 1500, "height": 1100})
        open_page(page, f"{url}/trajectories?u=1.5", timeout=600)
        page.locator(".st-key-w_view").get_by_text("Bend view", exact=True).click()
        page.wait_for_timeout(500)  # the rerun starts
        shoot(page, args.out / "bend.png")
    print(f"four screenshots in {time.perf_counter() - start:.0f} s (server log: {work / 'server.log'})")


if __name__ == "__main__":
    main()
