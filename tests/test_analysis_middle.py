"""The middle-block analysis: loss with and without the middle, and how far it moves H."""

import json

import pytest
import torch

from steering.analysis.middle import middle_work
from steering.cli.main import main
from steering.data.heldout import heldout_batch
from steering.evaluation.evaluate import middle_relative_update


@pytest.fixture(scope="module")
def windows(small_tokenizer):
    return heldout_batch(small_tokenizer, 32, 3)


def test_a_field_with_alpha_zero_does_no_work(small_hybrid, windows):
    inputs, targets, controls = windows
    with torch.no_grad():
        small_hybrid.field.alpha.zero_()
    w = middle_work(small_hybrid, inputs, targets, controls)
    assert w.loss_without_middle == pytest.approx(w.loss, abs=1e-6) and w.loss_cost_of_removal == pytest.approx(
        0, abs=1e-6
    )
    assert w.relative_update == 0 and w.relative_update_own_control == 0


def test_middle_work_matches_the_evaluation_and_sees_the_control(small_hybrid, small_discrete, windows):
    inputs, targets, controls = windows
    w = middle_work(small_hybrid, inputs, targets, controls)
    assert w.windows == len(inputs) and w.relative_update > 0 and w.state_norm > 0
    assert w.relative_update == pytest.approx(middle_relative_update(small_hybrid, inputs, targets), rel=1e-5)
    assert w.relative_update_own_control != pytest.approx(w.relative_update, rel=1e-4)  # u moves the block
    d = middle_work(small_discrete, inputs, targets, controls)
    assert d.relative_update == pytest.approx(middle_relative_update(small_discrete, inputs, targets), rel=1e-5)
    assert d.relative_update_own_control is None and d.loss_without_middle != pytest.approx(d.loss, abs=1e-4)


def test_analyze_middle_json(small_checkpoint, capsys):
    assert main(["analyze", "middle", "--json", "--checkpoint", str(small_checkpoint), "--n-reviews", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["arch"] == "hybrid" and out["windows"] >= 2
    assert out["loss_cost_of_removal"] == pytest.approx(out["loss_without_middle"] - out["loss"])
    assert out["relative_update"] >= 0 and out["relative_update_own_control"] >= 0


def test_a_constant_offset_is_shared_not_token_specific(small_hybrid, windows):
    inputs, targets, controls = windows
    with torch.no_grad():
        small_hybrid.field.fc_out.weight.zero_()
        small_hybrid.field.fc_out.bias.fill_(0.5)  # α·F is then the same vector for every token
    w = middle_work(small_hybrid, inputs, targets, controls)
    assert w.relative_update > 0.01
    assert w.token_specific_update == pytest.approx(0, abs=1e-5)
    assert w.shared_update == pytest.approx(
        small_hybrid.field.alpha.item() * 0.5 * small_hybrid.config.d_model**0.5 / w.state_norm, rel=1e-4
    )


def test_a_token_dependent_update_is_token_specific(small_discrete, windows):
    inputs, targets, controls = windows
    d = middle_work(small_discrete, inputs, targets, controls)
    assert d.token_specific_update > 0.5 * d.relative_update
