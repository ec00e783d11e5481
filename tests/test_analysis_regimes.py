import numpy as np
import pytest

from steering.analysis.regimes import crossing, level_switch, nfe_regimes, tolerance_scaling
from steering.ode import SolverConfig, SolverStepLimitError


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
    assert np.all((r.nfe["dopri5"] - 2) % 6 == 0)            # 2 start-up evaluations + 6 per attempted step
    assert np.all(r.steps["dopri5"] >= 1)
    assert np.all((r.target_probability >= 0) & (r.target_probability <= 1))
    assert r.target_raw.shape == (9, 2)
    assert 0 <= r.agreement and 0 <= r.step_agreement


def test_level_switch_and_crossing_on_known_curves():
    u = np.linspace(-2, 2, 41)
    nfe = np.where(u < 0.3, 20, 14)
    nfe[5] = 26                                                 # an outlier does not move the switch
    switch, levels = level_switch(u, nfe)
    assert switch == pytest.approx(0.25) and levels[0] > 19 and levels[1] == 14
    assert level_switch(u, np.full(41, 14)) == (None, None)
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
