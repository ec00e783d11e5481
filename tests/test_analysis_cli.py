import json

import pytest

from steering.cli.main import main


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_regimes_json_has_the_promised_keys(small_checkpoint, capsys):
    out = run_json(
        capsys,
        "analyze",
        "regimes",
        "--prompt",
        "The movie was",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "9",
    )
    assert len(out["u"]) == 9 and out["u"][0] == -2.0 and out["u"][-1] == 2.0
    assert set(out["nfe"]) == {"dopri5", "adaptive_heun"} and len(out["nfe"]["dopri5"]) == 9
    assert all(isinstance(n, int) and n >= 8 for n in out["nfe"]["dopri5"])
    for key in (
        "switch_u",
        "crossover_u",
        "seconds",
        "nfe_disagreement",
        "step_disagreement",
        "switches",
        "segments",
        "crossover_to_switch",
        "reading",
    ):
        assert key in out
    assert "agreement" not in out and "step_agreement" not in out and "nfe_levels" not in out
    assert out["seconds"] > 0
    d = out["nfe"]["dopri5"]
    changes = [(out["u"][k] + out["u"][k + 1]) / 2 for k in range(8) if d[k] != d[k + 1]]
    assert [s["u"] for s in out["switches"]] == pytest.approx(changes)
    assert all(set(s) == {"u", "from_level", "to_level"} for s in out["switches"])


def test_regimes_over_a_prompt_set(small_checkpoint, capsys):
    from steering.data.heldout import PROBE_PROMPT_VARIANTS

    out = run_json(
        capsys,
        "analyze",
        "regimes",
        "--prompt-set",
        "probe",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "5",
        "--null-draws",
        "100",
    )
    assert [row["prompt"] for row in out["prompts"]] == list(PROBE_PROMPT_VARIANTS)
    for key in (
        "aligned_share",
        "median_distance",
        "null_aligned_share",
        "null_median_distance",
        "p_aligned_share",
        "p_median_distance",
        "swapped_aligned_share",
        "n_prompts",
        "n_with_crossover",
        "threshold",
    ):
        assert key in out
    assert out["n_prompts"] == 10 and out["null_draws"] == 100 and out["prompt_set"] == "probe"
    for row in out["prompts"]:
        assert set(row) >= {"switches", "crossover_u", "distance", "aligned"}
    held = run_json(
        capsys,
        "analyze",
        "regimes",
        "--prompt-set",
        "heldout",
        "--n",
        "3",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "3",
        "--null-draws",
        "10",
    )
    assert held["n_prompts"] == 3 and all(
        row["prompt"] and not row["prompt"].startswith("<") for row in held["prompts"]
    )
    assert (
        main(
            [
                "analyze",
                "regimes",
                "--prompt-set",
                "probe",
                "--checkpoint",
                str(small_checkpoint),
                "--n-u",
                "3",
                "--null-draws",
                "10",
            ]
        )
        == 0
    )
    assert "shuffled-u null" in capsys.readouterr().out


def test_curvature_json(small_checkpoint, tmp_path, capsys):
    out = run_json(
        capsys,
        "analyze",
        "curvature",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "3",
        "--n-tau",
        "9",
        "--cache",
        str(tmp_path / "c"),
    )
    assert out["u"] == [-2.0, 0.0, 2.0] and out["n_tau"] == 9 and out["solver"].startswith("dopri5")
    for key in ("arc_to_chord", "orthogonal_share", "arc_to_chord_map", "orthogonal_share_map"):
        assert len(out[key]) == 3
    assert all(r >= 1 for r in out["arc_to_chord"]) and all(0 <= s <= 1 for s in out["orthogonal_share"])
    assert len(out["tau"]) == 9 and out["tau"][0] == 0.0 and out["tau"][-1] == 1.0
    for key in ("speed", "curvature"):
        assert len(out[key]) == 3 and all(len(row) == 9 for row in out[key])
    assert all(v > 0 for row in out["speed"] for v in row) and all(v >= 0 for row in out["curvature"] for v in row)
    tokens = out["token_strings"]  # each token's own path, not only the mean path
    assert len(out["token_arc_to_chord"]) == 3 and all(len(row) == len(tokens) for row in out["token_arc_to_chord"])
    assert all(r >= 1 for row in out["token_arc_to_chord"] for r in row)


def test_solver_trace_json_matches_the_regimes_nfe(small_checkpoint, capsys):
    args = ["--prompt", "The movie was", "--json", "--checkpoint", str(small_checkpoint), "--n-u", "5"]
    out = run_json(capsys, "analyze", "solver-trace", *args)
    regimes = run_json(capsys, "analyze", "regimes", *args, "--n-tau", "5", "--null-draws", "50")
    assert out["u"] == regimes["u"] and len(out["traces"]) == 5
    assert [t["nfe"] for t in out["traces"]] == regimes["nfe"]["dopri5"]
    for trace in out["traces"]:
        assert trace["steps"] and all(set(s) == {"tau", "h", "error_ratio", "accepted"} for s in trace["steps"])
        assert trace["first_step"]["h"] == trace["steps"][0]["h"] and trace["first_step"]["chosen_by"] in (
            "100·h0",
            "h1",
        )
        assert trace["nfe"] == 2 + 6 * len(trace["steps"])
    levels = regimes["curvature_by_level"]
    assert sorted(row["level"] for row in levels) == sorted(set(regimes["nfe"]["dopri5"]))
    assert all(row["curvature"] >= 0 for row in levels)
    assert regimes["p_value"] is None if len(levels) == 1 else 0 < regimes["p_value"] <= 1


