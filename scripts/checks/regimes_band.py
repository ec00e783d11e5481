"""Independent check of `analyze regimes-map`'s bands: raw torchdiffeq and a hand-written first-step rule.

    .venv/bin/python scripts/checks/regimes_band.py CHECKPOINT PROMPT T [--u -2 -1.5 ... 2]

At tolerance T (rtol T, atol T/10) and each u: dopri5 through torchdiffeq.odeint on the model's own field, with a
plain counting wrapper (its last step cut to land on τ = 1 by step_t, as the project's solves), and, beside it,
the first step of Hairer-Nørsett-Wanner's rule written out here in numpy (float64) from two field evaluations:
h0 = 0.01·|y0|/|f0|, h1 = (0.01 / max(|f0|, |f(h0) - f0|/h0))^(1/5), h = min(100·h0, h1), norms RMS over
y / (atol + rtol·|y0|); then the count the 10× growth cap implies, 2 + 6k with k the least number of steps
h, 10h, 100h, ... that reach τ = 1. Prints both per u. Only the model (its entry blocks and field) and the prompt
encoding come from the project; none of its solvers or analyses.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torchdiffeq import odeint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.data.tokenizer import bos_id, encode  # noqa: E402
from steering.training.checkpoint import load_model_or_saved_state  # noqa: E402


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x**2)))


def hand_first_step(field, y0: torch.Tensor, rtol: float, atol: float) -> float:
    y = y0.double().numpy()
    f0 = field(torch.tensor(0.0), y0).double().numpy()
    scale = atol + np.abs(y) * rtol
    d0, d1 = rms(y / scale), rms(f0 / scale)
    h0 = 0.01 * d0 / d1
    f1 = field(torch.tensor(h0, dtype=y0.dtype), y0 + h0 * torch.from_numpy(f0).to(y0.dtype)).double().numpy()
    d2 = rms((f1 - f0) / scale) / h0
    return min(100 * h0, (0.01 / max(d1, d2)) ** (1 / 5))


def cap_count(h: float) -> int:
    k, reach, step = 1, h, h
    while reach < 1.0:
        step *= 10.0
        reach += step
        k += 1
    return 2 + 6 * k


def main():
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("prompt")
    parser.add_argument("t", type=float)
    parser.add_argument("--u", type=float, nargs="+", default=list(np.linspace(-2, 2, 41)))
    args = parser.parse_args()
    model, tok, source = load_model_or_saved_state(args.checkpoint)
    model.eval()
    h0 = model.encode(torch.tensor([[bos_id(tok)] + encode(tok, args.prompt)]))
    rtol, atol = args.t, args.t / 10
    counts, rules = [], []
    for u in args.u:
        field = model.field.bind(torch.tensor([[float(u), 0.0]]), h0)
        calls = [0]

        def counted(t, y, field=field, calls=calls):
            calls[0] += 1
            return field(t, y)

        odeint(
            counted,
            h0,
            torch.tensor([0.0, 1.0]),
            method="dopri5",
            rtol=rtol,
            atol=atol,
            options={"step_t": torch.tensor([1.0], dtype=torch.float64)},
        )
        h = hand_first_step(field, h0, rtol, atol)
        counts.append(calls[0])
        rules.append(cap_count(h))
        print(f"u {u:+.2f}: torchdiffeq NFE {calls[0]}, hand-written first step {h:.5f} -> cap rule {cap_count(h)}")
    agree = sum(a == b for a, b in zip(counts, rules))
    print(
        f"{source}, {args.prompt!r}, rtol {rtol:g}, atol {atol:g}: levels {sorted(set(counts))}; "
        f"the hand-written rule's count equals torchdiffeq's at {agree} of {len(counts)} u"
    )


if __name__ == "__main__":
    main()
