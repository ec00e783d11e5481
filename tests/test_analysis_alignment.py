"""The alignment claim over prompts: distances, aligned share, and the shuffled-u and swapped nulls."""

import numpy as np
import pytest

from steering.analysis.alignment import alignment_statistics, nearest_distance, regimes_over_prompts
from steering.analysis.regimes import nfe_regimes

SWITCHES = [-0.55, 0.45]


def test_crossovers_on_their_switches_beat_chance():
    crossovers = [-0.55, 0.45, -0.5, 0.4, -0.6, 0.5, -0.55, 0.45, -0.52, 0.47]
    s = alignment_statistics(crossovers, [SWITCHES] * 10, (-2.0, 2.0), draws=4000)
    assert s["aligned_share"] == 1.0 and s["median_distance"] == pytest.approx(0.05, abs=0.03)
    # a random u in [-2, 2] lies within 0.1 of one of two switches with probability 0.4 / 4
    assert s["null_aligned_share"] == pytest.approx(0.1, abs=0.01)
    assert s["p_aligned_share"] == pytest.approx(1 / 4001)  # no draw puts all ten on a switch
    assert s["null_median_distance"] > 0.4 and s["p_median_distance"] == pytest.approx(1 / 4001)
    assert (s["n_prompts"], s["n_with_crossover"], s["n_with_switches"], s["n_measured"]) == (10, 10, 10, 10)


def test_crossovers_inside_the_band_are_not_aligned():
    crossovers = [-0.03, 0.0, 0.05, -0.1]
    s = alignment_statistics(crossovers, [SWITCHES] * 4, (-2.0, 2.0))
    assert s["aligned_share"] == 0.0 and s["median_distance"] == pytest.approx(0.45)  # 0.48, 0.45, 0.40, 0.45
    assert s["p_aligned_share"] == 1.0  # every draw is at least as aligned as 0 %


def test_the_null_median_of_one_central_switch_is_half_the_range():
    # a uniform u in [-2, 2] is uniformly 0 to 2 from a switch at 0: median 1
    s = alignment_statistics([0.3] * 25, [[0.0]] * 25, (-2.0, 2.0), draws=500, seed=1)
    assert s["null_median_distance"] == pytest.approx(1.0, abs=0.05)
    assert s["null_aligned_share"] == pytest.approx(0.05, abs=0.01)
    assert s["median_distance"] == pytest.approx(0.3)


def test_missing_crossovers_and_switches():
    s = alignment_statistics([None, 0.1, 0.5], [[0.0], [], [0.45]], (-2.0, 2.0), draws=100)
    assert (s["n_prompts"], s["n_with_crossover"], s["n_with_switches"], s["n_measured"]) == (3, 2, 2, 1)
    assert s["aligned_share"] == 0.5  # the prompt without a switch is not aligned
    assert s["median_distance"] == pytest.approx(0.05)
    # swapped: 0.1 against {0.0} (0.1, aligned) and {0.45}; 0.5 against {0.0} and {} (not aligned)
    assert s["swapped_aligned_share"] == pytest.approx(1 / 4)
    assert s["swapped_median_distance"] == pytest.approx(0.35)
    empty = alignment_statistics([None, None], [[0.0], []], (-2.0, 2.0))
    assert empty["aligned_share"] is None and empty["null_aligned_share"] is None and empty["n_with_crossover"] == 0
    assert nearest_distance(0.2, []) is None and nearest_distance(None, [0.1]) is None
    assert nearest_distance(0.2, [0.1, -1.0]) == pytest.approx(0.1)


def test_the_null_is_seeded_and_inputs_checked():
    a = alignment_statistics([0.3, -0.2], [SWITCHES, SWITCHES], (-2.0, 2.0), draws=200, seed=5)
    assert a == alignment_statistics([0.3, -0.2], [SWITCHES, SWITCHES], (-2.0, 2.0), draws=200, seed=5)
    with pytest.raises(ValueError, match="switch lists"):
        alignment_statistics([0.1], [], (-2.0, 2.0))
    with pytest.raises(ValueError, match="u_range"):
        alignment_statistics([0.1], [[0.0]], (2.0, -2.0))
    with pytest.raises(ValueError, match="draws"):
        alignment_statistics([0.1], [[0.0]], (-2.0, 2.0), draws=0)


def test_regimes_over_prompts_is_nfe_regimes_prompt_by_prompt(small_hybrid, small_tokenizer):
    grid = np.linspace(-2, 2, 5)
    prompts = ["The movie was", "The plot was"]
    a = regimes_over_prompts(small_hybrid, small_tokenizer, prompts, grid, draws=50, prompt_set="test")
    assert [row.prompt for row in a.prompts] == prompts and a.seconds > 0
    for row in a.prompts:
        alone = nfe_regimes(small_hybrid, small_tokenizer, row.prompt, grid)
        assert list(row.nfe) == list(alone.nfe["dopri5"]) and row.crossover_u == alone.crossover_u
        assert [s.u for s in row.switches] == [s.u for s in alone.switches]
        assert row.distance == nearest_distance(alone.crossover_u, [s.u for s in alone.switches])
    assert a.stats["n_prompts"] == 2 and a.stats["null_draws"] == 50
    out = a.to_dict()
    assert out["prompt_set"] == "test" and len(out["prompts"]) == 2 and "aligned_share" in out
    with pytest.raises(ValueError, match="prompt"):
        regimes_over_prompts(small_hybrid, small_tokenizer, [], grid)


@pytest.mark.parametrize("fixture", ["small_hybrid", "small_depth_hybrid"])
def test_the_batched_float64_alignment_is_nfe_regimes_in_float64(fixture, small_tokenizer, request, monkeypatch):
    """The Regimes page's alignment (precision float64: every u of a prompt in one batch) counts each prompt's
    NFE as the batched sweep does for that prompt alone."""
    from steering.analysis import alignment

    model = request.getfixturevalue(fixture)
    grid = np.linspace(-2, 2, 9)
    prompts = ["The movie was", "The plot was"]
    asked = []
    monkeypatch.setattr(
        alignment, "nfe_regimes", lambda *a, **kw: asked.append(kw["precision"]) or nfe_regimes(*a, **kw)
    )
    a = regimes_over_prompts(model, small_tokenizer, prompts, grid, draws=20, precision="float64")
    assert asked == ["float64", "float64"]  # each prompt batched, none one u at a time
    for row in a.prompts:
        alone = nfe_regimes(model, small_tokenizer, row.prompt, grid, precision="float64")
        assert list(row.nfe) == list(alone.nfe["dopri5"]) and row.crossover_u == pytest.approx(alone.crossover_u)
