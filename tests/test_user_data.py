"""Training on one's own labelled file (steering/data/user_data.py): reading, the axis mapping, the split, and
every bad input's one-line message (exit code 2, nothing written)."""

from __future__ import annotations

import pytest
from user_files import labelled_rows, write_csv, write_jsonl, write_parquet

from steering.cli.main import main
from steering.data import user_data
from steering.judges import axis_judges

AXES = ["formality=register:casual,formal", "topic=topic"]


@pytest.mark.parametrize("writer", [write_csv, write_jsonl, write_parquet])
def test_the_three_formats_read_alike(tmp_path, writer):
    path = writer(tmp_path / f"rows.{writer.__name__[6:]}", labelled_rows())
    corpus = user_data.load_corpus(path, "text", AXES)
    assert [(a.name, a.negative, a.positive) for a in corpus.axes] == [
        ("formality", "casual", "formal"),
        ("topic", "cooking", "sports"),  # no order given: sorted
    ]
    assert len(corpus.train) + len(corpus.heldout) == 320
    formal = next(r for r in corpus.train if r.text.startswith("Furthermore"))
    assert formal.control[0] == 1.0
    assert {r.control[1] for r in corpus.train} == {-1.0, 1.0}


def test_the_split_is_the_hash_rule_per_group_and_stable(tmp_path):
    rows = labelled_rows()
    a = user_data.load_corpus(write_csv(tmp_path / "a.csv", rows), "text", AXES)
    b = user_data.load_corpus(write_jsonl(tmp_path / "b.jsonl", rows[::-1]), "text", AXES)
    assert {r.text for r in a.heldout} == {r.text for r in b.heldout}  # row order does not matter
    assert len(a.heldout) == 4 * round(80 * 0.05)  # four (formality, topic) groups of 80
    for group in {r.label for r in a.heldout}:
        held = sorted(user_data._split_key(r.text) for r in a.heldout if r.label == group)
        kept = sorted(user_data._split_key(r.text) for r in a.train if r.label == group)
        assert held[-1] < kept[0]


def test_a_numeric_column_scales_to_minus_one_plus_one_and_one_axis_leaves_the_second_at_zero(tmp_path):
    corpus = user_data.load_corpus(write_csv(tmp_path / "r.csv", labelled_rows()), "text", ["level=level"])
    (axis,) = corpus.axes
    assert (axis.kind, axis.low, axis.high) == ("numeric", 0.0, 6.0)
    values = {r.control for r in corpus.train + corpus.heldout}
    assert min(v[0] for v in values) == -1.0 and max(v[0] for v in values) == 1.0
    assert {v[1] for v in values} == {0.0}
    assert (0.0, 0.0) in values  # level 3 is the middle


def test_empty_and_non_utf8_texts_are_counted_and_skipped(tmp_path):
    rows = labelled_rows(260)
    rows[0]["text"] = "   "
    rows[1]["text"] = ""
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    with path.open("ab") as f:
        f.write(b'{"text": "caf\xe9 latte", "register": "formal", "topic": "sports", "level": 1}\n')
    corpus = user_data.load_corpus(path, "text", AXES)
    assert corpus.skipped["empty texts"] == 2
    assert corpus.skipped["non-UTF-8 texts"] == 1
    assert corpus.notes() == "skipped 1 non-UTF-8 texts, 2 empty texts"
    csv_path = tmp_path / "r.csv"
    write_csv(csv_path, rows)
    with csv_path.open("ab") as f:
        f.write(b"caf\xe9 au lait,formal,sports,1\n")
    assert user_data.load_corpus(csv_path, "text", AXES).skipped["non-UTF-8 texts"] == 1


def run_cli(tmp_path, capsys, *args):
    out = tmp_path / "out"
    code = main(["train", "--preset", "tiny", "--steps", "1", "--stage2-steps", "0", "--out", str(out), *args])
    err = capsys.readouterr().err.strip()
    return code, err, out


def bad_file(tmp_path, change) -> str:
    rows = labelled_rows()
    change(rows)
    return str(write_csv(tmp_path / "bad.csv", rows))


def few(rows):
    del rows[150:]


def one_class(rows):
    for r in rows:
        r["topic"] = "sports"


def three_classes(rows):
    rows[0]["topic"] = "chess"


def nan_level(rows):
    rows[5]["level"] = "nan"


def constant_level(rows):
    for r in rows:
        r["level"] = 2.5


