"""The experiments' results as a table: (section, the paper's figure, ours, how measured) rows, results.md, and
reading and writing results.json. Plain dicts in, text out: the Results page, `figures` and the talk kit read
results through here without running anything (the runs are in experiments.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..training.checkpoint import DEFAULT_CHECKPOINT
from .regimes_claim import regimes_map_paragraph, regimes_map_rows

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "results"
PROMPT = "The movie was"  # the shipped model's subject (experiments.shipped_subject)
TARGETS = (" good", " bad")
SHIPPED_PROMPT_SETS = {"probe": "the evaluation's probe prompts", "heldout": "held-out review openings"}

PAPER_PROBE_U = {"probe_pos": "+1", "probe_neg": "-1", "probe_zero": "0"}  # where the paper probed
PAPER = {
    "final_loss": "6.449 vs 6.471",
    "grad_norm": "0.509 ± 0.142 vs 0.521 ± 0.140",
    "ode_grad_norm": "0.033 ± 0.021",
    "alpha": "0.1 → 0.065",
    "exploding_vanishing": "0 / 0",
    "parameters": "29.78M vs 30.50M (97.6%)",
    "probe_pos": "P(good) 98.0%, P(bad) 0.2%",
    "probe_neg": "P(good) 0.2%, P(bad) 88.1%",
    "probe_zero": "P(good) 91.4%, P(bad) 3.3%",
    "judged": "not measured (single next-token probe)",
    "divergence": "0.068%",
    "sweep": "smooth sigmoid curves, no jumps",
    "latency": "0.98× (earlier 1.27×)",
    "nfe_regimes": "≈20 NFE for u < 0.3, ≈14 above",
    "solver_steps": "within 15% (step counts)",
    "switch": "switch aligned with the semantic crossover",
    "tolerance": "14 → 26 NFE over 1000× tolerance (slope ≈ 0.09)",
    "probes": "no sudden jump over τ = 0, 0.5, 0.67, 1",
    "euler_order": "1 (theory)",
    "rk4_order": "4 (theory)",
    "contraction": "contractive if one-sided Lipschitz < 0 (theory)",
}

SECTIONS = (
    "stability",
    "evaluate",
    "steering",
    "continuity",
    "solver_probing",
    "second_paper",
    "activation_steering",
    "efficiency",
    "meta",
    "table",
)


def _pm(d: dict, digits: int = 3) -> str:
    return f"{d['mean']:.{digits}f} ± {d['std']:.{digits}f}"


SHIPPED_SUBJECT = {"prompt": PROMPT, "targets": list(TARGETS), "axis": "sentiment", "user_model": False}


def subject_of(r: dict) -> dict:
    """The subject a results.json was measured on (results from before it was recorded: the shipped one)."""
    return r["meta"].get("subject") or SHIPPED_SUBJECT


def table_rows(r: dict) -> list[dict]:
    """(section, paper figure, ours, how measured) rows for results.md and the Results page; a skipped section
    gets one row that says why."""
    subject = subject_of(r)
    rows = _stability_rows(r["stability"])
    if subject["user_model"]:
        rows += _axis_steering_rows(r["steering"], subject)
    else:
        rows += _steering_rows(r["steering"])
    rows += _continuity_rows(r["continuity"], subject)
    if "efficiency" in r:
        rows += _efficiency_rows(r["efficiency"])
    rows += _solver_probing_rows(r["solver_probing"], subject)
    rows += _second_paper_rows(r["second_paper"])
    if "activation_steering" in r:
        rows += _activation_rows(r["activation_steering"])
    rows += [("Skipped", section_title(k["section"]), "not run", k["why"]) for k in r.get("skipped", [])]
    return [{"section": a, "paper": p, "ours": o, "how": w} for a, p, o, w in rows]


SECTION_TITLES = {"activation_steering": "against activation steering", "efficiency": "Exp 4 efficiency"}


def section_title(section: str) -> str:
    return SECTION_TITLES.get(section, section.replace("_", " "))


def _stability_rows(s: dict) -> list[tuple]:
    h, d = s["hybrid"], s.get("discrete")
    if d is None:  # a model studied alone: its own log
        return [
            (
                "1 Stability",
                f"final loss: {PAPER['final_loss']}",
                f"{h['final_loss']:.3f} (held-out {h['final_val_loss']:.3f})",
                f"last stage-1 training step ({h['steps_stage1']} steps); held-out: last evaluation at u = 0",
            ),
            ("1 Stability", f"total grad norm: {PAPER['grad_norm']}", _pm(h["grad_norm"]), "mean ± std over stage 1"),
            (
                "1 Stability",
                f"ODE-block grad norm: {PAPER['ode_grad_norm']}",
                _pm(h["middle_grad_norm"]),
                "norm of the middle block's gradients, stage 1",
            ),
            (
                "1 Stability",
                f"α drift: {PAPER['alpha']}",
                f"{s['alpha_initial']:.3f} → {s['alpha_after_stage1']:.3f} (stage 1) → {s['alpha_final']:.3f} (final)",
                "α from the config and the log; final from the checkpoint",
            ),
            (
                "1 Stability",
                f"exploding / vanishing steps: {PAPER['exploding_vanishing']}",
                f"{h['exploding_steps']} / {h['vanishing_steps']}",
                "trainer flags, all stages: grad norm > 10× median of last 200; middle grad norm < 1e-7",
            ),
            (
                "1 Stability",
                f"parameters: {PAPER['parameters']}",
                f"{s['parameters_hybrid'] / 1e6:.2f}M",
                "all parameters, tied head counted once",
            ),
        ]
    return [
        (
            "1 Stability",
            f"final loss, hybrid vs discrete: {PAPER['final_loss']}",
            f"{h['final_loss']:.3f} vs {d['final_loss']:.3f} "
            f"(held-out {h['final_val_loss']:.3f} vs {d['final_val_loss']:.3f})",
            f"last stage-1 training step of each log ({h['steps_stage1']} vs {d['steps_stage1']} steps, same batches); "
            "held-out: last evaluation at u = 0",
        ),
        (
            "1 Stability",
            f"total grad norm: {PAPER['grad_norm']}",
            f"{_pm(h['grad_norm'])} vs {_pm(d['grad_norm'])}",
            "mean ± std over stage 1, before clipping",
        ),
        (
            "1 Stability",
            f"ODE-block grad norm: {PAPER['ode_grad_norm']}",
            f"{_pm(h['middle_grad_norm'])} (discrete middle blocks {_pm(d['middle_grad_norm'])})",
            "norm of the middle block's gradients, stage 1",
        ),
        (
            "1 Stability",
            f"α drift: {PAPER['alpha']}",
            f"{s['alpha_initial']:.3f} → {s['alpha_after_stage1']:.3f} (stage 1) → {s['alpha_final']:.3f} (final)",
            "α from the config and the log; final from the checkpoint",
        ),
        (
            "1 Stability",
            f"exploding / vanishing steps: {PAPER['exploding_vanishing']}",
            f"{h['exploding_steps'] + d['exploding_steps']} / {h['vanishing_steps'] + d['vanishing_steps']}",
            "trainer flags, both models, all stages: grad norm > 10× median of last 200; middle grad norm < 1e-7",
        ),
        (
            "1 Stability",
            f"parameters: {PAPER['parameters']}",
            f"{s['parameters_hybrid'] / 1e6:.2f}M vs {s['parameters_discrete'] / 1e6:.2f}M "
            f"({100 * s['parameter_ratio']:.1f}%)",
            "all parameters, tied head counted once",
        ),
    ]


def _steering_rows(st_: dict) -> list[tuple]:
    probe = st_["probe"]
    # the paper probes at u = ±1; ours is judged at ±steer_u (evaluate.trained_steer_u), the |u| it steers hard at
    su = st_.get("steer_u", 1.0)
    rows = []
    for label, key in ((f"{su:+g}", "probe_pos"), (f"{-su:+g}", "probe_neg"), ("0", "probe_zero")):
        p = probe[label]
        rows.append(
            (
                "2 Steering",
                f"probe u = {PAPER_PROBE_U[key]}: {PAPER[key]}",
                f"at u = {label}: P(good) {100 * p['p_good']:.1f}%, P(bad) {100 * p['p_bad']:.1f}% "
                f"(good among the two: {100 * p['relative_good']:.1f}%)",
                f"'{PROMPT}' + word, whole-word probability (chain rule over its tokens), the trained solver",
            )
        )
    return rows + [
        (
            "2 Steering",
            f"judged generations: {PAPER['judged']}",
            f"u={su:+g} positive {100 * st_['steer_pos_clf']:.0f}% (VADER {100 * st_['steer_pos_vader']:.0f}%); "
            f"u={-su:+g} negative {100 * st_['steer_neg_clf']:.0f}% (VADER {100 * st_['steer_neg_vader']:.0f}%); "
            f"u=0 positive {100 * st_['steer_neutral_pos_clf']:.0f}%",
            f"{st_['prompts']} held-out prompts × 40 sampled tokens; TF-IDF+LR judge and VADER on the continuation",
        ),
        (
            "2 Steering",
            "style control (not in the paper)",
            f"u₂={-su:+g} judged RT {100 * st_['style_rt_acc']:.0f}%, "
            f"u₂={su:+g} judged IMDB {100 * st_['style_imdb_acc']:.0f}%",
            "style judge (TF-IDF+LR on the source column)",
        ),
    ]


def _axis_steering_rows(st_: dict, subject: dict) -> list[tuple]:
    """A model of one's own: each axis judged by the judge trained on its file, and its probe words."""
    su = st_["steer_u"]
    rows = []
    for axis in st_["axes"]:
        trust = f", judge held-out accuracy {axis['judge_heldout_acc']:.2f}" if "judge_heldout_acc" in axis else ""
        rows.append(
            (
                "2 Steering",
                f"judged generations, {axis['name']} ({axis['negative']} / {axis['positive']})",
                f"u={su:+g} judged {axis['positive']!r} {100 * axis['steer_positive_acc']:.0f}%; u={-su:+g} judged "
                f"{axis['negative']!r} {100 * axis['steer_negative_acc']:.0f}%; u=0 judged {axis['positive']!r} "
                f"{100 * axis['neutral_positive_share']:.0f}%",
                f"{st_['prompts']} held-out openings × 40 sampled tokens, the other axis at 0; TF-IDF+LR judge "
                f"trained on the file's {axis['name']} labels{trust}",
            )
        )
        if "probe" in axis:
            p = axis["probe"]
            rows.append(
                (
                    "2 Steering",
                    f"probe, {axis['name']} (the paper: {PAPER['probe_pos']} at +1)",
                    f"P({p['positive_word'].strip()}) share {100 * p['positive_share_at_plus']:.1f}% at u = {su:+g}; "
                    f"P({p['negative_word'].strip()}) share {100 * p['negative_share_at_minus']:.1f}% at "
                    f"u = {-su:+g}",
                    f"'{p['prompt']}' + word; the axis's probe words (chosen at training time)",
                )
            )
    rows.append(
        (
            "2 Steering",
            "fluency cost of steering (not in the paper)",
            f"perplexity ratio {st_['ppl_ratio_steered']:.2f}, valid words {100 * st_['valid_word_rate']:.1f}%",
            "steered continuations' perplexity at u = 0 over the unsteered ones'; words seen in the training file",
        )
    )
    return rows


