"""Judges for generated text: sentiment (two independent judges) and style.

Sentiment
  * a TF-IDF + logistic-regression classifier trained on the training split only
    (word unigrams and bigrams, lower-cased, so a Rotten Tomatoes blurb and an IMDB
    review are read alike); judged positive when P(positive) >= 0.5, else negative.
  * VADER (the `vaderSentiment` package), a lexicon judge nobody here trained. Its
    compound score uses the thresholds its authors recommend: >= 0.05 positive,
    <= -0.05 negative, anything between is neutral and counts as neither.
Style
  * the same kind of classifier trained on the source column: P(IMDB review) >= 0.5 is
    judged IMDB-like, else Rotten-Tomatoes-like. It keeps case. The RT blurbs ship
    lower-cased with spaced punctuation and are normalised to prose at load time
    (data.normalize_blurb), so it tells the sources apart by what they say and how they
    say it, not by formatting (held-out accuracy 0.985; 0.999 when the formatting showed).

The decision rules were fixed on principle (the classifier's own 0.5, VADER's published
thresholds), before any model was evaluated with them.

The classifiers ship as plain files in assets/judge/ (nothing is pickled): per judge a
JSON file (vectorizer settings, vocabulary, held-out accuracy) and a safetensors file
(idf, coefficients, intercept); prediction rebuilds a fixed-vocabulary TfidfVectorizer
from them. training_words.json lists the words (regex [A-Za-z]+, lower-cased) seen at
least MIN_WORD_COUNT times in the training text, for the valid-word rate. Rebuild all
of it, byte for byte, with

    OMP_NUM_THREADS=1 python -m steering judges          # writes assets/judge/ (~1 minute)

If the folder is missing, the files are built on first use into ~/.cache/steering/judge
(or $STEERING_JUDGE_DIR when set).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from ..data import reviews as data

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "assets" / "judge"
CACHE_DIR = Path.home() / ".cache" / "steering" / "judge"
WORDS_FILE = "training_words.json"
MIN_WORD_COUNT = 5
WORD = re.compile(r"[A-Za-z]+")
VADER_POSITIVE, VADER_NEGATIVE = 0.05, -0.05
CLASSIFIER_THRESHOLD = 0.5


@dataclass(frozen=True)
class JudgeSpec:
    """How a linear judge reads text and which label it predicts."""

    name: str
    positive_class: str  # what P >= 0.5 means
    negative_class: str
    lowercase: bool
    token_pattern: str
    ngram_max: int
    max_features: int
    min_df: int = 3
    C: float = 1.0  # scikit-learn's default; not tuned

    def vectorizer_kwargs(self) -> dict:
        return dict(
            lowercase=self.lowercase,
            token_pattern=self.token_pattern,
            ngram_range=(1, self.ngram_max),
            sublinear_tf=True,
            dtype=np.float64,
        )


SENTIMENT_SPEC = JudgeSpec(
    "sentiment",
    "positive",
    "negative",
    lowercase=True,
    token_pattern=r"[a-z0-9]+(?:'[a-z]+)?",
    ngram_max=2,
    max_features=50_000,
)
# "\s?[^\w\s]" keeps the space before a punctuation mark, so "film ." (RT) differs from "film." (IMDB)
STYLE_SPEC = JudgeSpec(
    "style",
    "imdb",
    "rotten_tomatoes",
    lowercase=False,
    token_pattern=r"\w+|\s?[^\w\s]",
    ngram_max=1,
    max_features=20_000,
)
SPECS = {s.name: s for s in (SENTIMENT_SPEC, STYLE_SPEC)}


def review_target(spec: JudgeSpec, review: data.Review) -> int:
    return int(review.label == 1) if spec.name == "sentiment" else int(review.source == "imdb")


class LinearTextJudge:
    """TF-IDF features and a logistic regression, from plain arrays."""

    def __init__(
        self,
        spec: JudgeSpec,
        vocabulary: list[str],
        idf: np.ndarray,
        coef: np.ndarray,
        intercept: float,
        heldout_accuracy: float | None = None,
    ):
        from sklearn.feature_extraction.text import TfidfVectorizer

        if not (len(vocabulary) == len(idf) == len(coef)):
            raise ValueError(
                f"{spec.name} judge: vocabulary, idf and coef lengths differ "
                f"({len(vocabulary)}, {len(idf)}, {len(coef)})"
            )
        self.spec = spec
        self.vocabulary = vocabulary
        self.idf = np.asarray(idf, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self.heldout_accuracy = heldout_accuracy
        self._vectorizer = TfidfVectorizer(
            vocabulary={t: i for i, t in enumerate(vocabulary)}, **spec.vectorizer_kwargs()
        )
        self._vectorizer.idf_ = self.idf

    def probability(self, texts: list[str]) -> np.ndarray:
        """P(positive_class) for each text."""
        if isinstance(texts, str):
            raise ValueError("pass a list of texts, not a single string")
        if not texts:
            return np.zeros(0)
        logits = self._vectorizer.transform(list(texts)) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-np.asarray(logits).ravel()))

    def predict(self, texts: list[str]) -> np.ndarray:
        """1 where judged positive_class (P >= 0.5), else 0."""
        return (self.probability(texts) >= CLASSIFIER_THRESHOLD).astype(int)

    def accuracy(self, reviews) -> float:
        targets = np.array([review_target(self.spec, r) for r in reviews])
        return float((self.predict([r.text for r in reviews]) == targets).mean())

    @classmethod
    def from_sklearn(cls, spec: JudgeSpec, vectorizer, classifier) -> LinearTextJudge:
        return cls(
            spec,
            vectorizer.get_feature_names_out().tolist(),
            vectorizer.idf_,
            classifier.coef_.ravel(),
            float(classifier.intercept_[0]),
        )

    def save(self, folder: Path, meta: dict):
        folder.mkdir(parents=True, exist_ok=True)
        save_file(
            {
                "idf": self.idf.astype(np.float32),
                "coef": self.coef.astype(np.float32),
                "intercept": np.array([self.intercept], dtype=np.float32),
            },
            str(folder / f"{self.spec.name}.safetensors"),
        )
        doc = {
            "spec": self.spec.__dict__,
            "meta": {**meta, "heldout_accuracy": self.heldout_accuracy},
            "vocabulary": self.vocabulary,
        }
        (folder / f"{self.spec.name}.json").write_text(json.dumps(doc, sort_keys=True, ensure_ascii=False))

    @classmethod
    def load(cls, folder: Path, name: str) -> LinearTextJudge:
        doc = json.loads((folder / f"{name}.json").read_text())
        arrays = load_file(str(folder / f"{name}.safetensors"))
        return cls(
            JudgeSpec(**doc["spec"]),
            doc["vocabulary"],
            arrays["idf"],
            arrays["coef"],
            float(arrays["intercept"][0]),
            doc["meta"].get("heldout_accuracy"),
        )


def fit_sklearn(spec: JudgeSpec, texts: list[str], targets) -> tuple:
    """(fitted TfidfVectorizer, fitted LogisticRegression)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(min_df=spec.min_df, max_features=spec.max_features, **spec.vectorizer_kwargs())
    features = vectorizer.fit_transform(texts)
    classifier = LogisticRegression(C=spec.C, max_iter=2000).fit(features, np.asarray(targets))
    return vectorizer, classifier


