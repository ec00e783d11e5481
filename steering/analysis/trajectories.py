"""H(τ) along the continuous block for one prompt at one control, and where the solver looked.

NFE and the evaluation times are the field's own records (ControlledVectorField counts
every call; solve_block resets the count). Accepted and rejected steps of an adaptive
solver are read off those evaluation times (see infer_adaptive_steps); fixed solvers
reject nothing and accept the steps 0, 1/N, ..., (N-1)/N.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..inference.decode import STAGES
from ..model.ode import SolverConfig
from .inputs import control_vector, prompt_tensor, solver_config, tau_grid, tau_values


@dataclass
class Trajectory:
    tau: np.ndarray  # [T]
    states: np.ndarray  # [T, tokens, d]
    token_strings: list[str]
    nfe: int  # field evaluations of this solve (the field's own count)
    eval_taus: list[float]  # τ of each field evaluation, in call order
    accepted_taus: list[float]  # start τ of each accepted step
    rejected_taus: list[float]  # start τ of each rejected step
    u: np.ndarray  # [2] (sentiment, style)
    solver_label: str
    accepted_sizes: list[float] = field(default_factory=list)  # size of each accepted step
    rejected_sizes: list[float] = field(default_factory=list)  # size each rejected step tried
    # compute_path only: the solver's own step ends (τ = 0, then each accepted step's end) and its states
    # there, while `states` is the continuous path they lie on
    station_tau: np.ndarray | None = None  # [S]
    stations: np.ndarray | None = None  # [S, tokens, d]
    line_label: str = ""  # what drew `states` between the stations

    @property
    def final(self) -> np.ndarray:
        return self.states[-1]


def pooled(traj: Trajectory) -> np.ndarray:
    """The path of the mean token state, [T, d]."""
    return traj.states.mean(axis=1)


@dataclass
class StepLog:
    accepted: list[tuple[float, float]] = field(default_factory=list)  # (start τ, size)
    rejected: list[tuple[float, float]] = field(default_factory=list)


# Field evaluations per attempted step of torchdiffeq's adaptive Runge-Kutta solvers: the
# stages after the first, which is reused from the previous step's end (FSAL). The last of
# them is always at the step's end, τ0 + dt.
EVALS_PER_ATTEMPT = {"dopri5": 6, "bosh3": 3, "adaptive_heun": 1}
# Before the first step: f(0, H0), and one trial evaluation to choose the first step size.
EVALS_BEFORE_FIRST_STEP = 2


def infer_adaptive_steps(eval_taus: list[float], method: str) -> StepLog:
    """Accepted and rejected steps of an adaptive solve, read off its evaluation times.

    Each attempted step from τ0 with size dt evaluates the field EVALS_PER_ATTEMPT times, the
    last at τ0 + dt. An accepted step moves τ0 to its end, so the next attempt ends later; a
    rejected one retries from the same τ0 with a smaller dt, so the next attempt ends earlier.
    The last attempt is always accepted (the solve stops once a step reaches τ = 1).
    Checked against torchdiffeq's own accept/reject callbacks in the tests.
    """
    if method not in EVALS_PER_ATTEMPT:
        raise ValueError(f"{method!r} is not an adaptive solver")
    per = EVALS_PER_ATTEMPT[method]
    attempts = eval_taus[EVALS_BEFORE_FIRST_STEP:]
    if len(attempts) % per:
        raise RuntimeError(f"{len(eval_taus)} evaluations do not fit {method}'s {per} per step")
    ends = [attempts[i + per - 1] for i in range(0, len(attempts), per)]
    log, start = StepLog(), float(eval_taus[0]) if eval_taus else 0.0
    for k, end in enumerate(ends):
        if k == len(ends) - 1 or ends[k + 1] > end:
            log.accepted.append((start, end - start))
            start = end
        else:
            log.rejected.append((start, end - start))
    return log


def fixed_steps(solver: SolverConfig) -> list[tuple[float, float]]:
    size = 1.0 / solver.steps
    return [(i * size, size) for i in range(solver.steps)]


def step_log(model, result, solver: SolverConfig) -> StepLog:
    if not hasattr(model, "field"):
        return StepLog()
    if solver.is_fixed:
        return StepLog(accepted=fixed_steps(solver))
    return infer_adaptive_steps(result.eval_taus, solver.method)


@torch.no_grad()
def compute_trajectory(
    model, tok, prompt: str, u, solver=SolverConfig("rk4", steps=8), n_tau: int = 33, tau=None, axis: str = "sentiment"
) -> Trajectory:
    """H(τ) of every prompt token on n_tau evenly spaced points (or the given τ grid).

    u is a pair (sentiment, style) or one number on `axis`. A discrete model has no
    continuous block; its "trajectory" is the state after each middle block.
    """
    solver = solver_config(solver)
    idx, strings = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    grid = tau_grid(n_tau) if tau is None else tau_values(tau)
    h0 = model.encode(idx)
    result = model.middle(h0, control, solver, tau=grid)
    log = step_log(model, result, solver)
    return Trajectory(
        tau=result.tau.detach().cpu().numpy().astype(float),
        states=result.states[:, 0].detach().cpu().numpy(),
        token_strings=strings,
        nfe=int(result.nfe),
        eval_taus=list(result.eval_taus),
        accepted_taus=[t for t, _ in log.accepted],
        rejected_taus=[t for t, _ in log.rejected],
        u=control[0].cpu().numpy().astype(float),
        solver_label=solver.label() if hasattr(model, "field") else f"{len(result.eval_taus)} discrete blocks",
        accepted_sizes=[s for _, s in log.accepted],
        rejected_sizes=[s for _, s in log.rejected],
    )


# RK4 steps of the reference line. On D5f (assets/hybrid) its cubic dense output misses RK4 with 64 steps by at most
# 1.4e-4 of the path's extent in the PCA map (RK4-4: 3.1e-4, RK4-8: 2.2e-5), where the trained solver's own stations
# (RK4-2) miss it by 2.2e-3: the line stays a reference for them at 21 field evaluations (RK4-8's took 41).
LINE_STEPS = 5
LINE_LABEL = f"RK4 ({LINE_STEPS} steps) and its cubic dense output (reference)"


def hermite_line(nodes: torch.Tensor, slopes: torch.Tensor, n_tau: int) -> torch.Tensor:
    """H(τ) on n_tau evenly spaced points from H and dH/dτ at τ = 0, 1/N, ..., 1 ([N + 1, ...] each): the cubic
    Hermite interpolant on each step, smooth where straight segments between the step ends would kink."""
    steps = nodes.shape[0] - 1
    step = 1.0 / steps
    tau = tau_grid(n_tau).to(nodes.dtype)
    i = torch.clamp((tau / step).floor().long(), max=steps - 1)  # the step each point falls in
    s = (tau / step - i).view(-1, *[1] * (nodes.dim() - 1))  # where in that step, from 0 to 1
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, 3 * s**2 - 2 * s**3, s**3 - s**2
    return h00 * nodes[i] + h10 * step * slopes[i] + h01 * nodes[i + 1] + h11 * step * slopes[i + 1]


@torch.no_grad()
def solve_with_slopes(model, h0: torch.Tensor, u: torch.Tensor, solver: SolverConfig):
    """A fixed-step solve reported at its step ends, and dH/dτ there: (BlockSolve, slopes [N + 1, batch, tokens, d]).

    The slopes at the step starts are the solver's own first stages (decode.STAGES); only the one at τ = 1 costs
    an evaluation more (not counted in the solve's NFE, which stays the solver's effort)."""
    stages = STAGES[solver.method]
    solve = model.middle(h0, u, solver, tau=fixed_station_taus(solver), record_outputs=True)
    outputs = solve.field_outputs
    if len(outputs) != stages * solver.steps:
        raise RuntimeError(f"{solver.label()} evaluated the field {len(outputs)} times, not {stages * solver.steps}")
    return solve, torch.stack([*outputs[::stages], slope_at_end(model, h0, u, solve.states[-1])])


@torch.no_grad()
def recorded_stations_and_slopes(model, recorded: list, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """solve_with_slopes' states and slopes from a fast-decoder pass that recorded them (decode._Step._middle's
    path: (H, dH/dτ) at each step's start, then (H(1), None)): [N + 1, batch, tokens, d] each."""
    stations = torch.stack([h for h, _ in recorded])
    last = slope_at_end(model, stations[0], u, stations[-1])
    return stations, torch.stack([slope for _, slope in recorded[:-1]] + [last])


