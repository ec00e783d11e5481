"""Each figure builder on hand-made plain data: trace counts, axis titles, data ranges."""

import itertools
from types import SimpleNamespace as NS

import numpy as np
import plotly.graph_objects as go
import pytest

from steering.figures.dynamics import contraction_figure, convergence_figure
from steering.figures.flow import curvature_figure, pca_paths_figure, probes_figure, u_colors
from steering.figures.lens import depth_lens_heatmap, depth_lens_positions_heatmap, visible
from steering.figures.regimes import alignment_figure, nfe_regimes_figure, steering_sweep_figure, tolerance_figure
from steering.figures.solver_trace import field_heatmaps_figure, step_trace_figure, stretching_figure
from steering.figures.solvers import divergence_figure, eval_points_figure

TAU = np.linspace(0, 1, 5)


def paths():
    return [NS(name="p", u=u, tau=TAU, points=np.c_[TAU, u * TAU, TAU**2]) for u in (-2.0, 0.0, 2.0)]


def test_pca_paths_2d_3d_and_animation():
    fig = pca_paths_figure(paths(), dims=2, explained_variance=[0.5, 0.3, 0.1])
    assert isinstance(fig, go.Figure) and len(fig.data) == 4  # three paths + the τ = 0 markers
    assert fig.layout.xaxis.title.text.startswith("PC1 (50.0%")
    assert fig.data[0].line.color != fig.data[2].line.color  # coloured by u
    assert list(fig.data[2].y) == pytest.approx(list(2.0 * TAU))
    fig3 = pca_paths_figure(paths(), dims=3, highlight=[paths()[1]], animate=True)
    assert len(fig3.data) == 5 and fig3.layout.scene.zaxis.title.text == "PC3"
    assert len(fig3.frames) == 5 and len(fig3.frames[2].data[0].x) == 3
    assert fig3.layout.updatemenus[0].buttons[0].label.endswith("play")
    with pytest.raises(ValueError):
        pca_paths_figure([], dims=2)
    with pytest.raises(ValueError):
        pca_paths_figure(paths(), dims=4)
    assert u_colors([-1, 1])[0] != u_colors([-1, 1])[1]


def test_probes_figure():
    fig = probes_figure(NS(taus=[0, 0.5, 1], accuracy=[0.6, 0.7, 0.8], train_accuracy=[0.7, 0.8, 0.9], chance=0.5))
    assert len(fig.data) == 3 and fig.layout.yaxis.title.text == "accuracy" and max(fig.data[0].y) == 0.8


def test_divergence_and_eval_points():
    comparison = NS(
        tau=TAU,
        divergence=np.array([0, 1e-4, 2e-4, 3e-4, 4e-4]),
        a=NS(solver_label="euler (4 steps)"),
        b=NS(solver_label="dopri5"),
    )
    fig = divergence_figure([comparison, comparison])
    assert len(fig.data) == 2 and fig.layout.yaxis.type == "log" and len(fig.data[0].x) == 4  # τ=0 off the log axis
    assert fig.layout.xaxis.title.text == "depth τ" and max(fig.data[0].y) == pytest.approx(4e-4)
    traj = NS(
        solver_label="dopri5",
        nfe=8,
        eval_taus=[0, 0.1, 0.5, 1.05, 0.3, 0.4, 0.5, 0.6],
        accepted_taus=[0.0, 0.5],
        rejected_taus=[0.5],
    )
    fig = eval_points_figure([traj])
    assert len(fig.data) == 3 and list(fig.data[2].x) == [0.5] and fig.layout.xaxis.range[1] > 1.05
    assert fig.layout.yaxis.title.text == "solver"


