"""Time of the regimes map for one prompt: dopri5 over 41 u × 25 tolerances, plus the bands' bisections.

Not a test. The issue's target is 60 s on 2 CPU threads. Run:
    OMP_NUM_THREADS=2 python benchmarks/bench_regimes_map.py [--checkpoint DIR] [--prompt TEXT] [--repeats 1]
(default checkpoint: assets/hybrid, or $STEERING_CHECKPOINT).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steering.analysis.regimes_map import regimes_map
from steering.training.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--prompt", default="The movie was")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    model, tok, _ = load_checkpoint(args.checkpoint)
    regimes_map(model, tok, args.prompt, (-1.0, 1.0), (1e-3, 1e-2))  # warm-up
    times, cpu, m = [], [], None
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        m = regimes_map(model, tok, args.prompt)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(f"checkpoint {args.checkpoint}, prompt {args.prompt!r}, {torch.get_num_threads()} threads on {cpu_name()}")
    print(
        f"regimes map ({len(m.u)} u × {len(m.t)} tolerances incl. band middles, {m.solves} dopri5 solves with the "
        f"bisections): median {statistics.median(times):.1f} s over {args.repeats} run(s) (target 60 s); CPU time "
        f"{statistics.median(cpu):.1f} s (wall time above it means a busy machine)"
    )
    print("bands: " + "; ".join(f"{b.kind} t in [{b.t_low:.3g}, {b.t_high:.3g}]" for b in m.bands))


if __name__ == "__main__":
    main()
