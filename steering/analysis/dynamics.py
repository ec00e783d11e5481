"""The flow's dynamics (second paper): does the learned field contract, and do solvers converge at their order?

Contraction. Along the trajectory H(τ) a small perturbation δ obeys dδ/dτ = J(τ) δ with
J = ∂(α·F)/∂H. We integrate H and a few random δ together (RK4 on the τ grid, J·δ by
forward-mode Jacobian-vector products) and report the finite-time Lyapunov exponent
λ(τ) = ln(|δ(τ)| / |δ(0)|) / τ. Negative: nearby paths approach each other. The rate
d ln|δ|/dτ = δᵀSδ / δᵀδ is bounded by the top eigenvalue of S = (J + Jᵀ)/2 (the one-sided
Lipschitz constant); we get that eigenvalue for each token by Lanczos on S·v = (Jv + Jᵀv)/2
(one JVP and one VJP per iteration). A per-token field acts on each token on its own, so J
is block-diagonal over tokens and the whole state's top eigenvalue is the largest of them;
a token-mixing field couples the tokens, so there Lanczos runs on the whole state at once.

Convergence. Error at τ = 1 of N-step Euler and RK4 against a tight dopri5 reference, in
float64 on a copy of the field (float32 round-off would flatten RK4's curve), and the
fitted order: the slope of -log error against log N, over the errors at least ten times
the reference's own error (measured against a 100x tighter dopri5). The reference runs at
rtol = atol = 1e-12 by default: at 1e-9 (the issue's suggestion) its own error, about
3e-9 relative on our models, hides RK4's error from N = 2 on and leaves no slope to fit.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torchdiffeq import odeint

from ..model.ode import SolverStepLimitError, adaptive_options
from .inputs import axis_control, control_vector, prompt_tensor, tau_grid, u_grid_array


def _bound_field(field, control: torch.Tensor, h0: torch.Tensor):
    """f(τ, H) = α·F(H, τ, u) on the path from h0 with u fixed, on a private copy so no shared
    model state is touched (h0 matters only to an entry-normalised field)."""
    own = copy.deepcopy(field)
    for p in own.parameters():
        p.requires_grad_(False)
    return own.bind(control, h0)


@dataclass
class Contraction:
    tau: np.ndarray  # [T]
    u: np.ndarray  # [2]
    log_growth: np.ndarray  # [probes, T] ln(|δ(τ)| / |δ(0)|)
    ftle: np.ndarray  # [T] mean over probes of log_growth / τ (at τ = 0: the rate there)
    growth_rate: np.ndarray  # [T] mean over probes of δᵀSδ / δᵀδ (instantaneous)
    top_symmetric_eigenvalue: np.ndarray  # [T] largest eigenvalue of S over all tokens
    token_top_eigenvalue: np.ndarray  # [T, tokens]; [T, 1] (the whole state) for a token-mixing field
    token_strings: list[str]

    @property
    def final_ftle(self) -> float:
        return float(self.ftle[-1])

    @property
    def contractive(self) -> bool:
        """S negative definite all along the path: every perturbation shrinks, in every direction."""
        return bool((self.top_symmetric_eigenvalue < 0).all())

    def to_dict(self) -> dict:
        return {
            "tau": self.tau,
            "u": self.u,
            "ftle": self.ftle,
            "final_ftle": self.final_ftle,
            "growth_rate": self.growth_rate,
            "top_symmetric_eigenvalue": self.top_symmetric_eigenvalue,
            "max_top_symmetric_eigenvalue": float(self.top_symmetric_eigenvalue.max()),
            "contractive": self.contractive,
            "token_strings": self.token_strings,
        }


def _per_token_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1, keepdim=True)


def _whole_state_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(dim=(-2, -1), keepdim=True)


def linearize(f, tau, h: torch.Tensor):
    """f(τ, h) and two linear maps at h: v -> J v and v -> Jᵀ v.

    Jᵀv is one reverse pass. J v is the reverse pass of the (linear in w) map w -> Jᵀw,
    built once per point: on CPU this is several times cheaper than forward-mode AD here.
    """
    # the fused CPU attention kernel has no second derivative; a token-mixing field needs the plain one
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        x = h.detach().requires_grad_(True)
        out = f(tau, x)
        w = torch.zeros_like(out, requires_grad=True)
        transposed = torch.autograd.grad(out, x, w, create_graph=True)[0]

    def jvp(v):
        with torch.enable_grad():
            jv = torch.autograd.grad(transposed, w, v, retain_graph=True, allow_unused=True)[0]
        return torch.zeros_like(v) if jv is None else jv

    def vjp(v):
        with torch.enable_grad():
            return torch.autograd.grad(out, x, v, retain_graph=True)[0]

    return out.detach(), jvp, vjp


def symmetric_top_eigenvalues(
    f,
    tau: torch.Tensor,
    h: torch.Tensor,
    iterations: int = 24,
    generator: torch.Generator | None = None,
    per_token: bool = True,
) -> np.ndarray:
    """Largest eigenvalue of S = (J + Jᵀ)/2 for each token of h [1, tokens, d]: Lanczos, all tokens at once.
    per_token=False (a field that mixes tokens): one eigenvalue, of S on the whole state.

    Full reorthogonalisation keeps the small Krylov basis orthogonal; with iterations = d
    (tokens x d for the whole state) the result is exact up to round-off.
    """
    dot = _per_token_dot if per_token else _whole_state_dot
    size = h.shape[-1] if per_token else h.shape[-1] * h.shape[-2]
    m = max(1, min(iterations, size))
    _, jvp, vjp = linearize(f, tau, h)

    def apply_s(v):
        return 0.5 * (jvp(v) + vjp(v))

    q = torch.randn(h.shape, generator=generator, dtype=h.dtype).to(h.device)
    q = q / dot(q, q).sqrt()
    basis, alphas, betas = [q], [], []
    for j in range(m):
        w = apply_s(basis[-1])
        alpha = dot(w, basis[-1])
        alphas.append(alpha)
        for b in basis:  # full reorthogonalisation
            w = w - dot(w, b) * b
        if j == m - 1:
            break
        beta = dot(w, w).sqrt()
        fresh = torch.randn(h.shape, generator=generator, dtype=h.dtype).to(h.device)
        for b in basis:
            fresh = fresh - dot(fresh, b) * b
        fresh = fresh / dot(fresh, fresh).sqrt()
        # an invariant subspace (beta ≈ 0): continue from a fresh orthogonal direction, decoupled
        invariant = beta < 1e-10 * alpha.abs().clamp_min(1.0)
        nxt = torch.where(invariant, fresh, w / beta.clamp_min(1e-30))
        betas.append(torch.where(invariant, torch.zeros_like(beta), beta))
        basis.append(nxt)
    a = torch.cat(alphas, dim=-1)[0].double().cpu().numpy()  # [tokens, m]
    b = torch.cat(betas, dim=-1)[0].double().cpu().numpy() if betas else np.zeros((a.shape[0], 0))
    tops = []
    for token in range(a.shape[0]):
        tri = np.diag(a[token]) + np.diag(b[token], 1) + np.diag(b[token], -1)
        tops.append(np.linalg.eigvalsh(tri)[-1])
    return np.array(tops)


@torch.no_grad()
def contraction(
    model,
    tok,
    prompt: str,
    u,
    n_tau: int = 33,
    n_probes: int = 4,
    lanczos_iterations: int = 24,
    seed: int = 0,
    axis: str = "sentiment",
) -> Contraction:
    """FTLE of random perturbations and the top eigenvalue of S along the path at control u."""
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous vector field")
    if not isinstance(n_probes, int) or n_probes < 1:
        raise ValueError(f"n_probes must be a positive integer, got {n_probes!r}")
    idx, strings = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    grid = tau_grid(n_tau).to(idx.device)
    h = model.encode(idx).expand(n_probes, -1, -1).contiguous()
    f = _bound_field(model.field, control.expand(n_probes, -1), h)
    f_one = _bound_field(model.field, control, h[:1])
    per_token = not model.field.mixes_tokens
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(h.shape, generator=gen).to(h.device)
    v = v / v.flatten(1).norm(dim=1).view(-1, 1, 1)
    log_norm = torch.zeros(n_probes, dtype=torch.float64)

    def rhs(tau, h_, v_):
        out, jvp, _ = linearize(f, tau, h_)
        return out, jvp(v_)

    def rate(tau, h_, v_):
        jv = rhs(tau, h_, v_)[1]
        return ((v_ * jv).flatten(1).sum(1) / (v_ * v_).flatten(1).sum(1)).double()

    log_growth, rates, tops = [log_norm.clone()], [rate(grid[0], h, v)], []
    tops.append(symmetric_top_eigenvalues(f_one, grid[0], h[:1], lanczos_iterations, gen, per_token))
    for t0, t1 in zip(grid[:-1], grid[1:]):
        dt = t1 - t0
        k1 = rhs(t0, h, v)
        k2 = rhs(t0 + dt / 2, h + dt / 2 * k1[0], v + dt / 2 * k1[1])
        k3 = rhs(t0 + dt / 2, h + dt / 2 * k2[0], v + dt / 2 * k2[1])
        k4 = rhs(t1, h + dt * k3[0], v + dt * k3[1])
        h = h + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        norms = v.flatten(1).norm(dim=1)
        log_norm = log_norm + norms.double().log().cpu()
        v = v / norms.view(-1, 1, 1)  # keep δ at unit size; its growth is in log_norm
        log_growth.append(log_norm.clone())
        rates.append(rate(t1, h, v))
        tops.append(symmetric_top_eigenvalues(f_one, t1, h[:1], lanczos_iterations, gen, per_token))
    log_growth = torch.stack(log_growth, dim=1).numpy()
    tau = grid.cpu().numpy().astype(float)
    growth_rate = torch.stack(rates).mean(dim=1).cpu().numpy()
    ftle = np.empty(len(tau))
    ftle[0] = growth_rate[0]
    ftle[1:] = log_growth[:, 1:].mean(axis=0) / tau[1:]
    token_tops = np.stack(tops)
    return Contraction(
        tau=tau,
        u=control[0].cpu().numpy().astype(float),
        log_growth=log_growth,
        ftle=ftle,
        growth_rate=growth_rate,
        top_symmetric_eigenvalue=token_tops.max(axis=1),
        token_top_eigenvalue=token_tops,
        token_strings=strings,
    )


def contraction_by_u(
    model, tok, prompt: str, u_values=(-1.0, 0.0, 1.0), axis: str = "sentiment", **kwargs
) -> list[Contraction]:
    """The same prompt under several controls on one axis, to compare the regimes."""
    return [contraction(model, tok, prompt, axis_control(u, axis), **kwargs) for u in u_grid_array(u_values)]


@dataclass
class Convergence:
    steps: np.ndarray  # [n] N = 1, 2, 4, ...
    euler_error: np.ndarray  # [n] ||H_N(1) - H_ref(1)|| / ||H_ref(1)||
    rk4_error: np.ndarray  # [n]
    euler_order: float  # fitted; nan when fewer than two errors clear the floor
    rk4_order: float
    reference_error: float  # the reference's own error (against one 100x tighter)
    floor: float  # errors below this are not used in the fits
    reference_nfe: int
    u: np.ndarray | None = None

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "euler_error": self.euler_error,
            "rk4_error": self.rk4_error,
            "euler_order": self.euler_order,
            "rk4_order": self.rk4_order,
            "reference_error": self.reference_error,
            "floor": self.floor,
            "reference_nfe": self.reference_nfe,
            "u": self.u,
        }


class _Counted:
    def __init__(self, f):
        self.f, self.nfe = f, 0

    def __call__(self, t, h):
        self.nfe += 1
        return self.f(t, h)


def integrate_to_one(
    f, h0: torch.Tensor, method: str, steps: int = 1, tol: float = 1e-9, max_steps: int = 20000
) -> torch.Tensor:
    """H(1) of dH/dτ = f(τ, H) from h0 at τ = 0, in h0's precision; adaptive solves keep the step cap.

    Takes tolerances below SolverConfig's 1e-12 floor: in float64 they are still meaningful.
    """
    t = torch.tensor([0.0, 1.0], dtype=h0.dtype, device=h0.device)
    if method in ("euler", "midpoint", "rk4"):
        return odeint(f, h0, t, method=method, options={"step_size": 1.0 / steps})[-1]
    try:
        return odeint(f, h0, t, method=method, rtol=tol, atol=tol, options=adaptive_options(max_steps))[-1]
    except AssertionError as err:
        if "max_num_steps" in str(err):
            raise SolverStepLimitError(
                f"{method} needed more than max_steps={max_steps} steps at "
                f"rtol=atol={tol:g}; loosen the tolerance or raise the step cap"
            ) from None
        raise


def fitted_order(steps: np.ndarray, errors: np.ndarray, floor: float) -> float:
    """-slope of log error against log N over the errors above the floor (N = 1 only if needed)."""
    usable = errors > floor
    if (usable & (steps >= 2)).sum() >= 2:
        usable &= steps >= 2
    if usable.sum() < 2:
        return float("nan")
    return float(-np.polyfit(np.log(steps[usable]), np.log(errors[usable]), 1)[0])


def step_counts(max_steps: int) -> np.ndarray:
    if not isinstance(max_steps, (int, np.integer)) or not 2 <= max_steps <= 4096:
        raise ValueError(f"max_steps must be an integer in [2, 4096], got {max_steps!r}")
    return 2 ** np.arange(int(math.log2(max_steps)) + 1)


def convergence_study(
    f, h0: torch.Tensor, max_steps: int = 64, reference_tol: float = 1e-12, reference_max_steps: int = 20000
) -> Convergence:
    """Euler and RK4 errors at τ = 1 for N = 1, 2, 4, ..., max_steps against dopri5 at reference_tol."""
    steps = step_counts(max_steps)
    if not (isinstance(reference_tol, float) and 1e-13 <= reference_tol <= 1e-3):
        raise ValueError(f"reference_tol must be a number in [1e-13, 1e-3], got {reference_tol!r}")
    h0 = h0.double()
    counted = _Counted(f)
    ref = integrate_to_one(counted, h0, "dopri5", tol=reference_tol, max_steps=reference_max_steps)
    tighter_tol = max(reference_tol / 100, 1e-14)
    tighter = integrate_to_one(f, h0, "dopri5", tol=tighter_tol, max_steps=reference_max_steps)
    scale = ref.norm().clamp_min(1e-300)
    reference_error = float((ref - tighter).norm() / scale)
    errors = {}
    for method in ("euler", "rk4"):
        errors[method] = np.array(
            [float((integrate_to_one(f, h0, method, steps=int(n)) - ref).norm() / scale) for n in steps]
        )
    floor = max(10 * reference_error, 1e-14)
    return Convergence(
        steps=steps,
        euler_error=errors["euler"],
        rk4_error=errors["rk4"],
        euler_order=fitted_order(steps, errors["euler"], floor),
        rk4_order=fitted_order(steps, errors["rk4"], floor),
        reference_error=reference_error,
        floor=floor,
        reference_nfe=counted.nfe,
    )


@torch.no_grad()
def convergence(
    model, tok, prompt: str, u, max_steps: int = 64, reference_tol: float = 1e-12, axis: str = "sentiment"
) -> Convergence:
    """Convergence of Euler and RK4 on the model's own block for this prompt and control."""
    if not hasattr(model, "field"):
        raise ValueError("a discrete model has no continuous vector field")
    idx, _ = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    field64 = copy.deepcopy(model.field).double()
    h0 = model.encode(idx)
    f = _bound_field(field64, control.double(), h0.double())
    result = convergence_study(f, h0, max_steps, reference_tol)
    result.u = control[0].cpu().numpy().astype(float)
    return result
