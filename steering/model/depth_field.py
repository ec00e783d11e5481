"""A vector field whose weights are functions of depth: a continuous transformer block.

    α·F(τ, H, u) = α·[ Attn_θ(τ)(LN_θ(τ)(H)) + MLP_θ(τ)(LN_θ(τ)(H), u) ],   θ(τ) = Σ_k P_k(2τ − 1)·θ_k

Every weight of the block (its norm, attention and MLP, and the control's share of the MLP's
first layer) is expanded on the first K shifted Legendre polynomials of τ: a Galerkin neural
ODE (Massaroli et al. 2020, torchdyn's GalLinear) with a whole transformer block as its layer.
DiffEqFormer (Tong et al., arXiv 2503.01329) makes its weights functions of depth through a
hypernetwork on a τ embedding; a linear hypernetwork on a polynomial embedding is this.

Why: a field whose weights are shared across τ (ode.ControlledVectorField) is the same map at
every depth, so the shipped one learned a constant velocity that one Euler step integrates
exactly (docs/journal.md, "Depth that does work"). With K coefficient sets the field at
τ = 0, 1/3, 2/3 and 1 (the stages of torchdiffeq's RK4, the 3/8 rule) can be four different
blocks, as the discrete baseline's four middle blocks are, while staying smooth in τ, so an
adaptive solver sees a continuous field and a fixed one can follow it.

The control u enters as in the shared field: its own share of the MLP's first layer,
a function of τ too, plus (after add_beyond_steering) B₊·max(u − 1, 0) + B₋·min(u + 1, 0) for
|u| beyond 1. The module keeps the shared field's interface (bind, control_features, nfe,
eval_taus, recorded_outputs, kv_cache), so ode.solve_block integrates either.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import causal_attention
from .ode import _FieldUnderControl

# the per-τ weight sets kept for evaluation (no autograd): enough for every fixed solver's stages
WEIGHT_CACHE_SIZE = 8


def legendre_basis(tau, k: int, like: torch.Tensor) -> torch.Tensor:
    """[P_0(x), ..., P_{k-1}(x)] at x = 2τ − 1, shifted Legendre polynomials on [0, 1] (Bonnet's recursion)."""
    x = torch.as_tensor(tau, dtype=like.dtype, device=like.device).reshape(()) * 2 - 1
    values = [torch.ones_like(x), x]
    for n in range(1, k - 1):
        values.append(((2 * n + 1) * x * values[n] - n * values[n - 1]) / (n + 1))
    return torch.stack(values[:k])


class DepthVaryingField(nn.Module):
    """α·F with each weight a degree-(K−1) polynomial in τ (module docstring)."""

    mixes_tokens = True  # attention over the tokens: cached decoding keeps keys and values per evaluation

    # name -> shape of one coefficient set, (out, in) or (out,); built in __init__
    def __init__(
        self,
        d_model: int,
        control_dim: int,
        hidden: int,
        n_heads: int,
        basis_size: int,
        alpha_init: float = 1.0,
        residual_std: float = 0.02,
    ):
        super().__init__()
        if basis_size < 1:
            raise ValueError(f"basis_size must be at least 1, got {basis_size}")
        if n_heads < 1 or d_model % n_heads:
            raise ValueError("a depth-varying field needs field_heads > 0 dividing d_model")
        self.d_model, self.hidden, self.n_heads, self.basis_size = d_model, hidden, n_heads, basis_size
        self.residual_std = residual_std
        k, d = basis_size, d_model
        self.shapes = {
            "norm_weight": (d,),
            "norm_bias": (d,),
            "qkv_weight": (3 * d, d),
            "qkv_bias": (3 * d,),
            "proj_weight": (d, d),
            "proj_bias": (d,),
            "fc_in_weight": (hidden, d),
            "fc_in_bias": (hidden,),
            "control_weight": (hidden, control_dim),
            "fc_out_weight": (d, hidden),
            "fc_out_bias": (d,),
        }
        for name, shape in self.shapes.items():
            self.register_parameter(name, nn.Parameter(torch.zeros(k, *shape)))
        self.beyond_positive: nn.Linear | None = None  # B₊ and B₋, once added (τ-independent)
        self.beyond_negative: nn.Linear | None = None
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.kv_cache: dict[int, dict] | None = None
        self.nfe = 0
        self.eval_taus: list[float] = []
        self.recorded_outputs: list[torch.Tensor] | None = None
        self._weight_cache: dict = {}

    def reset_parameters(self):
        """Each coefficient set as a GPT-2 block's weights divided by sqrt(K), so the field at
        τ = 0 and τ = 1 (where every P_k is ±1) has a GPT-2 block's scale; the norm starts as
        the identity at every τ (P_0 = 1: only the first coefficient is set)."""
        scale = 1.0 / math.sqrt(self.basis_size)
        for name in self.shapes:
            nn.init.zeros_(getattr(self, name))
        with torch.no_grad():
            self.norm_weight[0].fill_(1.0)
        for name in ("qkv_weight", "fc_in_weight"):
            nn.init.normal_(getattr(self, name), std=0.02 * scale)
        for name in ("proj_weight", "fc_out_weight"):
            nn.init.normal_(getattr(self, name), std=self.residual_std * scale)
        nn.init.normal_(self.control_weight, std=0.1 * scale)

    # ------------------------------------------------------------ weights at τ
    def weights_at(self, tau) -> dict[str, torch.Tensor]:
        """Every weight of the block at depth τ. Without autograd the last few τ are kept (cached
        decoding evaluates the same stages for every token); any change to a coefficient (training,
        loading) is seen through its storage and version counter."""
        if torch.is_grad_enabled():
            return self._mix(tau)
        key = (float(tau), tuple((p.data_ptr(), p._version) for p in self._coefficients()))
        hit = self._weight_cache.get(key)
        if hit is None:
            if len(self._weight_cache) >= WEIGHT_CACHE_SIZE:
                self._weight_cache.pop(next(iter(self._weight_cache)))
            hit = self._weight_cache[key] = self._mix(tau)
        return hit

    def _coefficients(self):
        return (getattr(self, name) for name in self.shapes)

    def _mix(self, tau) -> dict[str, torch.Tensor]:
        basis = legendre_basis(tau, self.basis_size, self.fc_in_weight)
        # in fp32 even under autocast (which would round the sum to bf16): the maps that use them cast as they need
        with torch.autocast(self.fc_in_weight.device.type, enabled=False):
            return {name: torch.tensordot(basis, getattr(self, name), dims=1) for name in self.shapes}

    # ------------------------------------------------------------ the control
    def add_beyond_steering(self):
        """B₊ = B₋ = 0: the field is unchanged until training gives |u| > 1 directions of its own."""
        if self.beyond_positive is None:
            control_dim = self.control_weight.shape[-1]
            self.beyond_positive = nn.Linear(control_dim, self.hidden, bias=False).to(self.fc_in_weight)
            self.beyond_negative = nn.Linear(control_dim, self.hidden, bias=False).to(self.fc_in_weight)
            nn.init.zeros_(self.beyond_positive.weight)
            nn.init.zeros_(self.beyond_negative.weight)

    def split_control_embedding(self):
        raise ValueError("split_control applies to the shared-weight field only (field_basis 0)")

    def control_features(self, u: torch.Tensor) -> torch.Tensor:
        """The control's share of the MLP's first layer, [K + 1, batch, 1, hidden]: one row per basis
        coefficient, then the τ-independent part (|u| beyond 1). Computed once per solve."""
        u = u.to(self.control_weight.dtype)
        per_basis = torch.einsum("bc,khc->kbh", u, self.control_weight)
        fixed = torch.zeros_like(per_basis[0])
        if self.beyond_positive is not None:
            fixed = self.beyond_positive((u - 1).clamp_min(0)) + self.beyond_negative((u + 1).clamp_max(0))
        return torch.cat([per_basis, fixed[None]]).unsqueeze(2)

    def control_shift_at(self, control_features: torch.Tensor, tau) -> torch.Tensor:
        """The control's share at depth τ, [batch, 1, hidden]."""
        basis = legendre_basis(tau, self.basis_size, control_features)
        with torch.autocast(control_features.device.type, enabled=False):
            return torch.tensordot(basis, control_features[:-1], dims=1) + control_features[-1]

    def bind(self, u: torch.Tensor, h0: torch.Tensor, precompute: bool = True) -> _FieldUnderControl:
        """f(τ, H) for the path that starts at h0 under control u, as torchdiffeq wants it."""
        return _FieldUnderControl(self, u, None, precompute)

    # ------------------------------------------------------------ the field
    def forward(self, tau, h, u=None, control_features=None, entry_stats=None) -> torch.Tensor:
        """α·F at depth τ for states h [batch, tokens, d] under control u [batch, c]."""
        self.nfe += 1
        self.eval_taus.append(float(tau.detach()) if torch.is_tensor(tau) else float(tau))
        if control_features is None:
            if u is None:
                raise ValueError("the field needs a control u (or its precomputed control_features)")
            control_features = self.control_features(u)
        w = self.weights_at(tau)
        normed = F.layer_norm(h, (self.d_model,), w["norm_weight"], w["norm_bias"])
        pre = F.linear(normed, w["fc_in_weight"], w["fc_in_bias"]) + self.control_shift_at(control_features, tau).to(
            h.dtype
        )
        out = F.linear(F.gelu(pre), w["fc_out_weight"], w["fc_out_bias"])
        cache = None if self.kv_cache is None else self.kv_cache.setdefault(self.nfe - 1, {})
        mixed = causal_attention(
            normed, w["qkv_weight"], w["qkv_bias"], w["proj_weight"], w["proj_bias"], self.n_heads, cache
        )
        out = self.alpha * (out + mixed)
        if self.recorded_outputs is not None:
            self.recorded_outputs.append(out)
        return out
