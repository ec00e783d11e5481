"""The regimes map: dopri5's NFE over (u, tolerance), why each cell's count is what it is, and the tolerance
bands in which NFE over u takes two levels or more.

Each cell is one dopri5 solve of the prompt's block at control u and tolerance t (rtol = t, atol = t/10),
landing on τ = 1 (ode.adaptive_options; `past_end` solves as torchdiffeq does by default instead, stepping
past τ = 1 and interpolating back). Its step decisions come from solver_trace's recorder, and each cell gets
a reason:
  cap-limited    no step rejected, and every step after the first grew by torchdiffeq's 10× cap (the last
                 one may be cut to land on τ = 1): the count is the first-step rule's, 2 + 6·k NFE with k
                 the least number of steps h, 10·h, 100·h, … that reach τ = 1 (k steps need h ≥ 9/(10^k − 1):
                 1, 1/11, 1/111, …);
  error-limited  no step rejected, but the error held some step's growth under the cap;
  rejected       at least one step was rejected.

The first step h is torchdiffeq's min(100·h0, h1) (solver_trace.first_step_terms). With atol = rtol/10 the
tolerance scale atol + rtol·|H0| is t·(0.1 + |H0|): h0 = 0.01·d0/d1 does not depend on t, and
h1 = (0.01/max(d1, d2))^(1/5) grows as t^(1/5). So one solve's two initial evaluations per u give h(u, t) at
every t: h(u, t) = min(100·h0(u), h1(u, t_ref)·(t/t_ref)^(1/5)). Where h's range over u straddles a
threshold, the first-step rule predicts two levels; those bands are then found with real solves, their
edges by bisection on t, and their middle solved as a row of the map.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torchdiffeq._impl.odeint import SOLVERS as TORCHDIFFEQ_SOLVERS

from ..model.batched_adaptive import BatchedSolve, solve_adaptive_batch
from ..model.batched_field import batched_field, float_copy
from .changepoints import level_switches
from .inputs import axis_control, prompt_tensor, target_token_ids, u_grid_array
from .regimes import DEFAULT_U_GRID, crossing
from .solver_trace import EVALS_BEFORE_FIRST_STEP, GROWTH_CAP
from .sweep import target_probabilities

# 25 tolerances, four per decade over [1e-8, 1e-2] (1e-3, the regimes sweep's default, among them)
DEFAULT_TOLERANCES = tuple(float(f"{10.0**e:.6g}") for e in np.linspace(-8.0, -2.0, 25))
ATOL_RATIO = 0.1  # atol = t/10, rtol = t: the regimes sweep's pair
REASONS = ("cap-limited", "error-limited", "rejected")
BAND_KINDS = REASONS
METHOD = "dopri5"
EVALS_PER_STEP = len(TORCHDIFFEQ_SOLVERS[METHOD].tableau.beta)  # 6: the first-same-as-last stage is reused
ORDER = TORCHDIFFEQ_SOLVERS[METHOD].order  # 5: h1 = (0.01 / max(d1, d2))^(1/5)
FLOAT32_NOTE = (
    "In float32 the state carries about 7 digits: at atol ≤ 1e-6 its round-off in the error estimate is as large as "
    "the tolerance, so a step's acceptance, and the count, can follow the arithmetic rather than the flow. Where "
    "this map parts from the float64 one, round-off decides."
)
PRECISIONS = {"float64": torch.float64, "float32": torch.float32}
BISECTION_PRECISION = 1.01
# grid rows solved in one batch: 5 × 41 u gives matrix products of ~800 token rows, where float64's run
# near their best on this CPU (one row's ~160 token rows: 20 % slower a multiply-add)
ROWS_PER_BATCH = 5  # a band edge is bracketed within this factor of t
PAST_END_NOTE = (
    "Past τ = 1 a depth field's weights are polynomials extrapolated beyond the depth they were trained on: a step "
    "that reaches there is judged on the error out there, so these levels are not the flow's on [0, 1]."
)


def steps_to_end(h: float, growth: float = GROWTH_CAP) -> int:
    """The least k for which steps h, growth·h, growth²·h, … (k of them) reach τ = 1."""
    if not h > 0:
        raise ValueError(f"the first step must be positive, got {h!r}")
    k, reach, step = 1, h, h
    while reach < 1.0:
        step *= growth
        reach += step
        k += 1
    return k


def step_threshold(k: int, growth: float = GROWTH_CAP) -> float:
    """The smallest first step for which k steps reach τ = 1 under the growth cap: 1, 1/11, 1/111, …"""
    return (growth - 1.0) / (growth**k - 1.0)


def predicted_nfe(h: float) -> int:
    """The first-step rule's NFE for a cap-limited dopri5 solve: 2 + 6·k."""
    return EVALS_BEFORE_FIRST_STEP + EVALS_PER_STEP * steps_to_end(h)


