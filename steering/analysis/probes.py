"""Linear probes: how separable is review sentiment in the mean-pooled H(τ) at each depth?

A logistic regression per τ, trained on part of the reviews and scored on the rest. A
smooth rise (or a flat line) along τ means no sudden jump in where sentiment lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.tokenizer import bos_id, encode
from .inputs import control_vector, model_solver, tau_values

DEFAULT_TAUS = (0.0, 0.25, 0.5, 0.67, 0.75, 1.0)


@dataclass
class Probes:
    taus: np.ndarray  # [T]
    accuracy: np.ndarray  # [T] held-out accuracy
    train_accuracy: np.ndarray  # [T]
    n_train: int
    n_test: int
    chance: float  # accuracy of always guessing the majority class of the test set
    u: np.ndarray

    def to_dict(self) -> dict:
        return {
            "taus": self.taus,
            "accuracy": self.accuracy,
            "train_accuracy": self.train_accuracy,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "chance": self.chance,
            "u": self.u,
        }


@torch.no_grad()
def pooled_states(
    model, tok, texts: Sequence[str], taus: torch.Tensor, u, solver, max_tokens: int, batch_size: int = 32
) -> np.ndarray:
    """Mean over each text's tokens of H(τ): [texts, T, d].

    Texts are right-padded into batches: attention is causal, so padding after a text
    cannot change its states, and a fixed-step solve treats every sample alike. An
    adaptive solve would share step sizes across the batch, so there each text goes alone.
    """
    device = next(model.parameters()).device
    control = control_vector(u).to(device)
    limit = min(max_tokens, model.config.block_size)
    grid = taus if len(taus) > 1 else torch.cat([taus.new_zeros(1), taus]) if float(taus[0]) > 0 else None
    size = batch_size if solver.is_fixed else 1
    out = []
    for start in range(0, len(texts), size):
        rows = [([bos_id(tok)] + encode(tok, text))[:limit] for text in texts[start : start + size]]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [bos_id(tok)] * (width - len(r)) for r in rows], device=device)
        mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows], device=device)
        h0 = model.encode(ids)
        if grid is None:  # only τ = 0 asked: no solve needed
            states = h0[None]
        else:
            states = model.middle(h0, control.expand(len(rows), -1), solver, tau=grid).states
            states = states if len(taus) > 1 else states[1:]
        pooled = (states * mask[None, :, :, None]).sum(dim=2) / mask.sum(dim=1)[None, :, None]
        out.append(pooled.transpose(0, 1).cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def linear_probes(
    model,
    tok,
    reviews,
    taus=DEFAULT_TAUS,
    u=(0.0, 0.0),
    solver=None,
    max_reviews: int = 400,
    max_tokens: int = 64,
    test_fraction: float = 0.3,
    seed: int = 0,
) -> Probes:
    """Held-out accuracy of a logistic regression on mean-pooled H(τ), for each τ.

    reviews: objects with .text and .label (0/1), e.g. steering.data.reviews.heldout_reviews().
    A balanced sample of at most max_reviews is used, each cut to its first max_tokens tokens.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    grid = tau_values(taus)
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    reviews = list(reviews)
    by_label = {label: [r for r in reviews if r.label == label] for label in (0, 1)}
    per_class = min(len(by_label[0]), len(by_label[1]), max_reviews // 2)
    if per_class < 4:
        raise ValueError("linear probes need at least 4 reviews of each sentiment")
    chosen = [
        r for label in (0, 1) for r in (by_label[label][i] for i in rng.permutation(len(by_label[label]))[:per_class])
    ]
    labels = np.array([r.label for r in chosen])
    features = pooled_states(model, tok, [r.text for r in chosen], grid, u, model_solver(model, solver), max_tokens)
    train_idx, test_idx = train_test_split(
        np.arange(len(chosen)), test_size=test_fraction, stratify=labels, random_state=seed
    )
    accuracy, train_accuracy = [], []
    for t in range(len(grid)):
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        probe.fit(features[train_idx, t], labels[train_idx])
        accuracy.append(probe.score(features[test_idx, t], labels[test_idx]))
        train_accuracy.append(probe.score(features[train_idx, t], labels[train_idx]))
    test_labels = labels[test_idx]
    chance = float(max(test_labels.mean(), 1 - test_labels.mean()))
    return Probes(
        taus=grid.numpy().astype(float),
        accuracy=np.array(accuracy),
        train_accuracy=np.array(train_accuracy),
        n_train=len(train_idx),
        n_test=len(test_idx),
        chance=chance,
        u=control_vector(u)[0].numpy().astype(float),
    )