def test_nfe_regimes_tolerance_and_sweep():
    u = np.linspace(-2, 2, 41)
    regimes = NS(
        u=u,
        nfe={"dopri5": np.where((u > -0.55) & (u < 0.45), 14, 20), "adaptive_heun": np.full(41, 7)},
        target_probability=1 / (1 + np.exp(-u)),
        targets=[" good", " bad"],
        switches=[NS(u=-0.55, from_level=20.0, to_level=14.0), NS(u=0.45, from_level=14.0, to_level=20.0)],
        crossover_u=0.0,
        axis="sentiment",
    )
    fig = nfe_regimes_figure(regimes)
    assert len(fig.data) == 3 and fig.layout.xaxis.title.text == "control u (sentiment)"
    assert len(fig.layout.shapes) == 3 and {s.x0 for s in fig.layout.shapes} == {-0.55, 0.45, 0.0}
    labels = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("20 → 14 NFE") for t in labels) and any(t.startswith("14 → 20 NFE") for t in labels)
    assert fig.layout.yaxis.title.text == "function evaluations (NFE)" and max(fig.data[0].y) == 20
    assert fig.data[0].line.shape == "hvh"  # each level change drawn midway, on its switch
    assert len(nfe_regimes_figure(NS(**{**regimes.__dict__, "switches": []})).layout.shapes) == 1
    # issue 45's pilot: 7 switches between 20 and 26 NFE, some 0.1 apart; no two labels may overlap
    at = [-1.95, -1.85, -1.75, -0.3, 1.65, 1.75, 1.85]
    many = [NS(u=x, from_level=(20.0, 26.0)[k % 2], to_level=(26.0, 20.0)[k % 2]) for k, x in enumerate(at)]
    fig = nfe_regimes_figure(NS(**{**regimes.__dict__, "switches": many}))
    notes = [a for a in fig.layout.annotations if "→" in a.text]
    assert len(notes) == 7 and all(a.text in ("20 → 26", "26 → 20") for a in notes)
    width = 4 * (len("20 → 26") * 7 + 12) / 650  # the label's share of u, as the figure estimates it
    for a, b in itertools.combinations(notes, 2):
        assert a.y != b.y or abs(a.x - b.x) >= width, (a.x, b.x)
    assert len({a.y for a in notes}) <= 3  # a few rows, not one per label
    scaling = NS(tolerances=np.array([1e-2, 1e-4, 1e-6]), nfe=np.array([14, 20, 26]), slope=0.15, solver="dopri5")
    fig = tolerance_figure(scaling)
    assert len(fig.data) == 2 and fig.layout.xaxis.type == "log" and "0.150" in fig.data[1].name
    assert list(fig.data[0].x) == pytest.approx([1e2, 1e4, 1e6])
    sweep = NS(
        u=u,
        target_tokens=[" good", " bad"],
        probabilities=np.c_[0.5 / (1 + np.exp(-u)), 0.5 / (1 + np.exp(u))],
        relative=np.c_[1 / (1 + np.exp(-u)), 1 / (1 + np.exp(u))],
        axis="style",
    )
    fig = steering_sweep_figure(sweep, relative=True)
    assert len(fig.data) == 2 and fig.layout.xaxis.title.text == "control u (style)"
    assert fig.layout.yaxis.range == (0, 1.02) and max(fig.data[0].y) <= 1


def test_alignment_strip_plot():
    rows = [
        NS(prompt="The movie was", switches=[NS(u=-0.55), NS(u=0.45)], crossover_u=-0.03, aligned=False),
        NS(prompt="A long prompt " * 5, switches=[NS(u=-0.65), NS(u=0.65)], crossover_u=-0.65, aligned=True),
        NS(prompt="Flat", switches=[], crossover_u=None, aligned=False),
    ]
    alignment = NS(
        prompts=rows,
        u=np.linspace(-2, 2, 41),
        stats={"threshold": 0.1, "aligned_share": 0.5, "null_aligned_share": 0.1},
    )
    fig = alignment_figure(alignment)
    bands, switches, crossovers = fig.data
    assert list(switches.x) == [-0.55, 0.45, -0.65, 0.65] and len(set(switches.y)) == 2
    assert [x for x in bands.x if x is not None] == pytest.approx([-0.65, -0.45, 0.35, 0.55, -0.75, -0.55, 0.55, 0.75])
    assert list(crossovers.x) == [-0.03, -0.65] and list(crossovers.marker.symbol) == ["diamond-open", "diamond"]
    assert "aligned 50% (a random crossover: 10%)" in fig.layout.title.text
    assert list(fig.layout.yaxis.categoryarray or []) == [] and fig.layout.yaxis.autorange == "reversed"
    with pytest.raises(ValueError):
        alignment_figure(NS(prompts=[], u=[0.0], stats={}))


def test_curvature_figure():
    u = np.array([-1.0, 0.0, 1.0])
    c = NS(
        u=u,
        arc_to_chord=np.array([1.0, 1.001, 1.01]),
        orthogonal_share=np.array([0.0, 0.02, 0.05]),
        arc_to_chord_map=np.array([1.0, 1.0, 1.002]),
        orthogonal_share_map=np.array([0.0, 0.01, 0.03]),
        axis="sentiment",
    )
    fig = curvature_figure(c)
    assert len(fig.data) == 4 and fig.layout.yaxis.type == "log"
    assert list(fig.data[0].y) == pytest.approx([0.0, 0.001, 0.01]) and list(fig.data[1].y) == [0.0, 0.02, 0.05]
    assert fig.layout.xaxis.title.text == "control u (sentiment)"
    alone = curvature_figure(
        NS(
            u=u,
            arc_to_chord=c.arc_to_chord,
            orthogonal_share=c.orthogonal_share,
            arc_to_chord_map=None,
            orthogonal_share_map=None,
        )
    )
    assert len(alone.data) == 2


