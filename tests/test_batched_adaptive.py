"""The batched adaptive solver (each sample on its own steps) against torchdiffeq solving one sample at a time."""

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torchdiffeq import odeint

from steering.analysis.inputs import prompt_tensor
from steering.model.batched_adaptive import solve_adaptive_batch
from steering.model.batched_field import batched_field, float_copy
from steering.model.ode import SolverStepLimitError

SHIPPED = Path(__file__).resolve().parent.parent / "assets" / "hybrid"


class _Counted(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.calls, self.decisions, self.taus = f, 0, [], []

    def forward(self, t, y):
        self.calls += 1
        self.taus.append(float(t))
        return self.f(t, y)

    def callback_accept_step(self, t0, y0, dt):
        self.decisions.append(True)

    def callback_reject_step(self, t0, y0, dt):
        self.decisions.append(False)


@torch.no_grad()
def _torchdiffeq(field, h0, u, rtol, atol, method="dopri5", past_end=False) -> _Counted:
    """One sample alone, through torchdiffeq.odeint on the field module's own forward."""
    counted = _Counted(field.bind(torch.tensor([[u, 0.0]], dtype=h0.dtype), h0))
    options = {} if past_end else {"step_t": torch.tensor([1.0], dtype=torch.float64)}
    odeint(counted, h0, torch.tensor([0.0, 1.0], dtype=h0.dtype), method=method, rtol=rtol, atol=atol, options=options)
    return counted


def _setup(model, tok, us, dtype, prompt="The movie was"):
    idx, _ = prompt_tensor(model, tok, prompt)
    with torch.no_grad():
        h0 = model.encode(idx).to(dtype)
    field = float_copy(model.field, dtype)
    controls = torch.tensor([[u, 0.0] for u in us], dtype=dtype)
    batch = batched_field(field, controls, h0)
    return field, h0, batch, h0.expand(len(us), *h0.shape[1:]).contiguous()


def _assert_same_counts(field, h0, batch, y0, us, t, method="dopri5", past_end=False):
    solve = solve_adaptive_batch(batch, y0, t, t / 10, method, past_end=past_end)
    for j, u in enumerate(us):
        ref = _torchdiffeq(field, h0, u, t, t / 10, method, past_end)
        assert (solve.nfe[j], solve.decisions[j]) == (ref.calls, ref.decisions), (method, t, u)
    return solve


@pytest.mark.parametrize("fixture", ["small_depth_hybrid", "small_mixing_hybrid", "small_entry_hybrid"])
def test_the_batched_field_is_the_fields_own_forward_at_each_samples_tau(fixture, request, small_tokenizer):
    model = request.getfixturevalue(fixture)
    us = [-2.0, -0.5, 0.0, 1.0, 1.7]
    field, h0, batch, y0 = _setup(model, small_tokenizer, us, torch.float64)
    taus = torch.tensor([0.0, 0.13, 0.5, 0.99, 1.0], dtype=torch.float64)
    states = y0 + 0.1 * torch.randn_like(y0)
    out = batch(taus, states)
    with torch.no_grad():
        for j, u in enumerate(us):
            own = field.bind(torch.tensor([[u, 0.0]], dtype=torch.float64), h0)(taus[j], states[j : j + 1])
            torch.testing.assert_close(out[j : j + 1], own, rtol=1e-12, atol=1e-13)
    # a subset of the samples, by index
    torch.testing.assert_close(batch(taus[[3, 1]], states[[3, 1]], torch.tensor([3, 1])), out[[3, 1]])


def test_float64_counts_equal_torchdiffeqs_one_u_at_a_time_on_a_depth_field(small_depth_hybrid, small_tokenizer):
    us = [-2.0, -1.2, -0.3, 0.0, 0.8, 1.5, 2.0]
    field, h0, batch, y0 = _setup(small_depth_hybrid, small_tokenizer, us, torch.float64)
    levels = set()
    for t in (1e-2, 1e-4, 1e-6, 1e-8):
        solve = _assert_same_counts(field, h0, batch, y0, us, t)
        levels |= set(solve.nfe.tolist())
        assert np.allclose(solve.final_tau, 1.0) and solve.max_tau.max() <= 1.0
    assert len(levels) >= 4  # the tolerances reach different counts: the comparison is not trivial
    # torchdiffeq's default end (past τ = 1, then interpolated back) is matched too
    past = _assert_same_counts(field, h0, batch, y0, us, 1e-3, past_end=True)
    assert past.max_tau.max() > 1.0


def test_each_sample_is_solved_as_if_alone(small_depth_hybrid, small_tokenizer):
    # per-sample error norms: a sample's steps do not depend on which others share its batch
    us = [-2.0, -0.7, 0.0, 0.9, 2.0]
    _, _, batch, y0 = _setup(small_depth_hybrid, small_tokenizer, us, torch.float64)
    together = solve_adaptive_batch(batch, y0, 1e-6, 1e-7)
    for j in range(len(us)):
        alone = solve_adaptive_batch(lambda tau, h, select, j=j: batch(tau, h, select + j), y0[j : j + 1], 1e-6, 1e-7)
        assert alone.steps[0] == together.steps[j] and alone.decisions[0] == together.decisions[j]
        torch.testing.assert_close(alone.final[0], together.final[j], rtol=1e-12, atol=1e-13)
    # one tolerance per sample: rows of the map in one batch, each as if solved on its own
    tols = torch.tensor([1e-3, 1e-6, 1e-3, 1e-6, 1e-3], dtype=torch.float64)
    mixed = solve_adaptive_batch(batch, y0, tols, tols / 10)
    loose = solve_adaptive_batch(batch, y0, 1e-3, 1e-4)
    for j in range(len(us)):
        same = loose if tols[j] == 1e-3 else together
        assert mixed.steps[j] == same.steps[j] and mixed.decisions[j] == same.decisions[j]


@pytest.mark.parametrize("method", ["bosh3", "adaptive_heun"])
def test_the_other_adaptive_methods_count_as_torchdiffeq_does(method, small_depth_hybrid, small_tokenizer):
    us = [-1.5, 0.0, 1.5]
    field, h0, batch, y0 = _setup(small_depth_hybrid, small_tokenizer, us, torch.float64)
    for t in (1e-2, 1e-4):
        _assert_same_counts(field, h0, batch, y0, us, t, method)


def test_float32_is_a_toggle_with_torchdiffeqs_counts_where_round_off_does_not_decide(
    small_depth_hybrid, small_tokenizer
):
    us = [-2.0, 0.0, 2.0]
    field, h0, batch, y0 = _setup(small_depth_hybrid, small_tokenizer, us, torch.float32)
    assert next(field.parameters()).dtype == torch.float32 and y0.dtype == torch.float32
    for t in (1e-2, 1e-3):
        solve = _assert_same_counts(field, h0, batch, y0, us, t)
        assert solve.final.dtype == torch.float32
    # the copy is float64 only where asked: the model keeps its own weights
    assert next(small_depth_hybrid.parameters()).dtype == torch.float32
    assert float_copy(small_depth_hybrid.field, torch.float64) is not small_depth_hybrid.field


def test_the_step_cap_raises_as_torchdiffeqs_does(small_depth_hybrid, small_tokenizer):
    _, _, batch, y0 = _setup(small_depth_hybrid, small_tokenizer, [0.0, 1.0], torch.float64)
    solve = solve_adaptive_batch(batch, y0, 1e-6, 1e-7)
    most = int(max(len(s) for s in solve.steps))
    assert solve_adaptive_batch(batch, y0, 1e-6, 1e-7, max_steps=most).nfe.max() == solve.nfe.max()
    with pytest.raises(SolverStepLimitError, match="max_steps"):
        solve_adaptive_batch(batch, y0, 1e-6, 1e-7, max_steps=most - 1)


@pytest.mark.skipif(not (SHIPPED / "model.safetensors").exists(), reason="the shipped checkpoint is not here")
def test_float64_counts_equal_torchdiffeqs_on_the_shipped_model():
    from steering.training.checkpoint import load_checkpoint

    model, tok, _ = load_checkpoint(SHIPPED)
    us = [-2.0, 0.0, 2.0]  # the float64 regimes at t = 1e-5: 32 NFE at small |u|, 44 at the ends
    field, h0, batch, y0 = _setup(model, tok, us, torch.float64)
    field = copy.deepcopy(field)  # the reference runs the field module's own forward
    solve = _assert_same_counts(field, h0, batch, y0, us, 1e-5)
    assert solve.nfe.tolist() == [44, 32, 44]
