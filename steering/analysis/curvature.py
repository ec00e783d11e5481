"""How curved the paths H(τ) are: arc length over chord length, and how far they turn from their chord.

For a path x(τ_0), ..., x(τ_T) of any width:
  arc_to_chord      Σ_k |x(τ_k+1) - x(τ_k)| / |x(τ_T) - x(τ_0)|. 1 for a straight line, π/(2√2) ≈ 1.11
                    for a quarter circle, √2 for an L of two equal legs.
  orthogonal_share  max over τ > 0 of |d⊥(τ)| / |d(τ)|, where d(τ) = x(τ) - x(0) and d⊥ is its part
                    orthogonal to the chord x(τ_T) - x(0): the sine of the widest angle the displacement
                    so far ever makes with the chord. 0 for a straight line, sin 45° ≈ 0.71 for a
                    quarter circle or the L. It is first order in the bend where arc_to_chord - 1 is
                    second order, so it shows a slight bend that the ratio hides.
Both are measured in full space (every token's state together, H(τ) flattened) and on the
PCA map (the projected path the Trajectories page draws).

They are also measured in the bend view (analysis/bend.py: one axis along the family's chord, one
along its main departure from it), which keeps the bend the PCA map flattens. path_shape_note says,
from a checkpoint's config, which penalties shaped its paths. A fixed-step solver's path between its
steps is drawn as straight segments (linear interpolation), so measure curvature with dopri5 (the
default here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .bend import fit_bend_map
from .inputs import REFERENCE_SOLVER, u_grid_array
from .trajectories import Trajectory, compute_trajectory, pooled


def path_curvature(points) -> tuple[float, float]:
    """(arc_to_chord, orthogonal_share) of one path [T, ...] (any trailing shape is flattened).

    A path that ends where it starts has no chord: arc_to_chord is inf (1 when it never
    moves) and orthogonal_share is nan.
    """
    x = np.asarray(points, dtype=np.float64)
    if x.ndim < 2 or x.shape[0] < 2:
        raise ValueError(f"a path needs at least two points, shaped [T, width]; got shape {x.shape}")
    x = x.reshape(x.shape[0], -1)
    if not np.isfinite(x).all():
        raise ValueError("the path has non-finite points")
    arc = float(np.linalg.norm(np.diff(x, axis=0), axis=1).sum())
    chord_vec = x[-1] - x[0]
    chord = float(np.linalg.norm(chord_vec))
    if chord == 0.0 or chord <= 1e-12 * max(arc, 1e-300):
        return (1.0 if arc == 0.0 else math.inf), math.nan
    direction = chord_vec / chord
    d = x[1:] - x[0]
    along = d @ direction
    orthogonal = np.linalg.norm(d - along[:, None] * direction[None, :], axis=1)
    size = np.linalg.norm(d, axis=1)
    moved = size > 1e-12 * chord
    share = float(np.max(orthogonal[moved] / size[moved])) if moved.any() else 0.0
    return max(arc / chord, 1.0), min(share, 1.0)


def token_path_curvature(states) -> np.ndarray:
    """Each token's arc/chord along depth, [tokens], from its path states [T, tokens, d] (full width).

    A token whose state never moves counts as straight (1)."""
    x = np.asarray(states, dtype=np.float64)
    if x.ndim != 3 or x.shape[0] < 2:
        raise ValueError(f"token paths need states shaped [T >= 2, tokens, d]; got shape {x.shape}")
    arc = np.linalg.norm(np.diff(x, axis=0), axis=2).sum(0)
    chord = np.linalg.norm(x[-1] - x[0], axis=1)
    moved = chord > 1e-12 * np.maximum(arc, 1e-300)
    return np.where(moved, arc / np.where(moved, chord, 1.0), 1.0)


@dataclass
class Curvature:
    u: np.ndarray  # [n] control on `axis` of each path
    arc_to_chord: np.ndarray  # [n] full space
    orthogonal_share: np.ndarray  # [n] full space
    arc_to_chord_map: np.ndarray | None  # [n] on the PCA map (None without a map)
    orthogonal_share_map: np.ndarray | None
    arc_to_chord_bend: np.ndarray  # [n] in the bend view of the family (full-space states, analysis/bend.py)
    orthogonal_share_bend: np.ndarray
    bend_captured: float  # share of the departures from the chords the bend view's second axis holds
    solver: str
    n_tau: int
    axis: str = "sentiment"
    token_arc_to_chord: np.ndarray | None = None  # [n, tokens]: each token's own path in full space
    token_strings: list[str] | None = None

    def most_curved(self) -> dict:
        """The largest of each figure over u (paths without a chord left out): for a headline."""

        def top(values):
            values = None if values is None else np.asarray(values, dtype=float)
            if values is None or not np.isfinite(values).any():
                return None, None
            k = int(np.nanargmax(np.where(np.isfinite(values), values, np.nan)))
            return float(values[k]), float(self.u[k])

        (excess, excess_u), (share, share_u) = top(self.arc_to_chord - 1.0), top(self.orthogonal_share)
        map_share, map_u = top(self.orthogonal_share_map)
        (bend_excess, _), (bend_share, bend_u) = top(self.arc_to_chord_bend - 1.0), top(self.orthogonal_share_bend)
        return {
            "arc_to_chord_excess": excess,
            "arc_to_chord_excess_u": excess_u,
            "orthogonal_share": share,
            "orthogonal_share_u": share_u,
            "orthogonal_share_map": map_share,
            "orthogonal_share_map_u": map_u,
            "arc_to_chord_bend_excess": bend_excess,
            "orthogonal_share_bend": bend_share,
            "orthogonal_share_bend_u": bend_u,
        }

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "axis": self.axis,
            "arc_to_chord": self.arc_to_chord,
            "orthogonal_share": self.orthogonal_share,
            "arc_to_chord_map": self.arc_to_chord_map,
            "orthogonal_share_map": self.orthogonal_share_map,
            "arc_to_chord_bend": self.arc_to_chord_bend,
            "orthogonal_share_bend": self.orthogonal_share_bend,
            "bend_captured": self.bend_captured,
            "solver": self.solver,
            "n_tau": self.n_tau,
            "token_arc_to_chord": self.token_arc_to_chord,
            "token_strings": self.token_strings,
        }


def curvature_of(trajectories: list[Trajectory], map_paths=None, axis: str = "sentiment") -> Curvature:
    """Curvature of each trajectory in full space, and of its projected path when map_paths ([T, k] each) is given."""
    trajectories = list(trajectories)
    if not trajectories:
        raise ValueError("give at least one trajectory")
    full = np.array([path_curvature(t.states) for t in trajectories])
    on_map = None
    if map_paths is not None:
        map_paths = list(map_paths)
        if len(map_paths) != len(trajectories):
            raise ValueError(f"{len(trajectories)} trajectories but {len(map_paths)} projected paths")
        on_map = np.array([path_curvature(p) for p in map_paths])
    bend_map = fit_bend_map([t.states for t in trajectories])
    in_bend = np.array([path_curvature(bend_map.project(t.states)) for t in trajectories])
    column = 0 if axis == "sentiment" else 1
    return Curvature(
        u=np.array([float(t.u[column]) for t in trajectories]),
        arc_to_chord=full[:, 0],
        orthogonal_share=full[:, 1],
        arc_to_chord_map=None if on_map is None else on_map[:, 0],
        orthogonal_share_map=None if on_map is None else on_map[:, 1],
        arc_to_chord_bend=in_bend[:, 0],
        orthogonal_share_bend=in_bend[:, 1],
        bend_captured=bend_map.bend_captured,
        solver=trajectories[0].solver_label,
        n_tau=len(trajectories[0].tau),
        axis=axis,
        token_arc_to_chord=np.array([token_path_curvature(t.states) for t in trajectories]),
        token_strings=list(trajectories[0].token_strings),
    )


def curvature_by_u(
    model,
    tok,
    prompt: str,
    u_grid,
    solver=REFERENCE_SOLVER,
    n_tau: int = 33,
    axis: str = "sentiment",
    other: float = 0.0,
    pca_map=None,
) -> Curvature:
    """Each u's path of `prompt` solved on n_tau points; on the map, the mean-token path is projected."""
    from .inputs import axis_control

    grid = u_grid_array(u_grid)
    trajectories = [
        compute_trajectory(model, tok, prompt, axis_control(float(u), axis, other), solver, n_tau=n_tau) for u in grid
    ]
    map_paths = None if pca_map is None else [pca_map.project(pooled(t)) for t in trajectories]
    return curvature_of(trajectories, map_paths, axis=axis)


