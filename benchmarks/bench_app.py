"""Benchmark (not a test): the lab in a real browser.

    OMP_NUM_THREADS=2 python benchmarks/bench_app.py [--checkpoint DIR] [--repeats 10]

* cold start: from launching `streamlit run app.py` to the Steer page completely rendered
  (continuation text shown and the map plotted) in a fresh browser profile, with an empty
  PCA cache (the worst case: the map is fitted during the first render);
* slider step: from a key press on the sentiment slider (one step to a u never shown before)
  to the first frame with the map showing the new path, timed in the page (keydown to the
  animation frame after the path changed; browser_lab.ARM_LATENCY); median of `repeats`. Measured as the app runs
  (after an input change it computes every slider position in the background, nearest first)
  and with that work-ahead off (STEERING_PREFETCH=0: every step computed while the user waits);
* range: seconds from an input change (a new prompt typed in the sidebar) until the whole
  sentiment range has been computed, read from the app's own work-ahead log
  (STEERING_PREFETCH_LOG);
* far drag: one move from -2 to +2 (End) or back (Home), after the range is computed;
  median of `repeats`;
* 4 sessions: four browser sessions on one server, each on its own example prompt (so each has
  its own range computing meanwhile), each pressing a step at the same moment; the p50 of all
  their steps, against one session's step median.

Uses the shipped checkpoint (or $STEERING_CHECKPOINT / --checkpoint).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from browser_lab import (  # noqa: E402
    browser,
    browser_sessions,
    change_prompt,
    latency_seconds,
    move_sentiment,
    open_page,
    press_and_arm,
    streamlit_server,
    wait_for_steer_page,
    wait_until_idle,
)

from steering.lab.logic import EXAMPLE_PROMPTS  # noqa: E402

NEW_PROMPT = "I watched this film last night and"


def _ranges(log: Path) -> list[dict]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _wait_for_range(log: Path, prompt: str, timeout: float = 120.0) -> dict:
    """The first finished work-ahead for `prompt`, from the app's log."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for line in _ranges(log):
            if line["prompt"] == prompt:
                return line
        time.sleep(0.05)
    raise TimeoutError(f"the range for {prompt!r} was not computed within {timeout:.0f} s")


def _session(env: dict, repeats: int, far: bool) -> dict:
    """A fresh server (empty PCA cache) and browser: cold start, steps, and (far=True) the range and far drags."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        log = tmp / "prefetch.jsonl"
        launched = time.perf_counter()
        env = {**env, "STEERING_CACHE": str(tmp / "cache"), "STEERING_PREFETCH_LOG": str(log)}
        with streamlit_server(env, tmp / "streamlit.log") as (url, healthy):
            with browser(tmp / "profile") as page:
                open_page(page, f"{url}/?u=0")
                wait_for_steer_page(page)
                cold = time.perf_counter() - launched
                wait_until_idle(page)
                steps = []
                for _ in range(repeats):
                    steps.append(move_sentiment(page, "ArrowRight"))  # one step: a u not shown before
                    wait_until_idle(page, quiet=0.3)
                out = {"healthy": healthy, "cold": cold, "steps": steps}
                if far:
                    change_prompt(page, NEW_PROMPT)  # an input change: a new range
                    out["range"] = _wait_for_range(log, NEW_PROMPT)
                    wait_until_idle(page, quiet=0.3)
                    moves = []
                    for k in range(repeats + 1):
                        moved = move_sentiment(page, "End" if k % 2 == 0 else "Home")
                        if k:  # the first move only reaches an end
                            moves.append(moved)
                        wait_until_idle(page, quiet=0.3)
                    out["far"] = moves
    return out


def _four_sessions(env: dict, repeats: int, sessions: int = 4) -> list[float]:
    """Steps pressed at once in `sessions` browser sessions on one server; every step's seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**env, "STEERING_CACHE": str(tmp / "cache")}
        with streamlit_server(env, tmp / "streamlit.log") as (url, _):
            with browser_sessions(sessions) as pages:
                for page, prompt in zip(pages, itertools.cycle(EXAMPLE_PROMPTS)):  # each its own range to compute
                    open_page(page, f"{url}/?{urllib.parse.urlencode({'u': 0, 'prompt': prompt})}")
                for page in pages:
                    wait_for_steer_page(page)
                for page in pages:
                    wait_until_idle(page)
                times = []
                for _ in range(repeats):
                    for page in pages:  # each page times its own step (browser_lab.ARM_LATENCY)
                        press_and_arm(page, "ArrowRight")
                    times += [latency_seconds(page) for page in pages]
                    for page in pages:
                        wait_until_idle(page, quiet=0.3)
    return times


