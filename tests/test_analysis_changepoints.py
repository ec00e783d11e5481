"""Every level change of a profile: synthetic NFE profiles with none, one, two, three and noisy switches."""

import itertools

import numpy as np
import pytest

from steering.analysis.changepoints import default_penalty, level_switches, noise_scale, piecewise_constant

U = np.round(np.linspace(-2, 2, 41), 6)


def switch_points(switches):
    return [(s.u, s.from_level, s.to_level) for s in switches]


def test_a_constant_profile_has_no_switch():
    switches, segments = level_switches(U, np.full(41, 14))
    assert switches == [] and len(segments) == 1
    assert (segments[0].u_start, segments[0].u_end, segments[0].level, segments[0].points) == (-2.0, 2.0, 14.0, 41)


def test_one_switch():
    switches, segments = level_switches(U, np.where(U < 0.3, 20, 14))
    assert switch_points(switches) == [(pytest.approx(0.25), 20.0, 14.0)]
    assert [s.points for s in segments] == [23, 18]


def test_two_symmetric_switches_the_shipped_profile():
    # dopri5 on the shipped model, "The movie was", rtol 1e-3: 20 for u <= -0.6 and u >= 0.5, 14 between
    nfe = np.where((U > -0.55) & (U < 0.45), 14, 20)
    switches, segments = level_switches(U, nfe)
    assert switch_points(switches) == [(pytest.approx(-0.55), 20.0, 14.0), (pytest.approx(0.45), 14.0, 20.0)]
    assert [(s.u_start, s.level) for s in segments] == [
        (-2.0, 20.0),
        (pytest.approx(-0.55), 14.0),
        (pytest.approx(0.45), 20.0),
    ]


def test_three_switches():
    nfe = np.select([U < -1.0, U < 0.0, U < 1.2], [26, 20, 14], 20)
    switches, _ = level_switches(U, nfe)
    assert switch_points(switches) == [
        (pytest.approx(-1.05), 26.0, 20.0),
        (pytest.approx(-0.05), 20.0, 14.0),
        (pytest.approx(1.15), 14.0, 20.0),
    ]


def test_every_change_between_neighbours_of_an_integer_profile_is_a_switch_and_nothing_else():
    rng = np.random.default_rng(3)
    nfe = 14 + 6 * np.repeat(rng.integers(0, 3, size=9), rng.integers(2, 7, size=9))[:41]
    nfe = np.pad(nfe, (0, 41 - len(nfe)), mode="edge")
    changes = [float((U[k] + U[k + 1]) / 2) for k in range(40) if nfe[k] != nfe[k + 1]]
    switches, _ = level_switches(U, nfe)
    assert [s.u for s in switches] == pytest.approx(changes)


def test_noisy_levels_give_the_true_switches_and_noise_alone_gives_none():
    clean = np.where((U > -0.55) & (U < 0.45), 14.0, 20.0)
    noisy = clean + np.random.default_rng(3).normal(0, 1.0, size=41)
    switches, segments = level_switches(U, noisy)
    assert [s.u for s in switches] == pytest.approx([-0.55, 0.45], abs=0.1 + 1e-9)  # within one grid step
    assert [s.level for s in segments] == pytest.approx([20, 14, 20], abs=1)
    assert level_switches(U, 17 + np.random.default_rng(3).normal(0, 1.0, size=41))[0] == []
    assert noise_scale(noisy) == pytest.approx(1.0, abs=0.3)


def test_noisy_profiles_over_many_seeds():
    """Near the rates the docstring quotes (1,000 seeds: 6σ band found 96%, pure noise split 6%)."""
    clean = np.where((U > -0.55) & (U < 0.45), 14.0, 20.0)
    found = false_alarms = 0
    for seed in range(100):
        noise = np.random.default_rng(seed).normal(0, 1.0, size=41)
        switches, _ = level_switches(U, clean + noise)
        found += len(switches) == 2 and all(abs(s.u - t) <= 0.1 + 1e-9 for s, t in zip(switches, (-0.55, 0.45)))
        false_alarms += bool(level_switches(U, 17 + noise)[0])
    assert found >= 90 and false_alarms <= 10  # seeds 0-99: 94 and 5


def test_min_size_keeps_every_level_at_least_that_long():
    nfe = np.full(41, 20)
    nfe[10] = 26
    switches, _ = level_switches(U, nfe)
    assert [s.u for s in switches] == pytest.approx([-1.05, -0.95])  # one odd point is its own level
    _, segments = level_switches(U, nfe, min_size=3)
    assert min(s.points for s in segments) >= 3


def test_the_penalty_trades_fit_for_changes():
    noisy = np.where(U < 0, 14.0, 20.0) + np.random.default_rng(2).normal(0, 1.0, size=41)
    assert piecewise_constant(noisy, penalty=1e9) == []
    assert len(piecewise_constant(noisy, penalty=0.0)) > 5  # no penalty: noise becomes levels
    assert default_penalty(noisy) == pytest.approx(3 * noise_scale(noisy) ** 2 * np.log(41))
    assert 0 < default_penalty(np.where(U < 0, 14, 20)) < 1e-6  # plateaus: only a tie-breaker


def test_the_fit_is_the_exact_optimum():
    """Against every segmentation of a short profile."""
    y = np.random.default_rng(7).normal(0, 1, size=9).round(1)
    penalty = 0.8

    def total(breaks):
        bounds = [0, *breaks, len(y)]
        return sum(((y[a:b] - y[a:b].mean()) ** 2).sum() for a, b in zip(bounds[:-1], bounds[1:])) + penalty * len(
            breaks
        )

    best = min((list(c) for k in range(len(y)) for c in itertools.combinations(range(1, len(y)), k)), key=total)
    assert total(piecewise_constant(y, penalty)) == pytest.approx(total(best))


def test_bad_profiles():
    with pytest.raises(ValueError, match="finite"):
        piecewise_constant([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="min_size"):
        piecewise_constant([1.0, 2.0], min_size=0)
    with pytest.raises(ValueError, match="penalty"):
        piecewise_constant([1.0, 2.0], penalty=-1.0)
    with pytest.raises(ValueError, match="values of u"):
        level_switches([0.0, 1.0], [1.0])
    assert level_switches([], []) == ([], [])
    assert level_switches([0.0], [5.0])[0] == []