def _continuity_rows(c: dict, subject: dict) -> list[tuple]:
    cu, sw = c["curvature"], c["sweep"]
    prompt, (pos, neg) = subject["prompt"], subject["targets"]
    return [
        (
            "3 Continuity",
            f"Euler-4 vs dopri5 divergence: {PAPER['divergence']}",
            f"{100 * c['solver_divergence']:.4f}%",
            "mean over prompts and u ∈ {-s, 0, s} of |H_trained(1) - H_dopri5(1)| / |H_dopri5(1)|, dopri5 at 1e-6",
        ),
        (
            "3 Continuity",
            f"u sweep -2 … +2: {PAPER['sweep']}",
            f"largest jump {sw['largest_jump']:.4f} between u = {sw['largest_jump_u'][0]:+g} and "
            f"{sw['largest_jump_u'][1]:+g}; relative P({pos.strip()}) {sw['relative_good'][0]:.3f} → "
            f"{sw['relative_good'][-1]:.3f}",
            f"{len(sw['u'])} values of u ({subject['axis']}), next-token P('{pos}'), P('{neg}') after '{prompt}'",
        ),
        (
            "3 Continuity",
            "path curvature (not in the paper)",
            f"arc / chord - 1 at most {cu['arc_to_chord_excess']:.1e}; the displacement turns from the chord by at "
            f"most {100 * cu['orthogonal_share']:.2f}% "
            f"(sine of the angle; on the PCA map {100 * cu['orthogonal_share_map']:.2f}%)",
            f"'{prompt}', {len(cu['u'])} values of u in [-2, 2], {cu['solver']}, {cu['n_tau']} τ points; full space = "
            "every token's state",
        ),
    ]