def _ms(values) -> list[float]:
    return [round(1000 * v, 1) for v in values]


def main(argv=None) -> int:
    from steering.training.checkpoint import DEFAULT_BASELINE, DEFAULT_CHECKPOINT

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
    main_run = _session(env, args.repeats, far=True)
    cold_run = _session({**env, "STEERING_PREFETCH": "0"}, args.repeats, far=False)
    together = _four_sessions(env, args.repeats)
    one = statistics.median(main_run["steps"])
    result = {
        "checkpoint": args.checkpoint,
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "server_healthy_s": round(main_run["healthy"], 3),
        "cold_start_to_first_render_s": round(main_run["cold"], 3),
        "slider_to_updated_plot_median_ms": round(1000 * one, 1),
        "slider_to_updated_plot_ms": _ms(main_run["steps"]),
        "slider_without_prefetch_median_ms": round(1000 * statistics.median(cold_run["steps"]), 1),
        "slider_without_prefetch_ms": _ms(cold_run["steps"]),
        "range_after_prompt_change_s": round(main_run["range"]["seconds"], 3),
        "range_positions": main_run["range"]["keys"],
        "far_drag_median_ms": round(1000 * statistics.median(main_run["far"]), 1),
        "far_drag_ms": _ms(main_run["far"]),
        "four_sessions_step_p50_ms": round(1000 * statistics.median(together), 1),
        "four_sessions_step_ms": _ms(together),
        "four_sessions_over_one": round(statistics.median(together) / one, 2),
        "load_average": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"checkpoint: {result['checkpoint']}  (OMP_NUM_THREADS={result['omp_threads']}, "
            f"{result['cpu_count']} CPUs, load average {result['load_average'][0]:.1f})"
        )
        print(f"server healthy after:            {result['server_healthy_s']:.2f} s")
        print(f"cold start to first render:      {result['cold_start_to_first_render_s']:.2f} s   (target < 10 s)")
        print(
            f"slider step to updated plot:     {result['slider_to_updated_plot_median_ms']:.0f} ms median of "
            f"{len(main_run['steps'])}   (target <= 100 ms)"
        )
        print(f"  each: {', '.join(f'{m:.0f}' for m in result['slider_to_updated_plot_ms'])} ms")
        print(
            f"the same, work-ahead off:        {result['slider_without_prefetch_median_ms']:.0f} ms median "
            f"(STEERING_PREFETCH=0: each step computed while waiting)"
        )
        print(f"  each: {', '.join(f'{m:.0f}' for m in result['slider_without_prefetch_ms'])} ms")
        print(
            f"whole range after a new prompt:  {result['range_after_prompt_change_s']:.2f} s for "
            f"{result['range_positions']} positions   (target <= 3 s)"
        )
        print(
            f"far drag (-2 <-> +2):            {result['far_drag_median_ms']:.0f} ms median of "
            f"{len(main_run['far'])}   (target <= 150 ms)"
        )
        print(f"  each: {', '.join(f'{m:.0f}' for m in result['far_drag_ms'])} ms")
        print(
            f"4 sessions, a step each at once: {result['four_sessions_step_p50_ms']:.0f} ms p50 of "
            f"{len(together)}, {result['four_sessions_over_one']:.2f}x one session's   (target <= 2x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
