"""Why an adaptive solver works as hard as it does at each u: its step trace, and the field along the path.

The step trace. torchdiffeq's adaptive Runge-Kutta solvers call `callback_step(τ0, H0, h)` before
each attempted step and `callback_accept_step` or `callback_reject_step` after it: the solver's own
decisions, recorded here without re-implementing it. The error ratio behind each decision (the
embedded error estimate's RMS norm against atol + rtol·max(|H0|, |H1|)) is not passed to the
callbacks; it is recomputed from the step's recorded stage evaluations with torchdiffeq's own
Butcher tableau and `_compute_error_ratio`, in the solver's arithmetic (the tests check that it
reproduces every accept/reject decision and every next step size). The first step is
torchdiffeq's `_select_initial_step` (Hairer, Nørsett & Wanner II.4): min(100·h0, h1) with
h0 = 0.01·|H0|/|F0| and h1 = (0.01 / max(|F0|, |F1 - F0|/h0))^(1/order), norms scaled by
atol + rtol·|H0|; the trace says which of the two won.

Along τ (`field_geometry`), on a tight dopri5 path: the field's speed |α·F| per token, its turn
rate |d F̂/dτ| = |Ḟ⊥| / |F| (Ḟ = ∂F/∂τ + J·F, the change of F along the path; radians per unit
depth, per token and their mean), and the local stretching rate: the growth rate of the flow
Jacobian's largest singular value over an infinitesimal step, d/dδ σ_max(I + δJ) = λ_max((J + Jᵀ)/2),
by a few Lanczos iterations of J·v and Jᵀ·v products (steering.analysis.dynamics). Negative
stretching: the flow contracts in every direction there.

`curvature_by_level` tests the paper's claim that the control partitions the field into regions of
different curvature: the mean path curvature of the u values at each NFE level, and a permutation
p-value for "curvature differs between levels".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torchdiffeq import odeint
from torchdiffeq._impl.misc import _compute_error_ratio, _rms_norm
from torchdiffeq._impl.odeint import SOLVERS as TORCHDIFFEQ_SOLVERS

from ..model.ode import SolverConfig, SolverStepLimitError, adaptive_options
from .dynamics import symmetric_top_eigenvalues
from .inputs import REFERENCE_SOLVER, axis_control, prompt_tensor, tau_grid, u_grid_array

EVALS_BEFORE_FIRST_STEP = 2  # f(0, H0) and the trial evaluation that sizes the first step
GROWTH_CAP = 10.0  # torchdiffeq's ifactor: a step is at most this many times the one before


@dataclass
class Step:
    tau: float  # where the attempt starts
    h: float  # its size
    error_ratio: float  # the embedded error estimate against the tolerance: accepted when <= 1
    accepted: bool  # the solver's own decision (its callbacks)

    def to_dict(self) -> dict:
        return {"tau": self.tau, "h": self.h, "error_ratio": self.error_ratio, "accepted": self.accepted}


@dataclass
class FirstStep:
    h: float  # the first step tried: min(100·h0, h1)
    h0: float  # 0.01·d0/d1 (1e-6 when either is below 1e-5)
    h1: float  # (0.01 / max(d1, d2))^(1/order)
    d0: float  # |H0| scaled by atol + rtol·|H0| (RMS)
    d1: float  # |F(0, H0)|, scaled the same way
    d2: float  # |F(h0, H0 + h0·F0) - F0| / h0, scaled: the field's change along the path
    chosen_by: str  # "100·h0" (speed bound) or "h1" (change bound)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class SolverTrace:
    u: np.ndarray  # [2] (sentiment, style)
    method: str
    rtol: float
    atol: float
    steps: list[Step]
    first_step: FirstStep
    evals_per_step: int  # field evaluations per attempted step

    @property
    def nfe(self) -> int:
        """Field evaluations, from the trace: two before the first step, then a fixed number per attempt."""
        return EVALS_BEFORE_FIRST_STEP + self.evals_per_step * len(self.steps)

    @property
    def accepted(self) -> list[Step]:
        return [s for s in self.steps if s.accepted]

    @property
    def rejected(self) -> list[Step]:
        return [s for s in self.steps if not s.accepted]

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "method": self.method,
            "steps": [s.to_dict() for s in self.steps],
            "first_step": self.first_step.to_dict(),
            "nfe": self.nfe,
            "accepted_steps": len(self.accepted),
            "rejected_steps": len(self.rejected),
            "reading": trace_reading(self),
        }


class _Recorder(torch.nn.Module):
    """f(τ, H) as torchdiffeq calls it, keeping every evaluation and the solver's step callbacks."""

    def __init__(self, f, tau_end: float | None = 1.0):
        super().__init__()
        self.f = f
        self.tau_end = tau_end  # where the solve's last step is cut to land (None: it may step past the end)
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []  # (H, f(τ, H)) in call order
        self.attempts: list[tuple[float, torch.Tensor, torch.Tensor, int]] = []  # (τ0, H0, dt, first call)
        self.decisions: list[bool] = []

    def forward(self, tau, h):
        out = self.f(tau, h)
        self.calls.append((h, out))
        return out

    def callback_step(self, t0, y0, dt):
        # torchdiffeq reports the step it proposes, then shortens it to land on τ = 1 (ode.adaptive_options)
        taken = dt if self.tau_end is None else torch.minimum(dt, self.tau_end - t0)
        self.attempts.append((float(t0), y0, taken, len(self.calls)))

    def callback_accept_step(self, t0, y0, dt):
        self.decisions.append(True)

    def callback_reject_step(self, t0, y0, dt):
        self.decisions.append(False)