def _efficiency_rows(eff: dict) -> list[tuple]:
    return [
        (
            "4 Efficiency",
            f"latency hybrid / discrete: {PAPER['latency']}",
            f"{eff['latency_ratio']:.3f}× (FLOP ratio {eff['flop_ratio']:.3f}×)",
            f"steering.bench: no-grad forward, batch {eff['latency_shape'][0]} × {eff['latency_shape'][1]}, "
            f"median of {eff['repeats']} alternating runs, {eff['torch_threads']} thread(s)",
        ),
        (
            "4 Efficiency",
            "KV cache speed-up (goal ≥ 5×)",
            f"{eff['kv_cache_speedup']:.1f}×",
            "generation tokens/s with / without the cache",
        ),
        (
            "4 Efficiency",
            "adjoint memory 64 vs 4 Euler steps (goal ≤ 1.2×)",
            f"{eff['adjoint_mem_ratio_64_4']:.2f}× (direct backprop {eff['direct_mem_ratio_64_4']:.2f}×)",
            f"peak RSS growth of one training step, batch {eff['memory_shape'][0]} × {eff['memory_shape'][1]}, "
            f"{eff['memory_method']}",
        ),
        ("4 Efficiency", "41-point NFE sweep time", f"{eff['regimes_sweep_s']:.2f} s", "steering.bench"),
    ]


