import copy
import math

import numpy as np
import pytest
import torch

from steering.analysis.regimes_map import (
    PromptMap,
    cell_reason,
    crossings,
    default_tolerance_reading,
    predicted_nfe,
    regimes_map,
    step_threshold,
    steps_to_end,
)
from steering.model.batched_adaptive import solve_adaptive_batch
from steering.model.batched_field import batched_field, float_copy
from steering.model.ode import SolverConfig

U = (-2.0, -1.0, 0.0, 1.0, 2.0)
TOLS = (1e-5, 1e-4, 1e-3, 1e-2)


def test_the_first_step_rule_counts_steps_h_10h_100h_to_the_end():
    assert [round(1 / step_threshold(k)) for k in (1, 2, 3)] == [1, 11, 111]
    assert steps_to_end(1.0) == 1 and steps_to_end(0.999) == 2
    assert steps_to_end(1 / 11) == 2 and steps_to_end(1 / 11 * 0.999) == 3
    assert steps_to_end(1 / 111 * 1.001) == 3 and steps_to_end(1 / 111 * 0.999) == 4
    assert predicted_nfe(0.095) == 14 and predicted_nfe(0.08) == 20 and predicted_nfe(0.005) == 26
    with pytest.raises(ValueError, match="positive"):
        steps_to_end(0.0)


def test_each_cell_gets_its_reason_from_the_steps_as_taken():
    assert cell_reason([0.05, 0.5, 0.45], [True] * 3) == "cap-limited"  # 10×, then cut to land on τ = 1
    assert cell_reason([0.2], [True]) == "cap-limited"
    assert cell_reason([0.05, 0.3, 0.65], [True] * 3) == "error-limited"  # the error held the growth to 6×
    assert cell_reason([0.05, 0.5, 0.6, 0.45], [True, True, False, True]) == "rejected"


def _one_row_map(nfe, first_step, reasons) -> PromptMap:
    n = len(nfe)
    return PromptMap(
        prompt="p", u=np.linspace(-2, 2, n), t=np.array([1e-3]), nfe=np.array([nfe]), accepted=np.array([nfe]),
        rejected=np.zeros((1, n)), first_step=np.array([first_step]), reason=[reasons], predicted=np.zeros((1, n)),
        bands=[], exceptions=[], rule=None, band_rows=[], past_end=False, max_tau=1.0, why_no_band="none",
        rule_error=0.0, seconds=0.0, solves=n,
    )  # fmt: skip


def test_the_default_reading_tells_a_growth_the_error_held_from_a_step_it_added():
    # D5f on "The movie was": h = 0.0635, the second step grew 8x (under the cap), the third landed on tau = 1:
    # 3 steps, the fewest h and the 10x cap allow, so the first-step rule sets the count, not the tolerance
    held = default_tolerance_reading(_one_row_map([20, 20, 20], [0.062, 0.0635, 0.064], ["error-limited"] * 3))
    assert "never enough to cost a step" in held and "first-step rule, not the tolerance, sets it" in held
    assert "3, 2 + 6·3 = 20 NFE" in held
    # one u takes a fourth step that h and the cap did not need: there the tolerance sets the count
    added = default_tolerance_reading(_one_row_map([20, 26, 20], [0.062, 0.0635, 0.064], ["error-limited"] * 3))
    assert "on 1 of 3 u that costs steps: there the tolerance sets the count" in added


def test_interpolated_crossings_of_a_threshold():
    u = np.array([-1.0, 0.0, 1.0])
    assert crossings(u, np.array([0.1, 0.05, 0.1]), 0.1) == [-1.0, 1.0]
    (x,) = crossings(u[:2], np.array([0.2, 0.05]), 0.1)
    assert x == pytest.approx(-0.5)  # halfway in log h
    assert crossings(u, np.array([0.2, 0.3, 0.4]), 0.1) == []


@pytest.fixture
def slow_hybrid(small_hybrid):
    """small_hybrid with its field 10× slower: smooth enough at loose tolerances for the step rules to set the
    count (cap-limited cells, a 14/20 band near t = 1e-4), error-limited at tight ones."""
    with torch.no_grad():
        small_hybrid.field.alpha.mul_(0.1)
    return small_hybrid


@pytest.fixture
def small_map(slow_hybrid, small_tokenizer):
    return regimes_map(slow_hybrid, small_tokenizer, "The movie was", U, TOLS)


def test_the_map_holds_a_cell_per_u_and_tolerance_and_agrees_with_the_solver(small_map, slow_hybrid, small_tokenizer):
    m = small_map
    assert m.nfe.shape == (len(m.t), len(U)) and len(m.reason) == len(m.t)
    assert set(TOLS) <= set(m.t.tolist()) and (np.diff(m.t) > 0).all()
    # every cell's count is what solve_block (torchdiffeq, one u at a time) takes at that u and t, in float64
    from steering.analysis.inputs import prompt_tensor

    assert m.precision == "float64"
    idx, _ = prompt_tensor(slow_hybrid, small_tokenizer, "The movie was")
    h0 = slow_hybrid.encode(idx).double()
    model64 = copy.deepcopy(slow_hybrid).double()
    for i in (0, len(m.t) - 1):
        for j in (0, 2, 4):
            t = float(m.t[i])
            u = torch.tensor([[U[j], 0.0]], dtype=torch.float64)
            solve = model64.middle(h0, u, SolverConfig("dopri5", rtol=t, atol=t / 10))
            assert solve.nfe == m.nfe[i, j]
    assert (m.nfe == 2 + 6 * (m.accepted + m.rejected)).all()
    # in every cap-limited cell the first-step rule's count is the solver's
    cap = np.array([[r == "cap-limited" for r in row] for row in m.reason])
    assert cap.any()
    assert (m.predicted[cap] == m.nfe[cap]).all() and not m.exceptions
    assert (m.predicted[~cap] == 0).all()
    # h(u, t) from the loosest row's first two evaluations is the first step each solve took
    assert m.rule_error < 1e-4
    assert m.max_tau == pytest.approx(1.0, abs=1e-6)


