"""A judge per axis of one's own labelled file: trained on its training split at `train --data` (a TF-IDF +
logistic-regression judge, as the style judge), saved with the checkpoint in judges/ beside the training split's
words and the held-out split, and read back by `evaluate` and the lab. The probe words an axis gets when the
user names none are the ones its judge ties most to each end."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..data.user_data import HELDOUT_FILE, WORD, Axis, UserCorpus, UserDataError, axes_of

PROBE_WORD_COUNT = 3  # the probe's target words per end label, when the user names none
JUDGES_DIR = "judges"


def judge_spec(index: int, axis: Axis):
    from ..judges.judge import JudgeSpec

    return JudgeSpec(
        f"axis{index}",
        axis.positive,
        axis.negative,
        lowercase=True,
        token_pattern=r"[a-z0-9]+(?:'[a-z]+)?",
        ngram_max=2,
        max_features=50_000,
        min_df=2,
    )


def _judged_rows(rows, index: int) -> tuple[list[str], np.ndarray]:
    """Texts off the axis's middle and their side (1: the positive end)."""
    picked = [r for r in rows if r.control[index] != 0]
    return [r.text for r in picked], np.array([int(r.control[index] > 0) for r in picked])


def train_axis_judges(corpus: UserCorpus) -> list:
    """A TF-IDF + logistic-regression judge per axis (as the style judge), fitted on the training split;
    each knows its held-out accuracy."""
    from ..judges.judge import LinearTextJudge, fit_sklearn

    judges = []
    for index, axis in enumerate(corpus.axes):
        spec = judge_spec(index, axis)
        texts, targets = _judged_rows(corpus.train, index)
        try:
            fitted = fit_sklearn(spec, texts, targets)
        except ValueError:  # no word in two texts (min_df): every word counts
            spec = replace(spec, min_df=1)
            try:
                fitted = fit_sklearn(spec, texts, targets)
            except ValueError as err:
                raise UserDataError(f"axis {axis.name!r}: cannot fit its judge on the texts: {err}") from None
        judge = LinearTextJudge.from_sklearn(spec, *fitted)
        held_texts, held_targets = _judged_rows(corpus.heldout, index)
        judge.heldout_accuracy = float((judge.predict(held_texts) == held_targets).mean()) if len(held_texts) else None
        judges.append(judge)
    return judges


def probe_words_from_judge(judge, n: int = PROBE_WORD_COUNT) -> dict[str, list[str]]:
    """The single alphabetic words the judge ties most to each end (its largest and smallest weights)."""
    order = np.argsort(judge.coef)
    words = [(i, judge.vocabulary[i]) for i in range(len(judge.vocabulary))]
    single = {i for i, w in words if " " not in w and WORD.fullmatch(w)}
    negative = [judge.vocabulary[i] for i in order if i in single][:n]
    positive = [judge.vocabulary[i] for i in order[::-1] if i in single][:n]
    return {"negative": negative, "positive": positive}


def write_axis_judges(corpus: UserCorpus, out: Path, probe_words=None) -> tuple[Axis, ...]:
    """Train and save the judges into out/judges/ (plain files), with the training split's words
    for the valid-word rate; the axes come back with their probe words filled in: those of
    `probe_words` ({name: {"negative": [...], "positive": [...]}}) where given, else the words
    the judge ties most to each end."""
    from ..judges.judge import MIN_WORD_COUNT, WORDS_FILE

    folder = Path(out) / JUDGES_DIR
    axes = []
    for judge, axis in zip(train_axis_judges(corpus), corpus.axes, strict=True):
        judge.save(folder, {"axis": axis.name, "train_texts": len(corpus.train), "heldout_texts": len(corpus.heldout)})
        words = (probe_words or {}).get(axis.name) or probe_words_from_judge(judge)
        axes.append(Axis(**{**asdict(axis), "probe_words": words}))
    counts: Counter = Counter()
    for r in corpus.train:
        counts.update(w.lower() for w in WORD.findall(r.text))
    min_count = min(MIN_WORD_COUNT, 2)
    words = sorted(w for w, c in counts.items() if c >= min_count)
    (folder / WORDS_FILE).write_text(json.dumps({"min_count": min_count, "words": words}))
    # the held-out split travels with the checkpoint: evaluate and the lab need no copy of the file
    (Path(out) / HELDOUT_FILE).write_text(
        "".join(
            json.dumps({"text": r.text, "control": list(r.control), "label": r.label}) + "\n" for r in corpus.heldout
        ),
        encoding="utf-8",
    )
    return tuple(axes)


def load_axis_judges(checkpoint) -> list:
    from ..judges.judge import LinearTextJudge

    folder = Path(checkpoint) / JUDGES_DIR
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    return [LinearTextJudge.load(folder, f"axis{i}") for i in range(len(axes_of(config)))]


def load_training_words(checkpoint) -> frozenset[str]:
    from ..judges.judge import WORDS_FILE

    return frozenset(json.loads((Path(checkpoint) / JUDGES_DIR / WORDS_FILE).read_text())["words"])