def _solver_probing_rows(sp: dict, subject: dict) -> list[tuple]:
    prompt = subject["prompt"]
    pos, neg = (t.strip() for t in subject["targets"])
    rows = [
        (
            "Solver probing",
            f"NFE per u: {PAPER['nfe_regimes']}",
            sp["regimes_reading"],
            f"dopri5 at rtol {sp['rtol']:g}, atol {sp['atol']:g}, {len(sp['u'])} values of u, '{prompt}'; every switch "
            "by an exact penalised piecewise-constant fit of its NFE (steering.analysis.changepoints)",
        ),
        (
            "Solver probing",
            f"two solvers agree: {PAPER['solver_steps']}",
            f"accepted steps differ by up to {100 * sp['step_disagreement']:.0f}%; raw NFE by up to "
            f"{100 * sp['nfe_disagreement']:.0f}%",
            "dopri5 vs adaptive_heun, max over u of |a - b| / mean(a, b) (step_disagreement, nfe_disagreement)",
        ),
        (
            "Solver probing",
            f"{PAPER['switch']} ('{prompt}')",
            _switch_cell(sp),
            f"crossover: P({pos}) = P({neg}) among the two; distance to the nearest switch",
        ),
    ]
    if "curvature_by_level" in sp:  # results.json from before issue 35 lack these
        rows += _why_nfe_rows(sp)
    if "regimes_map" in sp:  # and these, from before issue 54
        rows += regimes_map_rows(sp["regimes_map"], PAPER["nfe_regimes"])
    for name, a in sp.get("alignment", {}).items():
        label = a.get("label") or SHIPPED_PROMPT_SETS[name]
        rows.append(
            (
                "Solver probing",
                f"{PAPER['switch']}, over prompts",
                _alignment_cell(a),
                f"{a['n_prompts']} {label}; aligned: crossover within {a['threshold']:g} of one of the prompt's own "
                f"switches; null: the crossover drawn uniformly from the u range ({a['null_draws']} draws, "
                "p = share of draws at least as aligned); swapped: other prompts' switches",
            )
        )
    rows.append(
        (
            "Solver probing",
            f"NFE vs tolerance: {PAPER['tolerance']}",
            f"{int(sp['tolerance_nfe'][0])} → {int(sp['tolerance_nfe'][-1])} NFE, slope {sp['tolerance_slope']:.3f}",
            f"dopri5 at rtol = atol ∈ {[f'{t:g}' for t in sp['tolerances']]}, u = 0; slope of log NFE vs log 1/tol",
        )
    )
    texts = "held-out texts (their first axis's sign)" if subject["user_model"] else "held-out reviews"
    rows.append(
        (
            "Solver probing",
            f"linear probes over τ: {PAPER['probes']}",
            ", ".join(f"τ={t:g}: {a:.2f}" for t, a in zip(sp["probe_taus"], sp["probe_accuracy"]))
            + f" (largest step {sp['probe_largest_step']:.2f}, chance {sp['probe_chance']:.2f})",
            f"logistic regression on mean-pooled H(τ), {sp['probe_reviews']} {texts}, 30% test",
        )
    )
    return rows


