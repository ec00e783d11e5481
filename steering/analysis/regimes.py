"""How much work the adaptive solvers do as the control moves: NFE regimes and resolution scaling.

The regimes are the constant levels of dopri5's NFE against u, found by an exact penalised
piecewise-constant fit (steering.analysis.changepoints): every switch, not just one.

Every u is solved on its own (torchdiffeq's adaptive solvers pick one step size for a
whole batch, which would couple the controls). Only the ODE block is solved per u; the
prompt is encoded once and only the last position is decoded, all u in one batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..model.ode import ADAPTIVE_SOLVERS, SolverConfig
from .changepoints import Segment, Switch, level_switches
from .inputs import axis_control, prompt_tensor, target_token_ids, u_grid_array
from .sweep import target_probabilities
from .trajectories import infer_adaptive_steps

DEFAULT_U_GRID = tuple(np.round(np.linspace(-2.0, 2.0, 41), 6))
ALIGNED_WITHIN = 0.1  # a crossover this close to a switch sits on it (one step of the default 41-point grid)
DEFAULT_TOLERANCES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def adaptive_solver(method: str, rtol: float, atol: float, max_steps: int = 2000) -> SolverConfig:
    if method not in ADAPTIVE_SOLVERS:
        raise ValueError(f"{method!r} is not an adaptive solver; choose from {', '.join(ADAPTIVE_SOLVERS)}")
    return SolverConfig(method, rtol=rtol, atol=atol, max_steps=max_steps)


@dataclass
class Regimes:
    u: np.ndarray  # [n_u]
    axis: str
    nfe: dict[str, np.ndarray]  # solver -> NFE per u
    steps: dict[str, np.ndarray]  # solver -> accepted steps per u
    nfe_disagreement: float  # max over u of |NFE_a - NFE_b| / mean(NFE_a, NFE_b) (first two solvers)
    step_disagreement: float  # the same for accepted steps (what the paper's "within 15%" compares)
    switches: list[Switch]  # every level change of the first solver's NFE (steering.analysis.changepoints)
    segments: list[Segment]  # the constant NFE levels between them
    switch_u: float | None  # the switch nearest the crossover (None: no switch or no crossover)
    crossover_u: float | None  # where the relative probability of targets[0] crosses 0.5
    crossover_to_switch: float | None  # |crossover_u - switch_u|
    reading: str  # one line: the regimes and where the crossover lies among them
    target_probability: np.ndarray  # [n_u] P(t0) / (P(t0) + P(t1)) after the first solver's solve
    target_raw: np.ndarray  # [n_u, n_targets] raw next-token probabilities
    targets: list[str]
    rtol: float
    atol: float
    seconds: float  # wall time of the whole sweep
    max_tau: float = 1.0  # the furthest τ any solve of the sweep evaluated the field at (1: each landed on τ = 1)

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "axis": self.axis,
            "nfe": self.nfe,
            "steps": self.steps,
            "nfe_disagreement": self.nfe_disagreement,
            "step_disagreement": self.step_disagreement,
            "switches": [s.to_dict() for s in self.switches],
            "segments": [s.to_dict() for s in self.segments],
            "switch_u": self.switch_u,
            "crossover_u": self.crossover_u,
            "crossover_to_switch": self.crossover_to_switch,
            "reading": self.reading,
            "target_probability": self.target_probability,
            "target_raw": self.target_raw,
            "targets": self.targets,
            "rtol": self.rtol,
            "atol": self.atol,
            "seconds": self.seconds,
            "max_tau": self.max_tau,
        }


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
    """The disagreement of two profiles: max over u of |a - b| / mean(a, b) (0: identical)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum((a + b) / 2, 1e-12)))


def nearest_switch(switches, at: float | None) -> float | None:
    """The u of the switch (a Switch or a u) nearest `at`, the left one on a tie; None without either."""
    if at is None or not switches:
        return None
    return float(min((float(getattr(s, "u", s)) for s in switches), key=lambda s: (abs(s - at), s)))


def _fmt(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.1f}"


