"""The evaluation's generations and probes: the measurements `evaluate`, `depth`, `bench` and `analyze` share.

`steering.evaluation.evaluate` builds its report from these (and re-exports them); `steering.cli.analyze` runs
them one at a time. The prompts they run on (the probe prompts, held-out openings) are steering.data.heldout's.
What each measures, and on which data: steering/evaluation/evaluate.py's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..data.heldout import PROBE_PROMPT, PROBE_PROMPT_VARIANTS
from ..data.tokenizer import bos_id, decode, encode
from ..inference.generate import sample_tokens
from ..inference.sampling import DEFAULT_SAMPLING, Sampling
from ..model.ode import SolverConfig

NEW_TOKENS = 40
SEED = 1234
BPB_CHARS = 300
BPB_REVIEWS = 100  # per (label, source)
PROBE_WORDS = {"good": " good", "bad": " bad"}


def probe_controls(steer_u: float = 1.0) -> dict[str, float]:
    """The probe's sentiments, labelled as they print: {"+s": s, "0": 0, "-s": -s}."""
    return {f"{steer_u:+g}": steer_u, "0": 0.0, f"{-steer_u:+g}": -steer_u}


PROBE_CONTROLS = probe_controls(1.0)
REFERENCE_SOLVER = SolverConfig("dopri5", rtol=1e-6, atol=1e-6, max_steps=10_000)


def steering_settings(steer_u: float = 1.0) -> dict[str, tuple[float, float]]:
    """The five controls the evaluation generates under: each side of each axis at ±steer_u, and u = 0."""
    return {
        "positive": (steer_u, 0.0),
        "negative": (-steer_u, 0.0),
        "neutral": (0.0, 0.0),
        "rotten_tomatoes": (0.0, -steer_u),
        "imdb": (0.0, steer_u),
    }


SETTINGS = steering_settings(1.0)


@dataclass(frozen=True)
class EvalSize:
    prompts: int
    val_reviews: int  # held-out reviews for the losses and the block displacement
    bpb_reviews: int  # held-out openings per (label, source) for bits per byte
    curvature_texts: int  # of those openings, how many give their tokens' paths to path_curvature


FULL = EvalSize(prompts=50, val_reviews=200, bpb_reviews=BPB_REVIEWS, curvature_texts=40)
QUICK = EvalSize(prompts=8, val_reviews=32, bpb_reviews=8, curvature_texts=4)


# ---------------------------------------------------------------- prompts and generations


@dataclass
class PromptGenerations:
    prompts: list[list[int]]
    tokens: dict[str, torch.Tensor]  # setting -> new token ids [prompts, NEW_TOKENS]
    continuations: dict[str, list[str]]  # setting -> decoded new tokens
    settings: dict[str, tuple[float, float]] = None  # setting -> its control (sentiment, style)


def generate_for_prompts(
    model,
    tok,
    prompts: list[list[int]],
    settings: dict = SETTINGS,
    seed: int = SEED,
    sampling: Sampling = DEFAULT_SAMPLING,
) -> PromptGenerations:
    """One sample per prompt and setting; all settings of a prompt share one batch and seed."""
    names = list(settings)
    u = torch.tensor([settings[k] for k in names], dtype=torch.float32)
    rows = {k: [] for k in names}
    for i, ids in enumerate(prompts):
        new, _ = sample_tokens(
            model, ids, u, NEW_TOKENS, n=len(names), sampling=sampling, seed=seed + i, solver=model.training_solver
        )
        for j, k in enumerate(names):
            rows[k].append(new[j])
    tokens = {k: torch.stack(v) for k, v in rows.items()}
    continuations = {k: [decode(tok, row.tolist()) for row in v] for k, v in tokens.items()}
    return PromptGenerations(prompts, tokens, continuations, dict(settings))


@torch.no_grad()
def continuation_perplexity(model, prompts: list[list[int]], new_tokens: torch.Tensor, u=None) -> float:
    """exp(mean NLL) of the new tokens given their prompts, under the model at control u (0 if None)."""
    total, count = 0.0, 0
    for prompt, new in zip(prompts, new_tokens.tolist()):
        seq = torch.tensor([prompt + new])
        logits, _ = model(seq[:, :-1], u)
        logp = logits[0, len(prompt) - 1 :].log_softmax(-1)
        total -= float(logp.gather(-1, seq[0, len(prompt) :, None]).sum())
        count += len(new)
    return math.exp(total / count)