def _second_paper_rows(sec: dict) -> list[tuple]:
    rows = [
        (
            "Second paper",
            f"Euler order: {PAPER['euler_order']}; RK4 order: {PAPER['rk4_order']}",
            f"Euler {_order(sec, 'euler')}, RK4 {_order(sec, 'rk4')}",
            f"float64 error at τ = 1 vs dopri5 at 1e-12, N = 1 … {int(sec['steps'][-1])}, u = 0",
        ),
    ]
    for cr in sec["contraction"].values():
        rows.append(
            (
                "Second paper",
                f"contraction, u = {cr['u']:+g} (in the {cr['nfe_level']:g}-NFE regime): {PAPER['contraction']}",
                f"FTLE(τ=1) {cr['final_ftle']:+.3f}, max λ_max(S) {cr['max_top_eigenvalue']:+.3f}, "
                f"contractive everywhere: {'yes' if cr['contractive'] else 'no'}",
                "perturbation growth along the path (RK4 + JVP); top eigenvalue of (J+Jᵀ)/2 by Lanczos",
            )
        )
    return rows


def _activation_rows(act: dict) -> list[tuple]:
    rows = []
    for judge, name in (("clf", "classifier"), ("vader", "VADER")):
        v = act["pareto"][judge]
        rows.append(
            (
                "vs activation steering",
                f"accuracy vs fluency, {name} judge (not in the paper)",
                f"{v['dominates']} dominates" if v["dominates"] != "neither" else "neither dominates (fronts cross)",
                f"{v['points_per_method']} steered magnitudes per method; hybrid points dominated "
                f"{v['hybrid_points_dominated']}, activation points dominated "
                f"{v['activation_points_dominated']}",
            )
        )
    b = act["best_accuracy_within_budget"]
    rows.append(
        (
            "vs activation steering",
            f"best accuracy at perplexity ≤ {act['fluency_budget']}× unsteered",
            f"hybrid {100 * b['hybrid_clf']:.0f}% (VADER {100 * b['hybrid_vader']:.0f}%); activation "
            f"{100 * b['activation_clf']:.0f}% (VADER {100 * b['activation_vader']:.0f}%)",
            f"u grid {[round(x, 2) for x in act['u_grid']]}; c grid {[round(x, 2) for x in act['c_grid']]} "
            f"(|v| = {act['vector_norm']:.3f}, c limit = mean |H| / |v|); {act['prompts']} prompts",
        )
    )
    return rows


def _why_nfe_rows(sp: dict) -> list[tuple]:
    levels = sp["curvature_by_level"]
    turn = ", ".join(f"{row['level']} NFE ({row['n_u']} u): {row['curvature']:.3g}" for row in levels)
    if sp.get("curvature_p_value") is None:
        verdict = f"one NFE level at every u, so no regimes to compare; mean turn rate {turn} rad per unit τ"
    else:
        differs = (
            "differs" if sp["curvature_p_value"] < 0.05 and sp["curvature_p_value_cyclic"] < 0.05 else "does not differ"
        )
        verdict = (
            f"curvature {differs} between the NFE levels: mean turn rate {turn} rad per unit τ; p = "
            f"{sp['curvature_p_value']:.3g} (permutation), {sp['curvature_p_value_cyclic']:.3g} (cyclic shift along u)"
        )
    first = np.asarray(sp["trace_first_step"], dtype=float)
    by = sorted(set(sp["trace_first_step_by"]))
    steps = sorted(set(sp["trace_accepted"]))
    cause = (
        f"first step {first.min():.4f} … {first.max():.4f} (set by {' / '.join(by)}); accepted steps "
        f"{', '.join(map(str, steps))}; {sum(sp['trace_rejected'])} rejected steps over all u; largest error ratio "
        f"{max(sp['trace_max_error_ratio']):.2g}"
    )
    return [
        (
            "Solver probing",
            "the control partitions the field into regions of different curvature",
            verdict,
            f"turn rate |dF̂/dτ| (Ḟ = ∂F/∂τ + J·F by autograd), mean over tokens and 17 τ on dopri5's path at "
            f"1e-7, per u; levels: dopri5's NFE at rtol {sp['rtol']:g}; {sp['curvature_draws']} relabellings "
            "(steering.analysis.solver_trace)",
        ),
        (
            "Solver probing",
            "what sets the NFE level (not in the paper)",
            cause,
            "every attempted dopri5 step from torchdiffeq's step callbacks, error ratio from its stages; "
            "`python -m steering analyze solver-trace`",
        ),
    ]