def mostly_empty(rows):
    for r in rows[:200]:
        r["text"] = " "


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "{dir}/missing.csv", "--text-column", "text", "--axis", "a=topic"], "data file not found: "),
        (["--data", "{good}", "--text-column", "body", "--axis", "a=topic"], "no column 'body' (it has text, "),
        (["--data", "{good}", "--text-column", "text", "--axis", "a=colour"], "no column 'colour'"),
        (["--data", "{good}", "--text-column", "text"], "--data needs at least one --axis NAME=COLUMN"),
        (
            [
                "--data",
                "{good}",
                "--text-column",
                "text",
                "--axis",
                "a=topic",
                "--axis",
                "b=register",
                "--axis",
                "c=level",
            ],
            "at most 2 axes (the model has two control inputs); got 3",
        ),
        (["--data", "{good}", "--text-column", "text", "--axis", "topic"], "expected NAME=COLUMN"),
        (["--data", "{good}", "--text-column", "text", "--axis", "t=topic:sports,chess"], "has no value 'chess'"),
        (["--data", "{good}", "--text-column", "text", "--axis", "t=text"], "column 'text' is the text column"),
        (["--data", "{three_classes}", "--text-column", "text", "--axis", "t=topic"], "has 3 distinct values"),
        (["--axis", "t=topic"], "--axis, --text-column and --probe-words need --data FILE"),
        (
            ["--data", "{few}", "--text-column", "text", "--axis", "t=topic"],
            "150 usable rows, fewer than the 200 needed",
        ),
        (["--data", "{one_class}", "--text-column", "text", "--axis", "t=topic"], "has one class only ('sports')"),
        (["--data", "{nan_level}", "--text-column", "text", "--axis", "l=level"], "has 1 NaN or empty values"),
        (["--data", "{constant_level}", "--text-column", "text", "--axis", "l=level"], "is constant (2.5)"),
        (
            ["--data", "{mostly_empty}", "--text-column", "text", "--axis", "t=topic"],
            "120 usable rows, fewer than the 200 needed (skipped 200 empty texts)",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, message):
    files = {
        "dir": str(tmp_path),
        "good": str(write_csv(tmp_path / "good.csv", labelled_rows())),
        **{
            fn.__name__: bad_file(_dir(tmp_path, fn.__name__), fn)
            for fn in (few, three_classes, one_class, nan_level, constant_level, mostly_empty)
        },
    }
    code, err, out = run_cli(tmp_path, capsys, *[a.format(**files) for a in args])
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err
    assert message in err
    assert not out.exists()


