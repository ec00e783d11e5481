"""The checkpoints in assets/: they load with no download, and the quick evaluation is in range."""
import json
import math

import pytest

from steering import evaluate
from steering.checkpoint import ASSETS, load_checkpoint


@pytest.fixture(scope="module")
def quick_report():
    return evaluate.evaluate(ASSETS / "hybrid", ASSETS / "discrete", quick=True)


def test_shipped_checkpoints_load_as_float32_and_fit_the_size_budget():
    for name in ("hybrid", "discrete"):
        model, tok, config = load_checkpoint(ASSETS / name)
        assert config["model"]["arch"] == name
        assert next(model.parameters()).dtype.is_floating_point
        assert tok.get_vocab_size() == config["model"]["vocab_size"]
    shipped = sum(p.stat().st_size for p in ASSETS.rglob("*") if p.is_file())
    assert shipped <= 25 * 1024 * 1024


def test_quick_evaluation_of_the_shipped_model_has_every_key_in_range(quick_report):
    assert set(quick_report) == set(evaluate.KEYS)
    for key, value in quick_report.items():
        if key == "probe_raw":
            for probs in value.values():
                assert all(0 <= p <= 1 for p in probs.values())
            continue
        assert isinstance(value, (int, float)) and math.isfinite(value), key
    for key in ("steer_pos_clf", "steer_neg_clf", "steer_pos_vader", "steer_neg_vader", "steer_neutral_pos_clf",
                "probe_good_pos", "probe_bad_neg", "style_rt_acc", "style_imdb_acc", "valid_word_rate",
                "judge_heldout_acc"):
        assert 0 <= quick_report[key] <= 1, key
    assert 0 < quick_report["val_loss_hybrid"] < math.log(4096)
    assert quick_report["alpha_initial"] == pytest.approx(0.1)


def test_the_shipped_control_steers(quick_report):
    raw = quick_report["probe_raw"]
    assert raw["+1"]["good"] / raw["+1"]["bad"] > 5 * raw["-1"]["good"] / raw["-1"]["bad"]
    assert quick_report["steer_pos_clf"] > 0.75 and quick_report["steer_neg_clf"] > 0.75
    assert quick_report["style_rt_acc"] > 0.75 and quick_report["style_imdb_acc"] > 0.75


def test_shipped_config_documents_its_recipe():
    config = json.loads((ASSETS / "hybrid" / "config.json").read_text())
    train = config["meta"]["train"]
    assert train["steps"] == 1200 and train["stage2_steps"] == 250 and train["stage2_neutral_lm"]
    assert "two invocations" in config["meta"]["note"]