@torch.no_grad()
def slope_at_end(model, h0: torch.Tensor, u: torch.Tensor, h1: torch.Tensor) -> torch.Tensor:
    """dH/dτ at τ = 1 for the state h1 reached from h0 (whose statistics the field's input normalisation uses)."""
    field = model.field.bind(model.control_or_zero(u, h0.shape[0], h0.device).to(h0.dtype), h0)
    return field(torch.tensor(1.0, dtype=h0.dtype), h1)


def flow_line(model, h0: torch.Tensor, u: torch.Tensor, n_tau: int) -> torch.Tensor:
    """The reference path drawn between a fixed-step solver's stations: H(τ) on n_tau evenly spaced points,
    RK4 with LINE_STEPS steps and its cubic dense output (accurate to the fourth order like the steps themselves).
    h0 [batch, tokens, d], u [batch, control]; returns [n_tau, batch, tokens, d]."""
    solve, slopes = solve_with_slopes(model, h0, u, SolverConfig("rk4", steps=LINE_STEPS))
    return hermite_line(solve.states, slopes, n_tau)


def fixed_station_taus(solver: SolverConfig) -> list[float]:
    """A fixed-step solver's step ends, τ = 0, 1/N, ..., 1."""
    return np.linspace(0.0, 1.0, solver.steps + 1).tolist()