def test_a_non_utf8_file_that_leaves_too_few_rows_says_how_many_were_skipped(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    rows = labelled_rows(260)
    lines = ["text,register,topic,level"] + [f"{r['text']} caf\xe9,{r['register']},{r['topic']},1" for r in rows[:100]]
    lines += [f"{r['text']},{r['register']},{r['topic']},1" for r in rows[100:]]
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    code, err, out = run_cli(tmp_path, capsys, "--data", str(path), "--text-column", "text", "--axis", "t=topic")
    assert code == 2
    assert "160 usable rows, fewer than the 200 needed (skipped 100 non-UTF-8 texts)" in err
    assert not out.exists()


def _dir(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    return folder


def test_the_lab_keeps_the_shipped_words_for_a_checkpoint_of_the_movie_corpus():
    from steering.lab import logic

    texts = logic.model_texts({"model": {}, "meta": {"train": {}}})
    assert texts.labels == ("Sentiment u₁  (− negative … + positive)", "Style u₂  (− critic blurb … + user review)")
    assert texts.helps == (logic.SENTIMENT_HELP, logic.STYLE_HELP)
    assert texts.prompts == logic.EXAMPLE_PROMPTS and texts.prompts[0] == "The movie was"
    assert texts.probe_targets == (" good", " bad") and not texts.user_model
    assert texts.short_label(0) == "Sentiment u₁"


def test_a_one_axis_model_names_its_axis_and_leaves_the_second_slider_unused():
    from steering.lab import logic

    axis = user_data.Axis(
        "toxicity", "label", "binary", "civil", "toxic", probe_words={"negative": ["thanks"], "positive": ["idiot"]}
    )
    texts = logic.model_texts({"meta": {"axes": user_data.axes_meta([axis]), "prompts": ["You are", "Thanks for"]}})
    assert texts.labels == ("Toxicity u₁  (− civil … + toxic)", logic.UNUSED_AXIS_LABEL)
    assert texts.used == (True, False)
    assert texts.prompts == ("You are", "Thanks for")
    assert texts.probe_targets == (" idiot", " thanks")
    assert "'civil' at −1 and 'toxic' at +1" in texts.helps[0]
    assert logic.steer_badges(0.9, 0.0, 4, ("civil", "toxic"))[0] == ("judged toxic: P(toxic) 90%", "positive")
    assert logic.steer_badges(0.5, 0.0, 4, ("civil", "toxic"))[0] == ("judged mixed: P(toxic) 50%", "neutral")


def test_batches_of_a_user_file_pack_texts_of_one_group_with_their_control(tmp_path):
    import torch

    from steering.data import reviews as data
    from steering.data.tokenizer import bos_id, train_tokenizer

    corpus = user_data.load_corpus(write_csv(tmp_path / "r.csv", labelled_rows()), "text", AXES)
    tok = train_tokenizer((r.text for r in corpus.train), 300)
    split = data.encode_reviews(tok, corpus.train, bos_id(tok))
    sampler = user_data.GroupBatchSampler(
        split, [r.label for r in corpus.train], 32, 32 * 8, torch.Generator().manual_seed(0), control_dropout=0.0
    )
    assert sorted(sampler.groups) == [("data", 0), ("data", 2), ("data", 6), ("data", 8)]  # (−,−) (−,+) (+,−) (+,+)
    by_control = {r.control for r in corpus.train}
    x, y, u, n = sampler.sample()
    assert x.shape == (8, 32) and n == 8 * 32
    assert {tuple(row) for row in u.tolist()} <= by_control and len({tuple(row) for row in u.tolist()}) > 1


def test_without_data_training_reads_the_movie_corpus_as_before():
    from steering.data import reviews as data
    from steering.training.train import _training_reviews, _user_corpus, make_config

    cfg = make_config("tiny")
    assert (cfg.data, cfg.text_column, cfg.axes) == ("", "", ())
    assert _user_corpus(cfg) is None
    reviews = _training_reviews(cfg)
    assert len(reviews) == cfg.max_reviews and set(reviews) <= set(data.train_reviews())


def test_a_run_on_a_user_file_resumes_where_it_stopped(tmp_path, monkeypatch):
    import torch

    from steering.data import reviews as data
    from steering.training.checkpoint import load_checkpoint, read_log
    from steering.training.train import make_config, train

    path = write_csv(tmp_path / "rows.csv", labelled_rows())
    short = dict(
        data=str(path), text_column="text", axes=tuple(AXES), steps=12, stage2_steps=0, eval_every=6, d_model=32,
        field_hidden=64, block_size=32, tokens_per_batch=256,
    )  # fmt: skip
    train(make_config("tiny", out=str(tmp_path / "straight"), **short), progress=False)
    real_sample, calls = data.BatchSampler.sample, {"n": 0}

    def flaky_sample(self):
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt
        return real_sample(self)

    monkeypatch.setattr(data.BatchSampler, "sample", flaky_sample)  # GroupBatchSampler's own sample
    with pytest.raises(KeyboardInterrupt):
        train(make_config("tiny", out=str(tmp_path / "resumed"), **short), progress=False)
    monkeypatch.setattr(data.BatchSampler, "sample", real_sample)
    train(make_config("tiny", out=str(tmp_path / "resumed"), resume=True, **short), progress=False)
    straight, _, config = load_checkpoint(tmp_path / "straight")
    resumed, _, _ = load_checkpoint(tmp_path / "resumed")
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-3), name
    assert [r["step"] for r in read_log(tmp_path / "resumed")] == list(range(12))
    assert [a["name"] for a in config["meta"]["axes"]] == ["formality", "topic"]
    assert (tmp_path / "resumed" / "judges" / "axis1.json").is_file()


def test_a_judge_is_still_fitted_when_no_word_appears_twice(tmp_path):
    import random

    rng = random.Random(1)
    rows = [
        {"text": "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(12)), "kind": "ab"[i % 2]}
        for i in range(240)
    ]
    corpus = user_data.load_corpus(write_csv(tmp_path / "unique.csv", rows), "text", ["kind=kind"])
    (judge,) = axis_judges.train_axis_judges(corpus)
    assert judge.spec.min_df == 1 and len(judge.vocabulary) == len(corpus.train)
