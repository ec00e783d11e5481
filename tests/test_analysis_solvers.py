import numpy as np
import pytest

from steering.analysis.solvers import compare_solvers, relative_divergence
from steering.model.ode import SolverConfig

REFERENCE = SolverConfig("dopri5", rtol=1e-7, atol=1e-9)


def test_divergence_shrinks_as_fixed_steps_grow(small_hybrid, small_tokenizer):
    finals = [
        compare_solvers(
            small_hybrid,
            small_tokenizer,
            "The movie was",
            [1.5, 0.0],
            SolverConfig("euler", steps=n),
            REFERENCE,
            n_tau=9,
        ).final_divergence
        for n in (1, 2, 4, 8, 16)
    ]
    assert all(b < a for a, b in zip(finals, finals[1:])), finals
    assert finals[-1] < finals[0] / 8  # first order: 16x the steps, about 1/16 the error
    assert finals[0] > 1e-6


def test_divergence_starts_at_zero_and_vanishes_for_one_solver(small_hybrid, small_tokenizer):
    c = compare_solvers(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], n_tau=17)
    assert c.divergence.shape == (17,) and c.divergence[0] == 0.0 and c.final_divergence == c.divergence[-1]
    assert c.a.nfe == 4 and c.b.nfe > 4
    same = compare_solvers(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], "rk4", "rk4", n_tau=5)
    assert np.all(same.divergence == 0.0)


def test_relative_divergence_by_hand():
    a = np.array([[[3.0, 4.0]], [[1.0, 0.0]]])
    b = np.array([[[0.0, 0.0 + 5.0]], [[2.0, 0.0]]])
    assert relative_divergence(a, b) == pytest.approx([np.hypot(3, 1) / 5, 0.5])
