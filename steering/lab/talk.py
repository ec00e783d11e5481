"""The offline talk demo: everything the Steer page shows, precomputed on a grid of controls.

`python -m steering export-talk --out talk.html` writes one self-contained HTML file (plotly.js
inlined, no network request of any kind) that plays the lab without Python: a sentiment slider
from −2 to +2 in steps of 0.1 and a three-way style control swap in precomputed text, judged
sentiment, next-token bars and hidden-state paths. It also holds the trajectories over τ (with a
Play button), the adaptive solvers' NFE against u with the regime switches, fixed against
adaptive paths with their divergence, and a footer naming the model and its evaluation.

This module computes (plain functions, no Streamlit); steering.figures.talk and talk_page render the HTML
and never sees the model.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.ode import SolverConfig
from . import compute, logic

# the slider's positions: −2 … +2 in steps of 0.1 (41), and the three styles
SENTIMENTS = tuple(round(-2.0 + 0.1 * k, 1) + 0.0 for k in range(41))
STYLES = (-1.0, 0.0, 1.0)
# fixed against adaptive is solved at these sentiments (each style); the page shows the nearest
COMPARE_SENTIMENTS = (-2.0, -1.0, 0.0, 1.0, 2.0)
# the NFE sweep's grid (the Regimes page offers 11 … 81; 21 keeps the build short)
REGIME_POINTS = 21
REGIME_RTOL, REGIME_ATOL = 1e-3, 1e-4  # the Regimes page's default tolerance (atol = rtol / 10)
REGIME_TARGETS = (" good", " bad")
ADAPTIVE_SOLVER = SolverConfig("dopri5", rtol=1e-7, atol=1e-9)  # the Solvers page's default reference
DEFAULT_NEW_TOKENS = 24
TEMPERATURE, TOP_K, N_TAU = 0.8, 10, 33  # compute_steer_views' defaults, as on the Steer page
MAX_PROMPTS = 8
MAX_BYTES = 15 * 1024 * 1024
# states kept at once while the grid is solved ([τ, rows, tokens, d] floats): rows are batched to fit
BATCH_STATE_BYTES = 256 * 1024 * 1024


@dataclass
class GridPoint:
    """One control's view: what the Steer page shows at (sentiment, style)."""

    sentiment: float
    style: float
    continuation: str
    score: float  # judged P(positive): the trained judge, else VADER mapped to [0, 1]
    classifier_positive: float | None
    vader_compound: float
    verdict: str  # logic.sentiment_label(score)
    next_tokens: list[str]
    next_probs: list[float]
    path: list[list[float]]  # mean-token H(τ) in the PCA map, [T, n_components]
    solve_nfe: int


@dataclass
class PromptTalk:
    """Everything precomputed for one prompt."""

    prompt: str  # the cleaned prompt
    prompt_shown: str  # as the model saw it (its tail, if it was cut)
    notice: str
    tau: list[float]
    solver_label: str
    points: list[list[GridPoint]]  # [style][sentiment], in STYLES × SENTIMENTS order
    regimes: object  # steering.analysis.regimes.Regimes (style 0, sentiment axis)
    comparisons: list[list[object]]  # [style][compare sentiment]: steering.analysis.solvers.SolverComparison
    comparison_paths: list[list[tuple]]  # [style][compare sentiment]: (ProjectedPath of A, of B)
    seconds: dict = field(default_factory=dict)

    def point(self, sentiment: float, style: float) -> GridPoint:
        k = int(np.argmin([abs(s - sentiment) for s in SENTIMENTS]))
        return self.points[STYLES.index(float(style))][k]


@dataclass
class TalkData:
    prompts: list[PromptTalk]
    sentiments: tuple[float, ...]
    styles: tuple[float, ...]
    compare_sentiments: tuple[float, ...]
    reference_paths: list  # ProjectedPath of the map's first reference prompt (the Steer page's backdrop)
    explained_variance: list[float]
    model: dict  # model_summary()
    evaluation: dict | None  # stored_evaluation()
    command: str  # the shell command that makes this file
    settings: dict
    seconds: float = 0.0
    made_by_cli: bool = True  # False: made in Python (the lab's button); the footer says so
    axes: list = field(
        default_factory=list
    )  # a user model's axes ({name, negative, positive}); [] for the shipped kind
    opening: tuple[float, float] = (0.0, 0.0)  # the control the page opens at (a point of the grid)
    pair: dict | None = None  # a second model's text on the same grid (pair_grid), shown beside


