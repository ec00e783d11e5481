"""docs/regimes.png: the Regimes page's map on the shipped model, in headless chromium, after the band button.

    .venv/bin/python scripts/regimes_screenshot.py [--checkpoint assets/hybrid] [--out docs/regimes.png]

Starts `streamlit run app.py` on the checkpoint (tests/browser_lab.py), opens the Regimes page, waits for the
map (computed in the background), presses "Jump to the band's middle" where the map has a band (a prompt whose
NFE over u never takes two levels has none) and shoots the map's section.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser_lab import browser, streamlit_server, wait_until_idle  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(ROOT / "assets" / "hybrid"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "regimes.png"))
    parser.add_argument("--prompt", default="The movie was")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="regimes-shot-"))
    env = {"STEERING_CHECKPOINT": args.checkpoint, "STEERING_PREFETCH": "0"}
    with streamlit_server(env, work / "server.log") as (url, _), browser(work / "profile", 1500, 1500) as page:
        start = time.perf_counter()
        page.goto(f"{url}/regimes?prompt={args.prompt.replace(' ', '+')}", timeout=300_000)
        page.locator(".st-key-regimes_map").wait_for(timeout=1_800_000)  # one core: minutes on a depth field
        wait_until_idle(page, timeout=300)
        print(f"map ready {time.perf_counter() - start:.0f} s after opening the page", flush=True)
        button = page.get_by_role("button", name="Jump to the band's middle")
        if button.count():
            button.click()
            wait_until_idle(page, timeout=300)
        else:
            print("no band on this prompt: the map at its default row", flush=True)
        page.wait_for_timeout(1500)
        page.get_by_text("The regimes map: NFE over u and tolerance").scroll_into_view_if_needed()
        box_top = page.get_by_text("The regimes map: NFE over u and tolerance").bounding_box()["y"]
        chart = page.locator(".st-key-regimes_map").bounding_box()
        page.screenshot(
            path=args.out,
            clip={
                "x": 0,
                "y": max(0, box_top - 10),
                "width": 1500,
                "height": chart["y"] + chart["height"] - box_top + 20,
            },
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
