"""Independent check: can a plain text classifier tell the model's continuations from people's?

    .venv/bin/python scripts/checks/human_or_model.py [CHECKPOINT] [--n 200]

For n held-out reviews (round-robin over label and source), the model continues the first 8
tokens with 40 new tokens at u = 0 and the default sampler; the people's text is what the
review itself says after those 8 tokens (40 tokens of it). A TF-IDF (word 1-2-grams and char
2-4-grams) logistic regression is cross-validated (5 folds) on the two sets. 0.5 means it
cannot tell them apart. The classifier is scikit-learn's own, not the project's judges.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline, make_union

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from steering.data import reviews as data  # noqa: E402
from steering.inference.generate import sample_tokens  # noqa: E402
from steering.training.checkpoint import load_checkpoint  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint", nargs="?", default="assets/hybrid")
    p.add_argument("--n", type=int, default=200)
    args = p.parse_args()
    torch.set_num_threads(1)
    model, tok, _ = load_checkpoint(args.checkpoint)
    bos = tok.token_to_id("<|endoftext|>")
    groups: dict = {}
    for r in data.heldout_reviews():
        groups.setdefault((r.label, r.source), []).append(r)
    queues = [iter(groups[k]) for k in sorted(groups)]
    human, machine = [], []
    while len(human) < args.n:
        for q in queues:
            r = next(q)
            ids = tok.encode(r.text, add_special_tokens=False).ids
            if len(ids) < 8 + 40:
                continue
            human.append(tok.decode(ids[8:48]))
            new, _ = sample_tokens(model, [bos] + ids[:8], torch.zeros(1, 2), 40, seed=len(human))
            machine.append(tok.decode(new[0].tolist()))
    texts, labels = human + machine, np.array([0] * len(human) + [1] * len(machine))
    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2), TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2)
    )
    clf = make_pipeline(features, LogisticRegression(max_iter=2000, C=1.0))
    scores = cross_val_score(clf, texts, labels, cv=5, scoring="accuracy")
    print(
        f"{args.checkpoint}: human-vs-model accuracy {scores.mean():.3f} (folds {np.round(scores, 3).tolist()}), "
        f"{len(human)} + {len(machine)} texts; 0.5 = indistinguishable"
    )
    for h, m in list(zip(human, machine))[:3]:
        print(f"  human: {h!r}\n  model: {m!r}")


if __name__ == "__main__":
    main()
