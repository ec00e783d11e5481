"""Computations behind each view of the lab: tensors in, dataclasses and numpy out.

One module per concept; the names most callers need are re-exported here.
"""

from .alignment import Alignment, alignment_statistics, regimes_over_prompts
from .changepoints import Segment, Switch, level_switches
from .curvature import Curvature, curvature_by_u, curvature_of, path_curvature
from .dynamics import Contraction, Convergence, contraction, contraction_by_u, convergence, convergence_study
from .inputs import PATH_SOLVER, REFERENCE_SOLVER
from .lens import DepthLens, depth_lens
from .middle import MiddleWork, middle_work
from .pca import PCAMap, ProjectedPath, checkpoint_identity, fit_pca_map, pca_map_for_checkpoint, project_trajectory
from .probes import Probes, linear_probes
from .regimes import Regimes, ToleranceScaling, nfe_regimes, tolerance_scaling
from .solvers import SolverComparison, compare_solvers
from .sweep import Sweep, next_token_distribution, steering_sweep
from .trajectories import Trajectory, compute_trajectory, pooled

__all__ = [
    "Alignment",
    "Curvature",
    "Segment",
    "Switch",
    "alignment_statistics",
    "curvature_by_u",
    "curvature_of",
    "level_switches",
    "path_curvature",
    "regimes_over_prompts",
    "Contraction",
    "Convergence",
    "DepthLens",
    "MiddleWork",
    "PCAMap",
    "PATH_SOLVER",
    "Probes",
    "ProjectedPath",
    "REFERENCE_SOLVER",
    "Regimes",
    "SolverComparison",
    "Sweep",
    "ToleranceScaling",
    "Trajectory",
    "checkpoint_identity",
    "compare_solvers",
    "compute_trajectory",
    "contraction",
    "contraction_by_u",
    "convergence",
    "convergence_study",
    "depth_lens",
    "fit_pca_map",
    "linear_probes",
    "middle_work",
    "next_token_distribution",
    "nfe_regimes",
    "pca_map_for_checkpoint",
    "pooled",
    "project_trajectory",
    "steering_sweep",
    "tolerance_scaling",
]
