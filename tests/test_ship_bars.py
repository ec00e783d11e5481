"""scripts/ship/check_bars.py on small hand-made measurement folders: a missed bar exits 1 and marks its own row."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("check_bars", ROOT / "scripts" / "ship" / "check_bars.py")
check_bars = sys.modules["check_bars"] = importlib.util.module_from_spec(SPEC)  # a script, not a package module
SPEC.loader.exec_module(check_bars)

# D5's figures (docs/journal.md, "D5's end"), with style at the bar: every bar met
EVALUATE = {
    "steer_u": 2.0,
    "depth_use_bpb": 0.069,
    "block_skip_bpb": 0.2514,
    "baseline_middle_bpb": 0.2575,
    "path_curvature": 0.0926,
    "solver_divergence": 0.0014,
    "bits_per_byte_hybrid": 1.5958,
    "bits_per_byte_discrete": 1.5818,
    "bits_per_byte_hybrid_imdb": 1.5685,
    "val_loss_own_control": 4.441,
    "val_loss_u0": 4.4631,
    "probe_good_pos": 0.9982,
    "probe_bad_neg": 0.9865,
    "steer_pos_clf": 1.0,
    "steer_neg_clf": 1.0,
    "steer_pos_vader": 0.98,
    "steer_neg_vader": 0.98,
    "style_rt_acc": 0.92,
    "style_imdb_acc": 0.98,
    "ppl_ratio_steered": 1.256,
    "valid_word_rate": 0.9906,
    "repeated_trigram_rate": 0.0025,
}
# each independent check's line as the script prints it
CHECKS = {
    "check_bits_per_byte": "runs/D5: bits/byte all 1.5959, imdb 1.5686",
    "check_solver_divergence": "runs/D5: RK4-2 vs DOP853 mean 0.00140 max 0.00300; project's solver_divergence "
    "(float64) 0.00140; hand-written vs project RK4 max |diff| 1.0e-12",
    "check_adaptive_steps": "runs/D5: scipy RK45 (rtol 0.001, atol 0.0001) evaluations at u = -2, 2; 0 of 10 "
    "prompts take two levels or more; field evaluated up to τ = 1.000000",
    "check_human_or_model": "runs/D5: human-vs-model accuracy 0.712 (folds [0.7]), 200 + 200 texts",
}


def measured(folder: Path, **changes) -> Path:
    """A complete measurement folder meeting every bar; changes={file: {key: value}} alters it."""
    files = {
        "evaluate": EVALUATE,
        "curvature": {
            "orthogonal_share": [0.2, 0.609],
            "orthogonal_share_bend": [0.1, 0.413],
            "arc_to_chord": [1.01, 1.105],
            "arc_to_chord_bend": [1.0, 1.068],
        },
        "regimes": {"max_tau": 1.0, "prompts": [{"nfe": [20, 20]}, {"nfe": [20, 26]}]},
        "bench": {
            "latency_solver": "rk4 (2 steps)",
            "latency_ratio": 1.02,
            "flop_ratio": 1.0,
            "decode_over_floor": 1.6,
            "euler4": {
                "solver": "euler (4 steps)",
                "latency_ratio": 0.7,
                "flop_ratio": 0.68,
                "solver_divergence": 0.004,
                "solver_divergence_trained": 0.0014,
            },
        },
        "bench_app": {
            "cold_start_to_first_render_s": 5.3,
            "range_after_prompt_change_s": 1.8,
            "slider_to_updated_plot_median_ms": 2.8,
        },
        "facts": {
            "app_default_solver": "rk4 (2 steps)",
            "assets_bytes_shipped": 75_000_000,
            "tokenizer_same_as_discrete": True,
            "weight_dtypes": ["F16"],
        },
    }
    for seed, shift in ((2234, 0.01), (3234, -0.01)):  # the other seeds' generations: the sampled figures move
        moved = {k: v + shift for k, v in EVALUATE.items() if k in check_bars.SAMPLED}
        files[f"evaluate_seed{seed}"] = {**EVALUATE, **moved}
    for name, data in files.items():
        (folder / f"{name}.json").write_text(json.dumps({**data, **changes.get(name, {})}))
    for name, line in CHECKS.items():
        (folder / f"{name}.txt").write_text(line + "\n")
    log = [{"stage": 1, "step": 0, "exploding": False, "vanishing": False}] * 3 + [
        {"stage": 2, "step": 0, "exploding": False, "vanishing": False}
    ]
    (folder / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    return folder


def verdicts(out: str) -> dict[str, str]:
    """figure -> its met column, from the printed table."""
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].lstrip("| "): cells[3].rstrip(" |") for cells in rows[1:]}


def test_a_folder_meeting_every_bar_passes(tmp_path, capsys):
    assert check_bars.main([str(measured(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "missed" not in out and all(v in ("yes", "-") or v.startswith("yes (") for v in verdicts(out).values())


def test_a_missed_bar_exits_1_and_marks_its_row_only(tmp_path, capsys):
    assert check_bars.main([str(measured(tmp_path, evaluate={"depth_use_bpb": 0.0004}))]) == 1
    out = capsys.readouterr().out
    missed = [figure for figure, met in verdicts(out).items() if met.startswith("**NO**")]
    assert missed == ["depth_use_bpb"] and out.rstrip().endswith("missed: depth_use_bpb")


def test_latency_is_judged_at_the_solver_the_app_opens_with(tmp_path, capsys):
    # the trained RK4-2 meets the bar, Euler 4 does not: the verdict follows the app's default
    slow = {"euler4": {"solver": "euler (4 steps)", "latency_ratio": 0.9, "flop_ratio": 0.68}}
    assert check_bars.main([str(measured(tmp_path, bench=slow))]) == 0
    capsys.readouterr()
    measured(tmp_path, bench=slow, facts={"app_default_solver": "euler (4 steps)"})
    assert check_bars.main([str(tmp_path)]) == 1
    row = verdicts(capsys.readouterr().out)["bench: latency ratio at the app's default solver"]
    assert row == "**NO**"


@pytest.mark.parametrize("rt, strict, after_three", [(0.88, 1, 0), (0.8, 1, 1)])
def test_style_has_both_verdicts(tmp_path, capsys, rt, strict, after_three):
    at_every_seed = {name: {"style_rt_acc": rt} for name in check_bars.SEED_RUNS}
    folder = str(measured(tmp_path, **at_every_seed))
    assert check_bars.main([folder]) == strict
    assert check_bars.main([folder, "--after-three-tries"]) == after_three
    assert f"(>= 0.85: {'yes' if rt >= 0.85 else 'NO'})" in verdicts(capsys.readouterr().out)["style_rt_acc"]


def test_sampled_figures_are_judged_on_their_mean_over_the_seeds(tmp_path, capsys):
    from steering.evaluation.evaluate import GENERATION_FIGURES, KEYS

    assert check_bars.SAMPLED == GENERATION_FIGURES and set(GENERATION_FIGURES) <= set(KEYS)
    # the evaluation's own seed meets the perplexity bar, the mean of the three does not
    lucky = {"ppl_ratio_steered": 1.43}
    folder = measured(
        tmp_path,
        evaluate=lucky,
        evaluate_seed2234={"ppl_ratio_steered": 1.42},
        evaluate_seed3234={"ppl_ratio_steered": 1.70},
    )
    assert check_bars.main([str(folder)]) == 1
    row = next(r for r in check_bars.all_rows(folder) if r.figure == "ppl_ratio_steered")
    assert row.value == "1.51667 (mean of 3 seeds, 1.42000-1.70000)" and row.met is False
    capsys.readouterr()
    (folder / "evaluate_seed3234.json").write_text(json.dumps({**EVALUATE, "ppl_ratio_steered": 1.56}))
    assert check_bars.main([str(folder)]) == 0  # mean 1.47: met
    # a seed's file missing: its figures are missed, the rest still judged
    (folder / "evaluate_seed2234.json").unlink()
    missed = [r.figure for r in check_bars.all_rows(folder) if r.met is False]
    assert sorted(missed) == sorted(check_bars.SAMPLED)


def test_a_missing_measurement_is_a_missed_bar(tmp_path, capsys):
    (measured(tmp_path) / "bench_app.json").unlink()
    (tmp_path / "check_solver_divergence.txt").write_text("Traceback (most recent call last):\n")
    assert check_bars.main([str(tmp_path)]) == 1
    rows = check_bars.all_rows(tmp_path)
    missing = [r.figure for r in rows if r.value.startswith("missing")]
    assert len(missing) == 4 and all(not r.met for r in rows if r.figure in missing)