def field_under_control(model, h0: torch.Tensor, control: torch.Tensor):
    """f(τ, H) of the model's block on the path from h0 under control [1, c], as torchdiffeq wants it.

    The one place that knows how a model binds its field (ode.solve_block does the same).
    """
    return model.field.bind(control.to(h0.dtype), h0)


def _rk_tableau(method: str, y0: torch.Tensor):
    solver = TORCHDIFFEQ_SOLVERS[method]
    tab = solver.tableau
    return (
        [b.to(device=y0.device, dtype=y0.dtype) for b in tab.beta],
        tab.c_sol.to(device=y0.device, dtype=y0.dtype),
        tab.c_error.to(device=y0.device, dtype=y0.dtype),
        solver.order,
    )


def first_step_terms(y0, f0, f1, rtol, atol, order: int, h: float | None = None) -> FirstStep:
    """The terms of torchdiffeq's _select_initial_step from its two evaluations, f0 = f(0, y0) and
    f1 = f(h0, y0 + h0·f0); h: the step it tried (default min(100·h0, h1))."""
    scale = atol + torch.abs(y0) * rtol
    d0, d1 = float(_rms_norm(y0 / scale)), float(_rms_norm(f0 / scale))
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    d2 = float(_rms_norm((f1 - f0) / scale)) / h0
    h1 = max(1e-6, h0 * 1e-3) if d1 <= 1e-15 and d2 <= 1e-15 else (0.01 / max(d1, d2)) ** (1.0 / order)
    h = min(100 * h0, h1) if h is None else h
    return FirstStep(h=h, h0=h0, h1=h1, d0=d0, d1=d1, d2=d2, chosen_by="100·h0" if 100 * h0 <= h1 else "h1")


def _first_step(rec: _Recorder, rtol, atol, order: int) -> FirstStep:
    """The terms of torchdiffeq's _select_initial_step, from the two evaluations it made."""
    (y0, f0), (_, f1) = rec.calls[0], rec.calls[1]
    return first_step_terms(y0, f0, f1, rtol, atol, order, h=float(rec.attempts[0][2]))


