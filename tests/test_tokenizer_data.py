import pytest

from steering.data import reviews as data
from steering.data.tokenizer import bos_id, decode, encode, load_tokenizer


@pytest.mark.parametrize(
    "text", ["The movie was great!", "Ünïcødé 🎬🍿 naïve café", "\x00\x07 ctrl \t\n", "日本語の映画", ""]
)
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


def test_packed_rows_hold_one_control_no_padding_and_review_boundaries(small_tokenizer):
    import torch

    reviews = data.train_reviews()[::50]
    bos = bos_id(small_tokenizer)
    split = data.encode_reviews(small_tokenizer, reviews, bos)
    sampler = data.BatchSampler(
        split,
        block_size=32,
        tokens_per_batch=512,
        rt_fraction=0.5,
        generator=torch.Generator().manual_seed(0),
        control_dropout=0.5,
    )
    texts = {tuple(t.tolist()) for t in split.tokens}
    zeros, total, starts, sources = 0, 0, 0, set()
    for _ in range(30):
        x, y, u, n = sampler.sample()
        assert x.shape == y.shape == (16, 32) and n == 512 and (y >= 0).all()  # every slot a real token
        assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next tokens
        zeros += int((u == 0).sum())
        total += u.numel()
        starts += int((x[:, 0] == bos).sum())
        sources |= set(u[:, 1].tolist()) - {0.0}
        for row in torch.cat([x, y[:, -1:]], 1):
            # every review packed after the first is whole from its BOS (the last one may be cut)
            cuts = (row == bos).nonzero().flatten().tolist()
            for a, b in zip(cuts, cuts[1:]):
                assert tuple(row[a:b].tolist()) in texts
    assert 0.35 < zeros / total < 0.65
    assert 0.3 < starts / (30 * 16) < 0.9  # about start_prob of the rows open a review, the rest mid-review
    assert sources == {-1.0, 1.0}


def test_packed_rows_are_one_label_and_source():
    import torch

    # tokens that name their review's group, so a row's content shows which groups it drew from
    groups = [(1, "imdb"), (0, "imdb"), (1, "rotten_tomatoes"), (0, "rotten_tomatoes")]
    reviews = [data.Review("x", label, source) for label, source in groups for _ in range(5)]
    tokens = [torch.tensor([0] + [10 + g] * (3 + i)) for g in range(4) for i in range(5)]
    split = data.EncodedSplit(tokens, torch.tensor([r.control for r in reviews]), [r.source for r in reviews])
    sampler = data.BatchSampler(
        split,
        block_size=20,
        tokens_per_batch=400,
        rt_fraction=0.5,
        generator=torch.Generator().manual_seed(1),
        control_dropout=0.0,
    )
    x, y, u, _ = sampler.sample()
    for row, control in zip(x, u):
        group = set(row.tolist()) - {0}
        assert len(group) == 1
        label, source = groups[group.pop() - 10]
        assert tuple(control.tolist()) == data.Review("x", label, source).control


def test_blurbs_are_normalised_to_prose_on_real_rows():
    blurbs = {r.shipped_text: r.text for r in data.load_reviews() if r.source == "rotten_tomatoes"}
    shipped = (
        "it showcases carvey's talent for voices , but not nearly enough and not without taxing every drop "
        "of one's patience to get to the good stuff ."
    )
    assert blurbs[shipped] == (
        "It showcases carvey's talent for voices, but not nearly enough and not without "
        "taxing every drop of one's patience to get to the good stuff."
    )
    quoted = next(k for k in blurbs if ' " ' in k and k.count('"') == 2)
    assert '" ' not in blurbs[quoted].split('"')[0][-1:] and ' " ' not in blurbs[quoted]
    assert (
        data.normalize_blurb("it's a \" movie \" , i think -- and 'grandeur' shots . so ?")
        == "It's a \"movie\", I think -- and 'grandeur' shots. So?"
    )
    spaced = sum(" , " in text or text.endswith(" .") for text in blurbs.values())
    assert spaced == 0 and sum(text[0].isupper() for text in blurbs.values()) > 0.95 * len(blurbs)
    imdb = next(r for r in data.load_reviews() if r.source == "imdb")
    assert imdb.shipped_text == ""  # IMDB text is used as shipped


def test_the_split_is_keyed_on_the_shipped_text():
    import hashlib

    train, heldout = data.split_reviews()
    held_rt = [r for r in heldout if r.source == "rotten_tomatoes"]
    assert held_rt and all(r.shipped_text and r.text != r.shipped_text for r in held_rt[:50])
    # within each group the held-out reviews are those with the smallest hash of the shipped text
    group = sorted(
        (r for r in train + heldout if (r.label, r.source) == (1, "rotten_tomatoes")),
        key=lambda r: hashlib.sha1(r.shipped_text.encode()).hexdigest(),
    )
    n_held = sum((r.label, r.source) == (1, "rotten_tomatoes") for r in heldout)
    assert {r.text for r in group[:n_held]} == {
        r.text for r in heldout if (r.label, r.source) == (1, "rotten_tomatoes")
    }
