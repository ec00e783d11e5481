import numpy as np
import pytest

from steering.analysis.regime_names import name_regimes, name_row, regimes_reading
from steering.analysis.regimes import nfe_regimes
from steering.analysis.regimes_map import PromptMap, regimes_map

U = np.round(np.linspace(-2.0, 2.0, 21), 6)  # steps of 0.2


def _profile(top_where, top: int, bottom: int) -> np.ndarray:
    return np.where(top_where(U), top, bottom)


def _map(rows, crossover_u=0.1, precision="float64") -> PromptMap:
    """A map of the given (t, nfe over U, reasons over U) rows, tightest first."""
    n_t, n_u = len(rows), len(U)
    return PromptMap(
        prompt="p", u=U, t=np.array([t for t, _, _ in rows]), nfe=np.array([nfe for _, nfe, _ in rows]),
        accepted=np.zeros((n_t, n_u)), rejected=np.zeros((n_t, n_u)), first_step=np.ones((n_t, n_u)),
        reason=[list(r) for _, _, r in rows], predicted=np.zeros((n_t, n_u)), bands=[], exceptions=[], rule=None,
        band_rows=[], past_end=False, max_tau=1.0, why_no_band=None, rule_error=0.0, seconds=0.0, solves=n_t * n_u,
        precision=precision, crossover_u=crossover_u,
    )  # fmt: skip


# the shipped model's float64 map on "The movie was", as measured: the steered ends cost two dopri5 steps more
ENDS = _profile(lambda u: np.abs(u) >= 1.4 - 1e-9, 44, 32)
ENDS_REASONS = ["rejected" if n == 44 else "error-limited" for n in ENDS]
LEFT = _profile(lambda u: u <= -1.8 + 1e-9, 20, 14)


def test_a_row_costlier_at_both_steered_ends_is_named_from_its_counts():
    r = name_row(U, ENDS, ENDS_REASONS, 1e-5, crossover_u=0.1)
    assert r.levels == [32, 44]
    assert r.intervals == {32: [(-1.2, 1.2)], 44: [(-2.0, -1.4), (1.4, 2.0)]}
    assert r.switch_u == pytest.approx([-1.3, 1.3])
    assert (r.costlier, r.symmetric, r.extra_steps) == ("both ends", True, 2.0)
    assert r.kind == "rejected"  # the costlier cells' reason, not the cheaper ones' (error-limited)
    assert r.crossover_to_switch == pytest.approx(1.2) and r.at_crossover is False


def test_one_side_the_middle_and_a_switch_on_the_crossover():
    left = name_row(U, LEFT, ["cap-limited"] * len(U), 1e-2, crossover_u=0.1)
    assert (left.costlier, left.symmetric, left.extra_steps, left.kind) == ("u < 0", False, 1.0, "cap-limited")
    assert left.switch_u == pytest.approx([-1.7]) and left.intervals[20] == [(-2.0, -1.8)]
    right = name_row(U, _profile(lambda u: u >= 0.2 - 1e-9, 20, 14), ["error-limited"] * len(U), 1e-3, 0.05)
    assert right.costlier == "u > 0" and right.switch_u == pytest.approx([0.1])
    assert right.at_crossover is True and right.crossover_to_switch == pytest.approx(0.05)
    assert name_row(U, LEFT, ["cap-limited"] * len(U), 1e-2, crossover_u=-1.65).at_crossover is True
    assert name_row(U, LEFT, ["cap-limited"] * len(U), 1e-2, crossover_u=-1.55).at_crossover is False
    middle = name_row(U, _profile(lambda u: np.abs(u) <= 0.4 + 1e-9, 26, 20), ["rejected"] * len(U), 1e-3)
    assert middle.costlier == "the middle" and middle.symmetric is True and middle.at_crossover is None
    lopsided = name_row(U, _profile(lambda u: (u <= -1.8 + 1e-9) | (u >= 1.4 - 1e-9), 20, 14), ["rejected"] * 21, 1)
    assert lopsided.costlier == "both ends" and lopsided.symmetric is False
    flat = name_row(U, np.full(len(U), 14), ["cap-limited"] * len(U), 1e-2)
    assert flat.levels == [14] and flat.kind is None and flat.costlier is None and flat.switch_u == []


