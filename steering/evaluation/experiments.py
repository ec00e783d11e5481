"""`python -m steering experiments`: the paper's experiments on our model, and activation steering as the rival.

One run writes results.json (every figure, plain JSON, nothing null) and results.md
(paper figure | ours | how measured; results_table.py). Each section reuses the project's own code:
  Exp 1 stability       the training logs (training/train.py writes them) and parameter counts
  Exp 2 steering        evaluation/evaluate.py (axis_eval.py for a model of one's own): probe, judged text
  Exp 3 continuity      evaluate.solver_divergence; analysis.sweep.steering_sweep over u = -2 … +2
  Exp 4 efficiency      evaluation/bench.py run_bench (in --quick its cheapest settings)
  Solver probing        analysis.regimes (NFE per u, every switch, tolerance scaling), analysis.alignment
                        (crossover vs switches over prompt sets, against a shuffled-u null), analysis.probes
  Path curvature        analysis.curvature (arc / chord, share orthogonal to the chord), under continuity
  Second paper          analysis.dynamics (Euler/RK4 orders, contraction per u regime)
  Against activation steering: activation_steering.activation_comparison (the rival and its run)

Fairness of the comparison. Both methods get grids with the same number of points, both
evenly spaced and symmetric about 0, each reaching its method's natural limit fixed
before anything is measured: u up to ±3, the whole control range the hybrid accepts
(training used ±1); c up to the value at which c·|v| equals the mean per-token norm of
the residual stream it is added to (beyond that the state is mostly the vector). The
same held-out prompts, seeds, sampling settings, judges and perplexity rule serve both.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..model.ode import SolverConfig
from ..training.checkpoint import (
    DEFAULT_BASELINE,
    DEFAULT_CHECKPOINT,
    load_checkpoint,
    matching_default_baseline,
    read_log,
)
from .measures import FULL as FULL_EVAL
from .measures import QUICK as QUICK_EVAL
from .results_table import PROMPT, SHIPPED_PROMPT_SETS, TARGETS, results_folder, table_rows, write_results


@dataclass(frozen=True)
class Size:
    quick: bool
    compare_prompts: int  # held-out prompts per grid point (activation vs u)
    grid_points: int  # per method, odd, symmetric about 0
    vector_reviews: int  # training reviews for the steering vector (half per class)
    sweep_points: int  # u sweep -2 … +2 (probe targets)
    regimes_points: int  # NFE per u (and the u of the curvature paths)
    alignment_heldout: int  # held-out review openings in the alignment test (besides the 10 probe prompts)
    tolerances: tuple
    probe_reviews: int
    probe_taus: tuple
    contraction_n_tau: int
    contraction_probes: int
    lanczos_iterations: int
    convergence_steps: int
    bench: dict  # keyword arguments of steering.bench.run_bench


# Sized from CPU timings of each section on a demo-size checkpoint (about 5 CPU-minutes in all,
# most of it the activation comparison, evaluate and the bench), so the run fits 30 minutes on
# 2 cores with room for a trained model's higher NFE.
FULL = Size(
    quick=False,
    compare_prompts=100,
    grid_points=13,
    vector_reviews=2000,
    sweep_points=41,
    regimes_points=41,
    alignment_heldout=20,
    tolerances=(1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8),
    probe_reviews=400,
    probe_taus=(0.0, 0.25, 0.5, 0.67, 0.75, 1.0),
    contraction_n_tau=33,
    contraction_probes=4,
    lanczos_iterations=24,
    convergence_steps=64,
    bench=dict(repeats=7),
)
QUICK = Size(
    quick=True,
    compare_prompts=4,
    grid_points=5,
    vector_reviews=40,
    sweep_points=9,
    regimes_points=9,
    alignment_heldout=4,
    tolerances=(1e-2, 1e-3, 1e-4),
    probe_reviews=40,
    probe_taus=(0.0, 0.5, 1.0),
    contraction_n_tau=5,
    contraction_probes=2,
    lanczos_iterations=8,
    convergence_steps=16,
    bench=dict(repeats=1, latency_shape=(2, 16), generation=(16, 4), memory_shape=(8, 64)),
)


@dataclass(frozen=True)
class Subject:
    """What the experiments steer and read: one prompt, the next-token pair that reads the swept axis, the prompt
    sets the alignment test runs over and the labelled texts the linear probes separate. The shipped model's is
    the paper's movie setting; a model of one's own brings its axes, probe words and held-out texts."""

    prompt: str
    targets: tuple[str, str]  # (positive-end word, negative-end word), each with its leading space
    axis: str  # the checkpoint's name for the swept (first) axis
    ends: tuple[str, str]  # its (negative, positive) end labels
    prompt_sets: dict  # name -> (label, prompts) for the alignment test
    probe_texts: tuple  # objects with .text and .label (1 positive end, 0 negative) for the linear probes
    map_prompts: tuple = ()  # the PCA map's prompts (empty: the lab's default movie openings)
    user_model: bool = False

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "targets": list(self.targets),
            "axis": self.axis,
            "ends": list(self.ends),
            "user_model": self.user_model,
        }


@dataclass(frozen=True)
class ProbeText:
    """A held-out text for the linear probes, labelled by its end of the swept axis (1 positive, 0 negative)."""

    text: str
    label: int


def shipped_subject(tok, size: Size) -> Subject:
    from ..data.heldout import prompt_set
    from ..data.reviews import heldout_reviews

    return Subject(
        PROMPT,
        TARGETS,
        "sentiment",
        ("negative", "positive"),
        {
            "probe": (SHIPPED_PROMPT_SETS["probe"], prompt_set("probe", tok, 10)),
            "heldout": (SHIPPED_PROMPT_SETS["heldout"], prompt_set("heldout", tok, size.alignment_heldout)),
        },
        heldout_reviews(),
    )


def user_subject(checkpoint, config: dict, tok, size: Size) -> Subject:
    """A model of one's own: its first axis, read by that axis's probe words after its first suggested opening;
    alignment over its suggested openings and its held-out texts' openings; probes on held-out texts by the
    sign of their first-axis target."""
    from ..data import user_data
    from ..data.tokenizer import decode
    from .axis_eval import heldout_prompts

    axis = user_data.axes_of(config)[0]
    heldout = user_data.read_heldout(checkpoint)
    suggested = list(user_data.checkpoint_prompts(config))
    openings = [decode(tok, ids[1:]) for ids in heldout_prompts(tok, heldout, size.alignment_heldout)]
    labelled = tuple(ProbeText(r.text, int(r.control[0] > 0)) for r in heldout if r.control[0] != 0)
    return Subject(
        suggested[0],
        user_data.probe_targets(axis),
        axis.name,
        (axis.negative, axis.positive),
        {
            "suggested": ("openings the checkpoint suggests", suggested[:10]),
            "heldout": ("held-out text openings", [o for o in openings if o.strip()]),
        },
        labelled,
        map_prompts=tuple(suggested[:4]),
        user_model=True,
    )


# ---------------------------------------------------------------- helpers


def jsonable(value):
    """numpy values as plain JSON types (NaN stays NaN: non_finite_paths finds it)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)
    return value


