import numpy as np
import pytest

from steering.analysis.changepoints import level_switches
from steering.analysis.regimes import (
    crossing,
    nearest_switch,
    nfe_regimes,
    profile_summary,
    regimes_reading,
    relative_difference,
    tolerance_scaling,
)
from steering.model.ode import SolverConfig, SolverStepLimitError


def test_each_u_is_its_own_solve_and_nfe_is_counted(small_hybrid, small_tokenizer):
    grid = np.linspace(-2, 2, 9)
    r = nfe_regimes(small_hybrid, small_tokenizer, "The movie was", grid, rtol=1e-4, atol=1e-5)
    assert set(r.nfe) == {"dopri5", "adaptive_heun"} and r.seconds > 0
    from steering.analysis.inputs import prompt_tensor

    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    h0 = small_hybrid.encode(idx)
    for i in (0, 4, 8):
        alone = small_hybrid.middle(h0, [float(grid[i]), 0.0], SolverConfig("dopri5", rtol=1e-4, atol=1e-5))
        assert r.nfe["dopri5"][i] == alone.nfe
    assert np.all((r.nfe["dopri5"] - 2) % 6 == 0)  # 2 start-up evaluations + 6 per attempted step
    assert np.all(r.steps["dopri5"] >= 1)
    assert np.all((r.target_probability >= 0) & (r.target_probability <= 1))
    assert r.target_raw.shape == (9, 2)
    assert r.nfe_disagreement == pytest.approx(relative_difference(r.nfe["dopri5"], r.nfe["adaptive_heun"]))
    assert r.step_disagreement == pytest.approx(relative_difference(r.steps["dopri5"], r.steps["adaptive_heun"]))
    # a switch midway between every pair of neighbours whose NFE differ, and nowhere else
    d = r.nfe["dopri5"]
    changes = [(grid[k] + grid[k + 1]) / 2 for k in range(len(grid) - 1) if d[k] != d[k + 1]]
    assert [s.u for s in r.switches] == pytest.approx(changes)
    assert sum(seg.points for seg in r.segments) == 9
    assert "agreement" not in r.to_dict() and "step_agreement" not in r.to_dict()
    assert {"nfe_disagreement", "step_disagreement", "switches", "segments", "reading"} <= set(r.to_dict())


def test_disagreement_is_the_largest_relative_difference():
    # the shipped model's accepted steps: dopri5 3 / 2, adaptive_heun 6 / 5
    assert relative_difference([3, 2, 3], [6, 5, 6]) == pytest.approx(3 / 3.5)
    assert relative_difference([14, 20], [14, 20]) == 0.0
    assert relative_difference([10], [12]) == pytest.approx(2 / 11)
    assert relative_difference([10], [12]) == relative_difference([12], [10])


def test_the_reading_of_the_shipped_profile():
    u = np.round(np.linspace(-2, 2, 41), 6)
    nfe = np.where((u > -0.55) & (u < 0.45), 14, 20)
    switches, segments = level_switches(u, nfe)
    assert regimes_reading(segments, -0.03) == (
        "two regimes: 14 NFE for -0.55 < u < 0.45, 20 outside; the crossover "
        "(u = -0.03) lies inside the low-NFE band, 0.48 from the nearest "
        "switch (u = 0.45)"
    )
    assert regimes_reading(segments, -0.62).endswith("sits on the switch at u = -0.55 (0.07 away)")
    assert regimes_reading(segments, None).endswith("never crosses 50% on the grid")
    assert regimes_reading(level_switches(u, np.full(41, 14))[1], 0.1).startswith("one regime: 14 NFE at every u")
    three = level_switches(u, np.select([u < -1.0, u < 0.0, u < 1.2], [26, 20, 14], 20))[1]
    assert regimes_reading(three, 0.5) == (
        "three regimes: 14 NFE for -0.05 < u < 1.15; 20 NFE for -1.05 < u < -0.05 "
        "and u > 1.15; 26 NFE for u < -1.05; the crossover (u = 0.50) lies inside "
        "the 14-NFE band, 0.55 from the nearest switch (u = -0.05)"
    )
    assert nearest_switch(switches, -0.03) == pytest.approx(0.45) and nearest_switch(switches, None) is None
    assert nearest_switch([], 0.0) is None