def _switch_cell(sp: dict) -> str:
    switches = ", ".join(f"{s['u']:+.2f}" for s in sp["switches"]) or "none"
    text = f"switches at u = {switches}; crossover u = {sp['crossover_u']:+.2f}"
    if not sp["crossover_found"]:
        return text + " (no crossover on the grid: closest point)"
    if "crossover_to_switch" in sp:
        text += f", {sp['crossover_to_switch']:.2f} from the nearest switch"
    return text


def _alignment_cell(a: dict) -> str:
    if "aligned_share" not in a:
        return f"no prompt's target share crosses 50% on the grid ({a['n_prompts']} prompts)"
    text = (
        f"aligned {100 * a['aligned_share']:.0f}% (a random crossover: {100 * a['null_aligned_share']:.0f}%, "
        f"p = {a['p_aligned_share']:.2f})"
    )
    if "median_distance" in a:
        text += (
            f"; median distance {a['median_distance']:.2f} (random: {a['null_median_distance']:.2f}, "
            f"p = {a['p_median_distance']:.3f})"
        )
    if "swapped_median_distance" in a:
        text += (
            f"; to other prompts' switches {100 * a['swapped_aligned_share']:.0f}%, "
            f"median {a['swapped_median_distance']:.2f}"
        )
    return text


def alignment_verdict(sp: dict, alpha: float = 0.05, prompt: str = PROMPT) -> str:
    """One paragraph: the paper's alignment claim, ours over each prompt set, against which null, and whether
    it holds."""
    parts, holds, nearer = [], [], []
    draws, threshold = None, None
    for name, a in sp.get("alignment", {}).items():
        if "aligned_share" not in a:
            continue
        label = {"probe": "probe prompts", "heldout": "held-out openings"}.get(name, a.get("label", name))
        draws, threshold = a["null_draws"], a["threshold"]
        holds.append(a["p_aligned_share"] < alpha and a["aligned_share"] > a["null_aligned_share"])
        text = (
            f"over {a['n_prompts']} {label}, {100 * a['aligned_share']:.0f}% of crossovers within "
            f"{a['threshold']:g} of a switch against {100 * a['null_aligned_share']:.0f}% by chance "
            f"(p = {a['p_aligned_share']:.2f})"
        )
        if "median_distance" in a:
            nearer.append(a["p_median_distance"] < alpha)
            text += (
                f", median distance {a['median_distance']:.2f} against {a['null_median_distance']:.2f} "
                f"(p = {a['p_median_distance']:.3f})"
            )
            if "swapped_median_distance" in a:
                text += f" and {a['swapped_median_distance']:.2f} to other prompts' switches"
        parts.append(text)
    if not parts:
        return "The alignment claim could not be tested: no prompt's target share crosses 50% on the grid."
    verdict = "holds" if all(holds) else "does not hold" if not any(holds) else "holds on one prompt set only"
    text = (
        f"The paper reports the NFE switch aligned with the semantic crossover. Tested against a shuffled-u null "
        f"(each crossover moved to a u drawn uniformly from the swept range, its prompt's switches kept, {draws} "
        f"draws; {100 * alpha:g}% level on the share of crossovers within {threshold:g} of a switch), "
        f"the claim {verdict} on our model: " + "; ".join(parts) + "."
    )
    if not any(holds) and any(nearer):
        text += " The crossovers lie nearer the switches than a random u would, but not on them."
    return text + f" On '{prompt}' itself: " + sp["regimes_reading"] + "."


