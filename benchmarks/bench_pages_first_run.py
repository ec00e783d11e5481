"""Each page's first run under Streamlit's AppTest on the shipped model, each in a fresh process with an empty
cache (what a newcomer's first visit to that page costs: the model's load, the PCA map's fit, the page's work).

Not a test. Issue 65's target: every page's first run <= 60 s on 2 CPU threads. Run:
    OMP_NUM_THREADS=2 python benchmarks/bench_pages_first_run.py [--pages regimes steer ...] [--json]
(default checkpoint: assets/hybrid, or $STEERING_CHECKPOINT). A page that raises or runs past --timeout is
reported as such, with its message, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(p.stem for p in (ROOT / "pages").glob("*.py"))
TARGET_S = 60.0

# run in the child: the app's entry point, then the page, as the tests' run_app does
CHILD = """
import sys, time
from streamlit.testing.v1 import AppTest
app, page, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
start = time.perf_counter()
at = AppTest.from_file(app, default_timeout=timeout)
at.run()
at.switch_page(page).run()
errors = [e.value for e in at.exception]
print("RESULT", time.perf_counter() - start, "|".join(errors))
"""


def first_run(page: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STEERING_CACHE": cache}
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(ROOT / "app.py"), f"pages/{page}.py", str(timeout)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout + 30,  # the child's own AppTest timeout fires first; this only ends a hung child
            )
        except subprocess.TimeoutExpired:
            return {"page": page, "seconds": None, "error": f"no result within {timeout + 30:.0f} s"}
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"page": page, "seconds": None, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    _, seconds, errors = line.split(" ", 2)
    return {"page": page, "seconds": float(seconds), "wall_s": time.perf_counter() - start, "error": errors or None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="+", default=PAGES, choices=PAGES)
    parser.add_argument("--timeout", type=float, default=180.0, help="AppTest's limit for one run, seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [first_run(page, args.timeout) for page in args.pages]
    if args.json:
        print(json.dumps({"target_s": TARGET_S, "threads": os.environ.get("OMP_NUM_THREADS"), "pages": results}))
        return 0
    print(f"each page's first run under AppTest, fresh process and cache (target <= {TARGET_S:.0f} s)")
    for r in results:
        if r["seconds"] is None or r["error"]:
            print(f"  {r['page']:<14} FAILED: {r['error']}" + (f" ({r['seconds']:.1f} s)" if r["seconds"] else ""))
        else:
            verdict = "met" if r["seconds"] <= TARGET_S else "MISSED"
            print(f"  {r['page']:<14} {r['seconds']:6.1f} s   {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
