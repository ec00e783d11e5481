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
        batch, tokens, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(batch, tokens, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if cache is not None and "k" in cache:
            k = torch.cat([cache["k"], k], dim=2)
            v = torch.cat([cache["v"], v], dim=2)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        past = k.shape[2] - tokens
        if past == 0:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif tokens == 1:
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # several new tokens after a cached prefix: causal mask offset by the prefix
            mask = torch.ones(tokens, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(batch, tokens, d))
