"""Next-token probabilities and how they move with the control: the paper's sigmoid curves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.tokenizer import decode
from .inputs import (
    axis_control,
    control_vector,
    decode_last,
    model_solver,
    prompt_tensor,
    target_token_ids,
    u_grid_array,
)

SWEEP_U_GRID = np.linspace(-2, 2, 41)  # steering_sweep's default grid of u


@torch.no_grad()
def next_token_distribution(
    model, tok, prompt: str, u, solver=None, top_k: int = 10, axis: str = "sentiment"
) -> tuple[list[str], np.ndarray]:
    """The top_k next tokens after the prompt at control u, and their probabilities."""
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    idx, _ = prompt_tensor(model, tok, prompt)
    control = control_vector(u, axis).to(idx.device)
    h1 = model.middle(model.encode(idx), control, model_solver(model, solver)).final
    probs = decode_last(model, h1)[0].float().softmax(-1)
    top = torch.topk(probs, min(top_k, probs.numel()))
    return [decode(tok, [i]) for i in top.indices.tolist()], top.values.cpu().numpy().astype(float)


@torch.no_grad()
def final_states(model, h0: torch.Tensor, controls: torch.Tensor, solver) -> tuple[torch.Tensor, list[int]]:
    """H(1) for each control [n, 2] from one H(0) [1, tokens, d], and each solve's NFE.

    Fixed-step solves are batched (exact: every sample gets the same steps anyway);
    adaptive ones run one control at a time, since a batched adaptive solve would share
    one step size across all controls.
    """
    if solver.is_fixed:
        result = model.middle(h0.expand(len(controls), -1, -1), controls, solver)
        return result.final, [result.nfe] * len(controls)
    finals, nfes = [], []
    for control in controls:
        result = model.middle(h0, control[None], solver)
        finals.append(result.final[0])
        nfes.append(result.nfe)
    return torch.stack(finals), nfes


@dataclass
class Sweep:
    u: np.ndarray  # [n_u] values on `axis`
    axis: str
    targets: list[str]  # as asked
    target_tokens: list[str]  # the token scored for each target
    probabilities: np.ndarray  # [n_u, n_targets] raw next-token probabilities
    relative: np.ndarray  # [n_u, n_targets] renormalised among the targets
    largest_jump: float  # max |Δ probability| between neighbouring u, over targets
    largest_jump_u: tuple[float, float] | None  # the neighbouring u pair where it happens
    solver_label: str
    notice: str = ""

    def to_dict(self) -> dict:
        return {
            "u": self.u,
            "axis": self.axis,
            "targets": self.targets,
            "target_tokens": self.target_tokens,
            "probabilities": self.probabilities,
            "relative": self.relative,
            "largest_jump": self.largest_jump,
            "largest_jump_u": self.largest_jump_u,
            "solver": self.solver_label,
            "notice": self.notice,
        }


def target_probabilities(model, states: torch.Tensor, target_ids: list[int]) -> np.ndarray:
    probs = decode_last(model, states).float().softmax(-1)
    return probs[:, target_ids].cpu().numpy().astype(float)


def steering_sweep(
    model,
    tok,
    prompt: str,
    targets=(" good", " bad"),
    u_grid=SWEEP_U_GRID,
    axis: str = "sentiment",
    solver=None,
    other: float = 0.0,
) -> Sweep:
    """Next-token probability of each target as the control moves along one axis (the other held at `other`)."""
    solver = model_solver(model, solver)
    grid = u_grid_array(u_grid)
    target_ids, target_tokens, notice = target_token_ids(tok, list(targets))
    idx, _ = prompt_tensor(model, tok, prompt)
    controls = torch.tensor([axis_control(u, axis, other) for u in grid], device=idx.device)
    control_vector(controls[0].tolist())  # range check of the held value
    with torch.no_grad():
        finals, _ = final_states(model, model.encode(idx), controls, solver)
        probabilities = target_probabilities(model, finals, target_ids)
    relative = probabilities / np.maximum(probabilities.sum(axis=1, keepdims=True), 1e-30)
    if len(grid) > 1:
        jumps = np.abs(np.diff(probabilities, axis=0)).max(axis=1)
        k = int(jumps.argmax())
        largest, where = float(jumps[k]), (float(grid[k]), float(grid[k + 1]))
    else:
        largest, where = 0.0, None
    return Sweep(
        u=grid,
        axis=axis,
        targets=list(targets),
        target_tokens=target_tokens,
        probabilities=probabilities,
        relative=relative,
        largest_jump=largest,
        largest_jump_u=where,
        solver_label=solver.label(),
        notice=notice,
    )
