"""How much work the adaptive solvers do as the control moves: NFE regimes and resolution scaling.

Every u is solved on its own (torchdiffeq's adaptive solvers pick one step size for a
whole batch, which would couple the controls). Only the ODE block is solved per u; the
prompt is encoded once and only the last position is decoded, all u in one batch.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..ode import ADAPTIVE_SOLVERS, SolverConfig
from .inputs import axis_control, prompt_tensor, target_token_ids, u_grid_array
from .sweep import target_probabilities
from .trajectories import infer_adaptive_steps

DEFAULT_U_GRID = tuple(np.round(np.linspace(-2.0, 2.0, 41), 6))
DEFAULT_TOLERANCES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def adaptive_solver(method: str, rtol: float, atol: float, max_steps: int = 2000) -> SolverConfig:
    if method not in ADAPTIVE_SOLVERS:
        raise ValueError(f"{method!r} is not an adaptive solver; choose from {', '.join(ADAPTIVE_SOLVERS)}")
    return SolverConfig(method, rtol=rtol, atol=atol, max_steps=max_steps)


@dataclass
class Regimes:
    u: np.ndarray                      # [n_u]
    axis: str
    nfe: dict[str, np.ndarray]         # solver -> NFE per u
    steps: dict[str, np.ndarray]       # solver -> accepted steps per u
    agreement: float                   # max over u of |NFE_a - NFE_b| / mean(NFE_a, NFE_b) (first two solvers)
    step_agreement: float              # the same for accepted steps
    switch_u: float | None             # where the first solver's NFE changes level (None: one level)
    nfe_levels: tuple[float, float] | None   # mean NFE below and above the switch
    crossover_u: float | None          # where the relative probability of targets[0] crosses 0.5
    target_probability: np.ndarray     # [n_u] P(t0) / (P(t0) + P(t1)) after the first solver's solve
    target_raw: np.ndarray             # [n_u, n_targets] raw next-token probabilities
    targets: list[str]
    rtol: float
    atol: float
    seconds: float                     # wall time of the whole sweep

    def to_dict(self) -> dict:
        return {"u": self.u, "axis": self.axis, "nfe": self.nfe, "steps": self.steps, "agreement": self.agreement,
                "step_agreement": self.step_agreement, "switch_u": self.switch_u, "nfe_levels": self.nfe_levels,
                "crossover_u": self.crossover_u, "target_probability": self.target_probability,
                "target_raw": self.target_raw, "targets": self.targets, "rtol": self.rtol, "atol": self.atol,
                "seconds": self.seconds}


def level_switch(u: np.ndarray, values: np.ndarray) -> tuple[float | None, tuple[float, float] | None]:
    """The split of u into two runs that best fits values by two constant levels.

    Returns the midpoint between the last u of the left run and the first of the right,
    and the two levels; (None, None) when the values are constant or when two levels
    explain less than half of their spread (no clear switch).
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None, None
    total = float(((values - values.mean()) ** 2).sum())
    if total == 0.0:
        return None, None
    best, best_k = np.inf, None
    for k in range(1, len(values)):
        left, right = values[:k], values[k:]
        cost = ((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum()
        if cost < best:
            best, best_k = cost, k
    if best > 0.5 * total:
        return None, None
    return float((u[best_k - 1] + u[best_k]) / 2), (float(values[:best_k].mean()), float(values[best_k:].mean()))


def crossing(u: np.ndarray, values: np.ndarray, level: float = 0.5) -> float | None:
    """The first u where values cross `level`, linearly interpolated between grid points."""
    values = np.asarray(values, dtype=float)
    for k in range(len(values) - 1):
        a, b = values[k] - level, values[k + 1] - level
        if a == 0.0:
            return float(u[k])
        if a * b < 0:
            return float(u[k] + (u[k + 1] - u[k]) * a / (a - b))
    if len(values) and values[-1] == level:
        return float(u[-1])
    return None


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum((a + b) / 2, 1e-12)))


