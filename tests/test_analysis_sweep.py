import numpy as np
import pytest
import torch

from steering.analysis.inputs import prompt_tensor
from steering.analysis.sweep import next_token_distribution, steering_sweep
from steering.model.ode import SolverConfig


def test_next_token_distribution_is_the_models_output(small_hybrid, small_tokenizer):
    tokens, probs = next_token_distribution(small_hybrid, small_tokenizer, "The movie was", [1.0, -0.5], top_k=7)
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    with torch.no_grad():
        logits, _ = small_hybrid(idx, torch.tensor([[1.0, -0.5]]))
    expected = torch.topk(logits[0, -1].softmax(-1), 7).values.numpy()
    assert len(tokens) == 7 and np.allclose(probs, expected, atol=1e-6)
    assert np.all(np.diff(probs) <= 0)


@pytest.mark.parametrize("solver", [SolverConfig("euler", steps=4), SolverConfig("dopri5", rtol=1e-5, atol=1e-6)])
def test_sweep_matches_one_u_at_a_time(small_hybrid, small_tokenizer, solver):
    grid = [-2.0, -0.5, 1.0, 2.0]
    s = steering_sweep(small_hybrid, small_tokenizer, "The movie was", [" good", " bad"], grid, solver=solver)
    assert s.probabilities.shape == (4, 2) and np.allclose(s.relative.sum(axis=1), 1.0)
    good_id = small_tokenizer.encode(" good", add_special_tokens=False).ids[0]
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    for i, u in enumerate(grid):
        with torch.no_grad():
            logits, _ = small_hybrid(idx, torch.tensor([[u, 0.0]]), solver)
        assert s.probabilities[i, 0] == pytest.approx(float(logits[0, -1].softmax(-1)[good_id]), rel=1e-4)
    jumps = np.abs(np.diff(s.probabilities, axis=0)).max()
    assert s.largest_jump == pytest.approx(jumps)


def test_style_axis_and_bad_inputs(small_hybrid, small_tokenizer):
    s = steering_sweep(small_hybrid, small_tokenizer, "The movie was", [" good"], [-1.0, 1.0], axis="style")
    assert s.axis == "style" and s.probabilities.shape == (2, 1)
    with pytest.raises(ValueError, match="empty"):
        steering_sweep(small_hybrid, small_tokenizer, "The movie was", [" good"], [])
    with pytest.raises(ValueError, match="target"):
        steering_sweep(small_hybrid, small_tokenizer, "The movie was", [], [0.0])
    with pytest.raises(ValueError, match="axis"):
        steering_sweep(small_hybrid, small_tokenizer, "The movie was", [" good"], [0.0], axis="tone")
    with pytest.raises(ValueError, match="top_k"):
        next_token_distribution(small_hybrid, small_tokenizer, "x", [0, 0], top_k=0)