@dataclass
class Cell:
    nfe: int
    accepted: int
    rejected: int
    first_step: float  # the first step torchdiffeq tried: min(100·h0, h1)
    reason: str  # one of REASONS
    max_tau: float  # the furthest τ the field was evaluated at (past 1 only with past_end)
    max_error_ratio: float = float("nan")  # dopri5's largest local error estimate against the tolerance

    @property
    def predicted(self) -> int | None:
        return predicted_nfe(self.first_step) if self.reason == "cap-limited" else None


def cell_reason(steps: list[float], decisions: list[bool]) -> str:
    """Why a solve took its count, from its attempted step sizes (as taken) and the solver's decisions."""
    if not all(decisions):
        return "rejected"
    # the last step ends the solve (cut to land on τ = 1, or past it): only the ones between must have grown 10×
    grew = all(b >= GROWTH_CAP * a * (1 - 1e-6) for a, b in zip(steps[:-2], steps[1:-1]))
    return "cap-limited" if grew else "error-limited"


def cells_from(solve: BatchedSolve) -> list[Cell]:
    """One Cell per sample of a batched dopri5 solve."""
    return [
        Cell(
            nfe=int(solve.nfe[j]),
            accepted=int(solve.accepted[j]),
            rejected=int(solve.rejected[j]),
            first_step=solve.steps[j][0],
            reason=cell_reason(solve.steps[j], solve.decisions[j]),
            max_tau=float(solve.max_tau[j]),
            max_error_ratio=max(solve.error_ratios[j]),
        )
        for j in range(len(solve.nfe))
    ]


@dataclass
class FirstStepRule:
    """h(u, t) for the map's tolerances (atol = t/10), from one solve's first two evaluations per u."""

    speed_bound: np.ndarray  # [n_u] 100·h0, the same at every t
    change_bound_ref: np.ndarray  # [n_u] h1 at t_ref
    t_ref: float

    def h(self, t) -> np.ndarray:
        """[n_u] (or [n_t, n_u] for an array of t) the first step at tolerance t."""
        t = np.asarray(t, dtype=float)
        change = self.change_bound_ref * (t[..., None] / self.t_ref) ** (1.0 / ORDER)
        return np.minimum(self.speed_bound, change)

    def chosen_by(self, t: float) -> list[str]:
        change = self.change_bound_ref * (t / self.t_ref) ** (1.0 / ORDER)
        return ["100·h0" if s <= c else "h1" for s, c in zip(self.speed_bound, change)]

    def crossing_t(self, threshold: float) -> np.ndarray:
        """[n_u] the t at which h(u, t) reaches threshold (inf where the speed bound keeps it below)."""
        t = self.t_ref * (threshold / self.change_bound_ref) ** ORDER
        return np.where(self.speed_bound >= threshold, t, np.inf)

    def to_dict(self) -> dict:
        return {"speed_bound": self.speed_bound, "change_bound_ref": self.change_bound_ref, "t_ref": self.t_ref}


def crossings(u: np.ndarray, h: np.ndarray, threshold: float) -> list[float]:
    """Every u where h crosses threshold, interpolated linearly in log h between grid points."""
    side = h >= threshold
    out = []
    for k in np.flatnonzero(side[1:] != side[:-1]):
        a, b = math.log(h[k] / threshold), math.log(h[k + 1] / threshold)
        out.append(float(u[k] + (u[k + 1] - u[k]) * a / (a - b)))
    return out


