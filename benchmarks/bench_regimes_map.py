"""Time of the regimes map for one prompt (dopri5 over 41 u × 25 tolerances plus the bands' bisections, float64 by
default) and of the Regimes page's NFE-against-u sweep (41 u, dopri5 and adaptive_heun, float64, rtol 1e-3).

Not a test. Issue 65's targets on 2 CPU threads: the map ≤ 15 s, the sweep ≤ 3 s. Run:
    OMP_NUM_THREADS=2 python benchmarks/bench_regimes_map.py [--checkpoint DIR] [--prompt TEXT] [--repeats 1]
        [--float32]
(default checkpoint: assets/hybrid, or $STEERING_CHECKPOINT). Prints wall and CPU seconds: wall well above
CPU / threads means a busy machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steering.analysis.regimes_map import regimes_map
from steering.lab import compute
from steering.training.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def timed(fn, repeats: int):
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return statistics.median(walls), statistics.median(cpus), out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--prompt", default="The movie was")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--float32", action="store_true", help="the map in float32 instead of float64")
    parser.add_argument("--skip-map", action="store_true", help="time the sweep only")
    args = parser.parse_args()
    precision = "float32" if args.float32 else "float64"
    model, tok, _ = load_checkpoint(args.checkpoint)
    regimes_map(model, tok, args.prompt, (-1.0, 1.0), (1e-3, 1e-2), precision=precision)  # warm-up
    print(f"checkpoint {args.checkpoint}, prompt {args.prompt!r}, {torch.get_num_threads()} threads on {cpu_name()}")
    grid = np.round(np.linspace(-2.0, 2.0, 41), 6)
    wall, cpu, r = timed(
        lambda: compute.regimes_in_chunks(model, tok, args.prompt, grid, rtol=1e-3, atol=1e-4, chunks=1),
        args.repeats,
    )
    print(
        f"NFE sweep (41 u, dopri5 and adaptive_heun, float64, rtol 1e-3, batched): median {wall:.2f} s over "
        f"{args.repeats} run(s) (target 3 s); CPU time {cpu:.2f} s; dopri5 NFE {sorted(set(r.nfe['dopri5'].tolist()))}"
    )
    if args.skip_map:
        return
    wall, cpu, m = timed(lambda: regimes_map(model, tok, args.prompt, precision=precision), args.repeats)
    print(
        f"regimes map ({len(m.u)} u × {len(m.t)} tolerances incl. band middles, {m.solves} dopri5 solves with the "
        f"bisections, {precision}): median {wall:.1f} s over {args.repeats} run(s) (target 15 s); CPU time {cpu:.1f} s"
    )
    print("bands: " + "; ".join(f"{b.kind} t in [{b.t_low:.3g}, {b.t_high:.3g}]" for b in m.bands))


if __name__ == "__main__":
    main()
