"""Activation steering of the discrete baseline: the method a user would pick instead of a learned control.

Steering vector: v = mean over positive training reviews of the residual stream after the
blocks before the middle (model.encode, i.e. after block 2 of 6; H(0) of the hybrid),
minus the same mean over negative training reviews. Each review is first averaged over
its own tokens (so long reviews do not outweigh short ones), then the reviews of a class
are averaged. Steering adds c·v at every position of encode's output, the prompt's and
every generated token's, before the middle blocks see it; c > 0 pushes toward positive.

ActivationSteered wraps a model and keeps the sampler's API (encode / middle / decode /
new_caches), so steering.inference.generate.sample_tokens samples from it unchanged, KV cache
included. Its coefficient may be one number or one per batch row, so a whole c grid is
sampled in one batch, as the hybrid's u grid is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from ..data.tokenizer import bos_id, encode


@dataclass
class SteeringVector:
    vector: torch.Tensor  # [d_model]
    positive_mean: torch.Tensor  # [d_model]
    negative_mean: torch.Tensor  # [d_model]
    n_positive: int
    n_negative: int
    residual_norm: float  # mean per-token norm of the residual stream at that point (for scale)

    @property
    def norm(self) -> float:
        return float(self.vector.norm())


@torch.no_grad()
def pooled_residuals(
    model, tok, texts: Sequence[str], max_tokens: int = 64, batch_size: int = 32
) -> tuple[torch.Tensor, float]:
    """Each text's token-mean of model.encode's output [texts, d], and the mean per-token norm."""
    if not texts:
        raise ValueError("need at least one text to average")
    limit = min(max_tokens, model.config.block_size)
    device = next(model.parameters()).device
    pooled, norm_sum, count = [], 0.0, 0
    for start in range(0, len(texts), batch_size):
        rows = [([bos_id(tok)] + encode(tok, t))[:limit] for t in texts[start : start + batch_size]]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [bos_id(tok)] * (width - len(r)) for r in rows], device=device)
        mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows], device=device)
        h = model.encode(ids)  # causal: the padding after a text cannot change its states
        pooled.append((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))
        norm_sum += float((h.norm(dim=-1) * mask).sum())
        count += int(mask.sum())
    return torch.cat(pooled), norm_sum / count


def steering_vector(
    model, tok, reviews, max_reviews: int = 1000, max_tokens: int = 64, seed: int = 0
) -> SteeringVector:
    """Mean difference of encode's output between positive and negative reviews (label 1 vs 0).

    A balanced sample of at most max_reviews // 2 per class, drawn with a fixed seed.
    """
    reviews = list(reviews)
    by_label = {label: [r for r in reviews if r.label == label] for label in (0, 1)}
    per_class = min(len(by_label[0]), len(by_label[1]), max_reviews // 2)
    if per_class < 1:
        raise ValueError("a steering vector needs at least one positive and one negative review")
    gen = torch.Generator().manual_seed(seed)
    chosen = {
        label: [by_label[label][i] for i in torch.randperm(len(by_label[label]), generator=gen)[:per_class]]
        for label in (0, 1)
    }
    positive, norm_pos = pooled_residuals(model, tok, [r.text for r in chosen[1]], max_tokens)
    negative, norm_neg = pooled_residuals(model, tok, [r.text for r in chosen[0]], max_tokens)
    pos_mean, neg_mean = positive.mean(0), negative.mean(0)
    return SteeringVector(
        vector=pos_mean - neg_mean,
        positive_mean=pos_mean,
        negative_mean=neg_mean,
        n_positive=per_class,
        n_negative=per_class,
        residual_norm=(norm_pos + norm_neg) / 2,
    )


class ActivationSteered(nn.Module):
    """model with c·v added to encode's output; every other call goes to the model unchanged.

    coefficient: a number (every row) or a tensor [batch] (one c per batch row).
    """

    def __init__(self, model, vector: torch.Tensor, coefficient=0.0):
        super().__init__()
        if vector.dim() != 1 or vector.shape[0] != model.config.d_model:
            raise ValueError(f"the steering vector must have shape [{model.config.d_model}], got {list(vector.shape)}")
        self.model = model
        self.config = model.config
        self.register_buffer("vector", vector.detach().clone())
        self.coefficient = coefficient

    def _shift(self, batch: int) -> torch.Tensor:
        c = torch.as_tensor(self.coefficient, dtype=self.vector.dtype, device=self.vector.device)
        if c.dim() == 0:
            return (c * self.vector)[None, None, :]
        if c.shape != (batch,):
            raise ValueError(f"one coefficient per batch row: got {list(c.shape)} for a batch of {batch}")
        return c[:, None, None] * self.vector[None, None, :]

    def encode(self, idx, caches=None, start: int = 0):
        h = self.model.encode(idx, caches, start)
        return h + self._shift(h.shape[0])

    def middle(self, h0, u=None, solver=None, **kwargs):
        if solver is None:  # each model keeps its own default
            return self.model.middle(h0, u, **kwargs)
        return self.model.middle(h0, u, solver, **kwargs)

    def decode(self, h, caches=None):
        return self.model.decode(h, caches)

    def new_caches(self):
        return self.model.new_caches()

    def can_cache(self, solver) -> bool:
        return self.model.can_cache(solver)

    def forward(self, idx, u=None, solver=None):
        h1 = self.middle(self.encode(idx), u, solver).final
        return self.decode(h1), h1.new_zeros(())


# ---------------------------------------------------------------- the comparison: accuracy against fluency


def symmetric_grid(limit: float, points: int) -> np.ndarray:
    """points evenly spaced values from -limit to +limit (an odd count, so 0 is on the grid)."""
    if not isinstance(points, (int, np.integer)) or points < 3 or points % 2 == 0:
        raise ValueError(f"grid points must be an odd integer >= 3 (so that 0 is on the grid), got {points!r}")
    if not (math.isfinite(limit) and limit > 0):
        raise ValueError(f"the grid limit must be a positive number, got {limit!r}")
    return np.round(np.linspace(-limit, limit, int(points)), 6)


@dataclass
class SteeringCurve:
    """One method's sweep: per grid value, and per magnitude with +m and -m paired."""

    method: str  # short id: "hybrid" or "activation"
    label: str  # for charts and tables
    grid: np.ndarray  # [n] u or c values, symmetric about 0
    positive_clf: np.ndarray  # [n] fraction judged positive by the classifier
    negative_clf: np.ndarray  # [n] fraction judged negative by the classifier (= 1 - positive)
    positive_vader: np.ndarray  # [n] fraction VADER calls positive
    negative_vader: np.ndarray  # [n] fraction VADER calls negative (VADER may call neither)
    perplexity: np.ndarray  # [n] of the continuations under the unsteered model
    magnitudes: np.ndarray  # [m] 0 and the positive grid values
    accuracy_clf: np.ndarray  # [m] mean of the +m point's positive and the -m point's negative fraction
    accuracy_vader: np.ndarray  # [m]
    paired_perplexity: np.ndarray  # [m] over both points' continuations (geometric mean of the two)
    samples: dict  # grid value -> a few continuations, to read

    @property
    def unsteered_perplexity(self) -> float:
        return float(self.paired_perplexity[0])

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "label": self.label,
            "grid": self.grid,
            "positive_clf": self.positive_clf,
            "negative_clf": self.negative_clf,
            "positive_vader": self.positive_vader,
            "negative_vader": self.negative_vader,
            "perplexity": self.perplexity,
            "magnitudes": self.magnitudes,
            "accuracy_clf": self.accuracy_clf,
            "accuracy_vader": self.accuracy_vader,
            "paired_perplexity": self.paired_perplexity,
            "samples": self.samples,
        }