# ---------------------------------------------------------------- the grid
def grid_controls(
    sentiments: Sequence[float] = SENTIMENTS, styles: Sequence[float] = STYLES
) -> list[tuple[float, float]]:
    """Every (sentiment, style) of the grid, style-major (the order of PromptTalk.points)."""
    return [(float(s), float(st)) for st in styles for s in sentiments]


def _rows_per_batch(model, tok, prompt: str, n_tau: int) -> int:
    from ..analysis.inputs import prompt_tensor

    idx, _ = prompt_tensor(model, tok, prompt)
    per_row = n_tau * idx.shape[1] * model.config.d_model * 4
    return max(1, BATCH_STATE_BYTES // max(per_row, 1))


def steer_grid(
    model,
    tok,
    pca_map,
    prompt: str,
    *,
    seed: int = 0,
    max_new_tokens: int = DEFAULT_NEW_TOKENS,
    sentiments: Sequence[float] = SENTIMENTS,
    styles: Sequence[float] = STYLES,
    solver: SolverConfig | None = None,
    cancelled=None,
    axis_judge=None,
    ends: tuple[str, str] | None = None,
) -> tuple[list[compute.SteerView], list[list[GridPoint]]]:
    """The Steer page's view at every grid control: batched decodes (compute.compute_steer_views, same seed in
    every row, so only u changes the text) and one batched call of each judge (as compute.judge_text judges).
    axis_judge, ends: a user model's first-axis judge and its (negative, positive) end labels.
    solver: the fixed-step solver of the grid (default: the one the model trained with, as the lab opens on)."""
    solver = solver or model.training_solver
    controls = grid_controls(sentiments, styles)
    rows = _rows_per_batch(model, tok, prompt, N_TAU)
    views: list[compute.SteerView] = []
    for start in range(0, len(controls), rows):
        views += compute.compute_steer_views(
            model,
            tok,
            pca_map,
            prompt,
            controls[start : start + rows],
            solver,
            seed=seed,
            max_new_tokens=max_new_tokens,
            temperature=TEMPERATURE,
            top_k=TOP_K,
            n_tau=N_TAU,
            cancelled=cancelled,
        )
    compute.attach_judgements(views, axis_judge)
    points = []
    for (sentiment, style), view in zip(controls, views):
        j = view.judgement
        points.append(
            GridPoint(
                sentiment=sentiment,
                style=style,
                continuation=view.continuation,
                score=float(j.score),
                classifier_positive=j.classifier_positive,
                vader_compound=float(j.vader_compound),
                verdict=logic.sentiment_label(j.score) if ends is None else logic.axis_verdict(j.score, ends),
                next_tokens=list(view.next_tokens),
                next_probs=[float(p) for p in view.next_probs],
                path=view.path,
                solve_nfe=int(view.solve_nfe),
            )
        )
    n = len(sentiments)
    return views, [points[k * n : (k + 1) * n] for k in range(len(styles))]


def solver_comparisons(
    model,
    tok,
    pca_map,
    prompt: str,
    *,
    sentiments: Sequence[float] = COMPARE_SENTIMENTS,
    styles: Sequence[float] = STYLES,
    fixed: SolverConfig | None = None,
    adaptive: SolverConfig = ADAPTIVE_SOLVER,
):
    """Fixed against adaptive (steering.analysis.solvers.compare_solvers) at each (sentiment, style), with both
    paths on the PCA map: ([style][sentiment] comparisons, [style][sentiment] (path A, path B)).
    fixed: default the solver the model trained with."""
    from ..analysis.pca import ProjectedPath
    from ..analysis.solvers import compare_solvers
    from ..analysis.trajectories import pooled

    fixed = fixed or model.training_solver
    comparisons, paths = [], []
    for style in styles:
        row, row_paths = [], []
        for sentiment in sentiments:
            c = compare_solvers(model, tok, prompt, (float(sentiment), float(style)), fixed, adaptive, n_tau=N_TAU)
            row.append(c)
            row_paths.append(
                tuple(
                    ProjectedPath(
                        name=t.solver_label,
                        u=float(sentiment),
                        tau=np.asarray(t.tau),
                        points=pca_map.project(pooled(t)),
                    )
                    for t in (c.a, c.b)
                )
            )
        comparisons.append(row)
        paths.append(row_paths)
    return comparisons, paths


def prompt_talk(
    model,
    tok,
    pca_map,
    prompt: str,
    *,
    seed: int = 0,
    max_new_tokens: int = DEFAULT_NEW_TOKENS,
    regime_points: int = REGIME_POINTS,
    compare_sentiments: Sequence[float] = COMPARE_SENTIMENTS,
    on_progress: Callable[[str], None] | None = None,
    targets: tuple[str, str] = REGIME_TARGETS,
    axis_judge=None,
    ends: tuple[str, str] | None = None,
) -> PromptTalk:
    """The grid, the NFE sweep (compute.regimes_in_chunks, style 0) and the solver comparisons for one prompt."""
    seconds = {}
    say = on_progress or (lambda _: None)
    start = time.perf_counter()
    say(f"{prompt!r}: {len(SENTIMENTS) * len(STYLES)} steered generations")
    views, points = steer_grid(
        model, tok, pca_map, prompt, seed=seed, max_new_tokens=max_new_tokens, axis_judge=axis_judge, ends=ends
    )
    seconds["grid"] = time.perf_counter() - start
    start = time.perf_counter()
    say(f"{prompt!r}: NFE of dopri5 and adaptive_heun at {regime_points} values of u")
    regimes = compute.regimes_in_chunks(
        model,
        tok,
        prompt,
        np.round(np.linspace(-2.0, 2.0, regime_points), 6),
        rtol=REGIME_RTOL,
        atol=REGIME_ATOL,
        targets=tuple(targets),
        chunks=1,
    )
    seconds["regimes"] = time.perf_counter() - start
    start = time.perf_counter()
    say(f"{prompt!r}: fixed against adaptive at {len(compare_sentiments) * len(STYLES)} controls")
    comparisons, paths = solver_comparisons(model, tok, pca_map, prompt, sentiments=compare_sentiments)
    seconds["solvers"] = time.perf_counter() - start
    first = views[0]
    return PromptTalk(
        prompt=prompt,
        prompt_shown=first.prompt_shown,
        notice=first.generation_notice,
        tau=first.tau,
        solver_label=first.solver_label,
        points=points,
        regimes=regimes,
        comparisons=comparisons,
        comparison_paths=paths,
        seconds=seconds,
    )


def pair_grid(
    checkpoint: str | Path,
    prompts: Sequence[str],
    *,
    seed: int,
    max_new_tokens: int,
    on_progress: Callable[[str], None] | None = None,
) -> dict:
    """The talk kit's second model (`export-talk --compare-with B`): B's text at every grid control of every
    prompt, as the page shows it: {checkpoint, axes, scoreLabel, prompts: [{shown, points: [style][sentiment] ->
    {text, verdict, score, nfe}}]} (plain JSON)."""
    from ..analysis.pca import checkpoint_identity
    from ..training.checkpoint import load_checkpoint
    from .compute import lab_pca_map

    model, tok, config = load_checkpoint(checkpoint)
    if not hasattr(model, "field"):
        raise ValueError(f"{checkpoint} holds a discrete model: it takes no control, so it has no slider to share")
    texts = logic.model_texts(config)
    pca_map = lab_pca_map(model, tok, config, checkpoint_identity(checkpoint))
    axis_judge = ends = None
    if texts.user_model:
        from ..judges.axis_judges import load_axis_judges

        axis_judge, ends = load_axis_judges(checkpoint)[0], texts.ends[0]
    out = []
    for prompt in prompts:
        if on_progress is not None:
            on_progress(f"{prompt!r}: the second model ({checkpoint}) at every grid control")
        views, points = steer_grid(
            model, tok, pca_map, prompt, seed=seed, max_new_tokens=max_new_tokens, axis_judge=axis_judge, ends=ends
        )
        out.append(
            {
                "shown": views[0].prompt_shown,
                "points": [
                    [{"text": p.continuation, "verdict": p.verdict, "score": p.score, "nfe": p.solve_nfe} for p in row]
                    for row in points
                ],
            }
        )
    return {
        "checkpoint": str(checkpoint),
        "axes": list(texts.names),
        "scoreLabel": texts.ends[0][1] if texts.user_model else "positive",
        "prompts": out,
    }


def clean_prompts(prompts: Sequence[str] | str) -> list[str]:
    """Each prompt cleaned as the lab cleans one (logic.clean_prompt); duplicates dropped, order kept."""
    if isinstance(prompts, str):
        prompts = [prompts]
    out = []
    for raw in prompts:
        cleaned = logic.clean_prompt(raw)
        if cleaned.refused:
            raise ValueError(f"prompt {raw!r}: {cleaned.notices[-1]}")
        if cleaned.text not in out:
            out.append(cleaned.text)
    if not out:
        raise ValueError("give at least one prompt")
    if len(out) > MAX_PROMPTS:
        raise ValueError(f"{len(out)} prompts; at most {MAX_PROMPTS} fit the file's size bound")
    return out


# ---------------------------------------------------------------- the footer: model and evaluation
def model_summary(model, config: dict | None = None, checkpoint: str | Path | None = None) -> dict:
    """Checkpoint folder and the architecture in a few numbers (read from the model, never assumed)."""
    cfg = model.config
    meta = (config or {}).get("meta") or {}
    train = meta.get("train") or {}
    summary = {
        "checkpoint": _shown_path(checkpoint) if checkpoint is not None else "(in memory)",
        "arch": cfg.arch,
        "d_model": cfg.d_model,
        "n_heads": cfg.n_heads,
        "vocab_size": cfg.vocab_size,
        "block_size": cfg.block_size,
        "n_pre": cfg.n_pre,
        "n_mid": cfg.n_mid,
        "n_post": cfg.n_post,
        "field_hidden": getattr(cfg, "field_hidden", None),
        "field_heads": getattr(cfg, "field_heads", None),
        "field_norm": getattr(cfg, "field_norm", None),
        "parameters": int(model.num_parameters()),
    }
    if hasattr(model, "field"):
        summary["alpha"] = float(model.field.alpha.detach().float().reshape(-1)[0])
    if train:
        summary["training"] = {
            k: train[k] for k in ("steps", "stage2_steps", "tokens_per_batch", "seed") if train.get(k) is not None
        }
    summary["text"] = (
        f"{cfg.arch}: d_model {cfg.d_model}, {cfg.n_heads} heads, {cfg.n_pre} block(s) + ODE block "
        f"(replacing {cfg.n_mid}) + {cfg.n_post} block(s), field hidden {summary['field_hidden']}"
        f"{f', field heads {cfg.field_heads}' if getattr(cfg, 'field_heads', 0) else ''}, "
        f"vocabulary {cfg.vocab_size}, context {cfg.block_size}; "
        f"{summary['parameters'] / 1e6:.2f}M parameters"
    )
    return summary


def _shown_path(path) -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def results_folders(checkpoint: str | Path | None) -> list[Path]:
    """Where an `experiments` results.json for this checkpoint may lie: the checkpoint's own folder, where
    `experiments` writes it (CHECKPOINT/results; assets/results for the shipped hybrid), then $STEERING_RESULTS
    (default assets/results, as on the Results page)."""
    from ..evaluation.results_table import DEFAULT_OUT, results_folder

    folders = [Path(checkpoint), results_folder(checkpoint)] if checkpoint is not None else []
    folders.append(Path(os.environ.get("STEERING_RESULTS", DEFAULT_OUT)))
    return list(dict.fromkeys(folders))  # the shipped hybrid's own folder is also the default


def stored_evaluation(checkpoint: str | Path | None, model, folders: Sequence[Path] | None = None) -> dict:
    """The `evaluate` figures stored for this checkpoint (nothing is run): the "evaluate" part of a
    results.json whose run names this checkpoint folder and whose hybrid has this model's parameter
    count. {"values": {...} or None, "source": file or None, "note": why not, when not}."""
    notes = []
    if checkpoint is None:
        return {"values": None, "source": None, "note": "the model was not loaded from a checkpoint folder"}
    root = Path(__file__).resolve().parents[2]
    target = Path(checkpoint).resolve()
    for folder in folders if folders is not None else results_folders(checkpoint):
        path = Path(folder) / "results.json"
        if not path.is_file():
            continue
        try:
            results = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            notes.append(f"{_shown_path(path)} is unreadable ({err})")
            continue
        meta = results.get("meta") or {}
        named = meta.get("checkpoint")
        named_path = (root / named if named and not Path(named).is_absolute() else Path(named or "")).resolve()
        if named is None or named_path != target:
            notes.append(f"{_shown_path(path)} describes {named!r}, not this checkpoint")
            continue
        stored_params = (results.get("stability") or {}).get("parameters_hybrid")
        if stored_params is not None and int(stored_params) != int(model.num_parameters()):
            notes.append(
                f"{_shown_path(path)} was measured on a model of {int(stored_params):,} parameters; this "
                f"one has {int(model.num_parameters()):,} (rerun `python -m steering experiments`)"
            )
            continue
        values = results.get("evaluate")
        if not isinstance(values, dict):
            notes.append(f"{_shown_path(path)} has no evaluate section")
            continue
        return {"values": values, "source": _shown_path(path), "quick": bool(meta.get("quick")), "note": None}
    return {
        "values": None,
        "source": None,
        "note": "; ".join(notes)
        or "no results.json for this checkpoint (make one with `python -m steering experiments`)",
    }


# ---------------------------------------------------------------- everything, and the file
def export_command(
    out, prompts: Sequence[str], checkpoint, seed: int, new_tokens: int, opening: dict[str, float] | None = None
) -> str:
    """The command line that makes this file (every option spelled out; `opening`: {axis name: value}, the
    control the page opens at, where it is not 0)."""
    argv = ["python", "-m", "steering", "export-talk", "--out", str(out)]
    for p in prompts:
        argv += ["--prompt", p]
    argv += ["--checkpoint", _shown_path(checkpoint), "--seed", str(int(seed)), "--new-tokens", str(int(new_tokens))]
    for name, value in (opening or {}).items():
        if value:
            argv += ["--u", f"{name}={value:g}"]
    return shlex.join(argv)


def opening_point(control: Sequence[float]) -> tuple[float, float]:
    """The grid point the page opens at: u₁ on the slider's grid (steps of 0.1 in [-2, 2]), u₂ one of STYLES."""
    first, second = (float(v) for v in control)
    if abs(first) > max(SENTIMENTS) + 1e-9 or second not in STYLES:
        raise ValueError(
            f"the page opens on its grid: u₁ in [{min(SENTIMENTS):g}, {max(SENTIMENTS):g}] and u₂ one of "
            f"{', '.join(f'{s:g}' for s in STYLES)}; got ({first:g}, {second:g})"
        )
    return SENTIMENTS[int(np.argmin([abs(s - first) for s in SENTIMENTS]))], second


def build_talk(
    model,
    tok,
    pca_map,
    prompts: Sequence[str] | str,
    *,
    seed: int = 0,
    max_new_tokens: int = DEFAULT_NEW_TOKENS,
    checkpoint: str | Path | None = None,
    config: dict | None = None,
    command: str | None = None,
    regime_points: int = REGIME_POINTS,
    on_progress: Callable[[str], None] | None = None,
    opening: Sequence[float] = (0.0, 0.0),
    pair: dict | None = None,
) -> TalkData:
    """Every prompt's grid, sweep and comparisons, the map's backdrop, the model and its stored evaluation.
    opening: the control the page opens at (opening_point)."""
    opening = opening_point(opening)
    if not hasattr(model, "field"):
        raise ValueError("the talk demo needs a hybrid model (a discrete one has no continuous block to steer)")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"new tokens must be a positive whole number, got {max_new_tokens!r}")
    if not isinstance(regime_points, int) or regime_points < 2:
        raise ValueError(f"the NFE sweep needs at least 2 points, got {regime_points!r}")
    prompts = clean_prompts(prompts)
    start = time.perf_counter()
    texts = logic.model_texts(config)
    axis_judge = ends = None
    if texts.user_model:  # a model trained on one's own file: its axes' words, its own judge and probe targets
        ends = texts.ends[0]
        if checkpoint is not None and (Path(checkpoint) / "judges").is_dir():
            from ..judges.axis_judges import load_axis_judges

            axis_judge = load_axis_judges(checkpoint)[0]
    targets = texts.probe_targets
    talks = [
        prompt_talk(
            model,
            tok,
            pca_map,
            p,
            seed=seed,
            max_new_tokens=max_new_tokens,
            regime_points=regime_points,
            on_progress=on_progress,
            targets=targets,
            axis_judge=axis_judge,
            ends=ends,
        )
        for p in prompts
    ]
    first = pca_map.reference[0].name
    reference = [p for p in pca_map.reference if p.name == first]
    made_by_cli = command is not None
    if command is None:
        command = export_command(
            "talk.html", prompts, checkpoint if checkpoint is not None else "MODEL", seed, max_new_tokens
        )
    settings = {
        "seed": int(seed),
        "new_tokens": int(max_new_tokens),
        "temperature": TEMPERATURE,
        "top_k": TOP_K,
        "grid_solver": model.training_solver.label(),
        "adaptive_solver": ADAPTIVE_SOLVER.label(),
        "regime_rtol": REGIME_RTOL,
        "regime_atol": REGIME_ATOL,
        "regime_points": regime_points,
        "regime_targets": list(targets),
        "map_reference": first,
        "map_solver": getattr(pca_map, "solver_label", ""),
    }
    return TalkData(
        prompts=talks,
        sentiments=SENTIMENTS,
        styles=STYLES,
        compare_sentiments=COMPARE_SENTIMENTS,
        reference_paths=reference,
        explained_variance=[float(v) for v in pca_map.explained_variance_ratio],
        model=model_summary(model, config, checkpoint),
        evaluation=stored_evaluation(checkpoint, model),
        command=command,
        settings=settings,
        seconds=time.perf_counter() - start,
        made_by_cli=made_by_cli,
        axes=[{"name": name, "negative": e[0], "positive": e[1]} for name, e in zip(texts.names, texts.ends)]
        if texts.user_model
        else [],
        opening=opening,
        pair=pair,
    )


