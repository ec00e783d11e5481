"""Adaptive Runge-Kutta (dopri5, bosh3, adaptive_heun) over a batch of independent paths, each with its own step
size: torchdiffeq's controller, per sample.

torchdiffeq integrates a batch as one state: one step size for all of it, and one error norm over all of it, so
the hardest sample sets every sample's steps (the regimes map solved its 41 u one at a time for that reason, at
about a second a solve on the shipped model). Here each sample b has its own τ_b, step h_b, error ratio and
decisions; the field is evaluated once per stage for every sample still running (model.batched_field), and a
sample that reaches τ = 1 drops out of the batch. Each sample's arithmetic is torchdiffeq's (0.9.x) for a solve
of that sample alone, rule for rule:

- the first step: `_select_initial_step` (Hairer, Nørsett & Wanner II.4), h = min(100·h0, h1) with
  h0 = 0.01·d0/d1 and h1 = (0.01 / max(d1, d2))^(1/order), norms scaled by atol + rtol·|H0|, in the state's dtype;
- the error norm: the RMS norm of the embedded error over the sample's own state (every token and feature)
  against atol + rtol·max(|H0|, |H1|), so no sample's error enters another's decision;
- the controller: accept when the ratio is ≤ 1; next step = step · min(10, max(0.9 / ratio^(1/order), 1 or 0.2))
  (ifactor 10, dfactor 0.2 after a rejection only, safety 0.9; order 5 for dopri5), from the step as taken;
- the end: with `step_t` = [1] (ode.adaptive_options) a step that would pass τ = 1 is cut to land on it; with
  past_end it runs past and the solve stops there (torchdiffeq then interpolates back, which costs no evaluation);
- times in float64, cast to the state's dtype where the field sees them, stages at τ = t1 evaluated just below it
  (torchdiffeq's Perturb.PREV);
- the step cap: more than max_steps attempts (accepted or rejected) raise ode.SolverStepLimitError, as
  torchdiffeq's max_num_steps does;
- the stages: torchdiffeq's tableau for the method; the solution from the last stage where the method is
  first-same-as-last (dopri5, bosh3), else from c_sol, and the next step's first evaluation is the last stage
  either way (as torchdiffeq has it);
- NFE: 2 before the first step (f(0, H0) and the trial evaluation that sizes it), then one per stage per attempt
  (6 for dopri5: its seventh stage is the next step's first).

tests/test_batched_adaptive.py checks the counts against torchdiffeq's own solves, and
scripts/checks/regimes_map_vs_torchdiffeq.py over the probe prompts' whole map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torchdiffeq._impl.odeint import SOLVERS as TORCHDIFFEQ_SOLVERS

from .ode import ADAPTIVE_SOLVERS, SolverStepLimitError

SAFETY, IFACTOR, DFACTOR = 0.9, 10.0, 0.2  # torchdiffeq's RKAdaptiveStepsizeODESolver defaults
EVALS_BEFORE_FIRST_STEP = 2


@dataclass
class BatchedSolve:
    """What each sample's solve did; arrays are [B], lists are per sample in attempt order."""

    nfe: np.ndarray
    accepted: np.ndarray
    rejected: np.ndarray
    steps: list[list[float]]  # each attempt's step as taken (cut to land on τ = 1 unless past_end)
    decisions: list[list[bool]]  # accepted or not
    error_ratios: list[list[float]]  # each attempt's error norm against the tolerance (accepted when <= 1)
    h0: np.ndarray  # the first-step rule's terms: 0.01·d0/d1 ...
    h1: np.ndarray  # ... and (0.01 / max(d1, d2))^(1/5); the first step tried is min(100·h0, h1)
    max_tau: np.ndarray  # the furthest τ each sample's field was evaluated at
    final: torch.Tensor  # [B, T, d] the state at τ = 1 (past_end: at the last step's end)
    final_tau: np.ndarray  # where each solve ended (1 unless past_end)

    @property
    def first_step(self) -> np.ndarray:
        return np.array([s[0] for s in self.steps])


def _rms(x: torch.Tensor) -> torch.Tensor:
    """torchdiffeq's _rms_norm, over each sample's own state: [B]."""
    return x.abs().pow(2).flatten(1).mean(1).sqrt()


def _column(x: torch.Tensor, dims: int) -> torch.Tensor:
    return x.reshape(-1, *([1] * dims))


