"""Path curvature: arc / chord and the share of the displacement orthogonal to the chord, on known paths."""

import math

import numpy as np
import pytest

from steering.analysis.bend import fit_bend_map
from steering.analysis.curvature import (
    curvature_by_u,
    curvature_of,
    path_curvature,
    path_shape_note,
    token_path_curvature,
)
from steering.analysis.pca import fit_pca_map
from steering.analysis.trajectories import compute_trajectory
from steering.model.ode import SolverConfig


def test_a_straight_line_is_one_and_zero():
    t = np.array([0.0, 0.1, 0.15, 0.5, 0.9, 1.0])  # uneven spacing
    direction = np.array([1.0, -2.0, 0.5, 3.0, 0.0])
    ratio, share = path_curvature(t[:, None] * direction[None, :] + 7.0)
    assert ratio == pytest.approx(1.0, abs=1e-12) and share == pytest.approx(0.0, abs=1e-12)


def test_an_l_shaped_path():
    leg = np.linspace(0, 1, 11)
    path = np.r_[np.c_[leg, 0 * leg], np.c_[np.ones(10), leg[1:]]]
    ratio, share = path_curvature(path)
    assert ratio == pytest.approx(math.sqrt(2)) and share == pytest.approx(math.sqrt(0.5))


def test_a_quarter_circle():
    theta = np.linspace(0, math.pi / 2, 2001)
    ratio, share = path_curvature(np.c_[np.cos(theta), np.sin(theta)])
    assert ratio == pytest.approx(math.pi / (2 * math.sqrt(2)), rel=1e-6)  # arc π/2 over chord √2
    assert share == pytest.approx(math.sin(math.pi / 4), rel=1e-3)  # the start tangent is 45° off the chord


def test_a_slight_bend_shows_in_the_share_before_the_ratio():
    t = np.linspace(0, 1, 33)
    ratio, share = path_curvature(np.c_[t, 0.01 * t * (1 - t)])
    assert ratio - 1 < 1e-4 and share == pytest.approx(0.01, rel=0.05)


def test_trailing_dimensions_are_flattened_and_loops_have_no_chord():
    t = np.linspace(0, 1, 5)
    path = np.stack([np.c_[t, 2 * t], np.c_[-t, t]], axis=1)  # [T, tokens, d]
    assert path_curvature(path) == pytest.approx((1.0, 0.0), abs=1e-12)
    ratio, share = path_curvature(np.c_[np.sin(np.linspace(0, 2 * math.pi, 9)), np.zeros(9)])
    assert ratio == math.inf and math.isnan(share)
    assert path_curvature(np.zeros((4, 3)))[0] == 1.0
    with pytest.raises(ValueError, match="two points"):
        path_curvature(np.zeros((1, 3)))


def test_one_euler_step_is_a_straight_path_and_dopri5_is_not(small_hybrid, small_tokenizer):
    straight = compute_trajectory(small_hybrid, small_tokenizer, "The movie was", 1.0, SolverConfig("euler", steps=1))
    curved = compute_trajectory(
        small_hybrid, small_tokenizer, "The movie was", 1.0, SolverConfig("dopri5", rtol=1e-6, atol=1e-8)
    )
    c = curvature_of([straight, curved])
    assert c.arc_to_chord[0] == pytest.approx(1.0, abs=1e-6) and c.orthogonal_share[0] < 1e-3
    assert c.orthogonal_share[1] > 10 * max(c.orthogonal_share[0], 1e-6)
    assert c.arc_to_chord_map is None and list(c.u) == [1.0, 1.0]


def test_curvature_by_u(small_hybrid, small_tokenizer):
    pca = fit_pca_map(small_hybrid, small_tokenizer, prompts=("The movie was",), u_values=(-1.0, 1.0), n_tau=5)
    c = curvature_by_u(small_hybrid, small_tokenizer, "The movie was", [-1.0, 0.0, 1.0], n_tau=9, pca_map=pca)
    out = c.to_dict()
    assert list(out["u"]) == [-1.0, 0.0, 1.0] and c.n_tau == 9 and c.solver.startswith("dopri5")
    for key in (
        "arc_to_chord",
        "orthogonal_share",
        "arc_to_chord_map",
        "orthogonal_share_map",
        "arc_to_chord_bend",
        "orthogonal_share_bend",
    ):
        assert len(out[key]) == 3
    assert np.all(c.arc_to_chord_bend >= 1) and np.all((c.orthogonal_share_bend >= 0) & (c.orthogonal_share_bend <= 1))
    assert 0 < c.bend_captured <= 1
    assert np.all(c.arc_to_chord >= 1) and np.all((c.orthogonal_share >= 0) & (c.orthogonal_share <= 1))
    assert c.token_arc_to_chord.shape == (3, len(c.token_strings)) and np.all(c.token_arc_to_chord >= 1)
    top = c.most_curved()
    assert top["orthogonal_share"] == pytest.approx(c.orthogonal_share.max())
    assert top["orthogonal_share_u"] == c.u[int(c.orthogonal_share.argmax())]


