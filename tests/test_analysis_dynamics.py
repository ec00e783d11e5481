import copy

import numpy as np
import pytest
import torch

from steering.analysis.dynamics import (
    _bound_field,
    contraction,
    convergence,
    convergence_study,
    fitted_order,
    symmetric_top_eigenvalues,
)
from steering.analysis.inputs import prompt_tensor
from steering.model.ode import SolverConfig


def smooth_field(t, h):
    return torch.sin(h) * torch.cos(3 * t) - 0.5 * h


def test_euler_and_rk4_converge_at_their_orders_on_a_smooth_field():
    result = convergence_study(smooth_field, torch.tensor([0.3, -1.2, 2.0]), max_steps=64)
    assert result.steps.tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert result.euler_order == pytest.approx(1.0, abs=0.2)
    assert result.rk4_order == pytest.approx(4.0, abs=0.5)
    assert np.all(np.diff(result.euler_error) < 0) and result.reference_error < 1e-10
    assert result.reference_nfe > 0


def test_fitted_order_ignores_errors_under_the_floor():
    steps = np.array([1, 2, 4, 8, 16])
    errors = np.array([1e-2, 1e-3 / 1.6, 1e-3 / 25.6, 1e-9, 1e-9])
    assert fitted_order(steps, errors, floor=1e-8) == pytest.approx(4.0)
    assert np.isnan(fitted_order(steps, np.full(5, 1e-12), floor=1e-8))


def test_model_convergence_reports_both_orders(small_hybrid, small_tokenizer):
    c = convergence(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], max_steps=16)
    assert c.euler_order == pytest.approx(1.0, abs=0.2)
    assert c.rk4_order == pytest.approx(4.0, abs=0.8)
    assert np.all(c.rk4_error[:3] < c.euler_error[:3])
    with pytest.raises(ValueError, match="max_steps"):
        convergence(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], max_steps=1)
    with pytest.raises(ValueError, match="reference_tol"):
        convergence(small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], reference_tol=0.5)


def test_lanczos_top_eigenvalue_matches_the_exact_jacobian(small_hybrid, small_tokenizer):
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    with torch.no_grad():
        h = small_hybrid.encode(idx)
    f = _bound_field(small_hybrid.field, torch.tensor([[1.0, 0.0]]), h)
    tau = torch.tensor(0.4)
    d = h.shape[-1]
    lanczos = symmetric_top_eigenvalues(f, tau, h, iterations=d, generator=torch.Generator().manual_seed(1))
    jac = torch.autograd.functional.jacobian(lambda x: f(tau, x), h, vectorize=True)[
        0, :, :, 0
    ]  # [tokens, d, tokens, d]
    exact = [
        np.linalg.eigvalsh(0.5 * (b + b.T)).max() for b in (jac[k, :, k, :].double().numpy() for k in range(h.shape[1]))
    ]
    assert np.allclose(lanczos, exact, rtol=1e-3, atol=1e-5)
    assert not np.allclose(exact, exact[0])  # tokens do differ


def test_perturbation_growth_matches_finite_differences(small_hybrid, small_tokenizer):
    c = contraction(
        small_hybrid, small_tokenizer, "The movie was", [1.0, 0.0], n_tau=17, n_probes=1, lanczos_iterations=8, seed=0
    )
    idx, _ = prompt_tensor(small_hybrid, small_tokenizer, "The movie was")
    model64 = copy.deepcopy(small_hybrid).double()
    with torch.no_grad():
        h0 = model64.encode(idx)
        v0 = torch.randn(h0.shape, generator=torch.Generator().manual_seed(0)).double()
        v0 = v0 / v0.norm()
        eps = 1e-6
        solver = SolverConfig("rk4", steps=16)
        u = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
        base = model64.middle(h0, u, solver).final
        moved = model64.middle(h0 + eps * v0, u, solver).final
    measured = float(torch.log((moved - base).norm() / eps))
    assert c.log_growth[0, -1] == pytest.approx(measured, abs=2e-3)
    assert c.ftle[-1] == pytest.approx(c.log_growth[0, -1], abs=1e-9)
    # the growth rate of any perturbation is bounded by the top eigenvalue of the symmetric part
    assert np.all(c.growth_rate <= c.top_symmetric_eigenvalue + 1e-4)
    assert c.token_top_eigenvalue.shape == (17, idx.shape[1])


def test_contraction_bad_inputs(small_hybrid, small_discrete, small_tokenizer):
    with pytest.raises(ValueError, match="discrete"):
        contraction(small_discrete, small_tokenizer, "x", [0.0, 0.0])
    with pytest.raises(ValueError, match="n_tau"):
        contraction(small_hybrid, small_tokenizer, "x", [0.0, 0.0], n_tau=1)
    with pytest.raises(ValueError, match="n_probes"):
        contraction(small_hybrid, small_tokenizer, "x", [0.0, 0.0], n_probes=0)


def test_a_token_mixing_field_gets_the_top_eigenvalue_of_the_whole_state(small_mixing_hybrid, small_tokenizer):
    """Its Jacobian couples the tokens: per-token Lanczos would miss the cross terms; the exact
    eigenvalue of the full symmetric part (dense, via autograd) is what the whole-state run must find."""
    from steering.analysis.dynamics import _bound_field, symmetric_top_eigenvalues

    model = small_mixing_hybrid
    idx, _ = prompt_tensor(model, small_tokenizer, "The movie was")
    control = torch.tensor([[1.0, 0.0]])
    with torch.no_grad():
        h = model.encode(idx)
    f = _bound_field(model.field, control, h)
    tau = torch.tensor(0.5)
    jac = torch.autograd.functional.jacobian(lambda x: f(tau, x.view(h.shape)).flatten(), h.flatten())
    exact = float(torch.linalg.eigvalsh(0.5 * (jac + jac.T).double())[-1])
    size = h.numel()
    top = symmetric_top_eigenvalues(
        f, tau, h, iterations=size, generator=torch.Generator().manual_seed(0), per_token=False
    )
    assert top.shape == (1,) and top[0] == pytest.approx(exact, rel=1e-3, abs=1e-5)
    c = contraction(model, small_tokenizer, "The movie was", [1.0, 0.0], n_tau=5, n_probes=1, lanczos_iterations=8)
    assert c.token_top_eigenvalue.shape == (5, 1)
    assert np.all(c.growth_rate <= c.top_symmetric_eigenvalue + 1e-4)
