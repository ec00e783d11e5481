"""Causal self-attention with an optional key/value cache, shared by the transformer
blocks and the token-mixing vector field."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, cache: dict | None = None):
        """x [batch, tokens, d]; with a cache, x holds only the tokens after the cached ones."""
        return causal_attention(
            x, self.qkv.weight, self.qkv.bias, self.proj.weight, self.proj.bias, self.n_heads, cache
        )


def causal_attention(x, qkv_weight, qkv_bias, proj_weight, proj_bias, n_heads: int, cache: dict | None = None):
    """Causal self-attention of x [batch, tokens, d] with the given weights (a module's own, or
    a depth-varying field's weights at one τ); with a cache, x holds only the tokens after the cached ones."""
    batch, tokens, d = x.shape
    q, k, v = F.linear(x, qkv_weight, qkv_bias).split(d, dim=-1)
    q, k, v = (t.view(batch, tokens, n_heads, d // n_heads).transpose(1, 2) for t in (q, k, v))
    if cache is not None:
        k, v = _append_to_cache(cache, k, v)
    past = k.shape[2] - tokens
    if q.dtype == torch.bfloat16 and q.device.type == "cpu":
        # under bf16 autocast on CPU the fp32 kernel is faster (measured 2.2x for a training step's
        # attention at 128 tokens) and keeps the softmax in fp32
        q, k, v = q.float(), k.float(), v.float()
    if past == 0:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif tokens == 1:
        y = F.scaled_dot_product_attention(q, k, v)
    else:  # several new tokens after a cached prefix: causal mask offset by the prefix
        mask = torch.ones(tokens, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return F.linear(y.transpose(1, 2).reshape(batch, tokens, d).to(x.dtype), proj_weight, proj_bias)


def _append_to_cache(cache: dict, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the new keys and values into the cache's buffers; return all of them so far.

    The buffers grow by doubling, so decoding a token writes only that token's keys and values
    (concatenating onto the cache copied all of them for every attention call, about a fifth of
    cached decoding's time with a token-mixing field).
    """
    past, new = cache.get("length", 0), k.shape[2]
    size = past + new
    buffers = cache.get("buffers")
    if buffers is None or buffers[0].shape[2] < size:
        capacity = max(size, 64, 2 * (buffers[0].shape[2] if buffers else 0))
        grown = tuple(t.new_empty(t.shape[0], t.shape[1], capacity, t.shape[3]) for t in (k, v))
        if buffers is not None:
            for old, bigger in zip(buffers, grown):
                bigger[:, :, :past] = old[:, :, :past]
        buffers = cache["buffers"] = grown
    buffers[0][:, :, past:size] = k
    buffers[1][:, :, past:size] = v
    cache["length"] = size
    return buffers[0][:, :, :size], buffers[1][:, :, :size]
