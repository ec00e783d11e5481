"""Benchmark (not a test): the Steer page's whole slider range, computed in batches of each size, in one run.

    OMP_NUM_THREADS=2 python benchmarks/bench_range.py [--checkpoint DIR] [--batches 16,28,40,81] [--repeats 2]

The work the page does ahead of the user after a prompt change (lab_ui.models.STEER_BATCH): every slider position's
continuation, next-token bars and path (lab.compute_steer_views), at the checkpoint's training solver. Sizes run
alternately, repeated, and the best of each is printed with its ratio to the first size: the batch size that
lab_ui uses is chosen from these.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steering.analysis.pca import fit_pca_map  # noqa: E402
from steering.lab.compute import compute_steer_views  # noqa: E402
from steering.lab.logic import slider_positions  # noqa: E402
from steering.training.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint  # noqa: E402


def range_seconds(model, tok, pca, prompt: str, batch: int) -> float:
    positions = slider_positions()
    start = time.perf_counter()
    for i in range(0, len(positions), batch):
        controls = [(u, 0.0) for u in positions[i : i + batch]]
        compute_steer_views(model, tok, pca, prompt, controls, model.training_solver)
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    p.add_argument("--batches", default="16,28,40,81")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--prompt", default="The movie was")
    args = p.parse_args(argv)
    sizes = [int(b) for b in args.batches.split(",")]
    model, tok, _ = load_checkpoint(args.checkpoint)
    pca = fit_pca_map(model, tok, prompts=(args.prompt,), u_values=(-1.0, 1.0), n_tau=5)
    range_seconds(model, tok, pca, args.prompt, sizes[0])  # warm-up
    runs = {b: [] for b in sizes}
    for _ in range(args.repeats):
        for b in sizes:
            runs[b].append(range_seconds(model, tok, pca, args.prompt, b))
    first = min(runs[sizes[0]])
    print(
        f"{args.checkpoint}: {len(slider_positions())} positions, {model.training_solver.label()}, "
        f"best of {args.repeats}"
    )
    for b in sizes:
        print(f"  batch {b:>3}: {min(runs[b]):.2f} s ({min(runs[b]) / first:.2f}x batch {sizes[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