@dataclass
class Band:
    kind: str  # cap-limited, error-limited or rejected
    t_low: float
    t_high: float
    switch_u: list[float]  # the NFE profile's switches at the band's middle tolerance
    predicted_switch_u: list[float] | None  # where h(u) crosses the threshold (cap-limited bands)
    levels: list[int]  # the NFE levels at the middle
    threshold: float | None = None  # the first step that separates the levels (cap-limited bands)
    bisected: bool = False  # edges by bisection on t (else: the grid rows it spans)

    @property
    def t_middle(self) -> float:
        return math.sqrt(self.t_low * self.t_high)

    def to_dict(self) -> dict:
        return {**self.__dict__, "t_middle": self.t_middle}


@dataclass
class PromptMap:
    prompt: str
    u: np.ndarray  # [n_u]
    t: np.ndarray  # [n_t] ascending: the grid, plus each cap-limited band's middle
    nfe: np.ndarray  # [n_t, n_u]
    accepted: np.ndarray
    rejected: np.ndarray
    first_step: np.ndarray  # [n_t, n_u] h as torchdiffeq tried it
    reason: list[list[str]]  # [n_t][n_u]
    predicted: np.ndarray  # [n_t, n_u] 2 + 6k in cap-limited cells, 0 elsewhere
    bands: list[Band]
    exceptions: list[dict]  # cap-limited cells whose NFE differs from the prediction
    rule: FirstStepRule
    band_rows: list[int]  # rows of t added for the bands' middles
    past_end: bool
    max_tau: float  # the furthest τ any solve evaluated the field at
    why_no_band: str | None  # where no cap-limited band lies in the t range: why, from h's range over u
    rule_error: float  # the largest relative gap between h(u, t) from the rule and the first step each solve took
    seconds: float
    solves: int  # dopri5 solves, the bisections' included
    precision: str = "float64"  # the dtype the field and the solves ran in (PRECISIONS)
    max_error_ratio: np.ndarray | None = None  # [n_t, n_u] dopri5's largest local error estimate against the tolerance
    crossover_u: float | None = None  # where P(targets[0]) overtakes P(targets[1]) over u (None: not on the grid)
    extra: dict = field(default_factory=dict)

    def row(self, t: float) -> int:
        """The row whose tolerance is nearest t (in log t)."""
        return int(np.argmin(np.abs(np.log(self.t) - math.log(t))))

    @property
    def cap_bands(self) -> list[Band]:
        return [b for b in self.bands if b.kind == "cap-limited"]

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "u": self.u,
            "t": self.t,
            "nfe": self.nfe,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "first_step": self.first_step,
            "reason": self.reason,
            "predicted": self.predicted,
            "bands": [b.to_dict() for b in self.bands],
            "exceptions": self.exceptions,
            "band_rows": self.band_rows,
            "first_step_rule": self.rule.to_dict(),
            "past_end": self.past_end,
            "precision": self.precision,
            "max_error_ratio": self.max_error_ratio,
            "max_tau": self.max_tau,
            "crossover_u": self.crossover_u,
            "why_no_band": self.why_no_band,
            "first_step_rule_error": self.rule_error,
            "default_reading": default_tolerance_reading(self),
            "seconds": self.seconds,
            "solves": self.solves,
        }