def talk_html_bytes(
    model,
    tok,
    pca_map,
    prompts: Sequence[str] | str,
    *,
    seed: int = 0,
    max_new_tokens: int = DEFAULT_NEW_TOKENS,
    checkpoint: str | Path | None = None,
    config: dict | None = None,
    command: str | None = None,
    regime_points: int = REGIME_POINTS,
    on_progress: Callable[[str], None] | None = None,
    opening: Sequence[float] = (0.0, 0.0),
    pair: dict | None = None,
) -> bytes:
    """The offline demo as UTF-8 bytes (the Steer page's download button and the CLI both use this).

    Raises ValueError when the file would exceed MAX_BYTES."""
    from ..figures.talk_page import talk_html

    data = build_talk(
        model,
        tok,
        pca_map,
        prompts,
        seed=seed,
        max_new_tokens=max_new_tokens,
        checkpoint=checkpoint,
        config=config,
        command=command,
        regime_points=regime_points,
        on_progress=on_progress,
        opening=opening,
        pair=pair,
    )
    html = talk_html(data).encode("utf-8")
    if len(html) > MAX_BYTES:
        raise ValueError(
            f"the demo would be {len(html) / 2**20:.1f} MB, over the {MAX_BYTES / 2**20:.0f} MB bound; "
            "give fewer prompts"
        )
    return html


