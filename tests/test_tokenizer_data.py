from steering import data
from steering.tokenizer import bos_id, decode, encode, load_tokenizer

import pytest


@pytest.mark.parametrize("text", ["The movie was great!", "Ünïcødé 🎬🍿 naïve café", "\x00\x07 ctrl \t\n", "日本語の映画", ""])
def test_byte_level_round_trip_on_odd_text(small_tokenizer, text):
    assert decode(small_tokenizer, encode(small_tokenizer, text)) == text


def test_bos_is_a_special_token_and_never_decoded(small_tokenizer):
    bos = bos_id(small_tokenizer)
    assert bos == 0
    assert decode(small_tokenizer, [bos] + encode(small_tokenizer, "hi")) == "hi"


def test_tokenizer_save_load_and_corrupt_file(small_tokenizer, tmp_path):
    small_tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert encode(load_tokenizer(tmp_path / "tokenizer.json"), "a film") == encode(small_tokenizer, "a film")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_tokenizer(tmp_path / "missing.json")


def test_corpus_is_real_and_split_is_stratified_and_disjoint():
    train, heldout = data.split_reviews()
    assert len(train) + len(heldout) > 33_000
    assert 0.045 < len(heldout) / (len(train) + len(heldout)) < 0.055
    for label in (0, 1):
        for source in data.SOURCES:
            group = [r for r in heldout if (r.label, r.source) == (label, source)]
            total = group + [r for r in train if (r.label, r.source) == (label, source)]
            assert abs(len(group) / len(total) - 0.05) < 0.002
    assert not {r.text for r in train} & {r.text for r in heldout}
    assert not any("<br" in r.text for r in train[:2000])
    assert data.split_reviews() == (train, heldout)  # deterministic


def test_controls_come_from_label_and_source():
    assert data.Review("x", 1, "imdb").control == (1.0, 1.0)
    assert data.Review("x", 0, "rotten_tomatoes").control == (-1.0, -1.0)


def test_batches_have_one_source_padding_and_control_dropout(small_tokenizer):
    import torch
    reviews = data.train_reviews()[::50]
    split = data.encode_reviews(small_tokenizer, reviews, bos_id(small_tokenizer))
    sampler = data.BatchSampler(split, block_size=32, tokens_per_batch=512,
                                generator=torch.Generator().manual_seed(0), control_dropout=0.5)
    zeros, total = 0, 0
    for _ in range(30):
        x, y, u, n = sampler.sample()
        assert x.shape == y.shape and x.shape[1] <= 32 and x.numel() <= 512
        assert n == int((y >= 0).sum())
        styles = set(u[:, 1].tolist()) - {0.0}
        assert len(styles) <= 1  # a batch holds one source
        zeros += int((u == 0).sum())
        total += u.numel()
    assert 0.35 < zeros / total < 0.65