def test_a_cap_limited_band_is_bisected_and_its_middle_splits_where_the_rule_says(small_map):
    m = small_map
    assert len(m.cap_bands) == 1 and m.cap_bands[0].levels == [14, 20]
    for band in m.cap_bands:
        assert band.bisected and band.t_low < band.t_high
        row = m.band_rows[m.cap_bands.index(band)]
        assert m.t[row] == pytest.approx(band.t_middle)
        levels = sorted(set(m.nfe[row].tolist()))
        assert levels == band.levels and len(levels) >= 2
        assert all(r == "cap-limited" for r in m.reason[row])
        assert len(band.switch_u) == len(band.predicted_switch_u)
        step = U[1] - U[0]
        assert all(abs(a - b) <= step for a, b in zip(band.switch_u, band.predicted_switch_u))
    assert (m.why_no_band is None) == bool(m.cap_bands)
    assert "NFE" in default_tolerance_reading(m)


def test_a_band_is_found_between_grid_rows_by_the_first_step_rule(slow_hybrid, small_tokenizer):
    # a grid too coarse to land in the band (1e-5, 1e-3): the rule still finds where h straddles 1/11
    reports = []
    coarse = regimes_map(slow_hybrid, small_tokenizer, "The movie was", U, (1e-5, 1e-3), on_progress=reports.append)
    fine = regimes_map(slow_hybrid, small_tokenizer, "The movie was", U, np.geomspace(1e-5, 1e-3, 9))
    assert not any(len(set(coarse.nfe[coarse.t.tolist().index(t)].tolist())) > 1 for t in (1e-5, 1e-3))
    assert len(coarse.cap_bands) == len(fine.cap_bands) == 1
    (a,), (b,) = coarse.cap_bands, fine.cap_bands
    assert (a.t_low, a.t_high) == pytest.approx((b.t_low, b.t_high), rel=0.02)  # the bisection's precision
    # a report before every round of attempts (where the lab's background job lets a page in), never going back,
    # then 1.0; the two grid rows are one batch, each bisection's row one more
    rows = coarse.solves // len(U)
    assert coarse.solves > 2 * len(U) and len(reports) > 2 * (rows - 1)  # two rounds or more a batch
    assert reports[0] == 0.0 and reports[-1] == 1.0 and (np.diff(reports) >= 0).all()


def test_only_the_past_end_flag_evaluates_a_depth_field_past_tau_one(small_depth_hybrid, small_tokenizer):
    model = small_depth_hybrid
    kwargs = dict(u_grid=(-1.5, 0.0, 1.5), tolerances=(1e-4, 1e-3))
    landing = regimes_map(model, small_tokenizer, "The movie was", **kwargs)
    past = regimes_map(model, small_tokenizer, "The movie was", past_end=True, **kwargs)
    assert landing.max_tau == pytest.approx(1.0, abs=1e-6)
    assert past.max_tau > 1.0 + 1e-3
    # the field itself says where it was evaluated
    from steering.analysis.inputs import prompt_tensor

    idx, _ = prompt_tensor(model, small_tokenizer, "The movie was")
    h0 = model.encode(idx).double()
    field = batched_field(float_copy(model.field, torch.float64), torch.tensor([[1.5, 0.0]], dtype=torch.float64), h0)
    for past_end in (False, True):
        taus = []

        def recorded(tau, h, select, taus=taus):
            taus.extend(tau.tolist())
            return field(tau, h, select)

        solve_adaptive_batch(recorded, h0, 1e-3, 1e-4, past_end=past_end)
        assert (max(taus) > 1.0 + 1e-3) == past_end


def test_float32_is_a_toggle_and_parts_from_float64_only_where_round_off_decides(slow_hybrid, small_tokenizer):
    kwargs = dict(u_grid=U, tolerances=(1e-8, 1e-3))
    m64 = regimes_map(slow_hybrid, small_tokenizer, "The movie was", **kwargs)
    m32 = regimes_map(slow_hybrid, small_tokenizer, "The movie was", precision="float32", **kwargs)
    assert (m64.precision, m32.precision) == ("float64", "float32")
    assert m32.to_dict()["precision"] == "float32"
    loose = m64.row(1e-3)
    assert (m32.nfe[m32.row(1e-3)] == m64.nfe[loose]).all()  # far above float32's round-off: the same counts
    assert np.isfinite(m64.max_error_ratio).all() and (m64.max_error_ratio[m64.rejected == 0] <= 1).all()
    with pytest.raises(ValueError, match="precision"):
        regimes_map(slow_hybrid, small_tokenizer, "The movie was", precision="float16", **kwargs)


def test_the_map_refuses_what_it_cannot_compute(small_entry_hybrid, small_discrete, small_tokenizer):
    with pytest.raises(ValueError, match="two distinct tolerances"):
        regimes_map(small_entry_hybrid, small_tokenizer, "The movie was", U, (1e-3,))
    with pytest.raises(ValueError, match="discrete"):
        regimes_map(small_discrete, small_tokenizer, "The movie was", U, TOLS)
    assert math.isfinite(step_threshold(5))