def non_finite_paths(value, path: str = "") -> list[str]:
    """Dotted paths of every leaf that is None, NaN or infinite."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in non_finite_paths(v, f"{path}[{i}]")]
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return [path]
    return []


def without_none(value):
    """value with every None dropped from its dicts (results.json holds no nulls; absent means undefined)."""
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [without_none(v) for v in value]
    return value


def mean_std(values) -> dict:
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size == 0:
        raise ValueError("no values to average in the training log")
    return {"mean": float(values.mean()), "std": float(values.std())}


# ---------------------------------------------------------------- Exp 1: stability


def stability(hybrid_dir, baseline_dir, hybrid, discrete, hybrid_config: dict) -> dict:
    """From both training logs (stage 1 is the language-model stage both models share); the hybrid's alone when
    there is no baseline (discrete None)."""
    logs = {"hybrid": read_log(hybrid_dir)}
    if discrete is not None:
        logs["discrete"] = read_log(baseline_dir)
    for name, records in logs.items():
        if not records:
            where = hybrid_dir if name == "hybrid" else baseline_dir
            raise ValueError(f"no training log (train_log.jsonl) in {where}: Exp 1 reads the {name} model's log")
    out = {}
    for name, records in logs.items():
        stage1 = [r for r in records if r.get("stage", 1) == 1]
        val = [r["val_loss"] for r in stage1 if r.get("val_loss") is not None]
        out[name] = {
            "steps_stage1": len(stage1),
            "final_loss": stage1[-1]["loss"],
            "final_val_loss": val[-1] if val else stage1[-1]["loss"],
            "grad_norm": mean_std(r.get("grad_norm") for r in stage1),
            "middle_grad_norm": mean_std(r.get("ode_grad_norm") for r in stage1),
            "exploding_steps": sum(bool(r.get("exploding")) for r in records),
            "vanishing_steps": sum(bool(r.get("vanishing")) for r in records),
        }
    alphas = [r["alpha"] for r in logs["hybrid"] if r.get("alpha") is not None]
    stage1_alphas = [r["alpha"] for r in logs["hybrid"] if r.get("alpha") is not None and r.get("stage", 1) == 1]
    out["alpha_initial"] = float(hybrid_config.get("alpha_init", alphas[0] if alphas else 0.1))
    out["alpha_after_stage1"] = float(stage1_alphas[-1]) if stage1_alphas else float(hybrid.field.alpha.detach())
    out["alpha_final"] = float(hybrid.field.alpha.detach())
    out["parameters_hybrid"] = hybrid.num_parameters()
    if discrete is not None:
        out["parameters_discrete"] = discrete.num_parameters()
        out["parameter_ratio"] = hybrid.num_parameters() / discrete.num_parameters()
    out["stage2_steps_hybrid"] = sum(r.get("stage", 1) == 2 for r in logs["hybrid"])
    return out


# ---------------------------------------------------------------- Exp 2 and 3 (probe, judged text, continuity)


def probe_table(report: dict) -> dict:
    """The paper's probe table from evaluate's raw probe: u -> P(good), P(bad), and the two renormalised."""
    table = {}
    for label, probs in report["probe_raw"].items():
        total = probs["good"] + probs["bad"]
        table[label] = {"p_good": probs["good"], "p_bad": probs["bad"], "relative_good": probs["good"] / total}
    return table


def u_sweep(model, tok, points: int, subject: Subject) -> dict:
    from ..analysis.sweep import steering_sweep

    s = steering_sweep(model, tok, subject.prompt, subject.targets, np.round(np.linspace(-2.0, 2.0, points), 6))
    relative_good = s.relative[:, 0]
    rel_jumps = np.abs(np.diff(relative_good))
    return {
        "u": s.u,
        "p_good": s.probabilities[:, 0],
        "p_bad": s.probabilities[:, 1],
        "relative_good": relative_good,
        "largest_jump": s.largest_jump,
        "largest_jump_u": list(s.largest_jump_u),
        "largest_relative_jump": float(rel_jumps.max()),
        "relative_good_monotone_fraction": float((np.diff(relative_good) >= 0).mean()),
        "target_tokens": s.target_tokens,
    }


# ---------------------------------------------------------------- solver probing and the second paper


def solver_probing(model, tok, size: Size, subject: Subject) -> dict:
    from ..analysis.alignment import regimes_over_prompts
    from ..analysis.probes import linear_probes
    from ..analysis.regimes import nfe_regimes, tolerance_scaling

    grid = np.round(np.linspace(-2.0, 2.0, size.regimes_points), 6)
    r = nfe_regimes(model, tok, subject.prompt, grid, solvers=("dopri5", "adaptive_heun"), targets=subject.targets)
    crossover = r.crossover_u
    crossover_found = crossover is not None
    if not crossover_found:  # P(good) never crosses P(bad) on the grid: the closest point instead
        crossover = float(r.u[int(np.abs(r.target_probability - 0.5).argmin())])
    alignment = {}
    for name, (label, prompts) in subject.prompt_sets.items():
        if not prompts:
            continue
        a = regimes_over_prompts(
            model,
            tok,
            prompts,
            grid,
            solvers=("dopri5", "adaptive_heun"),
            targets=subject.targets,
            prompt_set=name,
        )
        alignment[name] = {
            **a.stats,
            "label": label,
            "prompts": [
                {
                    "prompt": row.prompt,
                    "switches": [s.u for s in row.switches],
                    "crossover_u": row.crossover_u,
                    "distance": row.distance,
                    "aligned": row.aligned,
                }
                for row in a.prompts
            ],
        }
    tol = tolerance_scaling(model, tok, subject.prompt, (0.0, 0.0), size.tolerances)
    why = why_this_nfe(
        model, tok, subject.prompt, grid, r.nfe["dopri5"], SolverConfig("dopri5", rtol=r.rtol, atol=r.atol)
    )
    probes = linear_probes(model, tok, subject.probe_texts, taus=size.probe_taus, max_reviews=size.probe_reviews)
    return without_none(
        {
            "u": r.u,
            "nfe_dopri5": r.nfe["dopri5"],
            "nfe_adaptive_heun": r.nfe["adaptive_heun"],
            "steps_dopri5": r.steps["dopri5"],
            "steps_adaptive_heun": r.steps["adaptive_heun"],
            "nfe_disagreement": r.nfe_disagreement,
            "step_disagreement": r.step_disagreement,
            "switches": [s.to_dict() for s in r.switches],
            "n_switches": len(r.switches),
            "segments": [s.to_dict() for s in r.segments],
            "regimes_reading": r.reading,
            "switch_u": r.switch_u,
            "crossover_to_switch": r.crossover_to_switch,
            "crossover_u": crossover,
            "crossover_found": crossover_found,
            "rtol": r.rtol,
            "atol": r.atol,
            "alignment": alignment,
            "tolerances": tol.tolerances,
            "tolerance_nfe": tol.nfe,
            "tolerance_slope": tol.slope,
            "probe_taus": probes.taus,
            "probe_accuracy": probes.accuracy,
            "probe_chance": probes.chance,
            "probe_largest_step": float(np.abs(np.diff(probes.accuracy)).max()) if len(probes.accuracy) > 1 else 0.0,
            "probe_reviews": probes.n_train + probes.n_test,
            **why,
        }
    )


def why_this_nfe(model, tok, prompt: str, grid, nfe, solver) -> dict:
    """What sets dopri5's NFE at each u: its step trace (first step, rejections, largest error ratio) and whether
    the path's curvature differs between NFE levels (analysis.solver_trace)."""
    from ..analysis.solver_trace import curvature_by_level, field_geometry, solver_traces

    traces = solver_traces(model, tok, prompt, grid, solver)
    if not np.array_equal(traces.nfe, nfe):
        raise RuntimeError("the step traces' NFE differ from the regimes sweep's: the trace is out of step")
    geometry = field_geometry(model, tok, prompt, grid, n_tau=17)
    test = curvature_by_level(nfe, geometry.path_curvature)
    return {
        "trace_first_step": [t.first_step.h for t in traces.traces],
        "trace_first_step_by": [t.first_step.chosen_by for t in traces.traces],
        "trace_accepted": [len(t.accepted) for t in traces.traces],
        "trace_rejected": [len(t.rejected) for t in traces.traces],
        "trace_max_error_ratio": [max(s.error_ratio for s in t.steps) for t in traces.traces],
        "path_turn_rate": geometry.path_curvature,
        "field_speed": geometry.speed.mean(axis=1),
        "curvature_by_level": test["levels"],
        "curvature_p_value": test["p_value"],
        "curvature_p_value_cyclic": test["p_value_cyclic"],
        "curvature_draws": test["draws"],
    }


