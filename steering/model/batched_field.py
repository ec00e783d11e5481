"""The block's field for a batch of paths, each at its own depth τ: f(τ[b], H[b]) for b = 1..B.

An adaptive solver that gives every sample its own step size evaluates the field at a different τ for each
sample. ode.ControlledVectorField and depth_field.DepthVaryingField take one τ per call, so here the same
arithmetic is written with τ as a [B] tensor:

- the shared-weight field (ControlledVectorField): τ enters only as τ·w_τ added to the first layer's
  pre-activation, so a [B, 1, 1] τ broadcasts;
- the depth-varying field: its weights are θ(τ) = Σ_k P_k(2τ − 1)·θ_k. Materialising θ(τ) per sample would
  read and write every weight B times per evaluation; instead each layer applies all K coefficient sets in one
  matmul (x·[θ_0; …; θ_{K−1}]ᵀ) and mixes the K outputs with each sample's basis values: x·θ(τ) =
  Σ_k P_k(τ)·(x·θ_k). That is K× the multiply-adds of one τ, in one large matrix product.

In exact arithmetic both equal the module's own forward; in floating point they differ by round-off (the
order of the sums changes), which is why the regimes map solves in float64 (batched_field_like: a float64
copy of the field, the model's own weights untouched).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from .depth_field import DepthVaryingField
from .ode import ControlledVectorField


def legendre_basis_batch(tau: torch.Tensor, k: int) -> torch.Tensor:
    """[B, k]: P_0..P_{k-1} at x = 2τ − 1 for each τ of a [B] tensor (depth_field.legendre_basis, batched)."""
    x = tau * 2 - 1
    values = [torch.ones_like(x), x]
    for n in range(1, k - 1):
        values.append(((2 * n + 1) * x * values[n] - n * values[n - 1]) / (n + 1))
    return torch.stack(values[:k], dim=-1)


def float_copy(field: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The field in `dtype` (a copy when that differs from its own; the model is left as it is)."""
    if next(field.parameters()).dtype == dtype:
        return field
    return copy.deepcopy(field).to(dtype)


class BatchedDepthField:
    """f(τ[B], H[B, T, d]) of a DepthVaryingField under B controls (control_features computed once)."""

    def __init__(self, field: DepthVaryingField, u: torch.Tensor):
        self.field = field
        self.k = field.basis_size
        self.d = field.d_model
        with torch.no_grad():
            self.features = field.control_features(u.to(field.control_weight.dtype))  # [K + 1, B, 1, hidden]
            # every coefficient set of a layer stacked along its outputs: one matmul applies all K
            self.stacked = {
                name: getattr(field, name).reshape(-1, getattr(field, name).shape[-1])
                for name in ("qkv_weight", "proj_weight", "fc_in_weight", "fc_out_weight")
            }

    def _linear(self, x: torch.Tensor, name: str, basis: torch.Tensor) -> torch.Tensor:
        """x [B, T, in] through the layer `name` at each sample's τ: Σ_k P_k·(x·W_kᵀ) + Σ_k P_k·b_k."""
        out = F.linear(x, self.stacked[name + "_weight"]).unflatten(-1, (self.k, -1))  # [B, T, K, out]
        bias = basis @ getattr(self.field, name + "_bias")  # [B, out]
        mixed = out[:, :, 0].add(bias[:, None, :])  # P_0 = 1
        for k in range(1, self.k):  # in place, one coefficient at a time: no [B, T, K, out] permuted copy
            mixed.addcmul_(out[:, :, k], basis[:, k, None, None])
        return mixed

    @torch.no_grad()
    def __call__(self, tau: torch.Tensor, h: torch.Tensor, select: torch.Tensor | None = None) -> torch.Tensor:
        """α·F at τ [B'] for states h [B', T, d]; select: which of the B controls the B' rows are (default all)."""
        field = self.field
        basis = legendre_basis_batch(tau.to(h.dtype), self.k)  # [B', K]
        features = self.features if select is None else self.features[:, select]
        norm_weight, norm_bias = basis @ field.norm_weight, basis @ field.norm_bias  # [B', d]
        normed = F.layer_norm(h, (self.d,)) * norm_weight[:, None, :] + norm_bias[:, None, :]
        # the control's share at τ: Σ_k P_k·c_k + the τ-independent |u| > 1 part
        control = torch.einsum("kbth,bk->bth", features[:-1], basis) + features[-1]
        pre = self._linear(normed, "fc_in", basis).add_(control)
        out = self._linear(F.gelu(pre), "fc_out", basis)
        out.add_(self._attention(normed, basis))
        return out.mul_(field.alpha)

    def _attention(self, x: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
        batch, tokens, d = x.shape
        heads = self.field.n_heads
        q, k, v = self._linear(x, "qkv", basis).split(d, dim=-1)
        q, k, v = (t.view(batch, tokens, heads, d // heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self._linear(y.transpose(1, 2).reshape(batch, tokens, d), "proj", basis)


class BatchedSharedField:
    """f(τ[B], H[B, T, d]) of a ControlledVectorField (weights shared over τ) under B controls."""

    def __init__(self, field: ControlledVectorField, u: torch.Tensor, h0: torch.Tensor):
        self.field = field
        with torch.no_grad():
            self.features = field.control_features(u.to(field.fc_in.weight.dtype))  # [B, 1, hidden]
            self.entry_stats = field.entry_statistics(h0) if field.norm_mode == "entry" else None

    @torch.no_grad()
    def __call__(self, tau: torch.Tensor, h: torch.Tensor, select: torch.Tensor | None = None) -> torch.Tensor:
        field = self.field
        d = h.shape[-1]
        w = field.fc_in.weight
        features = self.features if select is None else self.features[select]
        normed = field.normalize(h, self.entry_stats)
        shift = features + tau.to(h.dtype)[:, None, None] * w[:, -1]
        pre = F.linear(normed, w[:, :d]).add_(shift)
        out = field.fc_out(F.softplus(pre))
        if field.mix is not None:
            out.add_(field.mix(normed))
        return out.mul_(field.alpha)


def batched_field(field: torch.nn.Module, u: torch.Tensor, h0: torch.Tensor):
    """The batched form of the model's field under the controls u [B, c], for paths that start at h0."""
    if isinstance(field, DepthVaryingField):
        return BatchedDepthField(field, u)
    if isinstance(field, ControlledVectorField):
        return BatchedSharedField(field, u, h0)
    raise ValueError(f"no batched form for a {type(field).__name__}")
