"""The judges: obvious sentences, held-out accuracy, and that the shipped plain files predict like scikit-learn."""

import json

import numpy as np
import pytest

from steering.data import reviews as data
from steering.judges import judge

POSITIVE = [
    "This movie was wonderful, a brilliant and moving film with great acting. I loved every minute of it.",
    "an absolute delight , funny , touching and beautifully made .",
    "One of the best films I have seen in years. Highly recommended!",
]
NEGATIVE = [
    "This was the worst movie I have ever seen. Boring, stupid and a complete waste of time.",
    "a dull , lifeless mess that is neither funny nor interesting .",
    "Terrible acting, an awful script and no reason to watch it. Avoid this film.",
]
RT_STYLE = [
    "A gorgeous, witty and moving film that never forgets its heart.",
    "The plot is thin, but the cast is charming and the jokes land.",
]
IMDB_STYLE = [
    "I watched this movie last night with my wife, and honestly I didn't expect much. But the story was great.",
    "The plot is thin, but the cast is charming and the jokes land. I'd give it a 7/10.",
]


def test_classifier_reads_obvious_sentiment():
    verdicts = judge.judge_sentiment(POSITIVE + NEGATIVE)
    assert verdicts.classifier.tolist() == [1] * 3 + [-1] * 3
    assert (verdicts.classifier_probability[:3] > 0.7).all() and (verdicts.classifier_probability[3:] < 0.3).all()


def test_vader_reads_obvious_sentiment_and_leaves_plain_facts_neutral():
    verdicts = judge.judge_sentiment(POSITIVE + NEGATIVE + ["The film is two hours long."])
    assert verdicts.vader.tolist() == [1] * 3 + [-1] * 3 + [0]
    assert verdicts.vader_compound[-1] == 0.0


def test_vader_decision_rule_uses_the_published_thresholds():
    assert judge.vader_verdict(np.array([0.05, 0.049, 0.0, -0.049, -0.05, 0.9, -0.9])).tolist() == [
        1,
        0,
        0,
        0,
        -1,
        1,
        -1,
    ]


def test_style_judge_tells_blurbs_from_reviews():
    assert judge.judge_style(RT_STYLE + IMDB_STYLE).tolist() == [-1, -1, 1, 1]


def test_style_judge_reads_the_normalised_blurbs_by_content_not_formatting():
    # the blurbs are prose now (data.normalize_blurb): the judge tells the sources apart by what
    # they say and how long they run, on held-out text of both
    held = data.heldout_reviews()
    for source, wanted in (("rotten_tomatoes", -1), ("imdb", 1)):
        texts = [r.text for r in held if r.source == source][:200]
        assert (judge.judge_style(texts) == wanted).mean() > 0.95, source
    assert not any(" , " in r.text for r in held if r.source == "rotten_tomatoes")


def test_sentiment_classifier_ignores_the_source_formatting():
    p = judge.sentiment_judge().probability(
        ["a funny , moving and wonderful film .", "A funny, moving and wonderful film."]
    )
    assert p[0] == pytest.approx(p[1], abs=1e-12)


def test_heldout_accuracy_of_the_shipped_judges():
    heldout = data.heldout_reviews()
    sentiment = judge.sentiment_judge()
    accuracy = sentiment.accuracy(heldout)
    assert accuracy > 0.8
    # the float32 files agree with the float64 model the accuracy was recorded from (to a review or two)
    assert accuracy == pytest.approx(sentiment.heldout_accuracy, abs=2 / len(heldout))
    assert judge.style_judge().accuracy(heldout) > 0.95


def test_shipped_judges_were_trained_on_the_current_training_split():
    folder = judge.judge_dir()
    meta = json.loads((folder / "sentiment.json").read_text())["meta"]
    assert meta["train_fingerprint"] == judge.split_fingerprint(data.train_reviews())
    assert meta["train_reviews"] == len(data.train_reviews())


def test_plain_file_judge_predicts_like_scikit_learn(tmp_path):
    train, heldout = data.train_reviews()[::20], data.heldout_reviews()[::10]
    spec = judge.SENTIMENT_SPEC
    vectorizer, classifier = judge.fit_sklearn(
        spec, [r.text for r in train], [judge.review_target(spec, r) for r in train]
    )
    texts = [r.text for r in heldout] + POSITIVE + NEGATIVE + ["", "zzzz qqqq"]
    expected = classifier.predict_proba(vectorizer.transform(texts))[:, 1]
    rebuilt = judge.LinearTextJudge.from_sklearn(spec, vectorizer, classifier)
    np.testing.assert_allclose(rebuilt.probability(texts), expected, rtol=0, atol=1e-12)
    rebuilt.save(tmp_path, {})
    reloaded = judge.LinearTextJudge.load(tmp_path, "sentiment")
    np.testing.assert_allclose(reloaded.probability(texts), expected, rtol=0, atol=1e-4)


def test_training_words_hold_common_words_only():
    words = judge.training_words()
    assert {"movie", "good", "bad", "the", "actors"} <= words
    assert "xqzvtw" not in words and "Movie" not in words
    counts = judge.count_training_words(data.train_reviews()[:200])
    assert counts["the"] > counts["movie"] > 0


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="list of texts"):
        judge.sentiment_judge().probability("a single string")
    with pytest.raises(ValueError, match="unknown judge"):
        judge.load_judge("humour")
    assert judge.sentiment_judge().probability([]).shape == (0,)