def station_taus(traj: Trajectory) -> list[float]:
    """τ = 0 and the end of each step the solver accepted (the last one is τ = 1)."""
    ends = sorted({min(1.0, round(t + h, 6)) for t, h in zip(traj.accepted_taus, traj.accepted_sizes)} - {0.0})
    return [0.0] + ends[:-1] + [1.0]


@torch.no_grad()
def compute_path(
    model,
    tok,
    prompt: str,
    u,
    solver=SolverConfig("rk4", steps=8),
    n_tau: int = 33,
    axis: str = "sentiment",
    line: str = "reference",
) -> Trajectory:
    """What the pages draw: the continuous path H(τ) on n_tau points, with the solver's stations on it.

    Between a fixed-step solver's step ends, torchdiffeq fills an output grid by straight lines, so
    RK4 with 2 steps would be drawn as a tent (τ = 0, 0.5, 1 joined by two segments, the kink at 0.5).
    Here the line is a fine RK4 solve with its cubic dense output (flow_line), and the
    stations are the chosen solver's own states at its step ends, so a person sees both the flow and
    where the solver actually stood. An adaptive solver's output between its steps is its own
    interpolant (dense output), already a smooth path, so it is kept as the line. NFE and the step
    records are the chosen solver's.

    line="solver" draws a fixed-step solver's own dense output instead (the cubic Hermite through its step
    ends, with the slopes it computed there): the path the solver's states take, as the Steer map draws it
    for every slider position, at one field evaluation more than the solve (the reference costs 21).
    """
    if line not in ("reference", "solver"):
        raise ValueError(f"line must be 'reference' or 'solver', got {line!r}")
    solver = solver_config(solver)
    if hasattr(model, "field") and solver.is_fixed and line == "solver":
        at_stations = compute_trajectory(model, tok, prompt, u, solver, tau=fixed_station_taus(solver), axis=axis)
        idx, _ = prompt_tensor(model, tok, prompt)
        solve, slopes = solve_with_slopes(model, model.encode(idx), control_vector(u, axis).to(idx.device), solver)
        return replace(
            at_stations,
            tau=tau_grid(n_tau).numpy().astype(float),
            states=hermite_line(solve.states, slopes, n_tau)[:, 0].cpu().numpy(),
            station_tau=at_stations.tau.copy(),
            stations=at_stations.states,
            line_label=f"{solver.label()} (the cubic through its step ends)",
        )
    if hasattr(model, "field") and solver.is_fixed:
        # one solve at the step ends (a fixed solver takes the same steps whatever grid it reports on)
        at_stations = compute_trajectory(model, tok, prompt, u, solver, tau=fixed_station_taus(solver), axis=axis)
        idx, _ = prompt_tensor(model, tok, prompt)
        line = flow_line(model, model.encode(idx), control_vector(u, axis).to(idx.device), n_tau)
        return replace(
            at_stations,
            tau=tau_grid(n_tau).numpy().astype(float),
            states=line[:, 0].cpu().numpy(),
            station_tau=at_stations.tau.copy(),
            stations=at_stations.states,
            line_label=LINE_LABEL,
        )
    own = compute_trajectory(model, tok, prompt, u, solver, n_tau=n_tau, axis=axis)
    if not hasattr(model, "field"):  # a discrete model: its block outputs are its only stations
        return replace(own, station_tau=own.tau.copy(), stations=own.states.copy(), line_label=own.solver_label)
    # an adaptive solver's steps are known only once it has solved: a second solve reports its step ends
    taus = station_taus(own)
    at_stations = compute_trajectory(model, tok, prompt, u, solver, tau=taus, axis=axis)
    return replace(
        own,
        station_tau=np.asarray(taus, dtype=float),
        stations=at_stations.states,
        line_label=f"{own.solver_label} (its dense output)",
    )