def _error_ratios(rec: _Recorder, method: str, rtol: float, atol: float) -> list[float]:
    """Each attempt's error ratio, recomputed from its stages as rk_common._runge_kutta_step and
    _adaptive_step compute it (the same tableau, dtypes and norm)."""
    y_first = rec.calls[0][0]
    beta, c_sol, c_error, _ = _rk_tableau(method, y_first)
    fsal = bool(c_sol[-1] == 0 and (c_sol[:-1] == beta[-1]).all())
    n_stages = len(beta)
    t_dtype = torch.promote_types(torch.float64, y_first.abs().dtype)
    rtol_t = torch.as_tensor(rtol, dtype=t_dtype, device=y_first.device)
    atol_t = torch.as_tensor(atol, dtype=t_dtype, device=y_first.device)
    f_now = rec.calls[0][1]
    ratios = []
    for (_, y0, dt, first), accepted in zip(rec.attempts, rec.decisions):
        stages = rec.calls[first : first + n_stages]
        k = torch.stack([f_now] + [out for _, out in stages], dim=-1)
        dt_y = dt.to(y0.abs().dtype)
        y1 = stages[-1][0] if fsal else y0 + torch.sum(k * (dt_y * c_sol), dim=-1).view_as(f_now)
        y1_error = torch.sum(k * (dt_y * c_error), dim=-1)
        ratios.append(float(_compute_error_ratio(y1_error, rtol_t, atol_t, y0, y1, _rms_norm)))
        if accepted:
            f_now = k[..., -1]
    return ratios


def trace_solve(f, h0: torch.Tensor, solver: SolverConfig, past_end: bool = False) -> tuple[_Recorder, torch.Tensor]:
    """Integrate dH/dτ = f(τ, H) from h0 over [0, 1] with an adaptive solver (its step cap kept),
    recording every evaluation and step decision; the recorder and H(1). past_end: as torchdiffeq does by
    default, the last step may run past τ = 1 (ode.adaptive_options)."""
    if solver.is_fixed:
        raise ValueError(f"{solver.method} takes fixed steps; a step trace needs an adaptive solver")
    rec = _Recorder(f, None if past_end else 1.0)
    t = torch.tensor([0.0, 1.0], dtype=h0.dtype, device=h0.device)
    try:
        states = odeint(
            rec,
            h0,
            t,
            method=solver.method,
            rtol=solver.rtol,
            atol=solver.atol,
            options=adaptive_options(solver.max_steps, past_end=past_end),
        )
    except AssertionError as err:
        if "max_num_steps" in str(err):
            raise SolverStepLimitError(
                f"{solver.method} needed more than max_steps={solver.max_steps} steps at rtol={solver.rtol:g}, "
                f"atol={solver.atol:g}; loosen the tolerance or raise the step cap"
            ) from None
        raise
    return rec, states[-1]


def solver_trace(f, h0: torch.Tensor, solver: SolverConfig, u=None) -> SolverTrace:
    """The step trace of one adaptive solve of dH/dτ = f(τ, H) from h0."""
    rec, _ = trace_solve(f, h0, solver)
    ratios = _error_ratios(rec, solver.method, solver.rtol, solver.atol)
    steps = [
        Step(tau=t0, h=float(dt), error_ratio=r, accepted=a)
        for (t0, _, dt, _), r, a in zip(rec.attempts, ratios, rec.decisions)
    ]
    order = TORCHDIFFEQ_SOLVERS[solver.method].order
    return SolverTrace(
        u=np.zeros(2) if u is None else np.asarray(u, dtype=float),
        method=solver.method,
        rtol=float(solver.rtol),
        atol=float(solver.atol),
        steps=steps,
        first_step=_first_step(rec, solver.rtol, solver.atol, order),
        evals_per_step=len(TORCHDIFFEQ_SOLVERS[solver.method].tableau.beta),
    )


def trace_reading(trace: SolverTrace) -> str:
    """One sentence: why this solve took as many steps as it did."""
    n, first = len(trace.accepted), trace.first_step
    steps = f"{n} step{'s' if n != 1 else ''}"
    largest = max(s.error_ratio for s in trace.steps)
    if trace.rejected:
        r = trace.rejected[0]
        more = f", {len(trace.rejected)} rejections in all" if len(trace.rejected) > 1 else ""
        return (
            f"{steps} here because attempt {trace.steps.index(r) + 1} (τ = {r.tau:.3f}, h = {r.h:.3f}) had error "
            f"ratio {r.error_ratio:.2f}: rejected{more}"
        )
    guess = f"h = {first.h:.4f}, set by {first.chosen_by}"
    if n == 1:
        return f"1 step: the first guess ({guess}) passed τ = 1; error ratio {largest:.2g}"
    a, b = trace.accepted[0], trace.accepted[1]
    factor = b.h / a.h
    growth = f"the next step {factor:.3g}× larger" + (" (the growth cap)" if factor >= GROWTH_CAP * (1 - 1e-6) else "")
    if n == 2:
        return (
            f"2 steps: the first guess was large enough ({guess}; {growth} passed τ = 1); "
            f"no error ratio above {largest:.2g}"
        )
    return (
        f"{steps}: the first guess ({guess}) was too small: {growth} ended at τ = {b.tau + b.h:.3f}, short of 1; "
        f"no error ratio above {largest:.2g}"
    )


