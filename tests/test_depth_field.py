"""The depth-varying field (steering/model/depth_field.py): weights that are polynomials in τ, RK4's error estimate,
and a checkpoint that saves and loads."""

import numpy as np
import pytest
import torch

from steering.model.depth_field import legendre_basis
from steering.model.ode import ADAPTIVE_SOLVERS, SolverConfig, rk4_error_estimate, solve_block
from steering.model.transformer import ModelConfig
from steering.training.checkpoint import load_checkpoint, save_checkpoint


def test_the_basis_is_the_shifted_legendre_polynomials():
    like = torch.zeros(())
    assert torch.allclose(legendre_basis(1.0, 5, like), torch.ones(5))
    assert torch.allclose(legendre_basis(0.0, 5, like), torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0]))
    # orthogonal on [0, 1]: ∫ P_j P_k dτ = δ_jk / (2k + 1), by Gauss-Legendre quadrature
    nodes, weights = np.polynomial.legendre.leggauss(8)
    taus, weights = (nodes + 1) / 2, weights / 2
    table = torch.stack([legendre_basis(float(t), 4, like) for t in taus]).double()
    gram = table.T @ torch.diag(torch.tensor(weights)) @ table
    assert torch.allclose(gram, torch.diag(torch.tensor([1.0, 1 / 3, 1 / 5, 1 / 7], dtype=torch.float64)), atol=1e-6)


def test_the_field_changes_with_depth_only_through_its_higher_coefficients(small_depth_hybrid):
    field = small_depth_hybrid.field
    h = torch.randn(1, 5, field.d_model)
    u = torch.zeros(1, 2)
    with torch.no_grad():
        assert not torch.allclose(field(0.0, h, u), field(1.0, h, u), atol=1e-3)
        for name in field.shapes:
            getattr(field, name)[1:].zero_()
        assert torch.allclose(field(0.0, h, u), field(1.0, h, u), atol=1e-6)


def test_a_depth_varying_block_bends_its_paths_and_one_euler_step_misses(small_depth_hybrid):
    model = small_depth_hybrid
    h0 = model.encode(torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0)))
    u = torch.zeros(1, 2)
    with torch.no_grad():
        reference = model.middle(h0, u, SolverConfig("dopri5", rtol=1e-7, atol=1e-9)).final
        rk4 = model.middle(h0, u).final  # its training solver: RK4, one step
        euler = model.middle(h0, u, SolverConfig("euler", steps=1)).final
    assert model.training_solver == SolverConfig("rk4", steps=1)
    assert (rk4 - reference).norm() < 0.2 * (euler - reference).norm()


def test_the_rk4_error_estimate_is_rk4_minus_ralstons_second_order_step(small_depth_hybrid):
    model = small_depth_hybrid
    h0 = model.encode(torch.randint(0, model.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(1)))
    u = torch.tensor([[1.0, 0.0], [-1.0, 0.5]])
    with torch.no_grad():
        solve = solve_block(model.field, h0, u, SolverConfig("rk4", steps=1), record_outputs=True)
        k1, k2, k3, k4 = solve.field_outputs
        rk4 = h0 + (k1 + 3 * k2 + 3 * k3 + k4) / 8
        ralston = h0 + (k1 + 3 * k3) / 4
        assert torch.allclose(solve.final, rk4, atol=1e-5)
        expected = (rk4 - ralston).pow(2).sum(-1).mean() / h0.pow(2).sum(-1).mean()
        assert torch.allclose(rk4_error_estimate(solve.field_outputs, h0, 1), expected, rtol=1e-4)
        # a field constant along the path has no error to estimate
        constant = [k1] * 4
        assert float(rk4_error_estimate(constant, h0, 1)) < 1e-12
    with pytest.raises(ValueError, match="4 times"):
        rk4_error_estimate(solve.field_outputs[:3], h0, 1)


def test_the_model_trains_with_its_penalty_and_round_trips_through_a_checkpoint(
    small_depth_hybrid, small_tokenizer, tmp_path
):
    model = small_depth_hybrid.train()
    idx = torch.randint(0, model.config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(2))
    logits, penalties = model(idx, torch.zeros(2, 2))
    assert set(penalties) == {"solver_error"} and float(penalties["solver_error"].detach()) > 0
    penalties["solver_error"].backward()
    assert model.field.fc_out_weight.grad.abs().sum() > 0
    model.eval()
    save_checkpoint(model, tmp_path, small_tokenizer, {})
    loaded, _, config = load_checkpoint(tmp_path)
    assert config["model"]["field_basis"] == 4 and config["model"]["solver"] == "rk4"
    with torch.no_grad():  # weights are stored in 16 bits (checkpoint.py)
        assert torch.allclose(loaded(idx, torch.ones(2, 2) * 1.5)[0], model(idx, torch.ones(2, 2) * 1.5)[0], atol=2e-3)


