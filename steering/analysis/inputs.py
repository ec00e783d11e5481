"""Turning what a user asks for (a prompt, a control, grids, a solver name) into checked tensors.

Every analysis goes through these, so bad input fails the same way everywhere: one
ValueError that says what was wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..data.tokenizer import bos_id, decode, encode
from ..model.ode import CONTROL_AXES, CONTROL_LIMIT, TRAINING_SOLVER, SolverConfig, validate_control, validate_tau_grid

# A smooth path solver for pictures: 8 RK4 steps follow the continuous flow closely at a fixed cost.
PATH_SOLVER = SolverConfig("rk4", steps=8)
# The "true" flow for comparisons: dopri5 well below the float32 noise of the states.
REFERENCE_SOLVER = SolverConfig("dopri5", rtol=1e-7, atol=1e-9)


def solver_config(solver) -> SolverConfig:
    """A SolverConfig from a config or a method name (names get that method's defaults)."""
    if isinstance(solver, SolverConfig):
        return solver
    if isinstance(solver, str):
        return SolverConfig(solver)
    raise ValueError(f"solver must be a SolverConfig or a method name, got {solver!r}")


def model_solver(model, solver=None) -> SolverConfig:
    """`solver` as a SolverConfig, or the model's own training solver where it is None (the discrete model,
    which has no continuous block, gets the default fixed-step one)."""
    if solver is None:
        return getattr(model, "training_solver", TRAINING_SOLVER)
    return solver_config(solver)


def prompt_tensor(model, tok, prompt: str) -> tuple[torch.Tensor, list[str]]:
    """BOS + the prompt's tokens as [1, tokens] (its tail if longer than the context), and each token's text."""
    if not isinstance(prompt, str):
        raise ValueError("prompt must be text")
    ids = [bos_id(tok)] + encode(tok, prompt)
    ids = ids[-model.config.block_size :]
    device = next(model.parameters()).device
    strings = ["<bos>" if i == bos_id(tok) else decode(tok, [i]) for i in ids]
    return torch.tensor([ids], dtype=torch.long, device=device), strings


def control_vector(u, axis: str | None = None, other: float = 0.0) -> torch.Tensor:
    """u as [1, 2]: a pair (sentiment, style), or one number on `axis` with `other` on the other axis."""
    if isinstance(u, (int, float, np.floating, np.integer)) and not isinstance(u, bool):
        return validate_control(axis_control(float(u), axis or "sentiment", other))
    return validate_control(u)


def axis_control(value: float, axis: str, other: float = 0.0) -> list[float]:
    if axis not in CONTROL_AXES:
        raise ValueError(f"unknown control axis {axis!r}; choose one of {', '.join(CONTROL_AXES)}")
    pair = [float(other)] * len(CONTROL_AXES)
    pair[CONTROL_AXES.index(axis)] = float(value)
    return pair


def u_grid_array(u_grid) -> np.ndarray:
    """A non-empty, finite, increasing control grid inside the control range."""
    grid = np.asarray(list(u_grid) if not isinstance(u_grid, np.ndarray) else u_grid, dtype=float).ravel()
    if grid.size == 0:
        raise ValueError("the u grid is empty; give at least one control value")
    if not np.isfinite(grid).all():
        raise ValueError("u grid values must be finite numbers")
    if np.abs(grid).max() > CONTROL_LIMIT:
        raise ValueError(f"u grid values must lie in [-{CONTROL_LIMIT:g}, {CONTROL_LIMIT:g}]")
    if grid.size > 1 and not (np.diff(grid) > 0).all():
        raise ValueError("u grid must be strictly increasing")
    return grid


def tau_grid(n_tau: int) -> torch.Tensor:
    if not isinstance(n_tau, (int, np.integer)) or not 2 <= n_tau <= 1025:
        raise ValueError(f"n_tau must be an integer in [2, 1025], got {n_tau!r}")
    return torch.linspace(0.0, 1.0, int(n_tau))


def tau_values(taus: Sequence[float]) -> torch.Tensor:
    """A user's τ list: inside [0, 1] and strictly increasing (one point is allowed)."""
    values = torch.as_tensor(list(taus), dtype=torch.float32).flatten()
    if values.numel() == 0:
        raise ValueError("give at least one τ value")
    if values.numel() == 1:
        if not (math.isfinite(float(values[0])) and 0.0 <= float(values[0]) <= 1.0):
            raise ValueError("τ grid values must lie in [0, 1]")
        return values
    return validate_tau_grid(values)


def target_token_ids(tok, targets: Sequence[str]) -> tuple[list[int], list[str], str]:
    """Each target's first token id and text, plus a notice when a target is more than one token.

    The next-token probability of a multi-token word is that of its first token; the
    notice says so rather than silently scoring something else.
    """
    if not targets:
        raise ValueError("give at least one target token")
    ids, shown, split = [], [], []
    for target in targets:
        if not isinstance(target, str) or not target:
            raise ValueError(f"target must be non-empty text, got {target!r}")
        pieces = encode(tok, target)
        ids.append(pieces[0])
        shown.append(decode(tok, pieces[:1]))
        if len(pieces) > 1:
            split.append(f"{target!r} is {len(pieces)} tokens; scored by its first token {shown[-1]!r}")
    return ids, shown, "; ".join(split)


def check_fixed_steps(steps: int, name: str = "steps") -> int:
    if not isinstance(steps, (int, np.integer)) or not 1 <= steps <= 4096:
        raise ValueError(f"{name} must be an integer in [1, 4096], got {steps!r}")
    return int(steps)


def decode_last(model, states: torch.Tensor) -> torch.Tensor:
    """Next-token logits [batch, vocab] at the last position of states [batch, tokens, d].

    The late blocks need every position (attention), but the norm and the head only
    the last one, which is most of the decoding cost at a large vocabulary.
    """
    if hasattr(model, "post") and hasattr(model, "ln_f") and hasattr(model, "wte"):
        h = states
        for block in model.post:
            h = block(h)
        return model.ln_f(h[:, -1]) @ model.wte.weight.T
    return model.decode(states)[:, -1]