def test_depth_lens_heatmaps():
    lens = NS(
        tau=TAU,
        shown_tokens=[" the", "the", " the"],
        shown_probs=np.linspace(0, 0.6, 15).reshape(5, 3),
        token_strings=["<bos>", "The", " movie"],
        position_top_tokens=[["a", "b", "c"]] * 5,
        position_top_probs=np.full((5, 3), 0.4),
    )
    fig = depth_lens_heatmap(lens)
    assert len(fig.data) == 1 and np.asarray(fig.data[0].z).shape == (3, 5)
    assert list(fig.data[0].y) == ["␣the", "the", "␣the (2)"] and fig.layout.xaxis.title.text == "depth τ"
    assert np.asarray(fig.data[0].z).max() == pytest.approx(0.6)
    fig = depth_lens_positions_heatmap(lens)
    assert np.asarray(fig.data[0].z).shape == (3, 5) and fig.layout.yaxis.title.text == "prompt position (token)"
    with pytest.raises(ValueError, match="all_positions"):
        depth_lens_positions_heatmap(NS(**{**lens.__dict__, "position_top_probs": None}))
    assert visible("\n") == "⏎"


def test_contraction_and_convergence_figures():
    runs = [
        NS(tau=TAU, u=np.array([u, 0.0]), ftle=-0.1 * TAU + u, top_symmetric_eigenvalue=0.2 - TAU) for u in (-1.0, 1.0)
    ]
    fig = contraction_figure(runs)
    assert len(fig.data) == 4 and fig.layout.xaxis2.title.text == "depth τ"
    assert fig.layout.yaxis.title.text == "FTLE λ" and fig.layout.yaxis2.title.text == "λ_max(S)"
    assert min(fig.data[1].y) == pytest.approx(-0.8)
    conv = NS(
        steps=np.array([1, 2, 4, 8]),
        euler_error=np.array([1e-2, 5e-3, 2.5e-3, 1.25e-3]),
        rk4_error=np.array([1e-4, 6e-6, 4e-7, 2.5e-8]),
        euler_order=1.0,
        rk4_order=float("nan"),
        floor=1e-9,
    )
    fig = convergence_figure(conv)
    assert len(fig.data) == 3 and fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "order 1.00" in fig.data[0].name and "too few" in fig.data[1].name
    assert fig.layout.xaxis.title.text == "steps N"


def step(tau, h, ratio, accepted):
    return NS(tau=tau, h=h, error_ratio=ratio, accepted=accepted)


def test_step_trace_marks_rejected_attempts():
    a = NS(
        u=np.array([0.5, 0.0]),
        steps=[step(0, 0.1, 1e-6, True), step(0.1, 1.0, 1.4, False), step(0.1, 0.5, 0.3, True)],
        nfe=20,
    )
    a.accepted = [s for s in a.steps if s.accepted]
    b = NS(u=np.array([0.6, 0.0]), steps=[step(0, 0.1, 0.0, True), step(0.1, 1.0, 1e-5, True)], nfe=14)
    b.accepted = b.steps
    fig = step_trace_figure([a, b])
    assert len(fig.data) == 4 and fig.data[0].name == "u = +0.50: 2 steps, NFE 20"
    assert list(fig.data[0].marker.symbol) == ["circle", "x", "circle"]
    assert list(fig.data[1].y) == pytest.approx([1e-6, 1.4, 0.3])
    assert min(fig.data[3].y) > 0  # a zero error ratio still has a place on the log axis
    assert fig.layout.yaxis2.type == "log" and any(s.y0 == 1.0 for s in fig.layout.shapes)


def test_field_heatmaps_over_u_and_tau():
    g = NS(u=np.array([-1.0, 0.0, 1.0]), tau=TAU, speed=np.ones((3, 5)), curvature=np.zeros((3, 5)), stretching=None)
    assert len(field_heatmaps_figure(g).data) == 2
    g.stretching = np.linspace(-2, 1, 15).reshape(3, 5)
    fig = field_heatmaps_figure(g)
    assert len(fig.data) == 3 and np.asarray(fig.data[2].z).shape == (5, 3)  # τ up, u across
    assert fig.data[2].zmin == -2 and fig.data[2].zmax == 2  # centred on 0


def test_stretching_figure_per_u():
    g = NS(u=np.array([-1.0, 1.0]), stretching=np.array([[-1.0, -3.0], [0.5, -0.5]]))
    fig = stretching_figure(g)
    assert list(fig.data[0].y) == [-1.0, 0.5] and list(fig.data[1].y) == [-2.0, 0.0]