class _Solver:
    """The prompt's block under each u of the grid, encoded once; rows of cells at any tolerance, every u of a
    row in one batched dopri5 solve (each u on its own steps), on a copy of the field in `dtype`."""

    def __init__(self, model, tok, prompt: str, grid, axis: str, other: float, max_steps: int, past_end: bool, dtype):
        idx, _ = prompt_tensor(model, tok, prompt)
        self.h0 = model.encode(idx).to(dtype)
        field = float_copy(model.field, dtype)
        controls = torch.tensor([axis_control(float(v), axis, other) for v in grid], dtype=dtype, device=idx.device)
        self.field = batched_field(field, controls, self.h0)  # the control's features once per u
        self.y0 = self.h0.expand(len(grid), *self.h0.shape[1:]).contiguous()
        self.max_steps, self.past_end = max_steps, past_end
        self.solves = 0
        self.finals: dict[float, torch.Tensor] = {}  # each row's states at τ = 1, for the semantic crossover

    def rows(self, ts, on_attempt=None) -> list[tuple[list[Cell], FirstStepRule]]:
        """Each tolerance's row of cells and the first-step rule at it, all rows in one batch (each sample with its
        own tolerance: larger matrix products than one row's); on_attempt(n_running) before each round."""
        n_u = self.y0.shape[0]
        tols = torch.tensor([float(t) for t in ts], dtype=torch.float64).repeat_interleave(n_u)
        solve = solve_adaptive_batch(
            lambda tau, h, select: self.field(tau, h, select % n_u),  # sample b is u number b mod n_u
            self.y0.repeat(len(ts), 1, 1),
            tols,
            tols * ATOL_RATIO,
            METHOD,
            self.max_steps,
            self.past_end,
            on_attempt=on_attempt,
        )
        self.solves += len(solve.nfe)
        cells = cells_from(solve)
        out = []
        for i, t in enumerate(ts):
            row = slice(i * n_u, (i + 1) * n_u)
            self.finals[float(t)] = solve.final[row]
            rule = FirstStepRule(speed_bound=100 * solve.h0[row], change_bound_ref=solve.h1[row], t_ref=float(t))
            out.append((cells[row], rule))
        return out

    def row(self, t: float, on_attempt=None) -> tuple[list[Cell], FirstStepRule]:
        return self.rows([t], on_attempt)[0]


def _row_kind(cells: list[Cell]) -> str | None:
    """The kind of a row whose NFE takes two levels or more (None: one level)."""
    if len({c.nfe for c in cells}) < 2:
        return None
    reasons = {c.reason for c in cells}
    return "rejected" if "rejected" in reasons else "error-limited" if "error-limited" in reasons else "cap-limited"


def _switches(u, cells: list[Cell]) -> list[float]:
    switches, _ = level_switches(u, np.array([c.nfe for c in cells], dtype=float))
    return [float(s.u) for s in switches]


def _bisect_edge(inside, t_in: float, t_out: float) -> float:
    """The edge between t_in (inside(t) True) and t_out (False), bisected in log t to BISECTION_PRECISION;
    returns the last t inside."""
    while max(t_in, t_out) / min(t_in, t_out) > BISECTION_PRECISION:
        mid = math.sqrt(t_in * t_out)
        if inside(mid):
            t_in = mid
        else:
            t_out = mid
    return t_in


def _cap_band(solve_row, u, rule, threshold: float, t_start: float, t_range, guess=(None, None)) -> Band | None:
    """The cap-limited band around t_start (a tolerance where the first-step rule, or the grid, puts two levels),
    both edges found by bisection on t with real solves (from the rule's predicted edges, `guess`, where given;
    each guess is checked, and the search widens when it is wrong); None when the solves at t_start show no
    cap-limited split. The band is cut at the ends of t_range."""

    def split(t):
        return _row_kind(solve_row(t)) == "cap-limited"

    if not split(t_start):
        return None
    edges = []
    for direction, limit, predicted in ((-1, t_range[0], guess[0]), (1, t_range[1], guess[1])):

        def clip(t, direction=direction, limit=limit):
            return max(t, limit) if direction < 0 else min(t, limit)

        t_in, step = t_start, 1.25
        if predicted is not None:
            near_in = clip(predicted * 1.02 ** (-direction))
            if (near_in - t_start) * direction > 0 and split(near_in):
                t_in, step = near_in, 1.02**2 * 1.0001
        while True:
            t_out = clip(t_in * step**direction)
            if t_out == t_in:  # the band reaches the end of the range
                edges.append(t_in)
                break
            if not split(t_out):
                edges.append(_bisect_edge(split, t_in, t_out))
                break
            t_in, step = t_out, step**2
    low, high = edges
    middle = math.sqrt(low * high)
    cells = solve_row(middle)
    return Band(
        kind="cap-limited",
        t_low=low,
        t_high=high,
        switch_u=_switches(u, cells),
        predicted_switch_u=crossings(u, rule.h(middle), threshold),
        levels=sorted({c.nfe for c in cells}),
        threshold=threshold,
        bisected=True,
    )


