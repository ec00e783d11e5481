"""`python -m steering evaluate` on tiny checkpoints trained here, and the pieces it is made of."""

import json
import math
from collections import Counter

import pytest
import torch

from steering.cli.main import main
from steering.data import reviews as data
from steering.data.tokenizer import decode, encode
from steering.evaluation import evaluate
from steering.inference.generate import sample_tokens
from steering.inference.sampling import GREEDY
from steering.lab import logic
from steering.model.ode import SolverConfig
from steering.training.checkpoint import load_checkpoint, read_log

PROBABILITIES = (
    "repeated_trigram_rate",
    "judge_heldout_acc",
    "steer_pos_clf",
    "steer_neg_clf",
    "steer_pos_vader",
    "steer_neg_vader",
    "steer_neutral_pos_clf",
    "probe_good_pos",
    "probe_bad_neg",
    "style_rt_acc",
    "style_imdb_acc",
    "valid_word_rate",
)


@pytest.fixture(scope="session")
def quick_report(tiny_trained_pair):
    hybrid, discrete = tiny_trained_pair
    return evaluate.evaluate(hybrid, discrete, quick=True)


def test_the_seed_moves_the_generations_figures_and_nothing_else(tiny_trained_pair, quick_report, capsys):
    hybrid, discrete = tiny_trained_pair
    args = ["evaluate", "--quick", "--json", "--checkpoint", str(hybrid), "--baseline", str(discrete)]
    assert main([*args, "--seed", "7"]) == 0
    other = json.loads(capsys.readouterr().out)
    for key in ("val_loss_hybrid", "val_loss_own_control", "bits_per_byte_hybrid", "probe_good_pos", "path_curvature"):
        assert other[key] == quick_report[key], key
    assert other["ppl_ratio_steered"] != quick_report["ppl_ratio_steered"]  # other texts, other perplexities
    with pytest.raises(SystemExit) as refused:  # argparse's usage line, no traceback
        main(["evaluate", "--seed", "x"])
    assert refused.value.code == 2 and "invalid int value: 'x'" in capsys.readouterr().err