def steering_curve(
    method: str,
    label: str,
    steered_model,
    unsteered_model,
    tok,
    prompts: list[list[int]],
    grid: np.ndarray,
    controls: torch.Tensor,
    new_tokens: int,
    sampling,
    seed: int,
    solver,
    n_samples: int = 2,
) -> SteeringCurve:
    """Sample every grid point for every prompt (one batch per prompt, one seed per prompt), judge, score.

    controls: [n, 2] the u passed to the sampler (the hybrid's steering; zeros for the
    discrete model, which ignores u and is steered through its coefficients instead).
    """
    from ..data.tokenizer import decode
    from ..inference.generate import sample_tokens
    from ..judges.judge import judge_sentiment
    from .evaluate import continuation_perplexity

    n = len(grid)
    rows: list[list[torch.Tensor]] = [[] for _ in range(n)]
    for i, ids in enumerate(prompts):
        new, _ = sample_tokens(
            steered_model, ids, controls, new_tokens, n=n, sampling=sampling, seed=seed + i, solver=solver
        )
        for j in range(n):
            rows[j].append(new[j])
    fractions = {k: np.zeros(n) for k in ("positive_clf", "negative_clf", "positive_vader", "negative_vader")}
    perplexity = np.zeros(n)
    samples = {}
    for j in range(n):
        tokens = torch.stack(rows[j])
        texts = [decode(tok, row) for row in tokens.tolist()]
        verdicts = judge_sentiment(texts)
        fractions["positive_clf"][j] = float((verdicts.classifier == 1).mean())
        fractions["negative_clf"][j] = float((verdicts.classifier == -1).mean())
        fractions["positive_vader"][j] = float((verdicts.vader == 1).mean())
        fractions["negative_vader"][j] = float((verdicts.vader == -1).mean())
        perplexity[j] = continuation_perplexity(unsteered_model, prompts, tokens)
        samples[f"{grid[j]:+g}"] = [decode(tok, p[1:]) + " |" + t for p, t in zip(prompts[:n_samples], texts)]
    zero = n // 2
    magnitudes = grid[zero:]
    accuracy_clf = np.array(
        [
            (fractions["positive_clf"][zero + k] + fractions["negative_clf"][zero - k]) / 2
            for k in range(len(magnitudes))
        ]
    )
    accuracy_vader = np.array(
        [
            (fractions["positive_vader"][zero + k] + fractions["negative_vader"][zero - k]) / 2
            for k in range(len(magnitudes))
        ]
    )
    # both points have the same number of continuation tokens, so their pooled perplexity is the geometric mean
    paired = np.array([math.sqrt(perplexity[zero + k] * perplexity[zero - k]) for k in range(len(magnitudes))])
    return SteeringCurve(
        method,
        label,
        grid,
        fractions["positive_clf"],
        fractions["negative_clf"],
        fractions["positive_vader"],
        fractions["negative_vader"],
        perplexity,
        magnitudes,
        accuracy_clf,
        accuracy_vader,
        paired,
        samples,
    )