def test_profile_summary_keeps_the_switch_nearest_the_crossover():
    u = np.round(np.linspace(-2, 2, 41), 6)
    nfe = {"dopri5": np.where((u > -0.55) & (u < 0.45), 14, 20), "adaptive_heun": np.where(np.abs(u) < 1.05, 7, 8)}
    steps = {"dopri5": np.where((u > -0.55) & (u < 0.45), 2, 3), "adaptive_heun": nfe["adaptive_heun"] - 2}
    p = 1 / (1 + np.exp(-3 * (u + 0.6)))  # crossing at -0.6: on the left switch
    s = profile_summary(u, nfe, steps, p)
    assert [x.u for x in s["switches"]] == pytest.approx([-0.55, 0.45])
    assert s["crossover_u"] == pytest.approx(-0.6, abs=0.01) and s["switch_u"] == pytest.approx(-0.55)
    assert s["crossover_to_switch"] == pytest.approx(0.05, abs=0.01)
    assert s["step_disagreement"] == pytest.approx(3 / 3.5) and s["nfe_disagreement"] == pytest.approx(
        13 / 13.5
    )  # 20 vs 7 at u = ±0.6
    assert "sits on the switch at u = -0.55" in s["reading"]
    none = profile_summary(u, {"dopri5": np.full(41, 14)}, {"dopri5": np.full(41, 2)}, np.full(41, 0.9))
    assert none["switches"] == [] and none["switch_u"] is None and none["crossover_to_switch"] is None
    assert none["nfe_disagreement"] == none["step_disagreement"] == 0.0


def test_crossing_on_known_curves():
    u = np.linspace(-2, 2, 41)
    p = 1 / (1 + np.exp(-3 * (u - 0.37)))
    assert crossing(u, p) == pytest.approx(0.37, abs=0.01)
    assert crossing(u, np.full(41, 0.9)) is None


def test_tolerance_scaling_grows_with_precision(small_hybrid, small_tokenizer):
    s = tolerance_scaling(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], [1e-2, 1e-4, 1e-6, 1e-8])
    assert np.all(np.diff(s.nfe) >= 0) and s.nfe[-1] > s.nfe[0]
    fitted = np.polyfit(np.log10(1 / s.tolerances), np.log10(s.nfe), 1)[0]
    assert s.slope == pytest.approx(fitted) and 0 < s.slope < 1


def test_regimes_bad_inputs(small_hybrid, small_tokenizer, small_discrete):
    args = (small_hybrid, small_tokenizer, "The movie was")
    with pytest.raises(ValueError, match="empty"):
        nfe_regimes(*args, [])
    with pytest.raises(ValueError, match="adaptive"):
        nfe_regimes(*args, [0.0], solvers=("euler",))
    with pytest.raises(ValueError, match="unknown solver|adaptive"):
        nfe_regimes(*args, [0.0], solvers=("rk45",))
    for bad in (0.0, -1e-3, 5.0, float("nan")):
        with pytest.raises(ValueError, match="rtol"):
            nfe_regimes(*args, [0.0], rtol=bad)
        with pytest.raises(ValueError, match="rtol"):
            tolerance_scaling(*args, [0.0, 0.0], [1e-3, bad])
    with pytest.raises(ValueError, match="two tolerances"):
        tolerance_scaling(*args, [0.0, 0.0], [1e-3])
    with pytest.raises(ValueError, match="two targets"):
        nfe_regimes(*args, [0.0], targets=(" good",))
    with pytest.raises(ValueError, match="discrete"):
        nfe_regimes(small_discrete, small_tokenizer, "The movie was", [0.0])
    with pytest.raises(SolverStepLimitError, match="max_steps"):
        nfe_regimes(*args, [2.0], rtol=1e-12, atol=1e-12, max_steps=2)


def test_max_tau_reports_how_far_the_solves_went(small_depth_hybrid, small_tokenizer, monkeypatch):
    """`analyze regimes` says every solve landed on τ = 1 (max_tau 1); with torchdiffeq's default, which steps past
    the end and interpolates back, the same sweep reports the overshoot."""
    from steering.analysis.alignment import regimes_over_prompts
    from steering.model import ode

    grid = np.linspace(-2, 2, 5)
    a = regimes_over_prompts(small_depth_hybrid, small_tokenizer, ["The movie was", "The film"], grid, draws=10)
    assert [p.max_tau for p in a.prompts] == pytest.approx([1.0, 1.0], abs=1e-6)
    assert a.to_dict()["max_tau"] == pytest.approx(1.0, abs=1e-6)
    monkeypatch.setattr(ode, "adaptive_options", lambda max_steps, tau_end=1.0: {"max_num_steps": max_steps})
    past = nfe_regimes(small_depth_hybrid, small_tokenizer, "The movie was", grid, rtol=1e-3, atol=1e-4)
    assert past.to_dict()["max_tau"] > 1.0 + 1e-3


def test_the_batched_sweep_counts_as_one_solve_per_u(small_depth_hybrid, small_tokenizer):
    # the Regimes page's sweep: every u in one batched solve per solver, each u on its own steps
    grid = np.linspace(-2, 2, 7)
    args = (small_depth_hybrid, small_tokenizer, "The movie was", grid)
    each = nfe_regimes(*args, rtol=1e-3, atol=1e-4)
    for precision in ("float32", "float64"):
        batched = nfe_regimes(*args, rtol=1e-3, atol=1e-4, precision=precision)
        for method in each.nfe:
            assert batched.nfe[method].tolist() == each.nfe[method].tolist()
            assert batched.steps[method].tolist() == each.steps[method].tolist()
        assert np.allclose(batched.target_probability, each.target_probability, atol=1e-4)
        assert batched.max_tau == pytest.approx(1.0)
