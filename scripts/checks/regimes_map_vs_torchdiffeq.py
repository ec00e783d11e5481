"""Independent check of the regimes map's batched solves: every cell against raw torchdiffeq, one u at a time.

    .venv/bin/python scripts/checks/regimes_map_vs_torchdiffeq.py CHECKPOINT [--prompts N] [--precision float64]
        [--every K] [--out FILE.jsonl]

For each probe prompt: `regimes_map` (the project's batched dopri5, each u on its own steps) and then, for every
cell of its map (41 u × the 25 grid tolerances and each band's middle; --every K keeps every K-th u), one
torchdiffeq.odeint dopri5 solve of that u alone on a float64 copy of the model's own field module (its own forward,
weights materialised at each τ), rtol t, atol t/10, step_t = [1] so the last step lands on τ = 1, with a plain
counting wrapper and torchdiffeq's step callbacks. Compares NFE, accepted and rejected steps cell by cell and
prints every difference with both solves' step sequences and the error ratios of the batched one, so a
difference at a ratio within round-off of 1 (a decision on a knife edge) reads as such. One JSON line per prompt
goes to --out as it finishes. Only the model, the prompt encoding and the map come from the project; the
reference solves use none of its solver code.

--reference-field batched runs the same torchdiffeq solves on the project's batched field with a batch of one
(model.batched_field: each layer's K coefficient sets in one matmul) instead of the module's own forward, which
materialises every weight at each τ and is about 10× slower on the shipped model: it checks the controller alone,
over the whole grid of every prompt in minutes; tests/test_batched_adaptive.py checks the batched field against
the module's forward (to 1e-12) and the counts against the own forward on sampled cells.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch
from torchdiffeq import odeint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.analysis.regimes_map import regimes_map  # noqa: E402
from steering.data.heldout import prompt_set  # noqa: E402
from steering.data.tokenizer import bos_id, encode  # noqa: E402
from steering.model.batched_field import batched_field  # noqa: E402
from steering.training.checkpoint import load_model_or_saved_state  # noqa: E402


class Counted(torch.nn.Module):
    """f(τ, H) with a call count and torchdiffeq's step callbacks (the step as proposed, then the decision)."""

    def __init__(self, f):
        super().__init__()
        self.f, self.calls, self.proposed, self.decisions = f, 0, [], []

    def forward(self, t, y):
        self.calls += 1
        return self.f(t, y)

    def callback_step(self, t0, y0, dt):
        self.proposed.append((float(t0), float(dt)))

    def callback_accept_step(self, t0, y0, dt):
        self.decisions.append(True)

    def callback_reject_step(self, t0, y0, dt):
        self.decisions.append(False)


def reference_solve(field, h0, u: float, t: float, batched: bool = False) -> Counted:
    control = torch.tensor([[u, 0.0]], dtype=h0.dtype)
    if batched:
        one = batched_field(field, control, h0)

        def f(tau, y):
            return one(tau.reshape(1), y)

        counted = Counted(f)
    else:
        counted = Counted(field.bind(control, h0))
    odeint(
        counted,
        h0,
        torch.tensor([0.0, 1.0], dtype=h0.dtype),
        method="dopri5",
        rtol=t,
        atol=t / 10,
        options={"step_t": torch.tensor([1.0], dtype=torch.float64), "max_num_steps": 2000},
    )
    return counted


def main():
    torch.set_grad_enabled(False)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--first-prompt", type=int, default=0)
    parser.add_argument("--precision", default="float64", choices=("float64", "float32"))
    parser.add_argument("--every", type=int, default=1, help="compare every K-th u of each row")
    parser.add_argument("--out", default=None)
    parser.add_argument("--reference-field", default="own", choices=("own", "batched"))
    args = parser.parse_args()
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.precision]
    model, tok, source = load_model_or_saved_state(args.checkpoint)
    model.eval()
    field = copy.deepcopy(model.field).to(dtype)
    prompts = prompt_set("probe", tok, 10)[args.first_prompt : args.first_prompt + args.prompts]
    total_cells = total_diffs = 0
    for prompt in prompts:
        start = time.perf_counter()
        m = regimes_map(model, tok, prompt, precision=args.precision)
        map_seconds = time.perf_counter() - start
        h0 = model.encode(torch.tensor([[bos_id(tok)] + encode(tok, prompt)])).to(dtype)
        diffs, cells = [], 0
        start = time.perf_counter()
        for i, t in enumerate(m.t):
            for j in range(0, len(m.u), args.every):
                ref = reference_solve(field, h0, float(m.u[j]), float(t), args.reference_field == "batched")
                cells += 1
                ours = (int(m.nfe[i, j]), int(m.accepted[i, j]), int(m.rejected[i, j]))
                theirs = (ref.calls, sum(ref.decisions), len(ref.decisions) - sum(ref.decisions))
                if ours != theirs:
                    diffs.append(
                        {
                            "t": float(t),
                            "u": float(m.u[j]),
                            "batched (nfe, accepted, rejected)": ours,
                            "torchdiffeq": theirs,
                            "batched max error ratio": float(m.max_error_ratio[i, j]),
                            "batched first step": float(m.first_step[i, j]),
                            "torchdiffeq steps (t0, dt proposed)": ref.proposed,
                            "torchdiffeq decisions": ref.decisions,
                        }
                    )
                    print(f"  DIFF {prompt!r} t {t:.4g} u {m.u[j]:+.2f}: batched {ours}, torchdiffeq {theirs}")
        line = {
            "checkpoint": source,
            "prompt": prompt,
            "precision": args.precision,
            "reference_field": args.reference_field,
            "cells": cells,
            "differences": diffs,
            "map_seconds": map_seconds,
            "reference_seconds": time.perf_counter() - start,
            "map": {
                "u": m.u.tolist(),
                "t": m.t.tolist(),
                "nfe": m.nfe.tolist(),
                "rejected": m.rejected.tolist(),
                "reason": m.reason,
                "first_step": m.first_step.tolist(),
                "max_error_ratio": m.max_error_ratio.tolist(),
                "bands": [{**b.to_dict()} for b in m.bands],
                "why_no_band": m.why_no_band,
                "solves": m.solves,
            },
        }
        total_cells += cells
        total_diffs += len(diffs)
        print(
            f"{prompt!r}: {cells} cells, {len(diffs)} differ (map {map_seconds:.1f} s, "
            f"reference {line['reference_seconds']:.1f} s)",
            flush=True,
        )
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(line) + "\n")
    print(f"{source} ({args.precision}): {total_diffs} of {total_cells} cells differ from torchdiffeq")


if __name__ == "__main__":
    main()