def dominated(point: tuple[float, float], others: list[tuple[float, float]]) -> bool:
    """(perplexity, accuracy): some other point is at least as fluent and as accurate, and better in one."""
    ppl, acc = point
    return any(o_ppl <= ppl and o_acc >= acc and (o_ppl < ppl or o_acc > acc) for o_ppl, o_acc in others)


def pareto_verdict(a: SteeringCurve, b: SteeringCurve, judge: str) -> dict:
    """Which method's steered points (magnitude > 0) dominate the other's, in (perplexity ↓, accuracy ↑).

    'a dominates' when every steered point of b is dominated by some steered point of a
    and none of a's is dominated by b's; 'neither' when the two fronts cross.
    """

    def points(curve):
        acc = curve.accuracy_clf if judge == "clf" else curve.accuracy_vader
        return [(float(p), float(x)) for p, x in zip(curve.paired_perplexity[1:], acc[1:])]

    pa, pb = points(a), points(b)
    b_beaten = sum(dominated(p, pa) for p in pb)
    a_beaten = sum(dominated(p, pb) for p in pa)
    if b_beaten == len(pb) and a_beaten == 0:
        winner = a.method
    elif a_beaten == len(pa) and b_beaten == 0:
        winner = b.method
    else:
        winner = "neither"
    return {
        "dominates": winner,
        f"{b.method}_points_dominated": b_beaten,
        f"{a.method}_points_dominated": a_beaten,
        "points_per_method": len(pa),
    }


