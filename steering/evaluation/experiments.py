"""`python -m steering experiments`: the paper's experiments on our model, and activation steering as the rival.

One run writes results.json (every figure, plain JSON, nothing null) and results.md
(paper figure | ours | how measured). Each section reuses the project's own code:
  Exp 1 stability       the training logs (steering.train writes them) and parameter counts
  Exp 2 steering        steering.evaluate: the probe and the judged generations
  Exp 3 continuity      evaluate.solver_divergence; analysis.sweep.steering_sweep over u = -2 … +2
  Exp 4 efficiency      steering.bench.run_bench (in --quick its cheapest settings)
  Solver probing        analysis.regimes (NFE per u, every switch, tolerance scaling), analysis.alignment
                        (crossover vs switches over prompt sets, against a shuffled-u null), analysis.probes
  Path curvature        analysis.curvature (arc / chord, share orthogonal to the chord), under continuity
  Second paper          analysis.dynamics (Euler/RK4 orders, contraction per u regime)
  Against activation steering: steering.activation_steering (see its docstring and GRIDS below)

Fairness of the comparison. Both methods get grids with the same number of points, both
evenly spaced and symmetric about 0, each reaching its method's natural limit fixed
before anything is measured: u up to ±3, the whole control range the hybrid accepts
(training used ±1); c up to the value at which c·|v| equals the mean per-token norm of
the residual stream it is added to (beyond that the state is mostly the vector). The
same held-out prompts, seeds, sampling settings, judges and perplexity rule serve both.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..model.ode import SolverConfig
from ..training.checkpoint import DEFAULT_BASELINE, DEFAULT_CHECKPOINT, load_checkpoint, read_log
from .measures import FULL as FULL_EVAL
from .measures import QUICK as QUICK_EVAL

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "results"
PROMPT = "The movie was"
TARGETS = (" good", " bad")
SHIPPED_PROMPT_SETS = {"probe": "the evaluation's probe prompts", "heldout": "held-out review openings"}
FLUENCY_BUDGET = 1.5  # the evaluation's bar for the fluency cost of steering (ppl ratio <= 1.5)

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
U_LIMIT = 3.0
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
class LabelledOpening:
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
    labelled = tuple(LabelledOpening(r.text, int(r.control[0] > 0)) for r in heldout if r.control[0] != 0)
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


def _pm(d: dict, digits: int = 3) -> str:
    return f"{d['mean']:.{digits}f} ± {d['std']:.{digits}f}"


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


# ---------------------------------------------------------------- against activation steering


def activation_comparison(hybrid, discrete, tok, size: Size) -> dict:
    from ..data import reviews as data
    from ..inference.sampling import DEFAULT_SAMPLING
    from . import evaluate
    from .activation_steering import (
        ActivationSteered,
        best_within_fluency_budget,
        pareto_verdict,
        steering_curve,
        steering_vector,
        symmetric_grid,
    )

    vec = steering_vector(discrete, tok, data.train_reviews(), max_reviews=size.vector_reviews)
    c_limit = vec.residual_norm / vec.norm
    u_grid = symmetric_grid(U_LIMIT, size.grid_points)
    c_grid = symmetric_grid(c_limit, size.grid_points)
    prompts = evaluate.heldout_prompts(tok, size.compare_prompts)
    common = dict(
        tok=tok,
        prompts=prompts,
        new_tokens=evaluate.NEW_TOKENS,
        sampling=DEFAULT_SAMPLING,
        seed=evaluate.SEED,
        solver=hybrid.training_solver,
    )
    u_controls = torch.tensor([[u, 0.0] for u in u_grid], dtype=torch.float32)
    hybrid_curve = steering_curve(
        "hybrid", "hybrid, learned control u", hybrid, hybrid, controls=u_controls, grid=u_grid, **common
    )
    steered = ActivationSteered(discrete, vec.vector, torch.tensor(c_grid, dtype=torch.float32)).eval()
    activation_curve = steering_curve(
        "activation",
        "discrete + activation steering c",
        steered,
        discrete,
        controls=torch.zeros(len(c_grid), 2),
        grid=c_grid,
        **common,
    )
    verdicts = {judge: pareto_verdict(hybrid_curve, activation_curve, judge) for judge in ("clf", "vader")}
    budget = {
        f"{name}_{judge}": best_within_fluency_budget(curve, judge, FLUENCY_BUDGET)
        for name, curve in (("hybrid", hybrid_curve), ("activation", activation_curve))
        for judge in ("clf", "vader")
    }
    return {
        "hybrid": hybrid_curve.to_dict(),
        "activation": activation_curve.to_dict(),
        "u_grid": u_grid,
        "c_grid": c_grid,
        "c_limit": c_limit,
        "u_limit": U_LIMIT,
        "vector_norm": vec.norm,
        "residual_norm": vec.residual_norm,
        "vector_reviews_per_class": vec.n_positive,
        "prompts": len(prompts),
        "new_tokens": evaluate.NEW_TOKENS,
        "pareto": verdicts,
        "fluency_budget": FLUENCY_BUDGET,
        "best_accuracy_within_budget": budget,
    }


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
        baseline = matching_baseline(checkpoint, tok)
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


def matching_baseline(checkpoint, tok):
    """The shipped baseline where it shares the checkpoint's tokenizer, else None (the model is studied alone)."""
    from ..data.tokenizer import load_tokenizer
    from ..training.checkpoint import TOKENIZER

    try:
        theirs = load_tokenizer(Path(DEFAULT_BASELINE) / TOKENIZER)
    except (FileNotFoundError, ValueError):
        return None
    return DEFAULT_BASELINE if theirs.get_vocab() == tok.get_vocab() else None


def results_folder(checkpoint) -> Path:
    """Where a checkpoint's results live: assets/results for the shipped hybrid, CHECKPOINT/results otherwise (so
    a model's results travel with it and never overwrite the shipped ones)."""
    if Path(checkpoint).resolve() == Path(DEFAULT_CHECKPOINT).resolve():
        return DEFAULT_OUT
    return Path(checkpoint) / "results"


# ---------------------------------------------------------------- the table


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
                f"'{PROMPT}' + word, whole-word probability (chain rule over its tokens), Euler 4",
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


def run(checkpoint, baseline, out, quick: bool) -> str:
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
