"""Small labelled files with two attributes that are not sentiment (formality, topic), for the tests of
training on one's own data (steering/data/user_data.py)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

FORMAL = ["Furthermore", "Consequently", "We respectfully note that", "It is evident that", "Accordingly"]
CASUAL = ["lol", "honestly", "yeah so", "omg", "kinda"]
TOPICS = {
    "sports": ["the match", "the striker", "a late goal", "the league table", "the coach", "extra time"],
    "cooking": ["the soup", "fresh basil", "a hot pan", "the oven", "garlic and butter", "the recipe"],
}
VERBS = ["changed", "decided", "shaped", "improved", "ruined", "defined"]


def labelled_rows(n: int = 320, seed: int = 0) -> list[dict]:
    """Rows {text, register, topic, level}: register formal/casual, topic sports/cooking, level a number."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        register = "formal" if i % 2 else "casual"
        topic = "sports" if (i // 2) % 2 else "cooking"
        lead = rng.choice(FORMAL if register == "formal" else CASUAL)
        things = rng.sample(TOPICS[topic], 3)
        tail = "." if register == "formal" else " !!"
        text = f"{lead} {things[0]} {rng.choice(VERBS)} {things[1]} and {things[2]} on day {i}{tail}"
        rows.append({"text": text, "register": register, "topic": topic, "level": float(i % 7)})
    return rows


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path)
    return path
