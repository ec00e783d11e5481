import numpy as np
import pytest
import torch

from steering.analysis.inputs import prompt_tensor
from steering.analysis.lens import depth_lens
from steering.model.ode import SolverConfig


@pytest.mark.parametrize("solver", [SolverConfig("euler", steps=4), SolverConfig("rk4", steps=2)])
def test_lens_at_tau_one_is_the_models_own_output(small_hybrid, small_tokenizer, solver):
    lens = depth_lens(
        small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], solver, n_tau=5, top_k=4, all_positions=True
    )
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    with torch.no_grad():
        logits, _ = small_hybrid(idx, torch.tensor([[1.0, 0.0]]), solver)
    probs = logits[0].softmax(-1)
    top = torch.topk(probs[-1], 4)
    assert np.allclose(lens.top_probs[-1], top.values.numpy(), atol=1e-6)
    assert lens.top_tokens[-1] == [small_tokenizer.decode([i]) for i in top.indices.tolist()]
    assert np.allclose(lens.position_top_probs[-1], probs.max(-1).values.numpy(), atol=1e-6)
    # every shown token's row agrees with its top-k entries
    for t in range(5):
        for token_id, p in zip(lens.top_token_ids[t], lens.top_probs[t]):
            assert lens.shown_probs[t, lens.shown_token_ids.index(token_id)] == pytest.approx(p)
    assert lens.shown_probs.shape == (5, len(lens.shown_tokens)) and 4 <= len(lens.shown_tokens) <= 20


def test_lens_at_tau_zero_skips_the_block(small_hybrid, small_tokenizer):
    lens = depth_lens(small_hybrid, small_tokenizer, "The movie was", [2.0, 0.0], n_tau=3, top_k=3)
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    with torch.no_grad():
        direct = small_hybrid.decode(small_hybrid.encode(idx))[0, -1].softmax(-1)
    assert np.allclose(lens.top_probs[0], torch.topk(direct, 3).values.numpy(), atol=1e-6)
    assert lens.position_top_probs is None
    with pytest.raises(ValueError, match="top_k"):
        depth_lens(small_hybrid, small_tokenizer, "x", [0, 0], top_k=0)
