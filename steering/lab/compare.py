"""What the Compare page computes for each of its two models, without Streamlit: the paths of the prompt for a
family of u in the model's PCA map and in the bend view with their curvature, dopri5's NFE and first step over u
(with the first step below which a solve takes a third step), depth use and block skip, and the fixed-vs-adaptive
divergence. The figures of `compare A B` are steering/evaluation/compare.py's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.bend import fit_bend_map
from ..analysis.curvature import curvature_of
from ..analysis.inputs import REFERENCE_SOLVER
from ..analysis.pca import ProjectedPath
from ..analysis.regimes import crossing
from ..analysis.solver_trace import solver_traces
from ..analysis.solvers import compare_solvers
from ..analysis.trajectories import compute_trajectory, pooled
from ..evaluation.compare import Side, depth_use_and_skip
from ..model.ode import SolverConfig

FAMILY = (-2.0, -1.0, 0.0, 1.0, 2.0)  # the paths drawn per model
LAB_TOLERANCE = SolverConfig("dopri5", rtol=1e-3, atol=1e-4)  # the Regimes page's default
# torchdiffeq lets a step grow at most 10x: a first step h reaches τ = 1 in two steps only when h + 10h >= 1, so a
# first step below 1/11 costs a third step (6 more NFE at dopri5), whatever the field does after it
FIRST_STEP_THRESHOLD = 1.0 / 11.0
DEPTH_TEXTS_PER_GROUP = 2


@dataclass
class SidePaths:
    pca: list[ProjectedPath]  # the family's mean-token paths on the model's PCA map
    bend: list[ProjectedPath]  # every token's state together, in the family's bend view
    explained: list[float]
    arc_to_chord_excess: float  # the largest arc / chord - 1 over the family, in full space
    orthogonal_share: float  # the largest share of the displacement orthogonal to the chord, in full space
    orthogonal_share_bend: float  # the same in the bend view
    bend_captured: float


def side_paths(model, tok, pca_map, prompt: str, style: float) -> SidePaths:
    """The prompt's paths at FAMILY (the other axis at `style`), solved by dopri5 at tight tolerance."""
    trajectories = [compute_trajectory(model, tok, prompt, (u, style), REFERENCE_SOLVER, n_tau=17) for u in FAMILY]
    on_map = [pca_map.project(pooled(t)) for t in trajectories]
    curvature = curvature_of(trajectories, on_map)
    bend = fit_bend_map([t.states for t in trajectories])
    top = curvature.most_curved()
    return SidePaths(
        pca=[ProjectedPath(name="", u=u, tau=t.tau, points=p) for u, t, p in zip(FAMILY, trajectories, on_map)],
        bend=[
            ProjectedPath(name="", u=u, tau=t.tau, points=bend.project(t.states)) for u, t in zip(FAMILY, trajectories)
        ],
        explained=list(pca_map.explained_variance_ratio),
        arc_to_chord_excess=_number(top["arc_to_chord_excess"]),
        orthogonal_share=_number(top["orthogonal_share"]),
        orthogonal_share_bend=_number(top["orthogonal_share_bend"]),
        bend_captured=float(bend.bend_captured),
    )


def _number(value) -> float:
    return float("nan") if value is None else float(value)


@dataclass
class FirstSteps:
    u: np.ndarray
    nfe: np.ndarray
    first_step: np.ndarray  # dopri5's first step h at each u
    threshold_u: float | None  # where the first step crosses FIRST_STEP_THRESHOLD (None: it never does)


def nfe_and_first_steps(model, tok, prompt: str, style: float, n_u: int = 21) -> FirstSteps:
    """dopri5's NFE and first step over u in [-2, 2] at the lab's default tolerance."""
    grid = np.round(np.linspace(-2.0, 2.0, n_u), 6)
    traces = solver_traces(model, tok, prompt, grid, LAB_TOLERANCE, other=style)
    first = np.array([t.first_step.h for t in traces.traces])
    return FirstSteps(
        u=grid,
        nfe=np.array([t.nfe for t in traces.traces]),
        first_step=first,
        threshold_u=crossing(grid, first, FIRST_STEP_THRESHOLD),
    )


def depth_figures(side: Side, texts_per_group: int = DEPTH_TEXTS_PER_GROUP) -> dict[str, float]:
    """Depth use and block skip (bits/byte) on a few of the model's own held-out openings, as `depth` measures."""
    return depth_use_and_skip(side.model, side.tok, side.openings(texts_per_group))


def solver_divergence_at(model, tok, prompt: str, control) -> object:
    """The model's own fixed-step training solver against dopri5 at tight tolerance, along τ (analysis.solvers)."""
    return compare_solvers(model, tok, prompt, control, model.training_solver, REFERENCE_SOLVER, n_tau=33)
