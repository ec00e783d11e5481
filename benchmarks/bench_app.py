"""Benchmark (not a test): the lab in a real browser.

    OMP_NUM_THREADS=2 python benchmarks/bench_app.py [--checkpoint DIR] [--repeats 10]

* cold start: from launching `streamlit run app.py` to the Steer page completely rendered
  (continuation text shown and the map plotted) in a fresh browser profile, with an empty
  PCA cache (the worst case: the map is fitted during the first render);
* slider: from a key press on the sentiment slider (one step to a u never shown before) to
  the map in the page showing the new path; median of `repeats`. Measured twice: as the
  app runs (it computes the next slider position while the page is looked at, so a step
  finds its result ready), and with that work-ahead off (STEERING_PREFETCH=0: every step
  computes its continuation, next-token odds and path while the user waits).

Uses the shipped checkpoint (or $STEERING_CHECKPOINT / --checkpoint).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from browser_lab import (browser, move_sentiment, open_page, streamlit_server, wait_for_steer_page,  # noqa: E402
                         wait_until_idle)


def _session(env: dict, repeats: int) -> tuple[float, float, list[float]]:
    """A fresh server (empty PCA cache) and browser: (seconds to healthy, cold start, slider moves)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        launched = time.perf_counter()
        with streamlit_server({**env, "STEERING_CACHE": str(tmp / "cache")}, tmp / "streamlit.log") as (url, healthy):
            with browser(tmp / "profile") as page:
                open_page(page, f"{url}/?u=0")
                wait_for_steer_page(page)
                cold = time.perf_counter() - launched
                wait_until_idle(page)
                moves = []
                for _ in range(repeats):
                    moves.append(move_sentiment(page, "ArrowRight"))   # one step: a u not shown before
                    wait_until_idle(page, quiet=0.3)
    return healthy, cold, moves


def main(argv=None) -> int:
    from steering.checkpoint import DEFAULT_BASELINE, DEFAULT_CHECKPOINT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--baseline", default=str(DEFAULT_BASELINE))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (Path(args.checkpoint) / "model.safetensors").is_file():
        print(f"no checkpoint at {args.checkpoint}; train one or pass --checkpoint", file=sys.stderr)
        return 2
    env = {"STEERING_CHECKPOINT": args.checkpoint, "STEERING_BASELINE": args.baseline}
    healthy_after, cold, moves = _session(env, args.repeats)
    _, _, moves_cold = _session({**env, "STEERING_PREFETCH": "0"}, args.repeats)
    result = {"checkpoint": args.checkpoint, "omp_threads": os.environ.get("OMP_NUM_THREADS"),
              "cpu_count": os.cpu_count(), "server_healthy_s": round(healthy_after, 3),
              "cold_start_to_first_render_s": round(cold, 3),
              "slider_to_updated_plot_median_ms": round(1000 * statistics.median(moves), 1),
              "slider_to_updated_plot_ms": [round(1000 * m, 1) for m in moves],
              "slider_without_prefetch_median_ms": round(1000 * statistics.median(moves_cold), 1),
              "slider_without_prefetch_ms": [round(1000 * m, 1) for m in moves_cold],
              "load_average": os.getloadavg()}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"checkpoint: {result['checkpoint']}  (OMP_NUM_THREADS={result['omp_threads']}, "
              f"{result['cpu_count']} CPUs, load average {result['load_average'][0]:.1f})")
        print(f"server healthy after:            {result['server_healthy_s']:.2f} s")
        print(f"cold start to first render:      {result['cold_start_to_first_render_s']:.2f} s   (target < 10 s)")
        print(f"slider move to updated plot:     {result['slider_to_updated_plot_median_ms']:.0f} ms median of "
              f"{len(moves)}   (target < 300 ms)")
        print(f"  each: {', '.join(f'{m:.0f}' for m in result['slider_to_updated_plot_ms'])} ms")
        print(f"the same, work-ahead off:        {result['slider_without_prefetch_median_ms']:.0f} ms median "
              f"(STEERING_PREFETCH=0: each step computed while waiting)")
        print(f"  each: {', '.join(f'{m:.0f}' for m in result['slider_without_prefetch_ms'])} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