def train_judge(spec: JudgeSpec, train_reviews, heldout_reviews) -> LinearTextJudge:
    vectorizer, classifier = fit_sklearn(
        spec, [r.text for r in train_reviews], [review_target(spec, r) for r in train_reviews]
    )
    judge = LinearTextJudge.from_sklearn(spec, vectorizer, classifier)
    judge.heldout_accuracy = judge.accuracy(heldout_reviews)
    return judge


def split_fingerprint(reviews) -> str:
    """sha1 over the texts and labels, so a judge can be matched to the split it was trained on."""
    digest = hashlib.sha1()
    for r in reviews:
        digest.update(f"{r.label}\t{r.source}\t{r.text}\n".encode())
    return digest.hexdigest()


def count_training_words(reviews) -> Counter:
    counts: Counter = Counter()
    for r in reviews:
        counts.update(w.lower() for w in WORD.findall(r.text))
    return counts


def build_judges(folder: str | Path = SHIPPED_DIR) -> dict:
    """Train both classifiers and count the training words; write everything into folder."""
    folder = Path(folder)
    train, heldout = data.train_reviews(), data.heldout_reviews()
    meta = {"train_fingerprint": split_fingerprint(train), "train_reviews": len(train), "heldout_reviews": len(heldout)}
    accuracies = {}
    for spec in SPECS.values():
        judge = train_judge(spec, train, heldout)
        judge.save(folder, meta)
        accuracies[spec.name] = judge.heldout_accuracy
    counts = count_training_words(train)
    words = sorted(w for w, c in counts.items() if c >= MIN_WORD_COUNT)
    (folder / WORDS_FILE).write_text(json.dumps({"min_count": MIN_WORD_COUNT, **meta, "words": words}))
    return accuracies


