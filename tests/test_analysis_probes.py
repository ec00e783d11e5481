from dataclasses import dataclass

import numpy as np
import pytest

from steering.analysis.probes import linear_probes


@dataclass
class Text:
    text: str
    label: int


def reviews(n):
    good = ["great fun, a wonderful film", "loved it, wonderful acting", "a great and moving story"]
    bad = ["awful, boring mess", "terrible acting, boring plot", "an awful waste of time"]
    return [Text(good[i % 3] + f" {i}", 1) for i in range(n)] + [Text(bad[i % 3] + f" {i}", 0) for i in range(n)]


def test_probes_separate_clearly_different_texts(small_hybrid, small_tokenizer):
    p = linear_probes(small_hybrid, small_tokenizer, reviews(30), taus=(0.0, 0.5, 1.0), max_reviews=60)
    assert p.taus.tolist() == [0.0, 0.5, 1.0]
    assert p.n_train + p.n_test == 60 and p.chance == pytest.approx(0.5)
    assert np.all(p.accuracy >= 0.9)  # word identity alone separates these
    assert np.all(p.train_accuracy >= p.accuracy - 0.1)


def test_probes_at_chance_when_labels_carry_nothing(small_hybrid, small_tokenizer):
    same = [Text("the same words every time", i % 2) for i in range(40)]
    p = linear_probes(small_hybrid, small_tokenizer, same, taus=(0.0, 1.0), max_reviews=40)
    assert np.all(p.accuracy <= 0.6)


def test_probes_bad_inputs(small_hybrid, small_tokenizer):
    with pytest.raises(ValueError, match="at least 4"):
        linear_probes(small_hybrid, small_tokenizer, reviews(2))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        linear_probes(small_hybrid, small_tokenizer, reviews(10), taus=(0.0, 1.5))
    with pytest.raises(ValueError, match="increasing"):
        linear_probes(small_hybrid, small_tokenizer, reviews(10), taus=(0.5, 0.25))
    with pytest.raises(ValueError, match="test_fraction"):
        linear_probes(small_hybrid, small_tokenizer, reviews(10), test_fraction=1.0)