def best_within_fluency_budget(curve: SteeringCurve, judge: str, budget: float) -> float:
    """Highest paired accuracy among magnitudes whose perplexity is at most budget × the unsteered one."""
    acc = curve.accuracy_clf if judge == "clf" else curve.accuracy_vader
    ok = curve.paired_perplexity <= budget * curve.unsteered_perplexity
    return float(acc[ok].max())


# ---------------------------------------------------------------- the experiment: learned control against the rival

U_LIMIT = 3.0  # the u grid's end: the whole control range the hybrid accepts (training used ±1)
FLUENCY_BUDGET = 1.5  # the evaluation's bar for the fluency cost of steering (ppl ratio <= 1.5)
FLUENCY_BUDGET = 1.5  # the evaluation's bar for the fluency cost of steering (ppl ratio <= 1.5)


def activation_comparison(hybrid, discrete, tok, size) -> dict:
    """The hybrid's learned u against the discrete model steered by a vector, on grids of the same size and
    spacing, each to its method's limit (experiments.py's docstring says why that is fair). `size`: an
    experiments.Size (compare_prompts, grid_points, vector_reviews)."""
    from ..data import reviews as data
    from ..inference.sampling import DEFAULT_SAMPLING
    from . import evaluate

    vec = steering_vector(discrete, tok, data.train_reviews(), max_reviews=size.vector_reviews)
    c_limit = vec.residual_norm / vec.norm
    u_grid = symmetric_grid(U_LIMIT, size.grid_points)
    c_grid = symmetric_grid(c_limit, size.grid_points)
    prompts = evaluate.heldout_prompts(tok, size.compare_prompts)
    common = dict(
        tok=tok,
        prompts=prompts,
        new_tokens=evaluate.NEW_TOKENS,
        sampling=DEFAULT_SAMPLING,
        seed=evaluate.SEED,
        solver=hybrid.training_solver,
    )
    u_controls = torch.tensor([[u, 0.0] for u in u_grid], dtype=torch.float32)
    hybrid_curve = steering_curve(
        "hybrid", "hybrid, learned control u", hybrid, hybrid, controls=u_controls, grid=u_grid, **common
    )
    steered = ActivationSteered(discrete, vec.vector, torch.tensor(c_grid, dtype=torch.float32)).eval()
    activation_curve = steering_curve(
        "activation",
        "discrete + activation steering c",
        steered,
        discrete,
        controls=torch.zeros(len(c_grid), 2),
        grid=c_grid,
        **common,
    )
    verdicts = {judge: pareto_verdict(hybrid_curve, activation_curve, judge) for judge in ("clf", "vader")}
    budget = {
        f"{name}_{judge}": best_within_fluency_budget(curve, judge, FLUENCY_BUDGET)
        for name, curve in (("hybrid", hybrid_curve), ("activation", activation_curve))
        for judge in ("clf", "vader")
    }
    return {
        "hybrid": hybrid_curve.to_dict(),
        "activation": activation_curve.to_dict(),
        "u_grid": u_grid,
        "c_grid": c_grid,
        "c_limit": c_limit,
        "u_limit": U_LIMIT,
        "vector_norm": vec.norm,
        "residual_norm": vec.residual_norm,
        "vector_reviews_per_class": vec.n_positive,
        "prompts": len(prompts),
        "new_tokens": evaluate.NEW_TOKENS,
        "pareto": verdicts,
        "fluency_budget": FLUENCY_BUDGET,
        "best_accuracy_within_budget": budget,
    }