@torch.no_grad()
def nfe_regimes(model, tok, prompt: str, u_grid=DEFAULT_U_GRID, solvers=("dopri5", "adaptive_heun"),
                rtol: float = 1e-3, atol: float = 1e-4, axis: str = "sentiment", targets=(" good", " bad"),
                max_steps: int = 2000, other: float = 0.0) -> Regimes:
    """NFE of each adaptive solver for each u, the regime switch and the semantic crossover."""
    if not solvers:
        raise ValueError("give at least one adaptive solver")
    configs = [adaptive_solver(m, rtol, atol, max_steps) for m in solvers]
    grid = u_grid_array(u_grid)
    target_ids, target_tokens, _ = target_token_ids(tok, list(targets))
    if len(target_ids) < 2:
        raise ValueError("give two targets: the crossover is where the first overtakes the second")
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous block to solve")
    start = time.perf_counter()
    idx, _ = prompt_tensor(model, tok, prompt)
    h0 = model.encode(idx)
    controls = torch.tensor([axis_control(u, axis, other) for u in grid], device=idx.device)
    nfe = {c.method: np.zeros(len(grid), dtype=int) for c in configs}
    steps = {c.method: np.zeros(len(grid), dtype=int) for c in configs}
    finals = []
    for i, control in enumerate(controls):
        for j, config in enumerate(configs):
            result = model.middle(h0, control[None], config)
            nfe[config.method][i] = result.nfe
            steps[config.method][i] = len(infer_adaptive_steps(result.eval_taus, config.method).accepted)
            if j == 0:
                finals.append(result.final[0])
    raw = target_probabilities(model, torch.stack(finals), target_ids)
    seconds = time.perf_counter() - start
    relative = raw[:, 0] / np.maximum(raw[:, 0] + raw[:, 1], 1e-30)
    first = configs[0].method
    switch_u, levels = level_switch(grid, nfe[first])
    if len(configs) > 1:
        second = configs[1].method
        agreement = relative_difference(nfe[first], nfe[second])
        step_agreement = relative_difference(steps[first], steps[second])
    else:
        agreement = step_agreement = 0.0
    return Regimes(u=grid, axis=axis, nfe=nfe, steps=steps, agreement=agreement, step_agreement=step_agreement,
                   switch_u=switch_u, nfe_levels=levels, crossover_u=crossing(grid, relative),
                   target_probability=relative, target_raw=raw, targets=target_tokens, rtol=float(rtol),
                   atol=float(atol), seconds=seconds)


@dataclass
class ToleranceScaling:
    tolerances: np.ndarray    # [n] rtol = atol
    nfe: np.ndarray           # [n]
    slope: float              # d log NFE / d log(1/tolerance)
    solver: str
    u: np.ndarray

    def to_dict(self) -> dict:
        return {"tolerances": self.tolerances, "nfe": self.nfe, "slope": self.slope, "solver": self.solver,
                "u": self.u}


@torch.no_grad()
def tolerance_scaling(model, tok, prompt: str, u, tolerances=DEFAULT_TOLERANCES, solver: str = "dopri5",
                      axis: str = "sentiment", max_steps: int = 2000) -> ToleranceScaling:
    """NFE at rtol = atol = each tolerance; the log-log slope says how fast work grows with precision.

    A slope well below 1 means sublinear growth: smooth dynamics, not ever finer structure.
    """
    from .inputs import control_vector

    tols = np.asarray(list(tolerances), dtype=float)
    if tols.size < 2:
        raise ValueError("give at least two tolerances to fit a slope")
    if len(set(tols.tolist())) != tols.size:
        raise ValueError("tolerances must be distinct")
    configs = [adaptive_solver(solver, float(t), float(t), max_steps) for t in tols]
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous block to solve")
    idx, _ = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    h0 = model.encode(idx)
    nfe = np.array([model.middle(h0, control, c).nfe for c in configs], dtype=int)
    slope = float(np.polyfit(np.log10(1.0 / tols), np.log10(nfe), 1)[0])
    return ToleranceScaling(tolerances=tols, nfe=nfe, slope=slope, solver=solver,
                            u=control[0].cpu().numpy().astype(float))