def _order(sec: dict, name: str) -> str:
    if sec[f"{name}_order_is_lower_bound"]:
        return (
            f"≥ {sec[f'{name}_order']:.2f} (too few errors above the reference's floor "
            f"{sec['error_floor']:.0e} to fit; bound from where it drops below)"
        )
    return f"{sec[f'{name}_order']:.2f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def results_markdown(r: dict) -> str:
    meta, subject = r["meta"], subject_of(r)
    pair = (
        f"`{meta['checkpoint']}` (hybrid) and `{meta['baseline']}` (discrete)"
        if meta.get("baseline")
        else f"`{meta['checkpoint']}` (hybrid, studied alone: no discrete baseline on its tokenizer)"
    )
    command = "python -m steering experiments" + (
        f" --checkpoint {meta['checkpoint']} --out {meta['checkpoint']}/results" if subject["user_model"] else ""
    )
    lines = [
        "# Experiments: the paper's figures on our model",
        "",
        f"Checkpoints: {pair}. "
        f"{'Quick run (small sizes, for tests).' if meta['quick'] else 'Full run.'} "
        f"Took {meta['total_seconds']:.0f} s on {meta['torch_threads']} thread(s). "
        f"Regenerate with `{command}`.",
        "",
        "| Section | Paper figure | Ours | How measured |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {_cell(row['section'])} | {_cell(row['paper'])} | {_cell(row['ours'])} | {_cell(row['how'])} |"
        for row in r["table"]
    ]
    verdict = alignment_verdict(r["solver_probing"], prompt=subject["prompt"])
    lines += ["", "## The paper's alignment claim", "", verdict]
    if "regimes_map" in r["solver_probing"]:
        paragraph = regimes_map_paragraph(r["solver_probing"]["regimes_map"], PAPER["nfe_regimes"])
        lines += ["", "## The paper's two regimes against the regimes map", "", paragraph]
    if r.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {section_title(k['section'])}: {k['why']}" for k in r["skipped"]]
    if "activation_steering" not in r:
        lines += ["", "Time per section (s): " + ", ".join(f"{k} {v:.0f}" for k, v in meta["seconds"].items()), ""]
        return "\n".join(lines)
    act = r["activation_steering"]
    lines += [
        "",
        "## Against activation steering",
        "",
        "Steering vector: mean residual stream after block 2 (model.encode) over positive minus negative "
        f"training reviews ({act['vector_reviews_per_class']} per class), added as c·v at every position. "
        f"Both grids: {len(act['u_grid'])} evenly spaced points symmetric about 0, each up to its "
        f"method's limit (u: ±{act['u_limit']:g}, the control range; c: ±{act['c_limit']:.2f}, where "
        "|c·v| equals the mean residual norm). Accuracy at magnitude m: mean of the fraction judged "
        "positive at +m and negative at -m. Perplexity: of the continuations under the unsteered model "
        "(u = 0 for the hybrid, c = 0 for the discrete model).",
        "",
        "| method | magnitude | accuracy (classifier) | accuracy (VADER) | perplexity |",
        "|---|---|---|---|---|",
    ]
    for key in ("hybrid", "activation"):
        cur = act[key]
        for m, a1, a2, p in zip(
            cur["magnitudes"], cur["accuracy_clf"], cur["accuracy_vader"], cur["paired_perplexity"]
        ):
            lines.append(f"| {cur['label']} | {m:g} | {a1:.3f} | {a2:.3f} | {p:.2f} |")
    lines += ["", "Time per section (s): " + ", ".join(f"{k} {v:.0f}" for k, v in meta["seconds"].items()), ""]
    return "\n".join(lines)


def write_results(results: dict, out: str | Path) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "results.json", out / "results.md"
    json_path.write_text(json.dumps(results, indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    md_path.write_text(results_markdown(results))
    return json_path, md_path


def load_results(folder: str | Path) -> dict | None:
    """results.json from folder, or None when there is none (the Results page then says how to make it)."""
    path = Path(folder) / "results.json"
    if not path.is_file():
        return None
    try:
        results = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); rerun `python -m steering experiments`") from None
    skipped = {k.get("section") for k in results.get("skipped", [])}
    missing = [k for k in SECTIONS if k not in results and k not in skipped]
    if missing:
        raise ValueError(
            f"{path} lacks {', '.join(missing)}: it was written by another version; rerun "
            "`python -m steering experiments`"
        )
    return results


def results_folder(checkpoint) -> Path:
    """Where a checkpoint's results live: assets/results for the shipped hybrid, CHECKPOINT/results otherwise (so
    a model's results travel with it and never overwrite the shipped ones)."""
    if Path(checkpoint).resolve() == Path(DEFAULT_CHECKPOINT).resolve():
        return DEFAULT_OUT
    return Path(checkpoint) / "results"
