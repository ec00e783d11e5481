"""Independent check of `analyze regimes`' NFE levels: scipy's adaptive Dormand-Prince (RK45), not torchdiffeq.

    .venv/bin/python scripts/checks/adaptive_steps.py CHECKPOINT [...] [--rtol 1e-3 --atol 1e-4]

For each of the 10 probe prompts at sentiment u = -2, -1.5, ..., 2 (style 0): scipy's RK45 over τ in [0, 1] at
the regimes' default tolerance (rtol 1e-3, atol 1e-4, or those given), in float64 on the model's own field; prints
its function evaluations per u and how many prompts take two levels or more. scipy never steps past τ = 1 (its
last step is cut to land on the end), so its counts say what the flow on [0, 1] asks of an adaptive solver. Its
step-size rule differs from torchdiffeq's in detail, so the counts need not equal the project's; the levels over u
are the check.
Only the model (its entry blocks and field) and the prompt texts come from the project.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.integrate import solve_ivp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.data.heldout import PROBE_PROMPT_VARIANTS  # noqa: E402
from steering.data.tokenizer import bos_id, encode  # noqa: E402
from steering.training.checkpoint import load_model_or_saved_state  # noqa: E402

US = np.linspace(-2.0, 2.0, 9)


def evaluations(model, h0: torch.Tensor, u: float, rtol: float, atol: float) -> tuple[int, float]:
    """RK45's function evaluations over [0, 1] and the largest τ it evaluated the field at."""
    control = torch.tensor([[u, 0.0]], dtype=torch.float64)
    field = model.field.bind(control, h0)  # f(τ, H) on this path (an entry-normalised field needs H(0)'s statistics)
    taus = []

    def flat(t, y):
        taus.append(t)
        return field(torch.tensor(t, dtype=torch.float64), torch.from_numpy(y).view(h0.shape)).reshape(-1).numpy()

    sol = solve_ivp(flat, (0.0, 1.0), h0.reshape(-1).numpy(), method="RK45", rtol=rtol, atol=atol)
    return sol.nfev, max(taus)


def check(path: str, rtol: float = 1e-3, atol: float = 1e-4) -> str:
    model, tok, source = load_model_or_saved_state(path)
    model = model.double().eval()
    lines, multi, furthest = [], 0, 0.0
    for prompt in PROBE_PROMPT_VARIANTS:
        h0 = model.encode(torch.tensor([[bos_id(tok)] + encode(tok, prompt)]))
        counts = []
        for u in US:
            n, tau = evaluations(model, h0, float(u), rtol, atol)
            counts.append(n)
            furthest = max(furthest, tau)
        multi += len(set(counts)) > 1
        lines.append(f"  {prompt!r}: " + " ".join(str(n) for n in counts))
    head = (
        f"{source}: scipy RK45 (rtol {rtol:g}, atol {atol:g}) evaluations at u = {', '.join(f'{u:g}' for u in US)}; "
        f"{multi} of {len(PROBE_PROMPT_VARIANTS)} prompts take two levels or more; "
        f"field evaluated up to τ = {furthest:.6f}"
    )
    return "\n".join([head] + lines)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()
    for path in args.checkpoints:
        print(check(path, args.rtol, args.atol), flush=True)