def test_the_note_reads_the_penalties_that_were_in_effect():
    shipped = {
        "model": {"field_norm": "entry"},
        "meta": {
            "train": {
                "stage2_steps": 300,
                "roughness_weight": 2.0,
                "stage2_roughness_weight": 1200.0,
                "stage2_roughness_relative_to": "state",
            }
        },
    }
    assert "stage 2 penalised path roughness with weight 1,200" in path_shape_note(shipped)
    assert "|H(0)|²" in path_shape_note(shipped) and "stage 1 with weight 2" in path_shape_note(shipped)
    assert "does not record" in path_shape_note({})
    # issue 45's pilot: a depth-varying field trained with RK4, no stage 2; the config's default
    # roughness weight (2,000) was never applied, and the note must not claim it was
    pilot = {
        "model": {"field_basis": 2},
        "meta": {
            "train": {
                "stage2_steps": 0,
                "roughness_weight": 2000.0,
                "solver": "rk4",
                "solver_steps": 2,
                "solver_error_weight": 100.0,
                "solver_error_tolerance": 1e-3,
                "solver_error_start": 200,
            }
        },
    }
    note = path_shape_note(pilot)
    assert "2,000" not in note and "No path-roughness penalty was in effect" in note
    assert "degree 1 in τ" in note and "0.001" in note and "step 200" in note and "stage 2" not in note
    unpenalised = {"meta": {"train": {"stage2_steps": 0, "roughness_weight": 0.0}}}
    assert "No path-roughness penalty was in effect" in path_shape_note(unpenalised)


def test_the_bend_view_keeps_a_bend_that_the_pca_map_flattens():
    """One prompt's paths for five u: a chord along x0, a small fan along x1, a slight bend along x3. The PCA
    map is fitted with other prompts, whose states lie far apart along x4 and move far along x0: it draws that and
    flattens the bend. The bend view is fitted on the family and keeps the bend near its full-space size."""
    t = np.linspace(0, 1, 33)
    family = []
    for spread in np.linspace(-1, 1, 5):
        x = np.zeros((33, 6))
        x[:, 0], x[:, 1], x[:, 3] = t, 0.2 * spread * t, 0.3 * np.sin(np.pi * t)
        family.append(x)
    others = [3 * x + np.r_[0, 0, 0, 0, offset, 0] for x in family for offset in (-30, 30)]
    stacked = np.concatenate(family + others)
    mean = stacked.mean(0)
    pcs = np.linalg.svd(stacked - mean, full_matrices=False)[2][:2]
    full = np.array([path_curvature(p)[1] for p in family])
    on_pca = np.array([path_curvature((p - mean) @ pcs.T)[1] for p in family])
    view = fit_bend_map(family)
    in_view = np.array([path_curvature(view.project(p))[1] for p in family])
    assert on_pca.max() < 0.2 * full.max()  # the PCA drawing hides it
    assert in_view == pytest.approx(full, rel=0.05)  # one bend direction: the view holds it
    assert view.bend_captured == pytest.approx(1.0) and abs(view.chord_axis @ view.bend_axis) < 1e-12
    assert (view.project(family[2])[:, 1] >= -1e-12).all()  # drawn bending up
    # straight paths: nothing to hold, and a family that never moves draws as one point
    assert math.isnan(fit_bend_map([np.c_[t, 2 * t]]).bend_captured)
    still = fit_bend_map([np.zeros((4, 3))])
    assert np.allclose(still.project(np.zeros((4, 3))), 0) and path_curvature(still.project(np.zeros((4, 3))))[0] == 1


def test_the_bend_view_refuses_paths_of_other_widths():
    view = fit_bend_map([np.random.default_rng(0).normal(size=(5, 4))])
    with pytest.raises(ValueError, match="width 3"):
        view.project(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="different widths"):
        fit_bend_map([np.zeros((5, 3)), np.zeros((5, 4))])


def test_token_path_curvature_is_each_tokens_arc_over_chord():
    tau = np.linspace(0, 1, 65)
    quarter = np.stack([np.cos(tau * np.pi / 2), np.sin(tau * np.pi / 2)], -1)  # a quarter circle
    straight = np.stack([tau, 2 * tau], -1)
    still = np.zeros_like(straight)
    states = np.stack([quarter, straight, still], 1)  # [T, tokens, d]
    ratio = token_path_curvature(states)
    assert ratio[0] == pytest.approx(np.pi / (2 * np.sqrt(2)), rel=1e-3)
    assert ratio[1] == pytest.approx(1.0) and ratio[2] == 1.0
    with pytest.raises(ValueError, match="tokens"):
        token_path_curvature(quarter)