@torch.no_grad()
def solve_adaptive_batch(
    f,
    y0: torch.Tensor,
    rtol,
    atol,
    method: str = "dopri5",
    max_steps: int = 2000,
    past_end: bool = False,
    on_attempt=None,
) -> BatchedSolve:
    """Integrate dH/dτ = f(τ, H) from y0 [B, T, d] over [0, 1], each sample on its own steps.

    f(τ [B'], H [B', T, d], select [B']) evaluates the samples `select` (indices into the batch) at their own τ
    (model.batched_field). rtol, atol: one number, or one per sample ([B]). on_attempt(n_running) before each
    round of attempts (the lab's progress and pause point)."""
    if method not in ADAPTIVE_SOLVERS:
        raise ValueError(f"{method!r} is not an adaptive solver; choose from {', '.join(ADAPTIVE_SOLVERS)}")
    solver = TORCHDIFFEQ_SOLVERS[method]
    order, tableau = solver.order, solver.tableau
    batch = y0.shape[0]
    dtype = y0.dtype
    time_dtype = torch.promote_types(torch.float64, dtype)
    state_dims = y0.dim() - 1
    # torchdiffeq keeps rtol, atol as float64 0-dim tensors, which scale a float32 state in float32: cast alike
    rtol = _column(torch.as_tensor(rtol, dtype=time_dtype).expand(batch).to(dtype), state_dims)
    atol = _column(torch.as_tensor(atol, dtype=time_dtype).expand(batch).to(dtype), state_dims)
    everyone = torch.arange(batch)
    alpha = tableau.alpha.to(dtype)
    beta = [b.to(dtype) for b in tableau.beta]
    c_sol, c_error = tableau.c_sol.to(dtype), tableau.c_error.to(dtype)
    fsal = bool(c_sol[-1] == 0 and (c_sol[:-1] == beta[-1]).all())

    # ---- the first step (torchdiffeq's _select_initial_step, per sample)
    zero = torch.zeros(batch, dtype=dtype)
    f0 = f(zero, y0, everyone)
    scale = atol + torch.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = torch.where((d0 < 1e-5) | (d1 < 1e-5), torch.full_like(d0, 1e-6), 0.01 * d0 / d1).abs()
    f1 = f(h0, y0 + _column(h0, state_dims) * f0, everyone)  # τ = 0 + h0, in the state's dtype
    d2 = torch.abs(_rms((f1 - f0) / scale) / h0)
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1_flat = torch.maximum(torch.full_like(h0, 1e-6), h0 * 1e-3)
    h1 = torch.where(flat, h1_flat, (0.01 / torch.maximum(d1, d2)) ** (1.0 / order)).abs()
    dt = torch.minimum(100 * h0, h1).to(time_dtype)

    t0 = torch.zeros(batch, dtype=time_dtype)
    y, f_now = y0.clone(), f0
    final_tau = np.zeros(batch)
    max_tau = h0.to(torch.float64).numpy().copy()
    attempts = np.zeros(batch, dtype=int)
    steps: list[list[float]] = [[] for _ in range(batch)]
    decisions: list[list[bool]] = [[] for _ in range(batch)]
    ratios: list[list[float]] = [[] for _ in range(batch)]
    final = y0.clone()
    exponent = torch.tensor(order, dtype=time_dtype).reciprocal()
    running = everyone.clone()

    while running.numel():
        if np.any(attempts[running.numpy()] >= max_steps):
            raise SolverStepLimitError(
                f"{method} needed more than max_steps={max_steps} steps; loosen the tolerance or raise the step cap"
            )
        if on_attempt is not None:
            on_attempt(running.numel())
        t_start, step = t0[running], dt[running]
        if not torch.all(t_start + step > t_start):
            raise AssertionError("underflow in dt")
        t_end = t_start + step
        if not past_end:  # step_t = [1]: a step that would pass τ = 1 is cut to end on it
            cut = (t_start < 1.0) & (t_end > 1.0)
            t_end = torch.where(cut, torch.ones_like(t_end), t_end)
            step = torch.where(cut, t_end - t_start, step)
        y_start, k0 = y[running], f_now[running]
        t0_y, dt_y, t1_y = t_start.to(dtype), step.to(dtype), t_end.to(dtype)
        just_below_end = torch.nextafter(t1_y, t1_y - 1)
        k = torch.empty(*k0.shape, len(alpha) + 1, dtype=dtype)
        k[..., 0] = k0
        dt_col = _column(dt_y, state_dims + 1)
        for i, (alpha_i, beta_i) in enumerate(zip(alpha, beta)):
            tau_i = just_below_end if alpha_i == 1.0 else t0_y + alpha_i * dt_y
            y_i = y_start + torch.sum(k[..., : i + 1] * (beta_i * dt_col), dim=-1)
            k[..., i + 1] = f(tau_i, y_i, running)
        # first-same-as-last (dopri5): the last stage's state is the solution; either way its evaluation is the
        # next step's first, as in torchdiffeq
        y1 = y_i if fsal else y_start + torch.sum(k * (dt_col * c_sol), dim=-1)
        f1 = k[..., -1]
        error = torch.sum(k * (dt_col * c_error), dim=-1)
        tol = atol[running] + rtol[running] * torch.max(y_start.abs(), y1.abs())
        ratio = _rms(error / tol).to(time_dtype)
        accept = ratio <= 1
        # torchdiffeq's _optimal_step_size, from the step as taken
        shrink = torch.where(ratio < 1, torch.ones_like(ratio), torch.full_like(ratio, DFACTOR))
        factor = torch.clamp(torch.maximum(SAFETY / ratio**exponent, shrink), max=IFACTOR)
        dt[running] = torch.where(ratio == 0, step * IFACTOR, step * factor)

        idx = running.numpy()
        attempts[idx] += 1
        np.maximum.at(max_tau, idx, t_end.numpy())  # the last two stages sit just below t_end, the rest before
        for j, b in enumerate(idx):
            steps[b].append(float(step[j]))
            decisions[b].append(bool(accept[j]))
            ratios[b].append(float(ratio[j]))
        moved = running[accept]
        t0[moved] = t_end[accept]
        y[moved] = y1[accept]
        f_now[moved] = f1[accept]
        done = accept & (t_end >= 1.0)
        finished = running[done]
        final[finished] = y1[done]
        final_tau[finished.numpy()] = t_end[done].numpy()
        running = running[~done]

    accepted = np.array([sum(d) for d in decisions])
    return BatchedSolve(
        nfe=EVALS_BEFORE_FIRST_STEP + len(alpha) * attempts,
        accepted=accepted,
        rejected=attempts - accepted,
        steps=steps,
        decisions=decisions,
        error_ratios=ratios,
        h0=h0.to(torch.float64).numpy(),
        h1=h1.to(torch.float64).numpy(),
        max_tau=max_tau,
        final=final,
        final_tau=final_tau,
    )