def test_contraction_json_gives_the_stretching_rate_per_u_and_tau(small_checkpoint, capsys):
    out = run_json(
        capsys,
        "analyze",
        "contraction",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "3",
        "--n-tau",
        "4",
        "--u-values",
        "0",
        "--lanczos-iterations",
        "4",
    )
    assert out["u"] == [-2.0, 0.0, 2.0] and len(out["tau"]) == 4
    assert len(out["stretching"]) == 3 and all(len(row) == 4 for row in out["stretching"])
    assert len(out["by_u"]) == 1


def test_prompt_set_is_for_regimes_only(small_checkpoint, capsys):
    assert main(["analyze", "sweep", "--prompt-set", "probe", "--checkpoint", str(small_checkpoint)]) == 2
    assert "--prompt-set applies to regimes" in capsys.readouterr().err


def test_convergence_and_divergence_json(small_checkpoint, capsys):
    conv = run_json(
        capsys, "analyze", "convergence", "--json", "--checkpoint", str(small_checkpoint), "--convergence-steps", "8"
    )
    assert conv["euler_order"] == pytest.approx(1.0, abs=0.3)
    assert "rk4_order" in conv and len(conv["euler_error"]) == 4
    div = run_json(capsys, "analyze", "divergence", "--json", "--checkpoint", str(small_checkpoint))
    assert 0 < div["divergence"] < 1 and div["solver_a"] == "euler (4 steps)" and div["nfe_a"] == 4
    assert div["divergence_along_tau"][0] == 0.0


