"""What the API's views return: one dataclass per view, each with .figure() (a plotly Figure, built by
steering.figures) and .to_dict() (plain data that json.dumps takes). The numbers are computed by steering.load()'s
methods (steering/api/model.py); nothing here touches the model, and plotly is imported only when a figure is
asked for."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def jsonable(value):
    """numpy and dataclass-ish values as plain JSON types; NaN and infinities become null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    return value


@dataclass
class Paths:
    """One prompt's mean-token paths H(τ), one per value of the swept axis, on the checkpoint's PCA map."""

    checkpoint: str
    prompt: str
    axis: str  # the swept axis, by the checkpoint's own name
    control: dict[str, float]  # every axis at the paths' u = 0 point; the swept one takes each of `us` in turn
    us: list[float]
    solver: str  # whose step ends the dots mark
    paths: list  # steering.analysis.pca.ProjectedPath, one per u: the continuous path and the solver's step ends
    explained_variance: np.ndarray  # of the map's components
    nfe: list[int]  # the solver's field evaluations per path
    arc_to_chord: np.ndarray  # per path, in full space: 1 is a straight ray

    def figure(self, dims: int = 2, animate: bool = False):
        from ..figures.flow import pca_paths_figure

        return pca_paths_figure(
            self.paths,
            dims=dims,
            explained_variance=self.explained_variance,
            animate=animate,
            title=f"{self.prompt!r}: H̄(τ) for {self.axis} from {min(self.us):+g} to {max(self.us):+g}; "
            f"dots: {self.solver}'s step ends",
        )

    def to_dict(self) -> dict:
        return jsonable(
            {
                "checkpoint": self.checkpoint,
                "prompt": self.prompt,
                "axis": self.axis,
                "control": self.control,
                "solver": self.solver,
                "explained_variance": self.explained_variance,
                "paths": [
                    {
                        "u": p.u,
                        "tau": p.tau,
                        "points": p.points,
                        "stations": p.stations,
                        "nfe": nfe,
                        "arc_to_chord": arc,
                    }
                    for p, nfe, arc in zip(self.paths, self.nfe, self.arc_to_chord)
                ],
            }
        )


@dataclass
class Comparison:
    """Two checkpoints on one prompt, as the Compare page sets them side by side: each one's paths in its own
    bend view (one axis along the paths' chord, one along their main departure from it) and dopri5's work over u."""

    prompt: str
    axis: str
    names: list[str]  # the two checkpoints' labels, this one first
    sides: dict  # name -> steering.lab.compare.SidePaths
    steps: dict  # name -> steering.lab.compare.FirstSteps
    threshold: float  # the first step below which dopri5 takes a third step

    def figure(self):
        from ..figures.compare import compare_slide_figure

        return compare_slide_figure(
            {name: self.sides[name].bend for name in self.names},
            {name: self.sides[name].orthogonal_share for name in self.names},
            self.steps[self.names[0]].u,
            {name: self.steps[name].nfe for name in self.names},
            {name: self.steps[name].first_step for name in self.names},
            self.threshold,
        )

    def to_dict(self) -> dict:
        def side(name: str) -> dict:
            paths, steps = self.sides[name], self.steps[name]
            return {
                "arc_to_chord_excess": paths.arc_to_chord_excess,
                "orthogonal_share": paths.orthogonal_share,
                "orthogonal_share_bend": paths.orthogonal_share_bend,
                "bend_captured": paths.bend_captured,
                "bend_paths": [{"u": p.u, "tau": p.tau, "points": p.points} for p in paths.bend],
                "u": steps.u,
                "nfe": steps.nfe,
                "first_step": steps.first_step,
                "threshold_u": steps.threshold_u,
            }

        return jsonable(
            {"prompt": self.prompt, "axis": self.axis, "threshold": self.threshold}
            | {"models": {name: side(name) for name in self.names}}
        )


@dataclass
class RegimesMap:
    """dopri5's NFE over (u, tolerance) for one prompt, each cell's reason, and the bands where it takes two
    levels (steering.analysis.regimes_map.PromptMap)."""

    axis: str
    control: dict[str, float]
    map: object  # steering.analysis.regimes_map.PromptMap

    def figure(self):
        from ..figures.regimes_map import regimes_map_figure

        return regimes_map_figure(self.map)

    def to_dict(self) -> dict:
        return jsonable({"axis": self.axis, "control": self.control, **self.map.to_dict()})


@dataclass
class SolverView:
    """One solver against a reference along τ on the same prompt and control
    (steering.analysis.solvers.SolverComparison)."""

    control: dict[str, float]
    comparison: object

    def figure(self):
        from ..figures.solvers import divergence_figure

        return divergence_figure(self.comparison)

    def to_dict(self) -> dict:
        return jsonable({"control": self.control, **self.comparison.to_dict()})


@dataclass
class Lens:
    """The next-token distribution if the flow stopped at τ (steering.analysis.lens.DepthLens)."""

    control: dict[str, float]
    lens: object

    def figure(self):
        from ..figures.lens import depth_lens_heatmap

        return depth_lens_heatmap(self.lens)

    def to_dict(self) -> dict:
        return jsonable({"control": self.control, **self.lens.to_dict()})


@dataclass
class Evaluation:
    """`python -m steering evaluate`'s figures, each with the bar it is held to where it has one."""

    checkpoint: str
    baseline: str | None
    report: dict  # as `evaluate --json` prints it
    bars: dict[str, tuple[str, bool]] = field(default_factory=dict)  # figure -> (its bar, met)

    def figure(self):
        from ..figures.results import evaluation_table_figure

        rows = [
            (name, value, *self.bars.get(name, ("", None)))
            for name, value in self.report.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        return evaluation_table_figure(rows, title=f"Evaluation of {self.checkpoint}")

    def to_dict(self) -> dict:
        bars = {name: {"bar": bar, "met": met} for name, (bar, met) in self.bars.items()}
        return jsonable({"checkpoint": self.checkpoint, "baseline": self.baseline, "report": self.report, "bars": bars})
