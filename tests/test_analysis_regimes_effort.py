import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from steering.analysis.curvature import curvature_by_u
from steering.analysis.regimes import nfe_regimes
from steering.analysis.regimes_effort import CURVATURE_MEASURES, field_effort, rank_correlation_test

U = (-2.0, -1.0, 0.0, 1.0, 2.0)


def test_a_perfectly_monotone_profile_has_rho_one_and_a_small_p():
    x = np.arange(10.0)
    up = rank_correlation_test(x, x**3, draws=1000, seed=0)
    assert up.rho == pytest.approx(1.0) and up.p_value == pytest.approx(1 / 1001)  # no shuffle reaches |rho| = 1
    assert -0.8 < up.null_low < 0 < up.null_high < 0.8
    assert up.p_value_cyclic == pytest.approx(1 / 10)  # no cyclic shift of a ramp keeps it a ramp: the floor, 1/n
    down = rank_correlation_test(x, -x, draws=1000, seed=0)  # two-sided: a falling profile is as unlikely
    assert down.rho == pytest.approx(-1.0) and down.p_value == pytest.approx(1 / 1001)


def test_profiles_drawn_independently_are_not_called_correlated():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=30), rng.normal(size=30)
    t = rank_correlation_test(x, y, draws=1000, seed=1)
    assert t.rho == pytest.approx(spearmanr(x, y).statistic)
    assert t.null_low <= t.rho <= t.null_high and t.p_value > 0.2 and t.p_value_cyclic > 0.2


def test_ties_take_their_average_rank_and_a_constant_profile_has_no_rho():
    nfe = np.array([32] * 5 + [44] * 5)  # two levels, as NFE comes
    curvature = np.linspace(0.1, 0.2, 10)
    t = rank_correlation_test(nfe, curvature, draws=500, seed=0)
    ranks = np.array([3.0] * 5 + [8.0] * 5)  # 1..5 and 6..10 averaged
    assert t.rho == pytest.approx(np.corrcoef(ranks, np.arange(1, 11))[0, 1]) and t.rho < 1
    assert t.p_value < 0.02
    same = rank_correlation_test(nfe, curvature, draws=500, seed=0)
    assert same == t  # a fixed seed: the same null
    flat = rank_correlation_test(np.full(10, 32), curvature, draws=500)
    assert flat.rho is None and flat.p_value is None and flat.null_low is None and flat.p_value_cyclic is None
    with pytest.raises(ValueError, match="one value per u"):
        rank_correlation_test([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="non-finite"):
        rank_correlation_test([1, 2, math.inf], [1, 2, 3])


def test_field_effort_counts_as_the_regimes_sweep_and_measures_the_curvature_pages_paths(
    small_depth_hybrid, small_tokenizer
):
    model, tok = small_depth_hybrid, small_tokenizer
    e = field_effort(model, tok, "The movie was", U, rtol=1e-3, atol=1e-4, draws=50)
    n = len(U)
    for values in (e.nfe, e.accepted, e.rejected, e.max_error_ratio, e.arc_to_chord_excess, e.orthogonal_share):
        assert values.shape == (n,) and np.isfinite(values).all()
    sweep = nfe_regimes(model, tok, "The movie was", U, solvers=("dopri5",), rtol=1e-3, atol=1e-4, precision="float64")
    assert e.nfe.tolist() == sweep.nfe["dopri5"].tolist()
    assert e.accepted.tolist() == sweep.steps["dopri5"].tolist()
    assert np.all(e.max_error_ratio[e.rejected == 0] <= 1.0) and np.all(e.max_error_ratio > 0)
    # the same paths as the curvature page's (dopri5 at its reference tolerance, one u at a time, in float32)
    page = curvature_by_u(model, tok, "The movie was", U)
    assert e.arc_to_chord_excess == pytest.approx(page.arc_to_chord - 1, rel=1e-4, abs=1e-6)
    assert e.orthogonal_share == pytest.approx(page.orthogonal_share, rel=1e-4, abs=1e-6)
    assert set(e.tests) == set(CURVATURE_MEASURES)
    d = e.to_dict()
    assert d["precision"] == "float64" and "NFE" in d["reading"] and set(d["tests"]) == set(CURVATURE_MEASURES)


def test_field_effort_refuses_a_discrete_model(small_discrete, small_tokenizer):
    with pytest.raises(ValueError, match="discrete"):
        field_effort(small_discrete, small_tokenizer, "The movie was", U)
