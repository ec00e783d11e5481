"""How much work the middle does: held-out loss with and without it, and how far it moves H.

The evaluation's displacement bar asks whether the ODE block moves the hidden state as
much as the two discrete blocks it replaces. This says why a block moves H little or a
lot: removing the middle (α = 0 for the hybrid, the blocks skipped for the baseline)
and measuring the held-out loss gives the language-modelling value of what it does.

The update H(1) - H(0) splits into the part every token shares (its mean over all
held-out tokens: a constant offset, as a bias writes) and the rest, which depends on the
token. Only the second can carry per-token work; the shipped ODE block's update is
mostly the first (docs/model-card.md#evaluation).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..model.transformer import language_model_loss


def relative_update(h_in: torch.Tensor, h_out: torch.Tensor) -> torch.Tensor:
    """Per token, |H_out - H_in| / |H_in|: how far a block moves each state."""
    return (h_out - h_in).norm(dim=-1) / h_in.norm(dim=-1).clamp_min(1e-12)


@dataclass
class MiddleWork:
    arch: str
    windows: int  # held-out windows measured
    loss: float  # mean token cross-entropy at u = 0
    loss_without_middle: float  # the same with H(1) := H(0)
    relative_update: float  # mean over tokens of |H(1) - H(0)| / |H(0)| at u = 0
    relative_update_own_control: float | None  # the same under each window's own (label, source) control
    state_norm: float  # mean |H(0)|
    shared_update: float  # |mean over tokens of (H(1) - H(0))| / mean |H(0)|, at u = 0
    token_specific_update: float  # mean over tokens of |update - its mean| / |H(0)|, at u = 0

    @property
    def loss_cost_of_removal(self) -> float:
        return self.loss_without_middle - self.loss

    def to_dict(self) -> dict:
        return {**asdict(self), "loss_cost_of_removal": self.loss_cost_of_removal}


@torch.no_grad()
def middle_work(
    model, inputs: torch.Tensor, targets: torch.Tensor, controls: torch.Tensor | None = None, batch: int = 32
) -> MiddleWork:
    """Measure the middle on held-out windows (inputs/targets as data.heldout.heldout_batch gives them)."""
    was_training = model.training
    model.eval()
    hybrid = hasattr(model, "field")
    sums = {"loss": 0.0, "skip": 0.0, "update_own": 0.0}
    tokens = 0
    updates, norms = [], []
    for i in range(0, len(inputs), batch):
        x, y = inputs[i : i + batch], targets[i : i + batch]
        real = y >= 0
        n = int(real.sum())
        h0 = model.encode(x)
        h1 = model.middle(h0, None, model.training_solver).final
        sums["loss"] += float(language_model_loss(model.decode(h1), y)) * n
        sums["skip"] += float(language_model_loss(model.decode(h0), y)) * n
        updates.append((h1 - h0)[real])
        norms.append(h0.norm(dim=-1)[real].clamp_min(1e-12))
        if hybrid and controls is not None:
            own = model.middle(h0, controls[i : i + batch], model.training_solver).final
            sums["update_own"] += float(relative_update(h0, own)[real].sum())
        tokens += n
    model.train(was_training)
    tokens = max(tokens, 1)
    updates, norms = torch.cat(updates), torch.cat(norms)  # [real tokens, d], [real tokens]
    shared = updates.mean(dim=0)
    return MiddleWork(
        arch=model.config.arch,
        windows=len(inputs),
        loss=sums["loss"] / tokens,
        loss_without_middle=sums["skip"] / tokens,
        relative_update=float((updates.norm(dim=-1) / norms).mean()),
        relative_update_own_control=sums["update_own"] / tokens if hybrid and controls is not None else None,
        state_norm=float(norms.mean()),
        shared_update=float(shared.norm() / norms.mean()),
        token_specific_update=float(((updates - shared).norm(dim=-1) / norms).mean()),
    )