def test_the_reading_is_built_from_the_rows_that_split():
    one = ["cap-limited"] * len(U)
    m = _map(
        [(1e-6, ENDS, ENDS_REASONS), (1e-5, ENDS, ENDS_REASONS), (1e-4, np.full(len(U), 26), one), (1e-2, LEFT, one)]
    )
    assert [r.levels for r in name_regimes(m)] == [[32, 44], [32, 44], [26], [14, 20]]
    text = regimes_reading(m)
    assert text.startswith("In float64") and "3 of 4 tolerance rows split over u" in text
    assert (
        "at rtol ≤ 1e-05, 32 NFE for |u| ≤ 1.2 and 44 for |u| ≥ 1.4, 2 steps dearer at the steered ends (symmetric "
        "in u), set by the field's own error (rejected steps); switches at u ≈ -1.30, +1.30; "
    ) in text
    assert (
        "at rtol 0.01, 14 NFE for u ≥ -1.6 and 20 for u ≤ -1.8, 1 step dearer on the u < 0 side, set by the "
        "first-step rule (every step grew by the 10× cap); switch at u ≈ -1.70."
    ) in text
    assert "no clean row switches within 0.1 of it (the nearest, 1.20 away, at rtol 1e-06)" in text
    assert "The other row takes one level over u." in text and "scatter" not in text
    # nothing is written in: other numbers, another reading; a switch on the crossover; scattered counts
    scatter = np.where(np.arange(21) % 3 == 0, 38, 32)
    other = regimes_reading(_map([(1e-6, scatter, ENDS_REASONS), (1e-5, ENDS + 6, one), (1e-4, LEFT, one)], -1.65))
    assert "at rtol 1e-05, 38 NFE for |u| ≤ 1.2 and 50 for |u| ≥ 1.4" in other and "first-step rule" in other
    assert "a clean switch within 0.1 of it at rtol 0.0001" in other
    assert "At rtol 1e-06 the counts scatter: up to 2 levels, one level on up to 7 separate" in other
    assert "0 of the 1 scattered rows have a switch that close" in other
    assert "No semantic crossover" in regimes_reading(_map([(1e-6, ENDS, one), (1e-5, ENDS, one)], crossover_u=None))
    assert "one level at every u" in regimes_reading(_map([(1e-6, np.full(21, 32), one), (1e-2, np.full(21, 14), one)]))


def test_the_depth_field_map_names_its_own_rows(small_depth_hybrid, small_tokenizer):
    grid = (-2.0, -1.0, 0.0, 1.0, 2.0)
    m = regimes_map(small_depth_hybrid, small_tokenizer, "The movie was", grid, (1e-5, 1e-3))
    # the crossover is the regimes sweep's, decoded from the map's tightest row instead of another solve
    sweep = nfe_regimes(small_depth_hybrid, small_tokenizer, "The movie was", grid, ("dopri5",), 1e-5, 1e-6,
                        precision="float64")  # fmt: skip
    assert (m.crossover_u is None) == (sweep.crossover_u is None)
    if m.crossover_u is not None:
        assert m.crossover_u == pytest.approx(sweep.crossover_u, abs=1e-3)
    for i, r in enumerate(name_regimes(m)):
        assert r.t == m.t[i] and r.levels == sorted(set(m.nfe[i].tolist()))
        held = {float(u): level for level, spans in r.intervals.items() for a, b in spans for u in m.u if a <= u <= b}
        assert [held[float(u)] for u in m.u] == m.nfe[i].tolist()  # the intervals cover every u with its own count
        assert len(r.switch_u) == int((np.diff(m.nfe[i]) != 0).sum())
        assert (r.kind is None) == (len(r.levels) == 1)
    assert regimes_reading(m).startswith("In float64") and m.to_dict()["crossover_u"] == m.crossover_u


def test_an_error_limited_split_is_the_first_step_rule_s_unless_the_error_cost_a_step():
    held = ["error-limited"] * len(U)
    # the dearer u start with h = 0.05: three steps (h, 10·h, the rest) are the fewest h and the 10× cap allow
    ruled = name_row(U, LEFT, held, 1e-2, first_step=np.where(LEFT == 20, 0.05, 0.1))
    paid = name_row(
        U, LEFT, held, 1e-2, first_step=np.full(len(U), 0.1)
    )  # h = 0.1 needs two: the third was the error's
    assert ruled.kind == paid.kind == "error-limited"
    assert ruled.beyond_first_step is False and paid.beyond_first_step is True
    m = _map([(1e-3, np.full(21, 20), held), (1e-2, LEFT, held)])
    m.first_step[1] = np.where(LEFT == 20, 0.05, 0.1)
    assert "set by the first-step rule (the error held a step's growth under the cap but cost no step)" in (
        regimes_reading(m)
    )
    m.first_step[1] = 0.1
    assert "set by the field's own error (it held a step's growth under the cap)" in regimes_reading(m)