def path_curvature(model, tok, size: Size, subject: Subject) -> dict:
    from ..analysis.curvature import curvature_by_u
    from ..analysis.inputs import REFERENCE_SOLVER
    from ..analysis.pca import fit_pca_map

    grid = np.round(np.linspace(-2.0, 2.0, size.regimes_points), 6)
    map_prompts = {"prompts": list(subject.map_prompts)} if subject.map_prompts else {}
    c = curvature_by_u(
        model, tok, subject.prompt, grid, REFERENCE_SOLVER, n_tau=33, pca_map=fit_pca_map(model, tok, **map_prompts)
    )
    return without_none({**c.to_dict(), **c.most_curved()})


def nfe_level_at(segments: list[dict], u: float) -> float:
    """The NFE level of the segment holding u (the left one at a switch)."""
    return next((s["level"] for s in segments if s["u_start"] <= u <= s["u_end"]), segments[-1]["level"])


def second_paper(model, tok, size: Size, segments: list[dict], subject: Subject) -> dict:
    from ..analysis.dynamics import contraction_by_u, convergence

    conv = convergence(model, tok, subject.prompt, (0.0, 0.0), max_steps=size.convergence_steps)
    # one control in each NFE regime of the shipped model (high at -1 and +1, low at 0)
    regimes = {"negative": -1.0, "zero": 0.0, "positive": 1.0}
    runs = contraction_by_u(
        model,
        tok,
        subject.prompt,
        tuple(regimes.values()),
        n_tau=size.contraction_n_tau,
        n_probes=size.contraction_probes,
        lanczos_iterations=size.lanczos_iterations,
    )
    contraction = {
        name: {
            "u": u,
            "final_ftle": c.final_ftle,
            "max_top_eigenvalue": float(c.top_symmetric_eigenvalue.max()),
            "mean_growth_rate": float(c.growth_rate.mean()),
            "contractive": c.contractive,
            "nfe_level": nfe_level_at(segments, u),
        }
        for (name, u), c in zip(regimes.items(), runs)
    }
    orders = {}
    for name, fitted, errors in (
        ("euler", conv.euler_order, conv.euler_error),
        ("rk4", conv.rk4_order, conv.rk4_error),
    ):
        bounded = not math.isfinite(fitted)
        orders[f"{name}_order"] = order_lower_bound(conv.steps, errors, conv.floor) if bounded else fitted
        orders[f"{name}_order_is_lower_bound"] = bounded
    return {
        "steps": conv.steps,
        "euler_error": conv.euler_error,
        "rk4_error": conv.rk4_error,
        **orders,
        "reference_error": conv.reference_error,
        "error_floor": conv.floor,
        "contraction": contraction,
    }