def _interval(seg: Segment, low: float, high: float) -> str:
    left, right = seg.u_start > low, seg.u_end < high
    if left and right:
        return f"{seg.u_start:.2f} < u < {seg.u_end:.2f}"
    if right:
        return f"u < {seg.u_end:.2f}"
    if left:
        return f"u > {seg.u_start:.2f}"
    return f"every u in [{low:g}, {high:g}]"


def regimes_reading(segments: list[Segment], crossover_u: float | None, unit: str = "NFE") -> str:
    """One line: how many levels, where each holds, and where the crossover lies among them.

    e.g. "two regimes: 14 NFE for -0.55 < u < 0.45, 20 outside; the crossover (u = -0.03)
    lies inside the low-NFE band, 0.48 from the nearest switch (u = 0.45)".
    """
    if not segments:
        return "no values"
    low, high = segments[0].u_start, segments[-1].u_end
    levels = sorted({round(s.level, 1) for s in segments})
    where = {lv: [s for s in segments if round(s.level, 1) == lv] for lv in levels}
    names = {1: "one regime", 2: "two regimes", 3: "three regimes", 4: "four regimes"}
    head = names.get(len(levels), f"{len(levels)} regimes")
    if len(levels) == 1:
        text = f"{head}: {_fmt(levels[0])} {unit} at {_interval(segments[0], low, high)}"
    else:
        inner = [
            lv for lv in levels if len(where[lv]) == 1 and where[lv][0].u_start > low and where[lv][0].u_end < high
        ]
        if len(levels) == 2 and len(segments) == 3 and inner:
            band, rest = inner[0], [lv for lv in levels if lv != inner[0]][0]
            text = f"{head}: {_fmt(band)} {unit} for {_interval(where[band][0], low, high)}, {_fmt(rest)} outside"
        else:
            text = f"{head}: " + "; ".join(
                f"{_fmt(lv)} {unit} for " + " and ".join(_interval(s, low, high) for s in where[lv]) for lv in levels
            )
    if crossover_u is None:
        return text + "; the target share never crosses 50% on the grid"
    switch_u = nearest_switch([s.u_end for s in segments[:-1]], crossover_u)
    if switch_u is not None and abs(crossover_u - switch_u) <= ALIGNED_WITHIN + 1e-9:
        return text + (
            f"; the crossover (u = {crossover_u:.2f}) sits on the switch at u = {switch_u:.2f} "
            f"({abs(crossover_u - switch_u):.2f} away)"
        )
    home = next((s for s in segments if s.u_start <= crossover_u <= s.u_end), segments[-1])
    level = round(home.level, 1)
    band = {levels[0]: f"low-{unit}", levels[-1]: f"high-{unit}"}.get(level) if len(levels) == 2 else None
    text += f"; the crossover (u = {crossover_u:.2f}) lies inside the {band or _fmt(level) + '-' + unit} band"
    if switch_u is not None:
        text += f", {abs(crossover_u - switch_u):.2f} from the nearest switch (u = {switch_u:.2f})"
    return text


def profile_summary(u, nfe: dict, steps: dict, target_probability, penalty: float | None = None) -> dict:
    """Everything a Regimes derives from its raw arrays: disagreements, switches, crossover, reading.

    The switches are those of the first solver's NFE.
    """
    u = np.asarray(u, dtype=float)
    methods = list(nfe)
    switches, segments = level_switches(u, nfe[methods[0]], penalty)
    if len(methods) > 1:
        nfe_disagreement = relative_difference(nfe[methods[0]], nfe[methods[1]])
        step_disagreement = relative_difference(steps[methods[0]], steps[methods[1]])
    else:
        nfe_disagreement = step_disagreement = 0.0
    crossover_u = crossing(u, target_probability)
    switch_u = nearest_switch(switches, crossover_u)
    return {
        "nfe_disagreement": nfe_disagreement,
        "step_disagreement": step_disagreement,
        "switches": switches,
        "segments": segments,
        "switch_u": switch_u,
        "crossover_u": crossover_u,
        "crossover_to_switch": None if switch_u is None else abs(crossover_u - switch_u),
        "reading": regimes_reading(segments, crossover_u),
    }