def perplexity_by_side(model, prompts: list[list[int]], gens: PromptGenerations) -> dict[str, dict[str, float]]:
    """The fluency cost of each steered side: its generations' perplexity under the model at u = 0
    and under their own control, each over the u = 0 generations' perplexity under u = 0.

    The evaluation's ppl_ratio_steered pools both sides (the geometric mean of the two "at_zero"
    ratios, as every generation has the same length); the "own_control" ratio says how much of a
    side's cost is its text being unusual even to the control that wrote it.
    """
    neutral = continuation_perplexity(model, prompts, gens.tokens["neutral"])
    return {
        side: {
            "at_zero": continuation_perplexity(model, prompts, gens.tokens[side]) / neutral,
            "own_control": continuation_perplexity(
                model, prompts, gens.tokens[side], torch.tensor([gens.settings[side]])
            )
            / neutral,
        }
        for side in ("positive", "negative")
    }


# ---------------------------------------------------------------- probes and solver checks


@torch.no_grad()
def word_probabilities(
    model,
    tok,
    prompt: str = PROBE_PROMPT,
    words: dict = PROBE_WORDS,
    controls: dict = PROBE_CONTROLS,
    axis: int = 0,
) -> dict[str, dict[str, float]]:
    """P(word | prompt) at s on the control's entry `axis` (the other at 0: sentiment s, style 0 by
    default), for each control label and word.

    A word may be several BPE tokens; its probability is that of the whole token sequence
    (chain rule), which equals the next-token probability when the word is one token.
    """
    prompt_ids = [bos_id(tok)] + encode(tok, prompt)
    out = {}
    for label, value in controls.items():
        u = torch.tensor([[value, 0.0] if axis == 0 else [0.0, value]])
        out[label] = {}
        for name, word in words.items():
            word_ids = encode(tok, word)
            seq = torch.tensor([prompt_ids + word_ids])
            logits, _ = model(seq[:, :-1], u)
            logp = logits[0, len(prompt_ids) - 1 :].log_softmax(-1)
            out[label][name] = math.exp(float(logp.gather(-1, torch.tensor(word_ids)[:, None]).sum()))
    return out


def probe_shares(raw: dict[str, dict[str, float]]) -> tuple[float, float]:
    """good / (good + bad) at the most positive control and bad / (good + bad) at the most
    negative one, from word_probabilities' output."""
    positive, negative = raw[max(raw, key=float)], raw[min(raw, key=float)]
    return (
        positive["good"] / (positive["good"] + positive["bad"]),
        negative["bad"] / (negative["good"] + negative["bad"]),
    )


def probe_over_prompts(
    model, tok, prompts=PROBE_PROMPT_VARIANTS, steer_u: float = 1.0, words: dict = PROBE_WORDS
) -> dict:
    """The evaluation's good/bad probe on each prompt, with the mean and the worst over them (`words`: the
    {"good": positive-end word, "bad": negative-end word} pair; a model of one's own has its probe words)."""
    rows = []
    for prompt in prompts:
        raw = word_probabilities(model, tok, prompt, words, controls=probe_controls(steer_u))
        good_pos, bad_neg = probe_shares(raw)
        rows.append({"prompt": prompt, "good_pos": good_pos, "bad_neg": bad_neg})
    summary = {}
    for key in ("good_pos", "bad_neg"):
        values = [row[key] for row in rows]
        summary[f"{key}_mean"], summary[f"{key}_min"] = sum(values) / len(values), min(values)
    return {"prompts": rows, **summary}


@torch.no_grad()
def solver_divergence(
    model, prompts: list[list[int]], sentiments=(-1.0, 0.0, 1.0), solver: SolverConfig | None = None
) -> float:
    """Mean over prompts and sentiments of ||H_trained(1) - H_dopri5(1)|| / ||H_dopri5(1)||, where H_trained
    is the model's own fixed-step training solver (Euler 4 for the shared-weight fields, RK4 for the depth-varying),
    or `solver` where given.

    Each prompt is its own initial value problem (dopri5's step control sees only it);
    the norm is over all of the prompt's tokens and features.
    """
    ratios = []
    for ids in prompts:
        h0 = model.encode(torch.tensor([ids]))
        for s in sentiments:
            u = torch.tensor([[s, 0.0]])
            fixed = model.middle(h0, u, solver or model.training_solver).final
            reference = model.middle(h0, u, REFERENCE_SOLVER).final
            ratios.append(float((fixed - reference).norm() / reference.norm()))
    return float(np.mean(ratios))
