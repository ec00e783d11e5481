"""Independent check of `depth`'s solver_divergence for a depth-varying field, without the project's solvers.

    .venv/bin/python scripts/checks/solver_divergence.py CHECKPOINT_OR_RUN [...]

For each of `depth`'s held-out prompts at u = -2, 0, 2: the reference H(1) from scipy's DOP853 (float64,
rtol = atol = 1e-10) and the trained solver's H(1) from a hand-written RK4 3/8 rule with the model's step count,
both on the model's own field in float64; prints the mean and max of |RK4 - DOP853| / |DOP853| beside the
project's solver_divergence on the same prompts, and how far the hand-written RK4 is from the project's.
Only the model (its entry blocks and field) and the prompt choice come from the project.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from scipy.integrate import solve_ivp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.data.heldout import heldout_prompts  # noqa: E402
from steering.evaluation.depth_report import DIVERGENCE_US, PROMPTS  # noqa: E402
from steering.evaluation.measures import solver_divergence
from steering.training.checkpoint import load_model_or_saved_state  # noqa: E402


def rk4_three_eighths(f, h, steps: int):
    """Kutta's 3/8 rule, `steps` equal steps over τ in [0, 1]."""
    dt = 1.0 / steps
    for i in range(steps):
        t = i * dt
        k1 = f(t, h)
        k2 = f(t + dt / 3, h + dt * k1 / 3)
        k3 = f(t + 2 * dt / 3, h + dt * (k2 - k1 / 3))
        k4 = f(t + dt, h + dt * (k1 - k2 + k3))
        h = h + dt * (k1 + 3 * k2 + 3 * k3 + k4) / 8
    return h


def check(path: str) -> str:
    model, tok, source = load_model_or_saved_state(path)
    if not model.config.field_basis or model.config.solver != "rk4":
        return f"{source}: not a depth-varying field trained with RK4; nothing to check"
    model = model.double().eval()
    prompts = heldout_prompts(tok, PROMPTS)
    ratios, hand_vs_project = [], []
    for ids in prompts:
        h0 = model.encode(torch.tensor([ids]))
        for s in DIVERGENCE_US:
            u = torch.tensor([[s, 0.0]], dtype=torch.float64)

            def field(t, h, u=u):
                return model.field(torch.tensor(t, dtype=torch.float64), h, u=u)

            def flat(t, y, shape=h0.shape, field=field):
                return field(t, torch.from_numpy(y).view(shape)).reshape(-1).numpy()

            ref = solve_ivp(flat, (0.0, 1.0), h0.reshape(-1).numpy(), method="DOP853", rtol=1e-10, atol=1e-10)
            reference = ref.y[:, -1]
            fixed = rk4_three_eighths(field, h0, model.config.solver_steps).reshape(-1).numpy()
            ratios.append(np.linalg.norm(fixed - reference) / np.linalg.norm(reference))
            project = model.middle(h0, u, model.training_solver).final.reshape(-1).numpy()
            hand_vs_project.append(np.abs(project - fixed).max())
    ours = solver_divergence(model, prompts, DIVERGENCE_US)
    return (
        f"{source}: RK4-{model.config.solver_steps} vs DOP853 mean {np.mean(ratios):.5f} max {np.max(ratios):.5f}; "
        f"project's solver_divergence (float64) {ours:.5f}; hand-written vs project RK4 max |diff| "
        f"{max(hand_vs_project):.1e}"
    )


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    for path in sys.argv[1:]:
        print(check(path), flush=True)