@dataclass
class LevelCause:
    """What sets one NFE level of a sweep: how many of its u had a step rejected, and how close the
    error came to the tolerance."""

    nfe: int
    n_u: int
    n_rejecting: int  # u whose solve had a step rejected (the error bound)
    largest_accepted_ratio: float  # the largest error ratio of an accepted step, over the level's u
    rejected_ratios: tuple[float, float] | None  # (lowest, highest) error ratio of a rejected step

    @property
    def error_binds(self) -> bool:
        return self.n_rejecting > 0

    def to_dict(self) -> dict:
        return {
            "nfe": self.nfe,
            "n_u": self.n_u,
            "n_rejecting": self.n_rejecting,
            "largest_accepted_ratio": self.largest_accepted_ratio,
            "rejected_ratios": self.rejected_ratios,
            "error_binds": self.error_binds,
        }


def level_causes(traces: list[SolverTrace]) -> list[LevelCause]:
    """Per NFE level of a sweep's traces (ascending), what set it: rejections or the step-size rules."""
    causes = []
    for nfe in sorted({t.nfe for t in traces}):
        at = [t for t in traces if t.nfe == nfe]
        rejected = [s.error_ratio for t in at for s in t.rejected]
        causes.append(
            LevelCause(
                nfe=nfe,
                n_u=len(at),
                n_rejecting=sum(bool(t.rejected) for t in at),
                largest_accepted_ratio=max(s.error_ratio for t in at for s in t.accepted),
                rejected_ratios=(min(rejected), max(rejected)) if rejected else None,
            )
        )
    return causes


def levels_reading(causes: list[LevelCause], n_u: int) -> str:
    """What sets each NFE level, in one line per level, for the page and the CLI."""
    lines = []
    for c in causes:
        where = f"{c.nfe} NFE on {c.n_u} of {n_u} u"
        if c.n_rejecting == c.n_u:
            low, high = c.rejected_ratios
            ratios = f"{low:.2f}" if abs(high - low) < 0.005 else f"{low:.2f}–{high:.2f}"
            lines.append(
                f"{where}: the error binds. Every one had a step rejected (error ratio {ratios}), and the retry "
                "costs the extra evaluations."
            )
        elif c.n_rejecting:
            lines.append(
                f"{where}: the error binds on {c.n_rejecting} of them (a step rejected); on the rest the step "
                f"rules set the count (accepted error ratio up to {c.largest_accepted_ratio:.2f})."
            )
        else:
            near = " (near the tolerance)" if c.largest_accepted_ratio > 0.5 else ""
            lines.append(
                f"{where}: no step rejected, error ratio at most {c.largest_accepted_ratio:.2f}{near}: the first "
                "step's guess and the 10× growth cap set how many steps reach τ = 1."
            )
    return " ".join(lines)


@dataclass
class SolverTraces:
    u: np.ndarray  # [n_u] on `axis`
    axis: str
    prompt: str
    traces: list[SolverTrace]

    @property
    def nfe(self) -> np.ndarray:
        return np.array([t.nfe for t in self.traces], dtype=int)

    def level_causes(self) -> list[LevelCause]:
        return level_causes(self.traces)

    def levels_reading(self) -> str:
        return levels_reading(self.level_causes(), len(self.traces))

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "axis": self.axis,
            "prompt": self.prompt,
            "nfe": self.nfe,
            "traces": [t.to_dict() for t in self.traces],
            "levels": [c.to_dict() for c in self.level_causes()],
            "levels_reading": self.levels_reading(),
        }