def test_the_reference_penalty_is_the_distance_to_a_finer_rk4_solve(small_depth_hybrid):
    """With reference_steps the penalty is |RK4-1(H0) - RK4-N(H0)|² / |H0|²: the one-step solve's real error
    (N -> inf: the flow), with its gradient through the trained solve only."""
    model = small_depth_hybrid.train()
    idx = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(3))
    u = torch.tensor([[2.0, 0.0], [-1.0, 1.0]])
    _, penalties = model(idx, u, reference_steps=8)
    with torch.no_grad():
        h0 = model.encode(idx)
        one = model.middle(h0, u, SolverConfig("rk4", steps=1)).final
        fine = model.middle(h0, u, SolverConfig("rk4", steps=8)).final
        flow = model.middle(h0, u, SolverConfig("dopri5", rtol=1e-7, atol=1e-9)).final
    expected = (one - fine).pow(2).sum(-1).mean() / h0.pow(2).sum(-1).mean()
    assert torch.allclose(penalties["solver_error"].detach(), expected, rtol=1e-4)
    # the finer solve stands for the flow: RK4-8 lies far nearer dopri5 than RK4-1 does
    assert (fine - flow).norm() < 0.05 * (one - flow).norm()
    penalties["solver_error"].backward()
    assert model.field.fc_out_weight.grad.abs().sum() > 0
    model.zero_grad()
    _, estimated = model(idx, u)  # without it, the embedded estimate: another number
    assert not torch.allclose(estimated["solver_error"].detach(), expected, rtol=1e-2)


def test_a_depth_varying_field_refuses_what_it_does_not_have():
    with pytest.raises(ValueError, match="attends"):
        ModelConfig(field_basis=4, field_heads=0)
    with pytest.raises(ValueError, match="attends"):
        ModelConfig(field_basis=4, field_heads=4, field_norm="entry")
    with pytest.raises(ValueError, match="fixed-step"):
        ModelConfig(solver="dopri5")


def test_the_rk4_error_penalty_comes_on_without_a_jump():
    """D3's linear ramp put 0.5 % of the weight on the penalty's first step and that step exploded; the
    squared ramp starts at 0, moves each step by at most 2/ramp of the weight and ends at the full weight."""
    from dataclasses import replace

    from steering.training.train import _solver_error_share, make_config

    cfg = replace(make_config(), solver_error_start=200, solver_error_ramp=400)
    shares = [_solver_error_share(step, cfg) for step in range(0, 1000)]
    assert shares[:201] == [0.0] * 201 and shares[600:] == [1.0] * 400
    steps = [b - a for a, b in zip(shares, shares[1:])]
    assert min(steps) >= 0 and max(steps) <= 2 / 400 + 1e-12
    assert shares[201] < 1e-4 < _solver_error_share(201, replace(cfg, solver_error_ramp=0))


def test_the_overlap_penalty_is_refused_for_a_depth_varying_field():
    from steering.training.train import make_config

    with pytest.raises(ValueError, match="overlap-weight applies to the shared-weight field"):
        make_config("tiny", field_basis=2, field_heads=2, overlap_weight=1.0)
    assert make_config("tiny", field_basis=2, field_heads=2).overlap_weight == 0


@pytest.mark.parametrize("method", ADAPTIVE_SOLVERS)
def test_adaptive_solvers_never_evaluate_the_field_past_the_depth_it_was_trained_on(small_depth_hybrid, method):
    # torchdiffeq's last step would run past τ = 1 and interpolate back: the field's weights there are extrapolated
    model = small_depth_hybrid
    h0 = model.encode(torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(2)))
    u = torch.tensor([[1.5, 0.0]])
    with torch.no_grad():
        solve = solve_block(model.field, h0, u, SolverConfig(method, rtol=1e-3, atol=1e-4), tau=[0.0, 0.5, 1.0])
        reference = model.middle(h0, u, SolverConfig("dopri5", rtol=1e-7, atol=1e-9)).final
    assert max(solve.eval_taus) == pytest.approx(1.0, abs=1e-6)  # it reaches τ = 1 (float32) and no further
    assert (solve.final - reference).norm() < 1e-2 * reference.norm()