def test_cli_prints_exactly_the_issue_keys_with_finite_values_in_range(tiny_trained_pair, capsys):
    hybrid, discrete = tiny_trained_pair
    assert main(["evaluate", "--quick", "--json", "--checkpoint", str(hybrid), "--baseline", str(discrete)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == list(evaluate.KEYS)
    assert len(evaluate.KEYS) == 33
    for key in PROBABILITIES:
        assert 0.0 <= report[key] <= 1.0, key
    vocab = math.log(load_checkpoint(hybrid)[0].config.vocab_size)
    for key in ("val_loss_hybrid", "val_loss_discrete", "val_loss_own_control", "val_loss_u0"):
        assert 0.5 * vocab < report[key] < 1.5 * vocab, key  # a few steps from uniform
    assert report["val_loss_u0"] == report["val_loss_hybrid"] and report["steer_u"] == 1.0
    for key in ("bits_per_byte_hybrid", "bits_per_byte_discrete", "bits_per_byte_hybrid_imdb"):
        assert 1.0 < report[key] < 8.0, key  # bits per UTF-8 byte, a few steps from uniform
    for key in (
        "alpha_initial",
        "alpha_final",
        "solver_divergence",
        "ode_relative_displacement",
        "discrete_mid_relative_update",
        "ppl_ratio_steered",
        "path_curvature",
    ):
        assert math.isfinite(report[key]) and report[key] >= 0, key
    for key in ("depth_use_bpb", "block_skip_bpb"):
        assert math.isfinite(report[key]), key
    assert report["ppl_ratio_steered"] > 0 and report["alpha_final"] > 0
    assert isinstance(report["exploding_steps"], int) and isinstance(report["vanishing_steps"], int)
    assert set(report["probe_raw"]) == {"+1", "0", "-1"}
    for probs in report["probe_raw"].values():
        assert set(probs) == {"good", "bad"} and all(0 < p <= 1 for p in probs.values())
    raw = report["probe_raw"]
    assert report["probe_good_pos"] == pytest.approx(raw["+1"]["good"] / (raw["+1"]["good"] + raw["+1"]["bad"]))
    assert report["probe_bad_neg"] == pytest.approx(raw["-1"]["bad"] / (raw["-1"]["good"] + raw["-1"]["bad"]))


def test_the_baselines_middle_load_is_its_outer_blocks_minus_itself_on_the_same_openings(
    tiny_trained_pair, quick_report
):
    _, discrete = tiny_trained_pair
    model, tok, _ = load_checkpoint(discrete)
    openings = evaluate.heldout_openings(evaluate.QUICK.bpb_reviews)
    whole = evaluate.bits_per_byte(model, tok, openings)
    assert quick_report["bits_per_byte_discrete"] == pytest.approx(whole)
    blocks = list(model.pre) + list(model.mid) + list(model.post)
    model.pre, model.mid, model.post = (torch.nn.ModuleList(b) for b in (blocks[:1], [], blocks[-1:]))
    assert quick_report["baseline_middle_bpb"] == pytest.approx(evaluate.bits_per_byte(model, tok, openings) - whole)
    held_to = evaluate.TARGETS["block_skip_bpb"][1]
    load = quick_report["baseline_middle_bpb"]
    assert held_to({"block_skip_bpb": 0.8 * load + 1e-9, "baseline_middle_bpb": load})
    assert not held_to({"block_skip_bpb": 0.8 * load - 1e-3, "baseline_middle_bpb": load})


def test_report_reads_alpha_and_gradient_flags_from_both_logs(tiny_trained_pair, quick_report):
    hybrid, discrete = tiny_trained_pair
    records = read_log(hybrid) + read_log(discrete)
    assert {r["stage"] for r in read_log(hybrid)} == {1, 2}
    assert quick_report["exploding_steps"] == sum(r["exploding"] for r in records)
    assert quick_report["vanishing_steps"] == sum(r["vanishing"] for r in records)
    assert quick_report["alpha_initial"] == pytest.approx(0.1)
    assert quick_report["alpha_final"] == pytest.approx(read_log(hybrid)[-1]["alpha"])


def test_evaluation_is_deterministic(tiny_trained_pair, quick_report):
    hybrid, discrete = tiny_trained_pair
    again = evaluate.evaluate(hybrid, discrete, quick=True)
    assert again == quick_report


def test_table_marks_each_issue_bar_as_met_or_missed(quick_report):
    lines = {line.split()[0]: line for line in evaluate.format_table(quick_report).splitlines()}
    for key, (target, check) in evaluate.TARGETS.items():
        assert target in lines[key]
        assert lines[key].endswith("  ok" if check(quick_report) else "  MISSED"), key
    assert "probe_raw" in lines and "val_loss_discrete" in lines


def test_prompts_are_balanced_over_label_and_source(small_tokenizer):
    prompts = evaluate.heldout_prompts(small_tokenizer, 8)
    assert len(prompts) == 8 and all(len(p) == 1 + evaluate.PROMPT_TOKENS for p in prompts)
    groups = {}
    for r in data.heldout_reviews():
        groups.setdefault((r.label, r.source), []).append(r)
    openings = {key: [encode(small_tokenizer, r.text)[:8] for r in rs[:2]] for key, rs in groups.items()}
    found = Counter(key for p in prompts for key, opens in openings.items() if p[1:] in opens)
    assert found == Counter({key: 2 for key in groups})
    assert evaluate.heldout_prompts(small_tokenizer, 8) == prompts
    with pytest.raises(ValueError):
        evaluate.heldout_prompts(small_tokenizer, 0)


def test_generated_words_count_a_word_the_prompt_began_once(small_tokenizer):
    prompt = encode(small_tokenizer, "The movie was unbeliev")
    new = encode(small_tokenizer, "able and good")
    assert decode(small_tokenizer, prompt + new) == "The movie was unbelievable and good"
    assert evaluate.generated_words(small_tokenizer, prompt, new) == ["unbelievable", "and", "good"]


def test_solver_divergence_and_block_update_vanish_for_an_identity_block(small_hybrid, small_tokenizer):
    prompts = evaluate.heldout_prompts(small_tokenizer, 2)
    x = torch.tensor(prompts)
    assert evaluate.solver_divergence(small_hybrid, prompts) > 1e-4  # a real field: Euler errs
    assert evaluate.middle_relative_update(small_hybrid, x, x) > 0.01
    with torch.no_grad():
        small_hybrid.field.alpha.zero_()
    # dopri5 returns H(1) through its interpolant, exact only to float32 rounding
    assert evaluate.solver_divergence(small_hybrid, prompts) < 1e-6
    assert evaluate.middle_relative_update(small_hybrid, x, x) == 0.0


def test_continuation_perplexity_prefers_the_models_own_text(small_hybrid, small_tokenizer):
    prompts = evaluate.heldout_prompts(small_tokenizer, 2)
    own = torch.stack([sample_tokens(small_hybrid, p, torch.zeros(1, 2), 10, sampling=GREEDY)[0][0] for p in prompts])
    noise = torch.randint(0, small_tokenizer.get_vocab_size(), own.shape, generator=torch.Generator().manual_seed(0))
    greedy, random_tokens = (evaluate.continuation_perplexity(small_hybrid, prompts, t) for t in (own, noise))
    assert 1.0 <= greedy < random_tokens


def test_wrong_checkpoints_are_refused(tiny_trained_pair, capsys):
    hybrid, discrete = tiny_trained_pair
    assert main(["evaluate", "--quick", "--checkpoint", str(discrete), "--baseline", str(discrete)]) == 2
    assert "must be the hybrid" in capsys.readouterr().err


def test_repeated_trigram_rate_counts_repeats_within_each_text_only():
    assert evaluate.repeated_trigram_rate(["a b c a b c", "x y z"]) == pytest.approx(
        1 / 5
    )  # 4 + 1 trigrams, one repeat
    assert evaluate.repeated_trigram_rate(["a b c", "a b c"]) == 0.0  # across texts is not a repeat
    assert evaluate.repeated_trigram_rate(["It was. it WAS, it was"]) == pytest.approx(2 / 4)
    assert evaluate.repeated_trigram_rate(["", "too short"]) == 0.0


def test_heldout_openings_are_cut_at_a_space_per_group():
    openings = evaluate.heldout_openings(5, chars=120)
    assert len(openings) == 20
    held = {r.text for r in data.heldout_reviews()}
    for text in openings:
        assert len(text) <= 120 and not text.endswith(" ")
        assert text in held or any(h.startswith(text + " ") for h in held)
    assert len(evaluate.heldout_openings(5, sources=("imdb",))) == 10


def test_bits_per_byte_is_total_nats_over_bytes(small_hybrid, small_tokenizer):
    texts = ["The movie was fine.", "Ünïcødé 🎬 café"]
    nats = 0.0
    for text in texts:
        ids = [0] + encode(small_tokenizer, text)
        with torch.no_grad():
            logp = small_hybrid(torch.tensor([ids[:-1]]))[0][0].log_softmax(-1)
        nats -= float(logp.gather(-1, torch.tensor(ids[1:])[:, None]).sum())
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    assert evaluate.bits_per_byte(small_hybrid, small_tokenizer, texts, batch=1) == pytest.approx(
        nats / math.log(2) / n_bytes, rel=1e-5
    )
    assert evaluate.bits_per_byte(small_hybrid, small_tokenizer, texts, batch=2) == pytest.approx(
        nats / math.log(2) / n_bytes, rel=1e-5
    )


def test_steering_is_judged_at_steer_u(tiny_trained_pair):
    hybrid, discrete = tiny_trained_pair
    report = evaluate.evaluate(hybrid, discrete, quick=True, steer_u=2.0)
    assert report["steer_u"] == 2.0 and set(report["probe_raw"]) == {"+2", "0", "-2"}
    raw = report["probe_raw"]
    assert report["probe_bad_neg"] == pytest.approx(raw["-2"]["bad"] / (raw["-2"]["good"] + raw["-2"]["bad"]))
    assert evaluate.steering_settings(2.0)["imdb"] == (0.0, 2.0)
    assert evaluate.trained_steer_u({"meta": {"train": {"contrast_u": 1.5}}}) == 1.5
    assert evaluate.trained_steer_u({"meta": {}}) == 1.0
    # directions of its own beyond |u| = 1: judged at the sliders' far end, wherever it contrasted
    beyond = {"model": {"beyond_steering": True}, "meta": {"train": {"contrast_u": 1.7}}}
    assert evaluate.trained_steer_u(beyond) == evaluate.STRONG_STEER_U == logic.U_MAX


def test_sampling_sweep_judges_each_sampler_on_the_same_prompts(tiny_trained_pair, capsys, monkeypatch):
    from steering.inference.sampling import Sampling

    hybrid, _ = tiny_trained_pair
    grid = {
        "plain": Sampling(temperature=1.0, top_k=None),
        "ban": Sampling(temperature=1.0, top_k=None, no_repeat_ngram=2),
    }
    report = evaluate.sampling_sweep(hybrid, grid, n_prompts=3)
    assert list(report) == ["plain", "ban"]
    for row in report.values():
        assert set(row) == set(evaluate.GENERATION_FIGURES)
        assert all(0.0 <= v <= 1.0 for k, v in row.items() if k != "ppl_ratio_steered")
        assert row["ppl_ratio_steered"] > 0
    monkeypatch.setattr(evaluate, "SAMPLING_GRID", {"only": Sampling(temperature=0.7, top_k=40)})
    assert main(["sampling", "--checkpoint", str(hybrid), "--prompts", "2", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["only"]


def test_depth_figures_measure_one_euler_step_and_the_skipped_block(small_depth_hybrid, small_tokenizer):
    """bits_per_byte with the block skipped is the model with α = 0; with one Euler step, H(0) + α·F(0, H(0))."""
    model, tok = small_depth_hybrid, small_tokenizer
    texts = ["The movie was a delight from start to end.", "Dull, long and badly acted."]
    trained = evaluate.bits_per_byte(model, tok, texts)
    skipped = evaluate.bits_per_byte(model, tok, texts, skip_middle=True)
    one_step = evaluate.bits_per_byte(model, tok, texts, solver=SolverConfig("euler", steps=1))
    assert len({trained, skipped, one_step}) == 3
    with torch.no_grad():
        model.field.alpha.zero_()
    assert evaluate.bits_per_byte(model, tok, texts) == pytest.approx(skipped, rel=1e-6)
    with torch.no_grad():
        model.field.alpha.fill_(1.0)
    field = model.field

    class OneEulerStep(torch.nn.Module):  # the same model, its middle written out by hand
        def __init__(self):
            super().__init__()
            self.config = model.config

        def forward(self, x, u=None, solver=None):
            h0 = model.encode(x)
            return model.decode(h0 + field(0.0, h0, torch.zeros(x.shape[0], 2))), {}

    assert evaluate.bits_per_byte(OneEulerStep(), tok, texts) == pytest.approx(one_step, rel=1e-5)


def test_path_curvature_is_the_median_token_excess_over_straight(small_depth_hybrid, small_tokenizer):
    texts = ["The movie was a delight from start to end.", "Dull, long and badly acted."]
    bent = evaluate.heldout_path_curvature(small_depth_hybrid, small_tokenizer, texts)
    assert bent > 1e-3
    field = small_depth_hybrid.field
    with torch.no_grad():  # a field constant along each token's path (no τ terms, reading nothing): straight lines
        for name in field.shapes:
            getattr(field, name)[1:].zero_()
        field.fc_in_weight.zero_()
        field.qkv_weight.zero_()
        field.fc_out_bias[0].normal_()  # a constant velocity, the same for every token
    assert evaluate.heldout_path_curvature(small_depth_hybrid, small_tokenizer, texts) < 1e-6
