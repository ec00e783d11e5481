"""`python -m steering analyze KIND`: each analysis on the command line, as text or one JSON object."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np

from ..api.results import jsonable  # one converter for the API's to_dict() and --json
from ..data.heldout import PROMPT_SETS, prompt_set
from ..model.ode import ADAPTIVE_SOLVERS, SolverConfig

KINDS = (
    "trajectory",
    "pca",
    "divergence",
    "regimes",
    "tolerance",
    "sweep",
    "lens",
    "contraction",
    "convergence",
    "probes",
    "middle",
    "fluency",
    "wordprobe",
    "curvature",
    "solver-trace",
    "regimes-map",
    "regimes-effort",
)
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "steering-analysis-cache"


def add_analyze_args(p):
    """Everything but the solver options, which the caller adds (steering.cli.main.add_solver_args)."""
    from ..training.checkpoint import DEFAULT_CHECKPOINT

    p.add_argument("kind", choices=KINDS, help="which analysis")
    p.add_argument(
        "--prompt", default=None, help="prompt text (default: 'The movie was'; a model of one's own: its first opening)"
    )
    p.add_argument(
        "--prompt-set",
        choices=PROMPT_SETS,
        default=None,
        help="regimes over many prompts and the alignment of crossover and switches: 'probe' (the "
        "evaluation's 10 probe prompts) or 'heldout' (the first tokens of --n held-out reviews)",
    )
    p.add_argument("--n", dest="n_prompts", type=int, default=20, help="held-out prompts (--prompt-set heldout)")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--u",
        action="append",
        metavar="NAME=VALUE",
        help="the control on one of the checkpoint's axes (-3..3), repeatable; an axis left out is 0",
    )
    p.add_argument("--sentiment", type=float, default=None, help="the shipped model's --u sentiment=VALUE")
    p.add_argument("--style", type=float, default=None, help="the shipped model's --u style=VALUE")
    p.add_argument("--axis", default=None, help="the checkpoint's axis swept (regimes, sweep, pca; default: its first)")
    p.add_argument("--u-min", type=float, default=-2.0)
    p.add_argument("--u-max", type=float, default=2.0)
    p.add_argument("--n-u", type=int, default=41, help="points of the u grid (regimes, sweep, curvature)")
    p.add_argument(
        "--u-values", type=float, nargs="+", default=[-1.0, 0.0, 1.0], help="controls compared (contraction)"
    )
    p.add_argument(
        "--targets",
        nargs="+",
        default=None,
        help="target tokens (regimes, sweep; default ' good' ' bad'; a model of one's own: its probe words)",
    )
    p.add_argument(
        "--solvers",
        nargs="+",
        default=["dopri5", "adaptive_heun"],
        choices=ADAPTIVE_SOLVERS,
        help="adaptive solvers compared (regimes)",
    )
    p.add_argument("--tolerances", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8])
    p.add_argument("--t-min", type=float, default=1e-8, help="tightest tolerance of the map (regimes-map)")
    p.add_argument("--t-max", type=float, default=1e-2, help="loosest tolerance of the map (regimes-map)")
    p.add_argument("--n-t", type=int, default=25, help="tolerances of the map, log-spaced (regimes-map; at least 2)")
    p.add_argument(
        "--past-end",
        action="store_true",
        help="regimes-map: solve as torchdiffeq does by default, the last step past τ = 1 and interpolated back "
        "(a comparison: past τ = 1 a depth field's weights are extrapolated)",
    )
    p.add_argument(
        "--float32",
        action="store_true",
        help="regimes-map: solve in float32, the model's own precision, instead of on a float64 copy of the field "
        "(a comparison: at atol <= 1e-6 float32's round-off, not the flow, decides dopri5's steps)",
    )
    p.add_argument("--reference-rtol", type=float, default=1e-7, help="dopri5 reference (divergence, curvature)")
    p.add_argument("--reference-atol", type=float, default=1e-9, help="dopri5 reference (divergence, curvature)")
    p.add_argument("--n-tau", type=int, default=None, help="τ grid points (default 33; lens 11)")
    p.add_argument(
        "--null-draws", type=int, default=2000, help="draws of the shuffled-u null (--prompt-set; regimes-effort)"
    )
    p.add_argument("--top-k", type=int, default=5, help="tokens per τ (lens)")
    p.add_argument("--convergence-steps", type=int, default=64, help="largest N (convergence)")
    p.add_argument(
        "--n-reviews",
        type=int,
        default=None,
        help="held-out reviews used (probes: 400; middle: 200 per label and source, as evaluate; "
        "fluency: 50 prompts, as evaluate)",
    )
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="where the PCA map is stored (pca, curvature)")
    p.add_argument(
        "--lanczos-iterations",
        type=int,
        default=20,
        help="J·v and Jᵀ·v products per point for the stretching rate (contraction)",
    )


def own_texts(config: dict | None) -> dict:
    """The default prompt, targets, probe prompts and words and the PCA map's prompts: the shipped model's, or for a
    model of one's own, its held-out openings and its first axis's probe words (never a movie review's)."""
    from ..analysis.pca import DEFAULT_PROMPTS
    from ..data.heldout import PROBE_PROMPT, PROBE_PROMPT_VARIANTS
    from ..data.user_data import axes_of, checkpoint_prompts, is_user_model, probe_targets
    from ..evaluation.measures import PROBE_WORDS

    if not is_user_model(config):
        targets = (PROBE_WORDS["good"], PROBE_WORDS["bad"])
        shipped = dict(prompt=PROBE_PROMPT, targets=targets, probe_prompts=PROBE_PROMPT_VARIANTS, words=PROBE_WORDS)
        return {**shipped, "pca": DEFAULT_PROMPTS}
    prompts = checkpoint_prompts(config)
    positive, negative = probe_targets(axes_of(config)[0])
    return dict(
        prompt=prompts[0],
        targets=(positive, negative),
        probe_prompts=prompts,
        words={"good": positive, "bad": negative},
        pca=prompts[:5],
    )


def own_axis_names(result, names: dict[str, str]):
    """A result with every "axis" entry named as the checkpoint names it (the analyses call the control's entries
    "sentiment" and "style")."""
    if isinstance(result, dict):
        return {
            k: names.get(v, v) if k == "axis" and isinstance(v, str) else own_axis_names(v, names)
            for k, v in result.items()
        }
    if isinstance(result, list):
        return [own_axis_names(v, names) for v in result]
    return result


def _grid(args) -> np.ndarray:
    if args.n_u < 1:
        raise ValueError(f"--n-u must be at least 1, got {args.n_u}")
    if args.u_max < args.u_min:
        raise ValueError("--u-max must not be below --u-min")
    return np.round(np.linspace(args.u_min, args.u_max, args.n_u), 6) if args.n_u > 1 else np.array([args.u_min])


def run_analyze(args, solver_for) -> None:
    """solver_for(the checkpoint's training solver) -> the solver the flags ask for."""
    from ..training.checkpoint import load_checkpoint

    if args.prompt_set is not None and args.kind not in ("regimes", "regimes-map", "regimes-effort"):
        raise ValueError(f"--prompt-set applies to regimes, regimes-map and regimes-effort, not {args.kind}")
    from ..model.controls import control_from_args, internal_axis
    from ..model.ode import CONTROL_AXES

    model, tok, config = load_checkpoint(args.checkpoint)
    control = control_from_args(config, args)
    swept = args.axis or control.names[0]
    # the analyses name the control's entries "sentiment" and "style"; args speak the checkpoint's names
    args.axis = internal_axis(config, swept)
    args.sentiment, args.style = control.values
    # defaults in the checkpoint's own words: a model of one's own opens on its held-out text and probe words
    texts = own_texts(config)
    args.prompt = texts["prompt"] if args.prompt is None else args.prompt
    args.targets = list(texts["targets"]) if args.targets is None else args.targets
    args.probe_prompts, args.probe_words, args.pca_prompts = texts["probe_prompts"], texts["words"], texts["pca"]
    u = list(control.values)
    solver = solver_for(model.training_solver) if hasattr(model, "training_solver") else None
    result, text = ANALYSES[args.kind](args, model, tok, u, solver, args.n_tau)
    if isinstance(result, dict):
        result = {**own_axis_names(result, dict(zip(CONTROL_AXES, control.names))), "control": control.as_dict()}
        result["swept_axis"] = swept
    text = f"control: {control.describe()}\n{text}"
    print(json.dumps(jsonable(result), indent=2) if args.json else text)


def _trajectory(args, model, tok, u, solver, n_tau):
    from ..analysis.trajectories import compute_trajectory, pooled

    t = compute_trajectory(model, tok, args.prompt, u, solver, n_tau=n_tau or 33)
    path = pooled(t)
    displacement = np.linalg.norm(t.states - t.states[0], axis=(1, 2)) / np.linalg.norm(t.states[0])
    result = {
        "tau": t.tau,
        "token_strings": t.token_strings,
        "nfe": t.nfe,
        "eval_taus": t.eval_taus,
        "accepted_taus": t.accepted_taus,
        "rejected_taus": t.rejected_taus,
        "u": t.u,
        "solver": t.solver_label,
        "pooled_norm": np.linalg.norm(path, axis=1),
        "relative_displacement": displacement,
    }
    text = (
        f"{t.solver_label}: NFE {t.nfe}, {len(t.accepted_taus)} accepted / {len(t.rejected_taus)} rejected steps\n"
        f"tokens: {t.token_strings}\n|H(1) - H(0)| / |H(0)| = {displacement[-1]:.4g}"
    )
    return result, text


def _pca(args, model, tok, u, solver, n_tau):
    from ..analysis.pca import checkpoint_identity, pca_map_for_checkpoint, project_trajectory
    from ..analysis.trajectories import compute_trajectory

    pca_map = pca_map_for_checkpoint(
        model, tok, checkpoint_identity(args.checkpoint), args.cache, prompts=args.pca_prompts, axis=args.axis
    )
    path = project_trajectory(pca_map, compute_trajectory(model, tok, args.prompt, u, n_tau=n_tau or 33), args.prompt)
    result = {
        "key": pca_map.key,
        "explained_variance_ratio": pca_map.explained_variance_ratio,
        "reference_prompts": pca_map.prompts,
        "u_values": pca_map.u_values,
        "tau": path.tau,
        "prompt_path": path.points,
    }
    text = (
        f"PCA map {pca_map.key}: explained variance {np.round(pca_map.explained_variance_ratio, 4).tolist()}\n"
        f"prompt path τ=0 {np.round(path.points[0], 3).tolist()} -> τ=1 {np.round(path.points[-1], 3).tolist()}"
    )
    return result, text


def _divergence(args, model, tok, u, solver, n_tau):
    from ..analysis.solvers import compare_solvers

    reference = SolverConfig("dopri5", rtol=args.reference_rtol, atol=args.reference_atol, max_steps=args.max_steps)
    c = compare_solvers(model, tok, args.prompt, u, solver, reference, n_tau=n_tau or 33)
    text = (
        f"{c.a.solver_label} (NFE {c.a.nfe}) vs {c.b.solver_label} (NFE {c.b.nfe}): "
        f"relative divergence at τ=1 {c.final_divergence:.4g} ({100 * c.final_divergence:.4f}%)"
    )
    return c.to_dict(), text


def _regimes(args, model, tok, u, solver, n_tau):
    if args.prompt_set is not None:
        return _regimes_over_prompts(args, model, tok)
    from ..analysis.regimes import nfe_regimes

    r = nfe_regimes(
        model,
        tok,
        args.prompt,
        _grid(args),
        solvers=tuple(args.solvers),
        rtol=args.rtol,
        atol=args.atol,
        axis=args.axis,
        targets=tuple(args.targets),
        max_steps=args.max_steps,
    )
    lines = [
        f"{len(r.u)} values of u in [{r.u[0]:g}, {r.u[-1]:g}] at rtol {r.rtol:g}, atol {r.atol:g}: {r.seconds:.2f} s"
    ]
    for name, values in r.nfe.items():
        lines.append(
            f"  {name}: NFE {int(values.min())}..{int(values.max())}, "
            f"accepted steps {int(r.steps[name].min())}..{int(r.steps[name].max())}"
        )
    lines.append(
        f"disagreement, max over u of |a - b| / mean(a, b): accepted steps {r.step_disagreement:.3f}, "
        f"NFE {r.nfe_disagreement:.3f}"
    )
    lines.append(
        "switches: " + (", ".join(f"u = {s.u:+.2f} ({s.from_level:g} -> {s.to_level:g})" for s in r.switches) or "none")
    )
    lines.append(r.reading)
    report = r.to_dict()
    if hasattr(model, "field"):
        report.update(_curvature_by_level(args, model, tok, r))
        levels = ", ".join(f"{row['level']} NFE: {row['curvature']:.4g}" for row in report["curvature_by_level"])
        p = report["p_value"]
        lines.append(
            f"mean path curvature (turn rate of F, rad per unit τ) by {args.solvers[0]} NFE level: {levels}; "
            + (
                "one level, nothing to compare"
                if p is None
                else f"p = {p:.3g} (permutation), {report['p_value_cyclic']:.3g} (cyclic shift)"
            )
        )
    return report, "\n".join(lines)


def _curvature_by_level(args, model, tok, r) -> dict:
    """Each u's path curvature on the regimes grid, averaged per NFE level of the first solver, and the test."""
    from ..analysis.solver_trace import curvature_by_level, field_geometry

    other = args.style if args.axis == "sentiment" else args.sentiment
    g = field_geometry(model, tok, args.prompt, r.u, n_tau=args.n_tau or 17, axis=args.axis, other=other)
    test = curvature_by_level(r.nfe[args.solvers[0]], g.path_curvature, draws=args.null_draws)
    return {
        "curvature_by_level": test["levels"],
        "p_value": test["p_value"],
        "p_value_cyclic": test["p_value_cyclic"],
        "path_curvature": g.path_curvature,
    }


def _regimes_over_prompts(args, model, tok):
    from ..analysis.alignment import regimes_over_prompts

    probe = args.prompt_set == "probe"  # a model of one's own: its openings
    prompts = list(args.probe_prompts) if probe else prompt_set(args.prompt_set, tok, args.n_prompts)
    a = regimes_over_prompts(
        model,
        tok,
        prompts,
        _grid(args),
        solvers=tuple(args.solvers),
        rtol=args.rtol,
        atol=args.atol,
        axis=args.axis,
        targets=tuple(args.targets),
        max_steps=args.max_steps,
        draws=args.null_draws,
        prompt_set=args.prompt_set,
    )
    s = a.stats
    lines = [
        f"{s['n_prompts']} prompts ({args.prompt_set}), {len(a.u)} values of u in [{a.u[0]:g}, {a.u[-1]:g}], "
        f"{a.solver} at rtol {a.rtol:g}: {a.seconds:.1f} s"
    ]
    for row in a.prompts:
        where = "no crossover" if row.crossover_u is None else f"crossover {row.crossover_u:+.2f}"
        far = "" if row.distance is None else f", {row.distance:.2f} from the nearest switch"
        lines.append(f"  {row.prompt!r}: switches {[round(x.u, 2) for x in row.switches]}, {where}{far}")

    def shown(x, pattern="{:.2f}"):
        return "n/a" if x is None else pattern.format(x)

    lines.append(
        f"aligned (distance <= {s['threshold']:g}): {shown(s['aligned_share'], '{:.0%}')} of "
        f"{s['n_with_crossover']} prompts with a crossover, median distance {shown(s['median_distance'])}"
    )
    lines.append(
        f"shuffled-u null: aligned {shown(s['null_aligned_share'], '{:.0%}')}, median distance "
        f"{shown(s['null_median_distance'])} (p = {shown(s['p_aligned_share'], '{:.3f}')} for the share, "
        f"{shown(s['p_median_distance'], '{:.3f}')} for the median)"
    )
    lines.append(
        f"swapped null (other prompts' switches): aligned {shown(s['swapped_aligned_share'], '{:.0%}')}, "
        f"median distance {shown(s['swapped_median_distance'])}"
    )
    return a.to_dict(), "\n".join(lines)


def _curvature(args, model, tok, u, solver, n_tau):
    from ..analysis.curvature import curvature_by_u
    from ..analysis.pca import checkpoint_identity, pca_map_for_checkpoint
    from ..analysis.solver_trace import field_geometry

    other = args.style if args.axis == "sentiment" else args.sentiment
    reference = SolverConfig("dopri5", rtol=args.reference_rtol, atol=args.reference_atol, max_steps=args.max_steps)
    pca_map = pca_map_for_checkpoint(
        model, tok, checkpoint_identity(args.checkpoint), args.cache, prompts=args.pca_prompts, axis=args.axis
    )
    c = curvature_by_u(
        model, tok, args.prompt, _grid(args), reference, n_tau=n_tau or 33, axis=args.axis, other=other, pca_map=pca_map
    )
    lines = [
        f"{args.prompt!r}, {c.solver}, {c.n_tau} τ points: arc / chord - 1 (0 = straight) and the largest "
        "share of the displacement orthogonal to the chord; full space | PCA map | bend view (chord x main "
        f"departure; it holds {c.bend_captured:.0%} of the departures)"
    ]
    lines += [
        f"u={v:+.2f}: {a - 1:.2e}  {o:.4f} | {am - 1:.2e}  {om:.4f} | {ab - 1:.2e}  {ob:.4f} | tokens' own "
        f"paths: median {np.median(t - 1):.2e}, max {np.max(t - 1):.2e}"
        for v, a, o, am, om, ab, ob, t in zip(
            c.u,
            c.arc_to_chord,
            c.orthogonal_share,
            c.arc_to_chord_map,
            c.orthogonal_share_map,
            c.arc_to_chord_bend,
            c.orthogonal_share_bend,
            c.token_arc_to_chord,
        )
    ]
    g = field_geometry(model, tok, args.prompt, c.u, n_tau=n_tau or 33, axis=args.axis, other=other, solver=reference)
    lines.append("along τ: speed |α·F| and turn rate |dF̂/dτ| (mean over tokens), min..max over τ")
    lines += [
        f"u={v:+.2f}: speed {sp.min():.4g}..{sp.max():.4g}, turn {cu.min():.3g}..{cu.max():.3g}"
        for v, sp, cu in zip(g.u, g.speed, g.curvature)
    ]
    geometry = {k: v for k, v in g.to_dict().items() if k not in ("u", "axis", "stretching")}
    return {"prompt": args.prompt, **c.to_dict(), **geometry}, "\n".join(lines)


def _tolerance(args, model, tok, u, solver, n_tau):
    from ..analysis.regimes import tolerance_scaling

    method = args.solver if args.solver in ADAPTIVE_SOLVERS else "dopri5"
    s = tolerance_scaling(model, tok, args.prompt, u, args.tolerances, solver=method, max_steps=args.max_steps)
    text = "\n".join([f"tol {t:g}: NFE {n}" for t, n in zip(s.tolerances, s.nfe)] + [f"log-log slope {s.slope:.3f}"])
    return s.to_dict(), text


def _sweep(args, model, tok, u, solver, n_tau):
    from ..analysis.sweep import steering_sweep

    other = args.style if args.axis == "sentiment" else args.sentiment
    s = steering_sweep(model, tok, args.prompt, args.targets, _grid(args), axis=args.axis, solver=solver, other=other)
    lines = [
        f"u={v:+.2f}: " + ", ".join(f"P({t!r})={p:.4f}" for t, p in zip(s.target_tokens, row))
        for v, row in zip(s.u, s.probabilities)
    ]
    lines.append(f"largest jump between neighbours: {s.largest_jump:.4f} at u in {s.largest_jump_u}")
    if s.notice:
        lines.append(f"note: {s.notice}")
    return s.to_dict(), "\n".join(lines)


def _lens(args, model, tok, u, solver, n_tau):
    from ..analysis.lens import depth_lens

    lens = depth_lens(model, tok, args.prompt, u, solver, n_tau=n_tau or 11, top_k=args.top_k)
    lines = [
        f"τ={t:.2f}: " + ", ".join(f"{tk!r} {p:.3f}" for tk, p in zip(tokens, probs))
        for t, tokens, probs in zip(lens.tau, lens.top_tokens, lens.top_probs)
    ]
    return lens.to_dict(), "\n".join(lines)


def _contraction(args, model, tok, u, solver, n_tau):
    from ..analysis.dynamics import contraction_by_u
    from ..analysis.solver_trace import field_geometry

    results = contraction_by_u(model, tok, args.prompt, args.u_values, axis=args.axis, n_tau=n_tau or 33)
    lines = [
        f"u={c.u.tolist()}: FTLE(τ=1) {c.final_ftle:+.4g}, max λ_max(S) {c.top_symmetric_eigenvalue.max():+.4g}, "
        f"contractive everywhere: {c.contractive}"
        for c in results
    ]
    other = args.style if args.axis == "sentiment" else args.sentiment
    g = field_geometry(
        model,
        tok,
        args.prompt,
        _grid(args),
        n_tau=n_tau or 17,
        stretching=True,
        lanczos_iterations=args.lanczos_iterations,
        axis=args.axis,
        other=other,
    )
    lines.append("local stretching rate λ_max((J + Jᵀ)/2) along τ (negative: contraction), min..max over τ")
    lines += [f"u={v:+.2f}: {row.min():+.4g}..{row.max():+.4g}" for v, row in zip(g.u, g.stretching)]
    report = {"by_u": [c.to_dict() for c in results], "u": g.u, "tau": g.tau, "stretching": g.stretching}
    return report, "\n".join(lines)


def _convergence(args, model, tok, u, solver, n_tau):
    from ..analysis.dynamics import convergence

    c = convergence(model, tok, args.prompt, u, max_steps=args.convergence_steps)
    lines = [f"N={n}: Euler {e:.3e}, RK4 {r:.3e}" for n, e, r in zip(c.steps, c.euler_error, c.rk4_error)]
    lines.append(f"fitted order: Euler {c.euler_order:.3f}, RK4 {c.rk4_order:.3f} (floor {c.floor:.1e})")
    return c.to_dict(), "\n".join(lines)


def _probes(args, model, tok, u, solver, n_tau):
    from ..analysis.probes import linear_probes
    from ..data.reviews import heldout_reviews

    p = linear_probes(model, tok, heldout_reviews(), u=u, solver=solver, max_reviews=args.n_reviews or 400)
    lines = [f"τ={t:.2f}: held-out accuracy {a:.3f}" for t, a in zip(p.taus, p.accuracy)]
    lines.append(f"({p.n_train} train / {p.n_test} test reviews; chance {p.chance:.3f})")
    return p.to_dict(), "\n".join(lines)


def _middle(args, model, tok, u, solver, n_tau):
    from ..analysis.middle import middle_work
    from ..data.heldout import heldout_batch, heldout_prompts
    from ..evaluation.measures import FULL, solver_divergence

    inputs, targets, controls = heldout_batch(tok, model.config.block_size, args.n_reviews or FULL.val_reviews)
    w = middle_work(model, inputs, targets, controls)
    own = (
        ""
        if w.relative_update_own_control is None
        else f"; under each window's own control {w.relative_update_own_control:.4f}"
    )
    text = (
        f"{w.arch} middle on {w.windows} held-out windows: loss {w.loss:.4f} with it, "
        f"{w.loss_without_middle:.4f} without (cost of removal {w.loss_cost_of_removal:+.4f} nats/token)\n"
        f"|H(1) - H(0)| / |H(0)| at u = 0: {w.relative_update:.4f}{own}; mean |H(0)| {w.state_norm:.2f}\n"
        f"at u = 0, shared by all tokens (a constant offset): {w.shared_update:.4f}; "
        f"token-specific: {w.token_specific_update:.4f}"
    )
    report = w.to_dict()
    if hasattr(model, "field"):
        # the other side of the trade: a block that moves H far along a curved path costs 4 Euler steps accuracy
        report["solver_divergence"] = solver_divergence(model, heldout_prompts(tok, FULL.prompts))
        text += (
            f"\n{model.training_solver.label()} vs dopri5 (1e-6), as the evaluation: {report['solver_divergence']:.2e}"
        )
    return report, text


def _fluency(args, model, tok, u, solver, n_tau):
    from ..data.heldout import heldout_prompts
    from ..evaluation.measures import FULL, generate_for_prompts, perplexity_by_side

    prompts = heldout_prompts(tok, args.n_reviews or FULL.prompts)
    sides = perplexity_by_side(model, prompts, generate_for_prompts(model, tok, prompts))
    pooled = math.sqrt(sides["positive"]["at_zero"] * sides["negative"]["at_zero"])
    text = "\n".join(
        [f"perplexity of the evaluation's steered generations / its u = 0 generations, {len(prompts)} prompts:"]
        + [
            f"  {side}: {r['at_zero']:.3f} under u = 0, {r['own_control']:.3f} under its own control"
            for side, r in sides.items()
        ]
        + [f"  both sides (evaluate's ppl_ratio_steered): {pooled:.3f}"]
    )
    return {**sides, "ppl_ratio_steered": pooled}, text


def _wordprobe(args, model, tok, u, solver, n_tau):
    from ..evaluation.measures import probe_over_prompts

    # the evaluation's prompt and its nine variants (a model of one's own: its openings), and --prompt where it is
    # none of them
    prompts = list(args.probe_prompts) + ([args.prompt] if args.prompt not in args.probe_prompts else [])
    report = probe_over_prompts(model, tok, prompts, words=args.probe_words)
    good, bad = (w.strip() for w in (args.probe_words["good"], args.probe_words["bad"]))
    lines = [
        f"evaluate's probe (Euler 4, the other axis at 0): {good} / ({good} + {bad}) at u = +1, "
        f"{bad} / ({good} + {bad}) at u = -1"
    ]
    lines += [f"  {row['prompt']!r}: {row['good_pos']:.4f} / {row['bad_neg']:.4f}" for row in report["prompts"]]
    lines.append(
        f"  mean {report['good_pos_mean']:.4f} / {report['bad_neg_mean']:.4f}; "
        f"worst {report['good_pos_min']:.4f} / {report['bad_neg_min']:.4f}"
    )
    return report, "\n".join(lines)


def _solver_trace(args, model, tok, u, solver, n_tau):
    from ..analysis.solver_trace import solver_traces

    other = args.style if args.axis == "sentiment" else args.sentiment
    config = SolverConfig(args.solvers[0], rtol=args.rtol, atol=args.atol, max_steps=args.max_steps)
    t = solver_traces(model, tok, args.prompt, _grid(args), config, axis=args.axis, other=other)
    lines = [f"{args.prompt!r}, {config.label()}: every attempted step (τ, h, error ratio, accepted)"]
    for value, trace in zip(t.u, t.traces):
        steps = "  ".join(
            f"({s.tau:.3f}, {s.h:.3f}, {s.error_ratio:.2g}{'' if s.accepted else ', REJECTED'})" for s in trace.steps
        )
        lines.append(
            f"u={value:+.2f}: NFE {trace.nfe}, first step {trace.first_step.h:.4f} "
            f"({trace.first_step.chosen_by}): {steps}"
        )
    return t.to_dict(), "\n".join(lines)


def _map_tolerances(args) -> list[float]:
    from ..analysis.regimes_map import DEFAULT_TOLERANCES

    if (args.t_min, args.t_max, args.n_t) == (1e-8, 1e-2, 25):
        return list(DEFAULT_TOLERANCES)
    if args.n_t < 2 or not 1e-12 <= args.t_min < args.t_max <= 1.0:
        raise ValueError("the map needs --n-t >= 2 and 1e-12 <= --t-min < --t-max <= 1")
    return [float(f"{t:.6g}") for t in np.geomspace(args.t_min, args.t_max, args.n_t)]


def _regimes_map(args, model, tok, u, solver, n_tau):
    from ..analysis.regime_names import name_regimes, regimes_reading
    from ..analysis.regimes_map import REASONS, default_tolerance_reading, regimes_map

    prompts = prompt_set(args.prompt_set, tok, args.n_prompts) if args.prompt_set else [args.prompt]
    other = args.style if args.axis == "sentiment" else args.sentiment
    tolerances, grid = _map_tolerances(args), _grid(args)
    maps = [
        regimes_map(
            model,
            tok,
            p,
            grid,
            tolerances,
            axis=args.axis,
            other=other,
            max_steps=args.max_steps,
            past_end=args.past_end,
            precision="float32" if args.float32 else "float64",
            targets=tuple(args.targets),
        )
        for p in prompts
    ]
    with_band = [m for m in maps if m.cap_bands]
    lines = [
        f"dopri5 over {len(grid)} u in [{grid[0]:g}, {grid[-1]:g}] x {len(tolerances)} tolerances t in "
        f"[{min(tolerances):g}, {max(tolerances):g}] (rtol t, atol t/10), "
        + ("stepping past τ = 1 as torchdiffeq does by default" if args.past_end else "every solve landing on τ = 1")
        + (", in float32" if args.float32 else ", in float64")
        + f": a cap-limited band on {len(with_band)} of {len(maps)} prompts; "
        f"{sum(len(m.exceptions) for m in maps)} cap-limited cells off the first-step rule's NFE"
    ]
    for m in maps:
        lines.append(f"{m.prompt!r} ({m.solves} solves, {m.seconds:.1f} s):")
        for b in m.bands:
            predicted = (
                ""
                if b.predicted_switch_u is None
                else f", predicted {', '.join(f'{x:+.3f}' for x in b.predicted_switch_u)}"
            )
            lines.append(
                f"  {b.kind} band t in [{b.t_low:.4g}, {b.t_high:.4g}] (middle {b.t_middle:.4g}"
                f"{', bisected' if b.bisected else ', grid rows'}): NFE {'/'.join(str(v) for v in b.levels)}, "
                f"switch u {', '.join(f'{x:+.2f}' for x in b.switch_u) or 'none'}{predicted}"
            )
        if m.why_no_band:
            lines.append(f"  no cap-limited band: {m.why_no_band}")
        for e in m.exceptions:
            lines.append(f"  exception: u {e['u']:+.2f}, t {e['t']:.4g}: NFE {e['nfe']}, predicted {e['predicted']}")
        lines.append("  " + default_tolerance_reading(m))
        lines.append("  " + regimes_reading(m))
    report = {
        "prompts": [
            {**m.to_dict(), "regimes": [r.to_dict() for r in name_regimes(m)], "regimes_reading": regimes_reading(m)}
            for m in maps
        ],
        "prompt_set": args.prompt_set,
        "past_end": args.past_end,
        "precision": "float32" if args.float32 else "float64",
        "n_with_cap_band": len(with_band),
        "n_exceptions": sum(len(m.exceptions) for m in maps),
        "reasons": list(REASONS),
    }
    return report, "\n".join(lines)


def _regimes_effort(args, model, tok, u, solver, n_tau):
    from .analyze_effort import regimes_effort

    return regimes_effort(args, model, tok, _grid(args))


ANALYSES = {
    "trajectory": _trajectory,
    "pca": _pca,
    "divergence": _divergence,
    "regimes": _regimes,
    "tolerance": _tolerance,
    "sweep": _sweep,
    "lens": _lens,
    "contraction": _contraction,
    "convergence": _convergence,
    "probes": _probes,
    "middle": _middle,
    "fluency": _fluency,
    "wordprobe": _wordprobe,
    "curvature": _curvature,
    "solver-trace": _solver_trace,
    "regimes-map": _regimes_map,
    "regimes-effort": _regimes_effort,
}