def order_lower_bound(steps, errors, floor: float) -> float:
    """When fewer than two errors clear the reference's floor, no order can be fitted; but if the error
    at N_k is above the floor and the one at N_k+1 is not, an error C·N^-p needs
    p >= log(e_k / floor) / log(N_k+1 / N_k). 0 (no information) when even N = 1 is at the floor."""
    steps, errors = np.asarray(steps, dtype=float), np.asarray(errors, dtype=float)
    above = np.flatnonzero(errors > floor)
    if above.size == 0 or above[-1] + 1 >= len(steps):
        return 0.0
    k = int(above[-1])
    return float(np.log(errors[k] / floor) / np.log(steps[k + 1] / steps[k]))


# ---------------------------------------------------------------- Exp 4


def efficiency(hybrid, discrete, tok, checkpoint, size: Size) -> dict:
    from .bench import run_bench

    report = run_bench(
        hybrid,
        discrete,
        tok,
        memory_spec={"source": "checkpoint", "checkpoint": str(checkpoint)},
        label=f"{checkpoint} vs discrete",
        **size.bench,
    ).to_dict()
    keys = (
        "latency_ratio",
        "flop_ratio",
        "kv_cache_speedup",
        "adjoint_mem_ratio_64_4",
        "direct_mem_ratio_64_4",
        "regimes_sweep_s",
        "hybrid_forward_ms",
        "discrete_forward_ms",
        "cached_tokens_per_s",
        "uncached_tokens_per_s",
        "repeats",
        "latency_shape",
        "memory_shape",
        "memory_method",
        "torch_threads",
    )
    return {k: report[k] for k in keys}


