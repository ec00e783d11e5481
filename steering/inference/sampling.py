"""How the next token is drawn from the logits, shared by both decoding paths.

generate.py (the general path) and decode.py (the fast path) both draw with next_tokens, so the two
give the same tokens; neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    """How the next token is drawn from the logits.

    temperature 0 is greedy. top_k / top_p cut the tail. repetition_penalty > 1 divides the
    positive logits (multiplies the negative ones) of every token already in the text (CTRL);
    no_repeat_ngram n > 0 forbids any token that would repeat an n-gram of tokens already in the
    text. DEFAULT_SAMPLING's values were chosen by measurement (docs/model-card.md, "Sampling").
    """

    temperature: float = 0.8
    top_k: int | None = 40
    top_p: float | None = None
    repetition_penalty: float = 1.0
    no_repeat_ngram: int = 0

    def __post_init__(self):
        if not 0 <= self.temperature <= 10:
            raise ValueError(f"temperature must be in [0, 10], got {self.temperature}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 1.0 <= self.repetition_penalty <= 10:
            raise ValueError(f"repetition_penalty must be in [1, 10], got {self.repetition_penalty}")
        if not isinstance(self.no_repeat_ngram, int) or not 0 <= self.no_repeat_ngram <= 16:
            raise ValueError(f"no_repeat_ngram must be an integer in [0, 16], got {self.no_repeat_ngram}")


# the evaluation's valid-word rate and repeated trigrams with each candidate: docs/model-card.md, "Sampling"
DEFAULT_SAMPLING = Sampling(temperature=0.5, top_k=10, repetition_penalty=1.1, no_repeat_ngram=3)
GREEDY = Sampling(temperature=0.0, top_k=None)


class Cancelled(Exception):
    """Decoding stopped because the caller's cancelled() said so (the inputs changed meanwhile)."""


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    logits = logits / max(temperature, 1e-6)
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) > top_p  # keep the token that crosses top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


def penalize_repeats(logits: torch.Tensor, history: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """logits [n, vocab] with the repetition penalty and the no-repeat n-gram ban applied, given
    each row's text so far, history [n, length] (prompt and generated tokens)."""
    if sampling.repetition_penalty != 1.0:  # only the seen tokens' logits change: gather, penalise, scatter back
        seen = logits.gather(1, history)
        penalized = torch.where(seen > 0, seen / sampling.repetition_penalty, seen * sampling.repetition_penalty)
        logits = logits.scatter(1, history, penalized)
    n = sampling.no_repeat_ngram
    if n and history.shape[1] >= n:  # every row at once: the n-grams whose first n - 1 tokens are the row's last
        grams = history.unfold(1, n, 1)  # [rows, windows, n]
        tail = history[:, history.shape[1] - n + 1 :]  # the n - 1 tokens a new n-gram would start with
        row, window = ((grams[:, :, : n - 1] == tail[:, None]).all(-1)).nonzero(as_tuple=True)
        logits = logits.index_put((row, grams[row, window, n - 1]), torch.tensor(float("-inf"), device=logits.device))
    return logits


def next_tokens(logits: torch.Tensor, history: torch.Tensor, sampling: Sampling, gen) -> torch.Tensor:
    """One token per row [n, 1], drawn from logits [n, vocab] as `sampling` says. gen is one torch.Generator
    for all rows, or a sequence of them, one per row (each row then draws what it would draw alone)."""
    logits = penalize_repeats(logits.float(), history, sampling)
    if sampling.temperature == 0:
        return logits.argmax(-1, keepdim=True)
    logits = filter_logits(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    # An exponential race over the candidates only: the argmax of p / E with E ~ Exp(1) draws from p. top_k
    # leaves k candidates, so each row draws k exponentials, not one per vocabulary entry as torch.multinomial's
    # race does (the Steer range's 81 rows a token: 49 -> 2.5 ms, docs/journal.md "Sampling, cheaper").
    k = min(sampling.top_k or logits.shape[-1], logits.shape[-1])
    candidates, ids = torch.topk(logits, k, dim=-1)
    probs = candidates.softmax(-1).cpu()
    if isinstance(gen, torch.Generator):
        race = torch.empty(probs.shape).exponential_(1, generator=gen)
    else:  # one generator per row: each row draws what it would draw alone, whatever else is in the batch
        race = torch.stack([torch.empty(k).exponential_(1, generator=g) for g in gen])
    return ids.gather(-1, (probs / race).argmax(-1, keepdim=True).to(ids.device))
