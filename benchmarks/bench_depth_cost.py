"""Benchmark (not a test): what a depth-varying hybrid costs to run, before it has finished training.

    OMP_NUM_THREADS=2 python benchmarks/bench_depth_cost.py RUN [--flat assets/flat] [--repeats 3] [--json]

RUN is a checkpoint folder or a training run's folder (its last saved state): the costs depend on the shapes and
the solver, not on how far the run has trained, so a candidate can be timed while it trains (pause the training
for clean figures). At RK4-2 (the depth recipe's solver) and Euler-4 (the cheap point at inference), side by side in
one run: the no-grad forward's latency and FLOP ratios to the discrete baseline (issue 53: latency <= FLOP + 0.05),
decoding over its own floor (bar: <= 2x), and the Steer page's 81-position range at batch 40 (lab.compute_steer_views,
the drawn paths included) against the flat hybrid's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_range import range_seconds  # noqa: E402

from steering.analysis.pca import fit_pca_map  # noqa: E402
from steering.evaluation.efficiency import (  # noqa: E402
    INFERENCE_EULER,
    LATENCY_BATCH,
    LATENCY_TOKENS,
    fixed_step_nfe,
    forward_flops,
    measure_decode,
    measure_latency,
)
from steering.model.ode import SolverConfig  # noqa: E402
from steering.training.checkpoint import DEFAULT_BASELINE, load_checkpoint, load_model_or_saved_state  # noqa: E402

SOLVERS = {"rk4_2": SolverConfig("rk4", steps=2), "euler_4": INFERENCE_EULER}
PROMPT = "The movie was"
BATCH = 40  # lab_ui.models.STEER_BATCH


def with_solver(model, solver: SolverConfig):
    """The model as if trained with `solver`: decoding and the Steer range use the training solver."""
    model.config = replace(model.config, solver=solver.method, solver_steps=solver.steps)
    return model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a checkpoint folder or a training run's folder")
    p.add_argument("--flat", default="assets/flat", help="the flat hybrid to compare the Steer range with")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    model, tok, source = load_model_or_saved_state(args.run)
    flat, flat_tok, _ = load_checkpoint(args.flat)
    discrete, _, _ = load_checkpoint(DEFAULT_BASELINE)
    trained_with = model.training_solver
    report = {"model": source, "trained_with": trained_with.label(), "threads": torch.get_num_threads()}
    for name, solver in SOLVERS.items():
        latency = measure_latency(model, discrete, solver=solver)
        shape = (LATENCY_BATCH, LATENCY_TOKENS)
        flop_ratio = forward_flops(model.config, *shape, fixed_step_nfe(solver)) / forward_flops(
            discrete.config, *shape
        )
        decode = [measure_decode(with_solver(model, solver)) for _ in range(args.repeats)]
        report[name] = {
            "latency_ratio": latency.ratio,
            "flop_ratio": flop_ratio,
            "decode_over_floor": [d.fast_ms_per_token / (d.floor_s * 1e3) for d in decode],
        }
    with_solver(model, trained_with)
    maps = {
        m: fit_pca_map(m, t, prompts=(PROMPT,), u_values=(-1.0, 1.0), n_tau=5)
        for m, t in ((model, tok), (flat, flat_tok))
    }
    ranges = {"model": [], "flat": []}
    for m, t in ((model, tok), (flat, flat_tok)):
        range_seconds(m, t, maps[m], PROMPT, BATCH)  # warm-up
    for _ in range(args.repeats):  # alternating, so a slower minute shows in both
        ranges["model"].append(range_seconds(model, tok, maps[model], PROMPT, BATCH))
        ranges["flat"].append(range_seconds(flat, flat_tok, maps[flat], PROMPT, BATCH))
    report["steer_range_s"] = ranges
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{source} (trained with {report['trained_with']}), {report['threads']} thread(s)")
    for name in SOLVERS:
        r = report[name]
        decode = ", ".join(f"{x:.2f}" for x in r["decode_over_floor"])
        print(
            f"  {name}: latency / discrete {r['latency_ratio']:.3f} (FLOP {r['flop_ratio']:.3f}, bar <= FLOP + 0.05); "
            f"decode / its floor {decode} (bar <= 2)"
        )
    fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    print(
        f"  Steer range (81 positions, batch {BATCH}, at {trained_with.label()}): {fmt(ranges['model'])} s; "
        f"flat hybrid {fmt(ranges['flat'])} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