def judge_dir() -> Path:
    """Where the judge files are read from; builds them into the cache when nothing is there."""
    override = os.environ.get("STEERING_JUDGE_DIR")
    candidates = [Path(override)] if override else [SHIPPED_DIR, CACHE_DIR]
    for folder in candidates:
        if all((folder / f).is_file() for f in _judge_files()):
            return folder
    target = candidates[-1]
    build_judges(target)
    return target


def _judge_files() -> list[str]:
    return [f"{n}.{ext}" for n in SPECS for ext in ("json", "safetensors")] + [WORDS_FILE]


@cache
def load_judge(name: str) -> LinearTextJudge:
    if name not in SPECS:
        raise ValueError(f"unknown judge {name!r}; choose one of {', '.join(SPECS)}")
    return LinearTextJudge.load(judge_dir(), name)


def sentiment_judge() -> LinearTextJudge:
    return load_judge("sentiment")


def style_judge() -> LinearTextJudge:
    return load_judge("style")


@lru_cache(maxsize=1)
def training_words() -> frozenset[str]:
    """Lower-cased alphabetic words seen at least MIN_WORD_COUNT times in the training split."""
    return frozenset(json.loads((judge_dir() / WORDS_FILE).read_text())["words"])


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def vader_compound(texts: list[str]) -> np.ndarray:
    """VADER's compound score in [-1, 1] for each text."""
    analyzer = _vader()
    return np.array([analyzer.polarity_scores(t)["compound"] for t in texts], dtype=np.float64)


def vader_verdict(compound: np.ndarray) -> np.ndarray:
    """+1 positive, -1 negative, 0 neutral (neither), by VADER's published thresholds."""
    compound = np.asarray(compound)
    return np.where(compound >= VADER_POSITIVE, 1, np.where(compound <= VADER_NEGATIVE, -1, 0))


@dataclass
class SentimentVerdicts:
    """Both judges on the same texts. Verdicts: +1 positive, -1 negative, 0 neither."""

    classifier_probability: np.ndarray  # P(positive)
    classifier: np.ndarray  # +1 / -1 (the classifier always decides)
    vader_compound: np.ndarray
    vader: np.ndarray  # +1 / 0 / -1


def judge_sentiment(texts: list[str]) -> SentimentVerdicts:
    probability = sentiment_judge().probability(texts)
    compound = vader_compound(texts)
    return SentimentVerdicts(
        probability, np.where(probability >= CLASSIFIER_THRESHOLD, 1, -1), compound, vader_verdict(compound)
    )


def judge_style(texts: list[str]) -> np.ndarray:
    """+1 judged IMDB-review-like, -1 judged Rotten-Tomatoes-blurb-like."""
    return np.where(style_judge().probability(texts) >= CLASSIFIER_THRESHOLD, 1, -1)
