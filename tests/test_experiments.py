"""`python -m steering experiments --quick` on tiny checkpoints trained here, the activation-steering
baseline it compares against, the accuracy-vs-fluency figure and the Results page."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from steering.cli.main import main
from steering.data.tokenizer import bos_id, encode
from steering.evaluation import experiments, results_table
from steering.evaluation.activation_steering import (
    ActivationSteered,
    SteeringCurve,
    pareto_verdict,
    pooled_residuals,
    steering_vector,
    symmetric_grid,
)
from steering.figures.results import accuracy_fluency_figure
from steering.inference.generate import sample_tokens
from steering.inference.sampling import GREEDY
from steering.training.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parent.parent
# Every figure the issue asks for, by its place in results.json.
REQUIRED = (
    "stability.hybrid.final_loss",
    "stability.discrete.final_loss",
    "stability.hybrid.grad_norm.mean",
    "stability.hybrid.grad_norm.std",
    "stability.discrete.grad_norm.mean",
    "stability.hybrid.middle_grad_norm.mean",
    "stability.alpha_initial",
    "stability.alpha_final",
    "stability.hybrid.exploding_steps",
    "stability.hybrid.vanishing_steps",
    "stability.parameters_hybrid",
    "stability.parameters_discrete",
    "steering.probe.+1.p_good",
    "steering.probe.+1.p_bad",
    "steering.probe.-1.p_good",
    "steering.probe.-1.p_bad",
    "steering.probe.0.p_good",
    "steering.probe.0.p_bad",
    "steering.steer_pos_clf",
    "steering.steer_neg_clf",
    "steering.steer_pos_vader",
    "steering.steer_neg_vader",
    "continuity.solver_divergence",
    "continuity.sweep.largest_jump",
    "continuity.sweep.largest_jump_u",
    "efficiency.latency_ratio",
    "efficiency.flop_ratio",
    "efficiency.kv_cache_speedup",
    "efficiency.adjoint_mem_ratio_64_4",
    "efficiency.direct_mem_ratio_64_4",
    "efficiency.regimes_sweep_s",
    "solver_probing.nfe_dopri5",
    "solver_probing.nfe_adaptive_heun",
    "solver_probing.n_switches",
    "solver_probing.crossover_u",
    "solver_probing.nfe_disagreement",
    "solver_probing.step_disagreement",
    "solver_probing.regimes_reading",
    "solver_probing.alignment.probe.n_prompts",
    "solver_probing.alignment.heldout.n_prompts",
    "continuity.curvature.arc_to_chord",
    "continuity.curvature.orthogonal_share",
    "continuity.curvature.orthogonal_share_map",
    "solver_probing.tolerance_slope",
    "solver_probing.probe_accuracy",
    "second_paper.euler_order",
    "second_paper.rk4_order",
    "second_paper.contraction.negative.final_ftle",
    "second_paper.contraction.positive.final_ftle",
    "activation_steering.u_grid",
    "activation_steering.c_grid",
    "activation_steering.hybrid.accuracy_clf",
    "activation_steering.activation.accuracy_vader",
    "activation_steering.hybrid.paired_perplexity",
    "activation_steering.pareto.clf.dominates",
    "activation_steering.pareto.vader.dominates",
    "meta.total_seconds",
)


def lookup(results: dict, dotted: str):
    node = results
    for part in dotted.split("."):
        node = node[part]
    return node


@pytest.fixture(scope="session")
def quick_run(tiny_trained_pair, tmp_path_factory):
    hybrid, discrete = tiny_trained_pair
    out = tmp_path_factory.mktemp("results")
    assert (
        main(["experiments", "--quick", "--out", str(out), "--checkpoint", str(hybrid), "--baseline", str(discrete)])
        == 0
    )
    return out, json.loads((out / "results.json").read_text())


# ---------------------------------------------------------------- the quick run


def test_quick_run_has_every_figure_present_and_finite(quick_run):
    _, results = quick_run
    assert set(results_table.SECTIONS) <= set(results)
    for dotted in REQUIRED:
        value = lookup(results, dotted)
        for leaf in np.ravel(value) if isinstance(value, list) else [value]:
            assert isinstance(leaf, str) or math.isfinite(float(leaf)), dotted
    assert experiments.non_finite_paths(results) == []
    assert results["meta"]["quick"] is True


def test_quick_run_figures_agree_with_the_models_and_each_other(quick_run, tiny_trained_pair):
    _, r = quick_run
    hybrid, _, config = load_checkpoint(tiny_trained_pair[0])
    discrete, _, _ = load_checkpoint(tiny_trained_pair[1])
    s = r["stability"]
    assert s["parameters_hybrid"] == hybrid.num_parameters() and s["parameters_discrete"] == discrete.num_parameters()
    assert s["alpha_final"] == pytest.approx(float(hybrid.field.alpha.detach()))
    assert s["alpha_initial"] == config["model"]["alpha_init"]
    assert s["hybrid"]["steps_stage1"] == 8 and s["stage2_steps_hybrid"] == 3
    for label in ("+1", "-1", "0"):
        p = r["steering"]["probe"][label]
        assert 0 < p["p_good"] < 1 and 0 < p["p_bad"] < 1
        assert p["relative_good"] == pytest.approx(p["p_good"] / (p["p_good"] + p["p_bad"]))
        assert p["p_good"] == r["evaluate"]["probe_raw"][label]["good"]
    sweep = r["continuity"]["sweep"]
    jumps = np.abs(np.diff(np.array([sweep["p_good"], sweep["p_bad"]]), axis=1)).max(axis=0)
    assert sweep["largest_jump"] == pytest.approx(jumps.max())
    sp = r["solver_probing"]
    assert len(sp["nfe_dopri5"]) == len(sp["u"]) == experiments.QUICK.regimes_points
    d = sp["nfe_dopri5"]
    changes = [(sp["u"][k] + sp["u"][k + 1]) / 2 for k in range(len(d) - 1) if d[k] != d[k + 1]]
    assert [s["u"] for s in sp["switches"]] == pytest.approx(changes) and sp["n_switches"] == len(changes)
    assert sp["alignment"]["probe"]["n_prompts"] == 10
    assert sp["alignment"]["heldout"]["n_prompts"] == experiments.QUICK.alignment_heldout
    assert not any("agreement" == k or k.endswith("_agreement") for k in sp)
    assert len(sp["trace_first_step"]) == len(sp["path_turn_rate"]) == len(sp["u"])
    assert sorted(row["level"] for row in sp["curvature_by_level"]) == sorted(set(d))
    assert sum(row["n_u"] for row in sp["curvature_by_level"]) == len(sp["u"])
    assert (sp.get("curvature_p_value") is None) == (len(set(d)) == 1)  # results.json drops nulls
    assert all(r >= 0 for r in sp["trace_rejected"]) and all(x > 0 for x in sp["trace_first_step"])
    assert all(
        c["nfe_level"] in [seg["level"] for seg in sp["segments"]] for c in r["second_paper"]["contraction"].values()
    )
    cu = r["continuity"]["curvature"]
    assert len(cu["arc_to_chord"]) == len(cu["u"]) and all(x >= 1 for x in cu["arc_to_chord"])
    assert all(n > 0 for n in sp["nfe_dopri5"] + sp["tolerance_nfe"])
    assert r["second_paper"]["euler_order"] == pytest.approx(1.0, abs=0.2)  # Euler is first order
    act = r["activation_steering"]
    assert len(act["u_grid"]) == len(act["c_grid"]) == experiments.QUICK.grid_points
    for grid in (np.array(act["u_grid"]), np.array(act["c_grid"])):
        assert np.allclose(grid, -grid[::-1]) and np.allclose(np.diff(grid), np.diff(grid)[0])
    assert act["c_limit"] == pytest.approx(act["residual_norm"] / act["vector_norm"], rel=1e-6)
    for method in ("hybrid", "activation"):
        curve = act[method]
        # at magnitude 0 the classifier's paired accuracy is P(pos) + P(neg) over 2 = 0.5 exactly
        assert curve["accuracy_clf"][0] == pytest.approx(0.5)
        assert all(0 <= a <= 1 for a in curve["accuracy_clf"] + curve["accuracy_vader"])
        assert all(p > 1 for p in curve["perplexity"])


def test_quick_run_writes_the_markdown_table(quick_run):
    out, results = quick_run
    md = (out / "results.md").read_text()
    assert "| Section | Paper figure | Ours | How measured |" in md
    for row in results["table"]:
        assert row["section"] and row["paper"] and row["ours"] and row["how"]
    assert sum(line.startswith("| ") for line in md.splitlines()) >= len(results["table"])
    assert "0.068%" in md and "6.449 vs 6.471" in md  # the paper's figures sit beside ours
    assert "## The paper's alignment claim" in md and "over prompts" in md
    assert "within 15% (step counts)" in md and "agreement" not in md.replace("disagreement", "")
    assert "regions of different curvature" in md and "what sets the NFE level" in md
    assert ("one NFE level at every u" in md) == (results["solver_probing"].get("curvature_p_value") is None)
    assert results_table.load_results(out)["table"] == results["table"]


def test_load_results_explains_bad_files(tmp_path):
    assert results_table.load_results(tmp_path) is None
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        results_table.load_results(tmp_path)
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(ValueError, match="rerun"):
        results_table.load_results(tmp_path)


def test_order_lower_bound_when_the_errors_hit_the_reference_floor():
    steps = np.array([1, 2, 4, 8])
    errors = np.array([1e-6, 1e-6 / 16, 1e-9, 1e-9])  # below the floor 1e-8 from N = 4 on
    assert experiments.order_lower_bound(steps, errors, 1e-8) == pytest.approx(np.log(1e-6 / 16 / 1e-8) / np.log(2))
    assert experiments.order_lower_bound(steps, np.full(4, 1e-9), 1e-8) == 0.0


# ---------------------------------------------------------------- activation steering


def test_steering_vector_is_the_mean_difference_of_per_review_means(small_discrete, small_tokenizer):
    reviews = [
        SimpleNamespace(text=t, label=label)
        for t, label in [
            ("a fine and lovely film", 1),
            ("great acting , great story", 1),
            ("dull .", 0),
            ("the plot is a mess and the jokes fall flat", 0),
            ("i loved it", 1),
            ("awful", 0),
        ]
    ]
    vec = steering_vector(small_discrete, small_tokenizer, reviews, max_reviews=6)

    def review_mean(text):
        ids = torch.tensor([[bos_id(small_tokenizer)] + encode(small_tokenizer, text)])
        with torch.no_grad():
            return small_discrete.encode(ids)[0].mean(0)

    pos = torch.stack([review_mean(r.text) for r in reviews if r.label == 1]).mean(0)
    neg = torch.stack([review_mean(r.text) for r in reviews if r.label == 0]).mean(0)
    assert torch.allclose(vec.vector, pos - neg, atol=1e-5)
    assert vec.n_positive == vec.n_negative == 3
    pooled, _ = pooled_residuals(small_discrete, small_tokenizer, [reviews[0].text, reviews[3].text])
    assert torch.allclose(pooled[0], review_mean(reviews[0].text), atol=1e-5)  # padding leaves the mean alone
    with pytest.raises(ValueError, match="positive and one negative"):
        steering_vector(small_discrete, small_tokenizer, reviews[:2])


def test_zero_coefficient_reproduces_unsteered_generation_exactly(small_discrete):
    vector = torch.randn(small_discrete.config.d_model)
    ids, u = [1, 5, 9, 12], torch.zeros(1, 2)
    plain, _ = sample_tokens(small_discrete, ids, u, 12, n=3, seed=7)
    for zero in (0.0, torch.zeros(3)):
        steered, _ = sample_tokens(ActivationSteered(small_discrete, vector, zero), ids, u, 12, n=3, seed=7)
        assert torch.equal(plain, steered)
    pushed, _ = sample_tokens(ActivationSteered(small_discrete, vector * 50, 1.0), ids, u, 12, n=3, seed=7)
    assert not torch.equal(plain, pushed)


def test_vector_is_added_at_every_position_and_per_row_including_cached_steps(small_discrete):
    torch.manual_seed(0)
    vector = torch.randn(small_discrete.config.d_model)
    idx = torch.randint(0, small_discrete.config.vocab_size, (2, 6))
    steered = ActivationSteered(small_discrete, vector, torch.tensor([2.0, -0.5]))
    with torch.no_grad():
        shift = steered.encode(idx) - small_discrete.encode(idx)
    assert torch.allclose(shift[0], (2.0 * vector).expand(6, -1), atol=1e-5)
    assert torch.allclose(shift[1], (-0.5 * vector).expand(6, -1), atol=1e-5)
    # greedy decoding with the KV cache equals decoding without it: the new tokens are steered too
    one = ActivationSteered(small_discrete, vector, 3.0)
    cached, _ = sample_tokens(one, [1, 2, 3], torch.zeros(1, 2), 8, sampling=GREEDY, use_cache=True)
    uncached, _ = sample_tokens(one, [1, 2, 3], torch.zeros(1, 2), 8, sampling=GREEDY, use_cache=False)
    assert torch.equal(cached, uncached)
    with pytest.raises(ValueError, match="one coefficient per batch row"):
        ActivationSteered(small_discrete, vector, torch.zeros(3)).encode(idx)
    with pytest.raises(ValueError, match="shape"):
        ActivationSteered(small_discrete, torch.zeros(5))


def test_symmetric_grid_rules():
    assert symmetric_grid(3.0, 5).tolist() == [-3.0, -1.5, 0.0, 1.5, 3.0]
    for points in (4, 1, 2.5):
        with pytest.raises(ValueError, match="odd integer"):
            symmetric_grid(1.0, points)
    with pytest.raises(ValueError, match="positive"):
        symmetric_grid(float("nan"), 5)


def _curve(method, acc, ppl):
    acc, ppl = np.asarray(acc, float), np.asarray(ppl, float)
    grid = np.arange(-(len(acc) - 1), len(acc), dtype=float)
    zeros = np.zeros(len(grid))
    return SteeringCurve(
        method, method, grid, zeros, zeros, zeros, zeros, zeros, np.arange(len(acc), dtype=float), acc, acc, ppl, {}
    )


def test_pareto_verdict_names_the_dominating_method_or_neither():
    better = _curve("hybrid", [0.5, 0.8, 0.95], [20, 22, 25])
    worse = _curve("activation", [0.5, 0.7, 0.9], [21, 24, 40])
    verdict = pareto_verdict(better, worse, "clf")
    assert verdict["dominates"] == "hybrid"
    assert verdict["activation_points_dominated"] == 2 and verdict["hybrid_points_dominated"] == 0
    assert pareto_verdict(worse, better, "vader")["dominates"] == "hybrid"
    crossing = _curve("activation", [0.5, 0.99, 0.6], [21, 30, 21])  # more accurate, but only at a cost
    assert pareto_verdict(better, crossing, "clf")["dominates"] == "neither"


# ---------------------------------------------------------------- the figure and the page


def test_accuracy_fluency_figure_plots_both_methods_and_judges():
    curves = [
        {
            "label": "hybrid",
            "magnitudes": [0, 1.5, 3],
            "accuracy_clf": [0.5, 0.8, 0.9],
            "accuracy_vader": [0.4, 0.6, 0.7],
            "paired_perplexity": [20, 22, 30],
        },
        {
            "label": "activation",
            "magnitudes": [0, 10, 20],
            "accuracy_clf": [0.5, 0.6, 0.7],
            "accuracy_vader": [0.4, 0.5, 0.5],
            "paired_perplexity": [19, 25, 60],
        },
    ]
    fig = accuracy_fluency_figure(curves)
    assert len(fig.data) == 4
    assert [t.name for t in fig.data] == [
        "hybrid, classifier judge",
        "hybrid, VADER judge",
        "activation, classifier judge",
        "activation, VADER judge",
    ]
    assert list(fig.data[2].x) == [19, 25, 60] and list(fig.data[3].y) == [0.4, 0.5, 0.5]
    assert list(fig.data[0].text) == ["0", "1.5", "3"]
    assert fig.data[0].line.color != fig.data[2].line.color
    with pytest.raises(ValueError, match="perplexities"):
        accuracy_fluency_figure([{**curves[0], "accuracy_clf": [0.5]}])
    with pytest.raises(ValueError, match="at least one"):
        accuracy_fluency_figure([])


def _page(folder, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("STEERING_RESULTS", str(folder))
    return AppTest.from_file(str(REPO / "pages" / "results.py"), default_timeout=60).run()


def test_results_page_without_results_says_how_to_make_them(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    assert not at.exception
    assert any("python -m steering experiments" in info.value for info in at.info)
    assert len(at.dataframe) == 0


def test_results_page_shows_the_table_and_the_chart(quick_run, monkeypatch):
    out, results = quick_run
    at = _page(out, monkeypatch)
    assert not at.exception
    assert len(at.dataframe) == 1
    assert at.dataframe[0].value.shape[0] == len(results["table"])
    assert any("quick run" in w.value for w in at.warning)
    assert any("Pareto comparison" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 1
