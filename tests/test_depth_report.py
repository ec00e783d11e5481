"""`python -m steering depth`: the issue-33 figures of a checkpoint or of a run while it trains."""

import json

import pytest
import torch

from steering.cli.main import main
from steering.evaluation.depth_report import depth_report, format_report
from steering.evaluation.evaluate import bits_per_byte, heldout_openings
from steering.model.ode import SolverConfig
from steering.training.checkpoint import CheckpointError, load_model_or_saved_state, save_checkpoint
from steering.training.train import _make_optimizer, _save_state


def test_the_report_measures_the_block_as_the_evaluation_does(small_depth_hybrid, small_tokenizer):
    model, tok = small_depth_hybrid, small_tokenizer
    report = depth_report(model, tok, texts_per_group=1, prompts=1, probe_prompts=3)
    openings = heldout_openings(1)
    trained = bits_per_byte(model, tok, openings)
    assert report["bits_per_byte"] == pytest.approx(trained)
    one_step = bits_per_byte(model, tok, openings, solver=SolverConfig("euler", steps=1))
    assert report["depth_use_bpb"] == pytest.approx(one_step - trained)
    assert report["block_skip_bpb"] == pytest.approx(bits_per_byte(model, tok, openings, skip_middle=True) - trained)
    # the fixture's field differs along τ, so its paths bend and one Euler step is not RK4
    assert report["path_curvature"] > 1e-4 and report["depth_use_bpb"] != 0
    assert report["displacement"] > 0 and report["solver_divergence"] >= 0
    levels = report["nfe_levels"]
    assert len(levels) == report["probe_prompts"] == 3
    assert all(nfe and nfe == sorted(set(nfe)) and nfe[0] >= 6 for nfe in levels)  # dopri5: 6 per step + 2
    assert report["prompts_with_two_levels"] == sum(len(nfe) > 1 for nfe in levels)
    text = format_report(report, "small")
    assert "block_skip_bpb" in text and "(bar >= 0.8 x baseline_middle_bpb: no baseline on this tokenizer)" in text


def test_with_a_baseline_the_skip_is_held_to_its_middle_load(small_depth_hybrid, small_discrete, small_tokenizer):
    model, discrete, tok = small_depth_hybrid, small_discrete, small_tokenizer
    report = depth_report(model, tok, texts_per_group=1, prompts=1, probe_prompts=1, baseline=discrete)
    own = depth_report(discrete, tok, texts_per_group=1)
    assert report["baseline_middle_bpb"] == pytest.approx(own["outer_only_bpb"])
    met = report["block_skip_bpb"] >= 0.8 * report["baseline_middle_bpb"]
    text = format_report(report, "small")
    assert f"baseline_middle_bpb  {report['baseline_middle_bpb']:.4f}" in text
    assert f"(bar >= 0.8 x baseline_middle_bpb: {'met' if met else 'not met'})" in text


def test_a_discrete_model_reports_the_load_of_its_middle_blocks(small_discrete, small_tokenizer):
    model, tok = small_discrete, small_tokenizer
    blocks = list(model.pre) + list(model.mid) + list(model.post)
    report = depth_report(model, tok, texts_per_group=1)
    assert list(model.pre) + list(model.mid) + list(model.post) == blocks  # put back as found
    openings = heldout_openings(1)
    full = bits_per_byte(model, tok, openings)
    model.pre, model.mid, model.post = (torch.nn.ModuleList(b) for b in (blocks[:1], [], blocks[-1:]))
    assert report == {
        "arch": "discrete",
        "bits_per_byte": pytest.approx(full),
        "outer_only_bpb": pytest.approx(bits_per_byte(model, tok, openings) - full),
    }


def test_the_command_reads_a_runs_saved_state_and_refuses_what_it_cannot_read(
    small_depth_hybrid, small_tokenizer, tmp_path, capsys
):
    run = tmp_path / "run"
    opt = _make_optimizer(small_depth_hybrid, 1e-3, 0.0, {})
    _save_state(run / "resume", small_depth_hybrid, opt, 7, 1, {}, [])
    with pytest.raises(CheckpointError, match="older version"):  # no tokenizer beside it yet
        load_model_or_saved_state(run)
    small_tokenizer.save(str(run / "tokenizer.json"))
    model, _, source = load_model_or_saved_state(run)
    assert source.endswith("stage 1 step 7")
    idx = torch.randint(0, model.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(idx)[0], small_depth_hybrid(idx)[0])

    assert main(["depth", str(run), "--json", "--texts", "1", "--prompts", "1", "--probe-prompts", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["source"].endswith("step 7")
        and printed["texts"] == 4
        and printed["prompts"] == 1
        and len(printed["nfe_levels"]) == 1
    )
    # a checkpoint folder loads as a checkpoint
    save_checkpoint(small_depth_hybrid, tmp_path / "ckpt", small_tokenizer, dtype=torch.float32)
    assert load_model_or_saved_state(tmp_path / "ckpt")[2] == str(tmp_path / "ckpt")
    # neither: one clear line, exit 2
    assert main(["depth", str(tmp_path / "empty")]) == 2
    assert "neither a checkpoint" in capsys.readouterr().err