@dataclass
class ExportReport:
    path: Path
    size: int
    seconds: float
    command: str


def export_talk(
    out: str | Path,
    prompts: Sequence[str] | str | None = None,
    *,
    checkpoint: str | Path | None = None,
    seed: int = 0,
    new_tokens: int = DEFAULT_NEW_TOKENS,
    regime_points: int = REGIME_POINTS,
    on_progress: Callable[[str], None] | None = None,
    control: dict[str, float] | None = None,
    compare_with: str | Path | None = None,
) -> ExportReport:
    """Load the checkpoint and its PCA map, build the demo, write it to `out`. control: {the checkpoint's axis
    name: value}, where the page opens (axes left out at 0; on the grid, opening_point). compare_with: a second
    checkpoint whose text the page shows beside the first's at every control (pair_grid)."""
    from ..analysis.pca import checkpoint_identity
    from ..model.controls import named_control
    from ..training.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
    from .compute import lab_pca_map

    start = time.perf_counter()
    checkpoint = Path(checkpoint if checkpoint is not None else DEFAULT_CHECKPOINT)
    model, tok, config = load_checkpoint(checkpoint)
    texts = logic.model_texts(config)  # the shipped model: "The movie was"; a user model: its first opening
    pca_map = lab_pca_map(model, tok, config, checkpoint_identity(checkpoint))  # the map the lab shows
    cleaned = clean_prompts(texts.prompts[:1] if prompts is None else prompts)
    named = named_control(config, [f"{k}={v}" for k, v in (control or {}).items()])
    opening = opening_point(named.values)  # refused here, before minutes of computing
    command = export_command(out, cleaned, checkpoint, seed, new_tokens, named.as_dict())
    pair = None
    if compare_with is not None:
        command += f" --compare-with {shlex.quote(str(compare_with))}"
        pair = pair_grid(compare_with, cleaned, seed=seed, max_new_tokens=new_tokens, on_progress=on_progress)
    html = talk_html_bytes(
        model,
        tok,
        pca_map,
        cleaned,
        seed=seed,
        max_new_tokens=new_tokens,
        checkpoint=checkpoint,
        config=config,
        command=command,
        regime_points=regime_points,
        on_progress=on_progress,
        opening=opening,
        pair=pair,
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(html)
    return ExportReport(path=out, size=len(html), seconds=time.perf_counter() - start, command=command)
