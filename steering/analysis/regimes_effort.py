"""The field's effort beside the solver's: per u, how curved the path H(τ) is next to what dopri5 spent on it.

For one prompt and a grid of u, in float64 on a copy of the field:
  nfe               dopri5's evaluations at (rtol, atol), every u on its own steps (model.batched_adaptive: the
                    regimes sweep's counts, nfe_regimes with precision "float64");
  max_error_ratio   the largest of dopri5's local error estimates against the tolerance over that solve's attempts
                    (the regimes map's Cell.max_error_ratio: above 1 a step was rejected);
  arc_to_chord - 1, orthogonal_share
                    the path's curvature (analysis/curvature.path_curvature, full space) on n_tau points of a tight
                    dopri5 solve (the curvature page's reference tolerances).
and the Spearman rank correlation of NFE with each curvature figure over u, against a null that shuffles u: rho,
the permutation p-value (two-sided, (1 + hits) / (1 + draws)) and the null's 2.5 / 97.5 percentiles. Neighbouring u
have similar NFE and similar paths, which a free shuffle ignores, so its p-value flatters any two smooth profiles;
p_value_cyclic also shifts NFE cyclically along u (every shift keeps the bands whole; its floor is 1/n_u), as
solver_trace.curvature_by_level does for the regimes sweep.

Spearman, not Pearson: NFE takes a few levels (multiples of 6), so only the order can be asked of it; scipy's
spearmanr is a well-kept implementation that ranks ties by their average.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import spearmanr
from torchdiffeq import odeint

from ..model.batched_adaptive import solve_adaptive_batch
from ..model.batched_field import batched_field, float_copy
from ..model.ode import adaptive_options
from .curvature import path_curvature
from .inputs import REFERENCE_SOLVER, axis_control, prompt_tensor, u_grid_array
from .regimes import DEFAULT_U_GRID

# the tolerance where the shipped model's float64 NFE over u takes two levels (32 and 44 NFE on "The movie was")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-6
NULL_DRAWS = 1000
CURVATURE_MEASURES = ("arc_to_chord_excess", "orthogonal_share")


@dataclass
class RankTest:
    """Spearman's rho of two profiles over u and where it falls among rhos with u shuffled."""

    rho: float | None  # None where either profile is constant (no order to correlate)
    p_value: float | None  # two-sided: (1 + #|rho_null| >= |rho|) / (1 + draws)
    null_low: float | None  # the shuffled rhos' 2.5th percentile ...
    null_high: float | None  # ... and 97.5th
    draws: int
    seed: int
    p_value_cyclic: float | None = None  # (1 + #|rho_shift| >= |rho|) / n over the n − 1 cyclic shifts along u

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def rank_correlation_test(x, y, draws: int = NULL_DRAWS, seed: int = 0) -> RankTest:
    """Spearman's rho of x and y (one value each per u) against `draws` shuffles of x's order over u."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"give two profiles of one value per u (at least two u); got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("the profiles have non-finite values")
    if not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # one level: spearmanr would return nan with a warning
        return RankTest(rho=None, p_value=None, null_low=None, null_high=None, draws=draws, seed=seed)
    rho = float(spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    null = np.array([spearmanr(rng.permutation(x), y).statistic for _ in range(draws)], dtype=float)
    # a shuffle that reproduces the observed order gives the same rho up to round-off: count it as a hit
    hits = int(np.sum(np.abs(null) >= abs(rho) - 1e-12))
    low, high = np.percentile(null, [2.5, 97.5])
    shifted = [abs(spearmanr(np.roll(x, k), y).statistic) for k in range(1, x.size)]
    cyclic_hits = sum(r >= abs(rho) - 1e-12 for r in shifted)
    return RankTest(
        rho=rho,
        p_value=(1 + hits) / (1 + draws),
        null_low=float(low),
        null_high=float(high),
        draws=draws,
        seed=seed,
        p_value_cyclic=(1 + cyclic_hits) / x.size,
    )


@dataclass
class FieldEffort:
    prompt: str
    u: np.ndarray  # [n_u]
    axis: str
    nfe: np.ndarray  # [n_u] dopri5 at (rtol, atol), float64
    accepted: np.ndarray  # [n_u]
    rejected: np.ndarray  # [n_u]
    max_error_ratio: np.ndarray  # [n_u] the largest local error estimate against the tolerance
    arc_to_chord_excess: np.ndarray  # [n_u] arc / chord − 1 in full space (0: straight)
    orthogonal_share: np.ndarray  # [n_u] the widest share of the displacement off the chord
    tests: dict[str, RankTest]  # curvature measure -> NFE against it
    rtol: float
    atol: float
    path_rtol: float  # the tight solve the curvature is measured on
    path_atol: float
    n_tau: int
    seconds: float

    def reading(self) -> str:
        """One line: the NFE levels and each rank test."""
        levels = "/".join(str(v) for v in sorted({int(n) for n in self.nfe}))
        parts = []
        for name, t in self.tests.items():
            if t.rho is None:
                parts.append(f"{name}: no rank correlation (a constant profile)")
            else:
                parts.append(
                    f"{name}: rho {t.rho:+.2f}, p = {t.p_value:.3g} (shuffled u: 95% of rho in "
                    f"[{t.null_low:+.2f}, {t.null_high:+.2f}]; cyclic shifts: p = {t.p_value_cyclic:.3g})"
                )
        return f"NFE {levels}; " + "; ".join(parts)

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "u": self.u,
            "axis": self.axis,
            "nfe": self.nfe,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "max_error_ratio": self.max_error_ratio,
            "arc_to_chord_excess": self.arc_to_chord_excess,
            "orthogonal_share": self.orthogonal_share,
            "tests": {k: t.to_dict() for k, t in self.tests.items()},
            "rtol": self.rtol,
            "atol": self.atol,
            "path_rtol": self.path_rtol,
            "path_atol": self.path_atol,
            "n_tau": self.n_tau,
            "precision": "float64",
            "reading": self.reading(),
            "seconds": self.seconds,
        }


def batched_paths(field, y0: torch.Tensor, n_tau: int, rtol: float, atol: float, max_steps: int = 2000):
    """H(τ) of every sample on n_tau evenly spaced τ in [0, 1], [n_tau, B, T, d], from one dopri5 solve of the
    whole batch as one state (torchdiffeq's dense output between steps). The batch shares its steps, which only
    makes the easier samples more accurate than the tolerance asks; the last step lands on τ = 1 so a depth
    field is never evaluated past the depth it was trained on."""
    batch = y0.shape[0]
    tau = torch.linspace(0.0, 1.0, n_tau, dtype=y0.dtype)
    options = adaptive_options(max_steps)
    return odeint(lambda t, h: field(t.expand(batch), h), y0, tau, rtol=rtol, atol=atol, options=options)


@torch.no_grad()
def field_effort(
    model,
    tok,
    prompt: str,
    u_grid=DEFAULT_U_GRID,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    axis: str = "sentiment",
    other: float = 0.0,
    n_tau: int = 33,
    path_rtol: float = REFERENCE_SOLVER.rtol,
    path_atol: float = REFERENCE_SOLVER.atol,
    draws: int = NULL_DRAWS,
    seed: int = 0,
    max_steps: int = 2000,
) -> FieldEffort:
    """dopri5's NFE and largest error ratio per u at (rtol, atol), each u's path curvature, and NFE's rank
    correlation with each curvature figure against shuffled u; all solves in float64 on a copy of the field."""
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous block to solve")
    if n_tau < 3:
        raise ValueError(f"a path's curvature needs at least 3 τ points, got n_tau={n_tau}")
    grid = u_grid_array(u_grid)
    start = time.perf_counter()
    idx, _ = prompt_tensor(model, tok, prompt)
    h0 = model.encode(idx).to(torch.float64)
    controls = torch.tensor([axis_control(float(v), axis, other) for v in grid], dtype=torch.float64)
    field = batched_field(float_copy(model.field, torch.float64), controls, h0)
    y0 = h0.expand(len(grid), *h0.shape[1:]).contiguous()

    solve = solve_adaptive_batch(field, y0, rtol, atol, "dopri5", max_steps)
    paths = batched_paths(field, y0, n_tau, path_rtol, path_atol, max_steps)
    shape = np.array([path_curvature(paths[:, j].numpy()) for j in range(len(grid))])  # [n_u, 2]
    arc_excess, share = shape[:, 0] - 1.0, shape[:, 1]
    tests = {}
    for name, values in zip(CURVATURE_MEASURES, (arc_excess, share)):
        if np.isfinite(values).all():
            tests[name] = rank_correlation_test(solve.nfe, values, draws=draws, seed=seed)
        else:  # a path that ends where it starts has no chord (path_curvature: inf / nan)
            tests[name] = RankTest(None, None, None, None, draws, seed)
    return FieldEffort(
        prompt=prompt,
        u=grid,
        axis=axis,
        nfe=np.asarray(solve.nfe, dtype=int),
        accepted=np.asarray(solve.accepted, dtype=int),
        rejected=np.asarray(solve.rejected, dtype=int),
        max_error_ratio=np.array([max(r) if r else math.nan for r in solve.error_ratios], dtype=float),
        arc_to_chord_excess=arc_excess,
        orthogonal_share=share,
        tests=tests,
        rtol=float(rtol),
        atol=float(atol),
        path_rtol=float(path_rtol),
        path_atol=float(path_atol),
        n_tau=n_tau,
        seconds=time.perf_counter() - start,
    )