# ---------------------------------------------------------------- the whole run


def run_experiments(
    checkpoint=DEFAULT_CHECKPOINT, baseline=DEFAULT_BASELINE, quick: bool = False, size: Size | None = None, log=None
) -> dict:
    """Every section on the shipped pair; on a model of one's own (trained with --data), the sections that make
    sense for it, on its first axis, with `skipped` naming the rest and why. baseline None: the shipped
    baseline where it shares the checkpoint's tokenizer, else the model alone."""
    from ..training.checkpoint import is_user_checkpoint

    size = size or (QUICK if quick else FULL)
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    torch.manual_seed(0)
    hybrid, tok, config = load_checkpoint(checkpoint)
    if hybrid.config.arch != "hybrid":
        raise ValueError(f"{checkpoint} holds a {hybrid.config.arch} model; --checkpoint must be the hybrid")
    user_model = is_user_checkpoint(checkpoint)
    discrete = None
    if baseline is None:
        baseline = matching_default_baseline(checkpoint)
    if baseline is not None:
        discrete, baseline_tok, _ = load_checkpoint(baseline)
        if discrete.config.arch != "discrete":
            raise ValueError(f"{baseline} holds a {discrete.config.arch} model; --baseline must be the discrete one")
        if baseline_tok.get_vocab() != tok.get_vocab():
            raise ValueError(
                f"{checkpoint} and {baseline} use different tokenizers, so their losses are not comparable; train "
                "the baseline with --tokenizer pointing at the hybrid's, or leave --baseline out"
            )
    if discrete is None and not user_model:
        raise ValueError(f"{checkpoint} is not a model of one's own: give the discrete baseline (--baseline)")
    subject = user_subject(checkpoint, config, tok, size) if user_model else shipped_subject(tok, size)
    seconds, results, skipped = {}, {}, []

    def timed(name, fn):
        start, cpu = time.perf_counter(), time.process_time()
        log(f"[experiments] {name} …")
        value = fn()
        seconds[name] = time.perf_counter() - start
        log(f"[experiments] {name}: {seconds[name]:.1f} s ({time.process_time() - cpu:.1f} s CPU in this process)")
        return value

    def skip(section: str, why: str):
        skipped.append({"section": section, "why": why})
        log(f"[experiments] {section}: skipped ({why})")

    results["stability"] = timed(
        "stability", lambda: stability(checkpoint, baseline, hybrid, discrete, config.get("model", {}))
    )
    if user_model:
        from .axis_eval import evaluate_axes

        report = timed("evaluate", lambda: evaluate_axes(checkpoint, baseline, quick=size.quick))
        results["evaluate"] = report
        results["steering"] = {
            "steer_u": report["steer_u"],
            "axes": report["axes"],
            "ppl_ratio_steered": report["ppl_ratio_steered"],
            "valid_word_rate": report["valid_word_rate"],
            "prompts": (QUICK_EVAL if size.quick else FULL_EVAL).prompts,
        }
    else:
        from . import evaluate

        report = timed("evaluate", lambda: evaluate.evaluate(checkpoint, baseline, quick=size.quick))
        results["evaluate"] = report
        results["steering"] = {
            "probe": probe_table(report),
            "steer_u": report["steer_u"],
            **{
                k: report[k]
                for k in (
                    "steer_pos_clf",
                    "steer_neg_clf",
                    "steer_pos_vader",
                    "steer_neg_vader",
                    "steer_neutral_pos_clf",
                    "style_rt_acc",
                    "style_imdb_acc",
                    "ppl_ratio_steered",
                )
            },
            "prompts": (QUICK_EVAL if size.quick else FULL_EVAL).prompts,
        }
    results["continuity"] = {
        "solver_divergence": report["solver_divergence"],
        "sweep": timed("u sweep", lambda: u_sweep(hybrid, tok, size.sweep_points, subject)),
        "curvature": timed("path curvature", lambda: path_curvature(hybrid, tok, size, subject)),
    }
    results["solver_probing"] = timed("solver probing", lambda: solver_probing(hybrid, tok, size, subject))
    results["solver_probing"]["regimes_map"] = timed("regimes map", lambda: _regimes_map(hybrid, tok, size, subject))
    probing = results["solver_probing"]
    results["second_paper"] = timed(
        "second paper", lambda: second_paper(hybrid, tok, size, probing["segments"], subject)
    )
    if user_model:
        skip(
            "activation_steering",
            "the rival's steering vector is built from the movie reviews' sentiment and judged by the sentiment "
            "judges; a model of one's own is steered on its own axes",
        )
    else:
        from .activation_steering import activation_comparison

        results["activation_steering"] = timed(
            "activation steering", lambda: activation_comparison(hybrid, discrete, tok, size)
        )
    if discrete is None:
        skip("efficiency", f"no discrete baseline on {checkpoint}'s tokenizer to time against (--baseline)")
    else:
        results["efficiency"] = timed("efficiency", lambda: efficiency(hybrid, discrete, tok, checkpoint, size))
    results["skipped"] = skipped
    results["meta"] = {
        "quick": size.quick,
        "checkpoint": _shown_path(checkpoint),
        "baseline": _shown_path(baseline) if baseline is not None else None,
        "subject": subject.to_dict(),
        "torch_threads": torch.get_num_threads(),
        "seconds": seconds,
        "total_seconds": float(sum(seconds.values())),
        "size": size.__dict__,
    }
    results = without_none(jsonable(results))
    results["table"] = table_rows(results)
    bad = non_finite_paths(results)
    if bad:
        raise ValueError(f"non-finite results at {', '.join(bad[:10])}")
    return results