def path_shape_note(config: dict | None) -> str:
    """Why a checkpoint's paths are straight or curved, read off the penalties that were in effect in its
    training (config["model"] and config["meta"]["train"])."""
    model = (config or {}).get("model") or {}
    train = ((config or {}).get("meta") or {}).get("train") or {}
    if not train:
        return (
            "This checkpoint's config does not record how it was trained, so what shaped its paths is unknown. "
            "A field that barely changes along the path moves H at a nearly constant velocity: a straight line."
        )
    stage2_ran = train.get("stage2_steps", 0) > 0
    basis = model.get("field_basis") or 0
    if basis > 1 and train.get("solver", "euler") == "rk4":
        weight = train.get("solver_error_weight", 0.0)
        penalty = (
            f"Its training penalised only RK4's own error estimate above a relative error of "
            f"{train.get('solver_error_tolerance', 0.0):g} (weight {weight:,g}, from stage-1 step "
            f"{train.get('solver_error_start', 0):,}{', and in stage 2' if stage2_ran else ''}): that keeps the "
            f"{train.get('solver_steps', 1)}-step solver close to the continuous ODE without straightening the path."
            if weight > 0
            else "No penalty on the paths' shape was in effect."
        )
        return (
            f"What shapes these paths: the field's weights vary with depth (polynomials of degree {basis - 1} in τ), "
            "so F changes along τ and each path turns as it goes. No path-roughness penalty was in effect. " + penalty
        )
    stage1 = train.get("roughness_weight", 0.0)
    stage2 = train.get("stage2_roughness_weight")
    stage2 = stage1 if stage2 is None else stage2
    relative = {
        1: train.get("roughness_relative_to") or "state",
        2: train.get("stage2_roughness_relative_to") or train.get("roughness_relative_to") or "state",
    }
    in_effect = [(1, stage1)] + ([(2, stage2)] if stage2_ran else [])
    in_effect = [(stage, w) for stage, w in in_effect if w > 0]
    if not in_effect:
        return (
            "No path-roughness penalty was in effect: this field shares its weights across depth, so what "
            "straightness its paths have comes from the field itself changing little along the path."
        )
    stage, weight = max(in_effect, key=lambda sw: sw[1])
    size = "|H(0)|²" if relative[stage] == "state" else "the field's own size"
    others = "".join(f"; stage {s} with weight {w:,g}" for s, w in in_effect if s != stage)
    return (
        f"What makes these paths straight: stage {stage} penalised path roughness with weight {weight:,g} (the "
        f"squared change of α·F between consecutive Euler evaluations, relative to {size}){others}. A field that "
        "barely changes along the path moves H at a nearly constant velocity, i.e. along a straight line, which "
        "is also why a few Euler steps land where dopri5 does."
    )