@torch.no_grad()
def nfe_regimes(
    model,
    tok,
    prompt: str,
    u_grid=DEFAULT_U_GRID,
    solvers=("dopri5", "adaptive_heun"),
    rtol: float = 1e-3,
    atol: float = 1e-4,
    axis: str = "sentiment",
    targets=(" good", " bad"),
    max_steps: int = 2000,
    other: float = 0.0,
    precision: str | None = None,
) -> Regimes:
    """NFE of each adaptive solver for each u, every regime switch and the semantic crossover.

    precision None: one torchdiffeq solve per u, in the model's own dtype. "float64" or "float32": every u in one
    batched solve per solver (model.batched_adaptive: torchdiffeq's controller per sample, the same counts) on a
    copy of the field in that dtype; 41 u take a few batched evaluations' time instead of 41 solves'."""
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
    if precision is None:
        nfe, steps, finals, max_tau = _solve_each_u(model, h0, controls, configs)
    else:
        nfe, steps, finals, max_tau = _solve_batched(model, h0, controls, configs, precision)
    raw = target_probabilities(model, finals.to(h0.dtype), target_ids)
    seconds = time.perf_counter() - start
    relative = raw[:, 0] / np.maximum(raw[:, 0] + raw[:, 1], 1e-30)
    return Regimes(
        u=grid,
        axis=axis,
        nfe=nfe,
        steps=steps,
        **profile_summary(grid, nfe, steps, relative),
        target_probability=relative,
        target_raw=raw,
        targets=target_tokens,
        rtol=float(rtol),
        atol=float(atol),
        seconds=seconds,
        max_tau=max_tau,
    )


def _solve_each_u(model, h0, controls, configs):
    """One torchdiffeq solve per u and solver: NFE and accepted steps per solver, the first solver's finals."""
    nfe = {c.method: np.zeros(len(controls), dtype=int) for c in configs}
    steps = {c.method: np.zeros(len(controls), dtype=int) for c in configs}
    finals, max_tau = [], 0.0
    for i, control in enumerate(controls):
        for j, config in enumerate(configs):
            result = model.middle(h0, control[None], config)
            nfe[config.method][i] = result.nfe
            steps[config.method][i] = len(infer_adaptive_steps(result.eval_taus, config.method).accepted)
            max_tau = max(max_tau, *result.eval_taus)
            if j == 0:
                finals.append(result.final[0])
    return nfe, steps, torch.stack(finals), max_tau


def _solve_batched(model, h0, controls, configs, precision: str):
    """Every u at once per solver, each on its own steps, on a copy of the field in `precision`."""
    from ..model.batched_adaptive import solve_adaptive_batch
    from ..model.batched_field import batched_field, float_copy

    dtype = {"float64": torch.float64, "float32": torch.float32}[precision]
    start = h0.to(dtype)
    field = batched_field(float_copy(model.field, dtype), controls.to(dtype), start)
    y0 = start.expand(len(controls), *start.shape[1:]).contiguous()
    nfe, steps, finals, max_tau = {}, {}, None, 0.0
    for config in configs:
        solve = solve_adaptive_batch(field, y0, config.rtol, config.atol, config.method, config.max_steps)
        nfe[config.method], steps[config.method] = solve.nfe, solve.accepted
        max_tau = max(max_tau, float(solve.max_tau.max()))
        finals = solve.final if finals is None else finals
    return nfe, steps, finals, max_tau


@dataclass
class ToleranceScaling:
    tolerances: np.ndarray  # [n] rtol = atol
    nfe: np.ndarray  # [n]
    slope: float  # d log NFE / d log(1/tolerance)
    solver: str
    u: np.ndarray

    def to_dict(self) -> dict:
        return {"tolerances": self.tolerances, "nfe": self.nfe, "slope": self.slope, "solver": self.solver, "u": self.u}


@torch.no_grad()
def tolerance_scaling(
    model,
    tok,
    prompt: str,
    u,
    tolerances=DEFAULT_TOLERANCES,
    solver: str = "dopri5",
    axis: str = "sentiment",
    max_steps: int = 2000,
) -> ToleranceScaling:
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
    return ToleranceScaling(
        tolerances=tols, nfe=nfe, slope=slope, solver=solver, u=control[0].cpu().numpy().astype(float)
    )