def _predicted_bands(rule: FirstStepRule, t_range) -> list[tuple[float, float, float]]:
    """(threshold, low, high): the tolerances at which h's range over u straddles each threshold, within t_range."""
    bands = []
    for k in range(1, 12):
        threshold = step_threshold(k)
        t_cross = rule.crossing_t(threshold)
        finite = t_cross[np.isfinite(t_cross)]
        if finite.size == 0:
            continue
        low, high = max(float(finite.min()), t_range[0]), min(float(t_cross.max()), t_range[1])
        if low < high:
            bands.append((threshold, low, high))
    return bands


def _grid_bands(u, t, rows: list[list[Cell]]) -> list[Band]:
    """Runs of consecutive grid rows that take two levels or more, by kind (edges: the rows' tolerances)."""
    bands, run = [], []
    kinds = [_row_kind(cells) for cells in rows]
    for i in range(len(rows) + 1):
        if i < len(rows) and kinds[i] is not None and (not run or kinds[run[-1]] == kinds[i]):
            run.append(i)
            continue
        if run:
            middle = run[len(run) // 2]
            bands.append(
                Band(
                    kind=kinds[run[0]],
                    t_low=float(t[run[0]]),
                    t_high=float(t[run[-1]]),
                    switch_u=_switches(u, rows[middle]),
                    predicted_switch_u=None,
                    levels=sorted({c.nfe for c in rows[middle]}),
                )
            )
        run = [i] if i < len(rows) and kinds[i] is not None else []
    return bands


def why_no_cap_band(rule: FirstStepRule, t_range) -> str:
    """Why the first-step rule puts no two levels in t_range, from h's range over u."""
    lo_t, hi_t = t_range
    h_lo, h_hi = rule.h(lo_t), rule.h(hi_t)
    ratio = float(np.max(h_hi) / np.min(h_hi))
    parts = [
        f"over u the first step spans {np.min(h_lo):.3g}–{np.max(h_lo):.3g} at t = {lo_t:g} and "
        f"{np.min(h_hi):.3g}–{np.max(h_hi):.3g} at t = {hi_t:g} (a factor {ratio:.3g})"
    ]
    for k in range(1, 12):
        threshold = step_threshold(k)
        t_cross = rule.crossing_t(threshold)
        if np.all(np.isinf(t_cross)):
            continue
        finite = t_cross[np.isfinite(t_cross)]
        low, high = float(finite.min()), float(t_cross.max())
        inside = low < hi_t and high > lo_t
        if high > lo_t / 1e3 and low < hi_t * 1e3:
            parts.append(
                f"h straddles {_fraction(threshold)} only for t in [{low:.3g}, {high:.3g}]"
                + (" (inside the range, but the solves there are not all cap-limited)" if inside else "")
            )
    return "; ".join(parts)


def _fraction(threshold: float) -> str:
    return "1" if threshold == 1 else f"1/{round(1 / threshold):d}"


@torch.no_grad()
def regimes_map(
    model,
    tok,
    prompt: str,
    u_grid=DEFAULT_U_GRID,
    tolerances=DEFAULT_TOLERANCES,
    axis: str = "sentiment",
    other: float = 0.0,
    max_steps: int = 2000,
    past_end: bool = False,
    precision: str = "float64",
    targets=(" good", " bad"),
    on_progress=None,
) -> PromptMap:
    """dopri5 over u × tolerance for one prompt: each cell's NFE and reason, the prediction, and the bands.

    precision: the dtype the field and the solve run in, on a copy of the field (PRECISIONS; float64 by default:
    at atol ≤ 1e-6 float32's round-off, not the flow, decides steps; float32 shows where the two part).
    targets: the two words whose crossover (the first overtaking the second) the switches are compared with.
    on_progress(done_fraction) before each round of a row's attempts (the bands' bisections are the last 10 %): in
    the lab it is where the background job lets a page have the model."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous block to solve")
    grid = u_grid_array(u_grid)
    tols = np.asarray(sorted({float(t) for t in tolerances}), dtype=float)
    if tols.size < 2 or not np.all(np.isfinite(tols)) or tols[0] < 1e-12 or tols[-1] > 1.0:
        raise ValueError("give at least two distinct tolerances in [1e-12, 1]")
    start = time.perf_counter()
    solver = _Solver(model, tok, prompt, grid, axis, other, max_steps, past_end, PRECISIONS[precision])
    rows: dict[float, list[Cell]] = {}
    rule = None

    def report(done: float):
        return None if on_progress is None else (lambda n_running: on_progress(done))

    loosest_first = [float(t) for t in tols[::-1]]  # the loosest row's solves give the rule
    for i in range(0, len(loosest_first), ROWS_PER_BATCH):
        group = loosest_first[i : i + ROWS_PER_BATCH]
        for t, (cells, row_rule) in zip(group, solver.rows(group, report(0.9 * i / tols.size))):
            rows[t] = cells
            rule = rule or row_rule
    t_range = (float(tols[0]), float(tols[-1]))
    in_bands = report(0.9)

    def solve_row(t):
        if t not in rows:
            rows[t] = solver.row(t, in_bands)[0]
        return rows[t]

    # decoded from the tightest row's states: the flow's own end, without another solve (past τ = 1 a solve ends
    # beyond the depth the crossover is defined at)
    crossover_u = None if past_end else semantic_crossover(model, tok, grid, solver.finals[float(tols[0])], targets)
    bands = _grid_bands(grid, tols, [rows[float(t)] for t in tols])
    starts = [(th, math.sqrt(lo * hi), (lo, hi)) for th, lo, hi in _predicted_bands(rule, t_range)]
    for b in bands:  # a split on the grid that the rule did not predict: the threshold its first steps straddle
        h = rule.h(b.t_middle)
        inside = [step_threshold(k) for k in range(1, 12) if h.min() < step_threshold(k) <= h.max()]
        if b.kind == "cap-limited" and inside:
            starts.append((inside[0], b.t_middle, (None, None)))
    cap = []
    for threshold, t_start, guess in starts:
        if any(b.t_low <= t_start <= b.t_high for b in cap):
            continue
        band = _cap_band(solve_row, grid, rule, threshold, t_start, t_range, guess)
        if band is not None:
            cap.append(band)
    bands = sorted(cap + [b for b in bands if b.kind != "cap-limited"], key=lambda b: b.t_low)
    for b in cap:
        solve_row(b.t_middle)
    if on_progress is not None:
        on_progress(1.0)
    t_all = np.array(sorted(set(tols.tolist()) | {b.t_middle for b in cap}))
    band_rows = [int(np.flatnonzero(t_all == b.t_middle)[0]) for b in cap]
    table = [rows[float(t)] for t in t_all]
    nfe = np.array([[c.nfe for c in r] for r in table], dtype=int)
    first_step = np.array([[c.first_step for c in r] for r in table], dtype=float)
    predicted = np.array([[c.predicted or 0 for c in r] for r in table], dtype=int)
    exceptions = [
        {"prompt": prompt, "u": float(grid[j]), "t": float(t_all[i]), "nfe": int(nfe[i, j]), "predicted": int(p)}
        for i, j in zip(*np.nonzero(predicted))
        if (p := predicted[i, j]) != nfe[i, j]
    ]
    return PromptMap(
        prompt=prompt,
        u=grid,
        t=t_all,
        nfe=nfe,
        accepted=np.array([[c.accepted for c in r] for r in table], dtype=int),
        rejected=np.array([[c.rejected for c in r] for r in table], dtype=int),
        first_step=first_step,
        reason=[[c.reason for c in r] for r in table],
        max_error_ratio=np.array([[c.max_error_ratio for c in r] for r in table], dtype=float),
        predicted=predicted,
        bands=bands,
        exceptions=exceptions,
        rule=rule,
        band_rows=band_rows,
        past_end=past_end,
        precision=precision,
        max_tau=max(c.max_tau for r in rows.values() for c in r),
        why_no_band=None if cap else why_no_cap_band(rule, t_range),
        rule_error=float(np.max(np.abs(rule.h(t_all) / first_step - 1))),
        crossover_u=crossover_u,
        seconds=time.perf_counter() - start,
        solves=solver.solves,
    )


def semantic_crossover(model, tok, u, finals: torch.Tensor, targets) -> float | None:
    """Where P(targets[0]) / (P(targets[0]) + P(targets[1])) crosses one half over u, from the states at τ = 1."""
    ids, _, _ = target_token_ids(tok, list(targets))
    if len(ids) < 2:
        raise ValueError("give two targets: the crossover is where the first overtakes the second")
    raw = target_probabilities(model, finals.to(next(model.parameters()).dtype), ids[:2])
    return crossing(u, raw[:, 0] / np.maximum(raw[:, 0] + raw[:, 1], 1e-30))


def default_tolerance_reading(m: PromptMap, t: float = 1e-3) -> str:
    """What sets dopri5's NFE over u at tolerance t (the regimes sweep's default), from the map's own numbers."""
    i = m.row(t)
    t_row = float(m.t[i])
    nfe, reasons, h = m.nfe[i], m.reason[i], m.first_step[i]
    levels = sorted({int(v) for v in nfe})
    where = f"At rtol {t_row:.3g} (atol {t_row * ATOL_RATIO:.3g})"
    head = (
        f"{where}: one level, {levels[0]} NFE at every u"
        if len(levels) == 1
        else f"{where}: {len(levels)} levels ({', '.join(str(v) for v in levels)} NFE)"
    )
    counts = {r: reasons.count(r) for r in REASONS if r in reasons}
    if set(counts) == {"cap-limited"}:
        ks = sorted({steps_to_end(float(x)) for x in h})
        chosen = sorted(set(m.rule.chosen_by(t_row)))
        text = (
            f"{head}. No step is rejected and every step grows by torchdiffeq's 10× cap, so the count is set by its "
            f"first step h = min(100·h0, h1) = {h.min():.3g}–{h.max():.3g} over u (set by {' and '.join(chosen)})"
        )
        if len(ks) == 1:
            k = ks[0]
            between = f"at least {_fraction(step_threshold(k))}" + (
                f" and under {_fraction(step_threshold(k - 1))}" if k > 1 else ""
            )
            text += (
                f", {between}: {k} step{'s' if k > 1 else ''} (h, 10·h, … the last cut to land on τ = 1), "
                f"2 + 6·{k} = {EVALS_BEFORE_FIRST_STEP + EVALS_PER_STEP * k} NFE"
            )
        else:
            text += ", which straddles " + ", ".join(_fraction(step_threshold(k)) for k in ks[1:]) + ": the switch"
    elif "rejected" not in counts:
        # the error slowed a step's growth below the cap; whether that cost a step is the count against the
        # fewest steps the first step and the cap allow (2 + 6·k NFE without rejections)
        added = [int(v) > predicted_nfe(float(x)) for v, x in zip(nfe, h)]
        n = len(reasons)
        held = f"No step is rejected; the error holds a step's growth under the 10× cap on {counts['error-limited']}"
        held += f" of {n} u"
        if any(added):
            text = f"{head}. {held}, and on {sum(added)} of {n} u that costs steps: there the tolerance sets the count"
        else:
            ks = sorted({steps_to_end(float(x)) for x in h})
            text = (
                f"{head}. {held}, but never enough to cost a step: the count is the fewest steps the first step "
                f"h = min(100·h0, h1) = {h.min():.3g}–{h.max():.3g} and the 10× cap allow ("
                + " or ".join(f"{k}, 2 + 6·{k} = {EVALS_BEFORE_FIRST_STEP + EVALS_PER_STEP * k} NFE" for k in ks)
                + "), so the first-step rule, not the tolerance, sets it"
            )
    else:
        text = (
            f"{head}. A step is rejected on {counts['rejected']} of {len(reasons)} u: there the error binds, and the "
            "retry costs the extra evaluations"
        )
    cap = m.cap_bands
    if cap:
        b = cap[0]
        text += (
            f". Two levels appear for t in [{b.t_low:.3g}, {b.t_high:.3g}], where h crosses "
            f"{_fraction(b.threshold)} inside u ∈ [{m.u[0]:g}, {m.u[-1]:g}]."
        )
    else:
        text += f". No tolerance in [{m.t[0]:.3g}, {m.t[-1]:.3g}] splits the first-step rule's levels over u."
    return text
