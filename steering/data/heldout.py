"""What training, analysis, evaluation and the lab all read from the held-out side: the probe prompt and its
variants, the openings of held-out reviews as prompts, named prompt sets (`analyze --prompt-set`, the paper's
alignment test), and fixed held-out batches for losses. They live here, low, so no domain climbs to reach them."""

from __future__ import annotations

import torch

from . import reviews
from .tokenizer import bos_id, decode, encode

PROMPT_TOKENS = 8
PROBE_PROMPT = "The movie was"
# the probe's prompt and nine of its kind: how much the one-prompt figure owes to its exact wording
PROBE_PROMPT_VARIANTS = (
    PROBE_PROMPT,
    "The film was",
    "This movie is",
    "This film is",
    "The acting was",
    "The plot was",
    "The story was",
    "Overall, the movie was",
    "I thought the film was",
    "The ending was",
)
PROMPT_SETS = ("probe", "heldout")


def heldout_prompts(tok, n: int, prompt_tokens: int = PROMPT_TOKENS) -> list[list[int]]:
    """BOS + the first prompt_tokens tokens of n held-out reviews, round-robin over (label, source)."""
    if n < 1:
        raise ValueError(f"need at least one prompt, got {n}")
    groups: dict = {}
    for r in reviews.heldout_reviews():
        groups.setdefault((r.label, r.source), []).append(r)
    queues = [iter(groups[key]) for key in sorted(groups)]
    prompts, bos = [], bos_id(tok)
    while len(prompts) < n and queues:
        for queue in list(queues):
            review = next(queue, None)
            if review is None:
                queues.remove(queue)
                continue
            ids = encode(tok, review.text)
            if len(ids) >= prompt_tokens:
                prompts.append([bos] + ids[:prompt_tokens])
            if len(prompts) == n:
                break
    return prompts


def prompt_set(name: str, tok, n: int) -> list[str]:
    """The prompts of a named set: the evaluation's probe prompts, or the openings of n held-out reviews."""
    if name == "probe":
        return list(PROBE_PROMPT_VARIANTS)
    if name == "heldout":
        if n < 1:
            raise ValueError(f"--n must be at least 1, got {n}")
        return [decode(tok, ids[1:]) for ids in heldout_prompts(tok, n)]  # without the BOS the encoder adds back
    raise ValueError(f"unknown prompt set {name!r}; choose from {', '.join(PROMPT_SETS)}")


def heldout_batch(tok, block_size: int, n_reviews: int, heldout=None):
    """The first block_size+1 tokens of the first n held-out reviews of each (label, source)
    (heldout: another held-out split, such as a user file's; default the corpus's)."""
    heldout = reviews.heldout_reviews() if heldout is None else heldout
    groups: dict = {}
    for r in heldout:
        groups.setdefault((r.label, r.source), []).append(r)
    per_group = max(1, n_reviews // len(groups))
    picked = [r for key in sorted(groups) for r in groups[key][:per_group]]
    enc = reviews.encode_reviews(tok, picked, bos_id(tok), max_tokens=block_size + 1)
    width = max(len(t) for t in enc.tokens) - 1
    inputs = torch.zeros(len(picked), width, dtype=torch.long)
    targets = torch.full((len(picked), width), -1, dtype=torch.long)
    for i, t in enumerate(enc.tokens):
        inputs[i, : len(t) - 1] = t[:-1]
        targets[i, : len(t) - 1] = t[1:]
    return inputs, targets, enc.controls