@pytest.mark.parametrize(
    "kind", ["trajectory", "sweep", "lens", "tolerance", "contraction", "regimes", "curvature", "solver-trace"]
)
def test_every_kind_prints_text(small_checkpoint, capsys, kind):
    assert (
        main(
            [
                "analyze",
                kind,
                "--checkpoint",
                str(small_checkpoint),
                "--n-u",
                "3",
                "--n-tau",
                "5",
                "--tolerances",
                "1e-2",
                "1e-4",
                "--u-values",
                "1",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip()


def test_pca_uses_the_cache(small_checkpoint, tmp_path, capsys):
    args = ["analyze", "pca", "--json", "--checkpoint", str(small_checkpoint), "--cache", str(tmp_path / "c")]
    first = run_json(capsys, *args)
    assert len(first["explained_variance_ratio"]) == 3 and len(list((tmp_path / "c").glob("*.npz"))) == 1
    assert run_json(capsys, *args)["key"] == first["key"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--n-u", "0"], "n-u"),
        (["--tolerances", "0", "1e-3"], "rtol"),
        (["--rtol", "-1"], "rtol"),
        (["--u-min", "-9"], "u grid"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(small_checkpoint, capsys, argv, message):
    kind = "tolerance" if "--tolerances" in argv else "regimes"
    assert main(["analyze", kind, "--checkpoint", str(small_checkpoint), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_missing_checkpoint_exits_2(tmp_path, capsys):
    assert main(["analyze", "trajectory", "--checkpoint", str(tmp_path / "none")]) == 2
    assert "not found" in capsys.readouterr().err


def test_middle_json_weighs_the_block_against_its_solver_cost(small_checkpoint, capsys):
    from steering.data.heldout import heldout_prompts
    from steering.evaluation.evaluate import FULL, solver_divergence
    from steering.training.checkpoint import load_checkpoint

    out = run_json(capsys, "analyze", "middle", "--json", "--checkpoint", str(small_checkpoint), "--n-reviews", "8")
    assert out["arch"] == "hybrid" and out["windows"] > 0
    assert out["loss_cost_of_removal"] == pytest.approx(out["loss_without_middle"] - out["loss"])
    model, tok, _ = load_checkpoint(small_checkpoint)
    assert out["solver_divergence"] == pytest.approx(
        solver_divergence(model, heldout_prompts(tok, FULL.prompts)), rel=1e-4
    )


def test_fluency_splits_the_evaluations_perplexity_ratio_by_side(small_checkpoint, capsys):
    import torch

    from steering.data.heldout import heldout_prompts
    from steering.evaluation.evaluate import continuation_perplexity, generate_for_prompts
    from steering.training.checkpoint import load_checkpoint

    out = run_json(capsys, "analyze", "fluency", "--json", "--checkpoint", str(small_checkpoint), "--n-reviews", "3")
    model, tok, _ = load_checkpoint(small_checkpoint)
    prompts = heldout_prompts(tok, 3)
    gens = generate_for_prompts(model, tok, prompts)
    # pooled exactly as evaluate pools it
    steered = continuation_perplexity(
        model, prompts + prompts, torch.cat([gens.tokens["positive"], gens.tokens["negative"]])
    )
    neutral = continuation_perplexity(model, prompts, gens.tokens["neutral"])
    assert out["ppl_ratio_steered"] == pytest.approx(steered / neutral, rel=1e-5)
    positive_own = continuation_perplexity(model, prompts, gens.tokens["positive"], torch.tensor([[1.0, 0.0]]))
    assert out["positive"]["own_control"] == pytest.approx(positive_own / neutral, rel=1e-5)
    assert out["negative"]["at_zero"] != pytest.approx(out["positive"]["at_zero"], rel=1e-6)


def test_wordprobe_gives_the_evaluations_probe_on_each_prompt(small_checkpoint, capsys):
    from steering.data.heldout import PROBE_PROMPT_VARIANTS
    from steering.evaluation.evaluate import probe_shares, word_probabilities
    from steering.training.checkpoint import load_checkpoint

    out = run_json(
        capsys,
        "analyze",
        "wordprobe",
        "--json",
        "--checkpoint",
        str(small_checkpoint),
        "--prompt",
        "Frankly, the film was",
    )
    prompts = [row["prompt"] for row in out["prompts"]]
    assert prompts == list(PROBE_PROMPT_VARIANTS) + ["Frankly, the film was"]
    model, tok, _ = load_checkpoint(small_checkpoint)
    # the first row is the evaluation's own probe; the others differ from it
    first = out["prompts"][0]
    assert (first["good_pos"], first["bad_neg"]) == pytest.approx(probe_shares(word_probabilities(model, tok)))
    last = out["prompts"][-1]
    assert (last["good_pos"], last["bad_neg"]) == pytest.approx(
        probe_shares(word_probabilities(model, tok, "Frankly, the film was"))
    )
    assert last["bad_neg"] != pytest.approx(first["bad_neg"], rel=1e-6)
    shares = [row["bad_neg"] for row in out["prompts"]]
    assert out["bad_neg_min"] == min(shares) and out["bad_neg_mean"] == pytest.approx(sum(shares) / len(shares))
    assert all(0 < row["good_pos"] < 1 and 0 < row["bad_neg"] < 1 for row in out["prompts"])


def test_regimes_map_json_has_the_promised_shape(small_checkpoint, capsys):
    out = run_json(
        capsys,
        "analyze",
        "regimes-map",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "3",
        "--n-t",
        "3",
        "--t-min",
        "1e-4",
        "--t-max",
        "1e-2",
        "--json",
    )
    (p,) = out["prompts"]
    assert p["prompt"] == "The movie was" and len(p["u"]) == 3 and len(p["t"]) >= 3
    assert len(p["nfe"]) == len(p["reason"]) == len(p["t"]) and all(len(row) == 3 for row in p["nfe"])
    assert {r for row in p["reason"] for r in row} <= {"cap-limited", "error-limited", "rejected"}
    for band in p["bands"]:
        assert {"kind", "t_low", "t_high", "switch_u", "predicted_switch_u"} <= set(band)
    assert isinstance(p["exceptions"], list) and out["past_end"] is False and p["max_tau"] <= 1.0 + 1e-6
    assert "NFE" in p["default_reading"]
    # every row named: its levels are the row's counts, its switches where neighbouring counts differ
    assert [r["t"] for r in p["regimes"]] == p["t"] and p["regimes_reading"].startswith("In float64")
    for r, nfe in zip(p["regimes"], p["nfe"]):
        assert r["levels"] == sorted(set(nfe)) and len(r["switch_u"]) == sum(a != b for a, b in zip(nfe, nfe[1:]))
    assert "crossover_u" in p
    assert out["precision"] == p["precision"] == "float64"  # float64 unless --float32 asks for the model's own


def test_regimes_effort_json_has_a_row_per_u_and_a_test_per_curvature_figure(small_checkpoint, capsys):
    out = run_json(
        capsys,
        "analyze",
        "regimes-effort",
        "--checkpoint",
        str(small_checkpoint),
        "--n-u",
        "4",
        "--null-draws",
        "20",
        "--json",
    )
    (p,) = out["prompts"]
    assert p["prompt"] == "The movie was" and len(p["u"]) == len(p["nfe"]) == len(p["max_error_ratio"]) == 4
    assert len(p["arc_to_chord_excess"]) == len(p["orthogonal_share"]) == 4
    assert set(p["tests"]) == {"arc_to_chord_excess", "orthogonal_share"}
    assert (out["rtol"], out["atol"]) == (1e-5, 1e-6)  # its own default where the solver flags are left alone
    assert p["precision"] == "float64" and p["tests"]["orthogonal_share"]["draws"] == 20
