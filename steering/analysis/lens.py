"""Depth lens: what the model would say next if integration stopped at τ.

H(τ) goes through the late blocks, the final norm and the head, exactly as H(1) does,
so the row at τ = 1 is the model's own next-token distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.tokenizer import decode
from .inputs import control_vector, model_solver, prompt_tensor, tau_grid


@dataclass
class DepthLens:
    tau: np.ndarray  # [T]
    token_strings: list[str]  # the prompt's tokens (with BOS)
    top_tokens: list[list[str]]  # [T][k] at the last position
    top_probs: np.ndarray  # [T, k]
    shown_tokens: list[str]  # every token that is in some τ's top k (last position)
    shown_probs: np.ndarray  # [T, n_shown] probability of each shown token at each τ
    u: np.ndarray
    solver_label: str
    # with all_positions: the most likely next token after each prompt position, at each τ
    position_top_tokens: list[list[str]] | None = None  # [T][tokens]
    position_top_probs: np.ndarray | None = None  # [T, tokens]
    top_token_ids: list[list[int]] | None = None  # [T][k]; several ids can decode alike (byte pieces)
    shown_token_ids: list[int] | None = None

    def to_dict(self) -> dict:
        return {
            "tau": self.tau,
            "token_strings": self.token_strings,
            "top_tokens": self.top_tokens,
            "top_probs": self.top_probs,
            "shown_tokens": self.shown_tokens,
            "shown_probs": self.shown_probs,
            "u": self.u,
            "solver": self.solver_label,
            "position_top_tokens": self.position_top_tokens,
            "position_top_probs": self.position_top_probs,
        }


@torch.no_grad()
def depth_lens(
    model,
    tok,
    prompt: str,
    u,
    solver=None,
    n_tau: int = 11,
    top_k: int = 5,
    all_positions: bool = False,
    axis: str = "sentiment",
) -> DepthLens:
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    solver = model_solver(model, solver)
    idx, strings = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    grid = tau_grid(n_tau)
    result = model.middle(model.encode(idx), control, solver, tau=grid)
    states = result.states[:, 0]  # [T, tokens, d]: each τ decoded as its own sequence
    probs = model.decode(states).float().softmax(-1)  # [T, tokens, vocab]
    last = probs[:, -1]
    k = min(top_k, last.shape[-1])
    top = torch.topk(last, k, dim=-1)
    shown_ids = list(dict.fromkeys(top.indices.flatten().tolist()))
    lens = DepthLens(
        tau=result.tau.cpu().numpy().astype(float),
        token_strings=strings,
        top_tokens=[[decode(tok, [i]) for i in row] for row in top.indices.tolist()],
        top_probs=top.values.cpu().numpy().astype(float),
        shown_tokens=[decode(tok, [i]) for i in shown_ids],
        shown_probs=last[:, shown_ids].cpu().numpy().astype(float),
        u=control[0].cpu().numpy().astype(float),
        solver_label=solver.label(),
        top_token_ids=top.indices.tolist(),
        shown_token_ids=shown_ids,
    )
    if all_positions:
        best = probs.max(dim=-1)
        lens.position_top_tokens = [[decode(tok, [i]) for i in row] for row in best.indices.tolist()]
        lens.position_top_probs = best.values.cpu().numpy().astype(float)
    return lens