@torch.no_grad()
def solver_traces(
    model,
    tok,
    prompt: str,
    u_grid,
    solver: SolverConfig | None = None,
    axis: str = "sentiment",
    other: float = 0.0,
) -> SolverTraces:
    """The step trace of an adaptive solve of the prompt's block at each u of the grid (dopri5 at
    rtol 1e-3, atol 1e-4 by default: the Regimes sweep's solver)."""
    solver = solver or SolverConfig("dopri5", rtol=1e-3, atol=1e-4)
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous block to solve")
    grid = u_grid_array(u_grid)
    idx, _ = prompt_tensor(model, tok, prompt)
    h0 = model.encode(idx)
    traces = []
    for value in grid:
        control = torch.tensor([axis_control(float(value), axis, other)], device=idx.device)
        traces.append(solver_trace(field_under_control(model, h0, control), h0, solver, control[0].cpu().numpy()))
    return SolverTraces(u=grid, axis=axis, prompt=prompt, traces=traces)


def change_along_path(f, tau: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """F = f(τ, H) and Ḟ = ∂F/∂τ + J·F, its derivative along its own path (one double-backward pass)."""
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        x = h.detach().requires_grad_(True)
        t = tau.detach().clone().to(h.dtype).requires_grad_(True)
        out = f(t, x)
        w = torch.zeros_like(out, requires_grad=True)
        gx, gt = torch.autograd.grad(out, (x, t), w, create_graph=True, allow_unused=True)
        along = (gx * out.detach()).sum() + (0.0 if gt is None else gt.sum())
        change = torch.autograd.grad(along, w, allow_unused=True)[0]
    return out.detach(), torch.zeros_like(out) if change is None else change.detach()


def turn_rate(f_value: torch.Tensor, change: torch.Tensor) -> torch.Tensor:
    """|d F̂/dτ| = |Ḟ - (Ḟ·F̂)F̂| / |F| per token (last axis): 0 where F keeps its direction."""
    speed = f_value.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    unit = f_value / speed
    orthogonal = change - (change * unit).sum(-1, keepdim=True) * unit
    return (orthogonal.norm(dim=-1, keepdim=True) / speed).squeeze(-1)


@dataclass
class FieldGeometry:
    u: np.ndarray  # [n_u] on `axis`
    axis: str
    tau: np.ndarray  # [T]
    speed: np.ndarray  # [n_u, T] mean over tokens of |α·F|
    curvature: np.ndarray  # [n_u, T] mean over tokens of the turn rate |dF̂/dτ| (radians per unit τ)
    curvature_token: np.ndarray  # [n_u, T, tokens]
    stretching: np.ndarray | None  # [n_u, T] λ_max((J + Jᵀ)/2), the largest over tokens; None when not asked
    token_strings: list[str]
    solver: str
    extra: dict = field(default_factory=dict)

    @property
    def path_curvature(self) -> np.ndarray:
        """[n_u] the mean over τ of the mean turn rate: one number per path."""
        return self.curvature.mean(axis=1)

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "axis": self.axis,
            "tau": self.tau,
            "speed": self.speed,
            "curvature": self.curvature,
            "curvature_token": self.curvature_token,
            "path_curvature": self.path_curvature,
            "stretching": self.stretching,
            "token_strings": self.token_strings,
            "geometry_solver": self.solver,
        }


