"""How far two solver settings disagree along the same path: ||H_a(τ) - H_b(τ)|| / ||H_b(τ)||."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .inputs import REFERENCE_SOLVER, model_solver, solver_config
from .trajectories import Trajectory, compute_trajectory


@dataclass
class SolverComparison:
    tau: np.ndarray  # [T]
    divergence: np.ndarray  # [T] relative divergence of a from b (b is the reference)
    final_divergence: float  # at τ = 1
    a: Trajectory
    b: Trajectory

    def to_dict(self) -> dict:
        return {
            "tau": self.tau,
            "divergence_along_tau": self.divergence,
            "divergence": self.final_divergence,
            "solver_a": self.a.solver_label,
            "solver_b": self.b.solver_label,
            "nfe_a": self.a.nfe,
            "nfe_b": self.b.nfe,
            "u": self.a.u,
        }


def relative_divergence(states_a: np.ndarray, states_b: np.ndarray) -> np.ndarray:
    """Per leading index: Frobenius norm of the difference over that of b (all tokens together)."""
    a = np.asarray(states_a, dtype=np.float64).reshape(len(states_a), -1)
    b = np.asarray(states_b, dtype=np.float64).reshape(len(states_b), -1)
    return np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(b, axis=1), 1e-30)


def compare_solvers(
    model,
    tok,
    prompt: str,
    u,
    solver_a=None,
    solver_b=REFERENCE_SOLVER,
    n_tau: int = 33,
    axis: str = "sentiment",
) -> SolverComparison:
    """Both solves on the same τ grid; b is the reference the divergence is measured against. solver_a:
    default the model's own training solver."""
    a = compute_trajectory(model, tok, prompt, u, model_solver(model, solver_a), n_tau=n_tau, axis=axis)
    b = compute_trajectory(model, tok, prompt, u, solver_config(solver_b), n_tau=n_tau, axis=axis)
    divergence = relative_divergence(a.states, b.states)
    return SolverComparison(tau=a.tau, divergence=divergence, final_divergence=float(divergence[-1]), a=a, b=b)