def _regimes_map(model, tok, size: Size, subject: Subject) -> dict:
    from .regimes_claim import regimes_map_section

    prompts = subject.prompt_sets.get("probe", (None, [subject.prompt]))[1]
    return regimes_map_section(model, tok, prompts, subject.targets, size.regimes_points, quick=size.quick)


def rerun_regimes_map(checkpoint, out) -> str:
    """Only the regimes map's section, into an existing results.json; the table and results.md rewritten."""
    from .results_table import load_results

    out = results_folder(checkpoint) if out is None else Path(out)
    results = load_results(out)
    if results is None:
        raise ValueError(f"no results.json in {out}: run `python -m steering experiments` first")
    model, tok, config = load_checkpoint(checkpoint)
    size = QUICK if results["meta"]["quick"] else FULL
    from ..training.checkpoint import is_user_checkpoint

    subject = (
        user_subject(checkpoint, config, tok, size) if is_user_checkpoint(checkpoint) else shipped_subject(tok, size)
    )
    start = time.perf_counter()
    results["solver_probing"]["regimes_map"] = without_none(jsonable(_regimes_map(model, tok, size, subject)))
    results["meta"]["seconds"]["regimes map"] = time.perf_counter() - start
    results["table"] = table_rows(results)
    json_path, md_path = write_results(results, out)
    return f"wrote {json_path} and {md_path} (the regimes map: {time.perf_counter() - start:.0f} s)"


def run(checkpoint, baseline, out, quick: bool, only: str | None = None) -> str:
    if only == "regimes-map":
        return rerun_regimes_map(checkpoint, out)
    results = run_experiments(checkpoint, baseline, quick=quick)
    out = results_folder(checkpoint) if out is None else out
    json_path, md_path = write_results(results, out)
    return f"wrote {json_path} and {md_path} ({results['meta']['total_seconds']:.0f} s)"


def _shown_path(path) -> str:
    """A checkpoint path relative to the repository when it lies inside it, so committed results read the same
    anywhere."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)