@torch.no_grad()
def field_geometry(
    model,
    tok,
    prompt: str,
    u_grid,
    n_tau: int = 17,
    stretching: bool = False,
    lanczos_iterations: int = 6,
    axis: str = "sentiment",
    other: float = 0.0,
    solver: SolverConfig = REFERENCE_SOLVER,
    seed: int = 0,
) -> FieldGeometry:
    """Speed, turn rate and (stretching=True) the local stretching rate of the field along each u's
    path, solved with `solver` on n_tau points of τ."""
    from .dynamics import _bound_field

    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous vector field")
    grid = u_grid_array(u_grid)
    idx, strings = prompt_tensor(model, tok, prompt)
    taus = tau_grid(n_tau).to(idx.device)
    h0 = model.encode(idx)
    per_token = not model.field.mixes_tokens
    gen = torch.Generator().manual_seed(seed)
    speed, turn, stretch = [], [], []
    for value in grid:
        control = torch.tensor([axis_control(float(value), axis, other)], device=idx.device)
        states = model.middle(h0, control, solver, tau=taus).states  # [T, 1, tokens, d]
        f = _bound_field(model.field, control, h0)
        row_speed, row_turn, row_stretch = [], [], []
        for tau, h in zip(taus, states):
            value_f, change = change_along_path(f, tau, h)
            row_speed.append(value_f[0].norm(dim=-1).double().cpu().numpy())
            row_turn.append(turn_rate(value_f[0], change[0]).double().cpu().numpy())
            if stretching:
                tops = symmetric_top_eigenvalues(f, tau, h, lanczos_iterations, gen, per_token)
                row_stretch.append(float(np.max(tops)))
        speed.append(np.mean(row_speed, axis=1))
        turn.append(np.stack(row_turn))
        stretch.append(row_stretch)
    turn = np.stack(turn)
    return FieldGeometry(
        u=grid,
        axis=axis,
        tau=taus.cpu().numpy().astype(float),
        speed=np.stack(speed),
        curvature=turn.mean(axis=2),
        curvature_token=turn,
        stretching=np.array(stretch, dtype=float) if stretching else None,
        token_strings=strings,
        solver=solver.label(),
    )


def _between_levels(values: np.ndarray, labels: np.ndarray) -> float:
    """The between-level sum of squares Σ_l n_l (mean_l - mean)²: 0 when every level has the same mean."""
    grand = values.mean()
    return float(sum((labels == lv).sum() * (values[labels == lv].mean() - grand) ** 2 for lv in np.unique(labels)))


def curvature_by_level(nfe, curvature, draws: int = 2000, seed: int = 0) -> dict:
    """For each NFE level, the mean path curvature of its u values; and whether curvature differs between levels.

    p_value: the share of `draws` random relabellings of the u values (levels' sizes kept) whose
    between-level spread of mean curvature is at least the observed one ((1 + hits) / (1 + draws)).
    Neighbouring u have similar curvature and the levels are bands of neighbours, which a free
    relabelling ignores, so p_value_cyclic also shifts the labels cyclically along u (every shift;
    it keeps the bands whole). None for both with a single level.
    """
    nfe = np.asarray(nfe)
    curvature = np.asarray(curvature, dtype=float)
    if nfe.shape != curvature.shape or nfe.ndim != 1 or nfe.size == 0:
        raise ValueError(f"give one NFE and one curvature per u, got shapes {nfe.shape} and {curvature.shape}")
    if not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    levels = [
        {"level": int(lv), "curvature": float(curvature[nfe == lv].mean()), "n_u": int((nfe == lv).sum())}
        for lv in np.unique(nfe)
    ]
    if len(levels) < 2:
        return {"levels": levels, "p_value": None, "p_value_cyclic": None, "draws": draws}
    observed = _between_levels(curvature, nfe)
    rng = np.random.default_rng(seed)
    tol = 1e-12 * max(observed, 1e-300)
    hits = sum(_between_levels(curvature, rng.permutation(nfe)) >= observed - tol for _ in range(draws))
    shifts = [_between_levels(curvature, np.roll(nfe, k)) >= observed - tol for k in range(1, nfe.size)]
    return {
        "levels": levels,
        "p_value": (1 + hits) / (1 + draws),
        "p_value_cyclic": (1 + sum(shifts)) / (1 + len(shifts)),
        "draws": draws,
    }


def neighbour_across_switch(nfe, index: int) -> int | None:
    """The grid index nearest `index` whose NFE differs from its own (the left one on a tie); without
    any, the next grid point (the previous at the end); None on a one-point grid."""
    nfe = np.asarray(nfe)
    if not 0 <= index < nfe.size:
        raise ValueError(f"index {index} is outside the grid of {nfe.size} values")
    other = np.flatnonzero(nfe != nfe[index])
    if other.size:
        return int(other[np.argmin(np.abs(other - index) * 2 + (other > index))])
    if nfe.size == 1:
        return None
    return index + 1 if index + 1 < nfe.size else index - 1
