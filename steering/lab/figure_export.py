"""`python -m steering figures`: the lab's key figures as slides, PNG (1920 x 1080) and SVG.

Each figure is built by the same builder the lab's page uses (steering.figures), on the same
computation, with the presenter mode's type size (steering.lab.logic.figure_font_size(presenter=True)),
and written with plotly's own static export (Kaleido), which drives a Chrome or Chromium:

- the BROWSER_PATH environment variable, when set (Kaleido and its browser driver honour it too);
- else the first of chromium, chromium-browser, google-chrome, google-chrome-stable, chrome on PATH
  (Debian: apt-get install chromium).

Nothing is downloaded: without a browser the command stops with a message saying so.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import compute, logic

WIDTH, HEIGHT = 1920, 1080
FORMATS = ("png", "svg")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
DEFAULT_PROMPT = "The movie was"
DEFAULT_U = 1.5


class ExportError(ValueError):
    """The figures cannot be written (no browser, an unknown figure name, no data); the message says why."""


def find_browser(environ: dict | None = None, which: Callable[[str], str | None] = shutil.which) -> str:
    """The Chrome or Chromium Kaleido will drive: $BROWSER_PATH, else the first of BROWSER_NAMES on PATH."""
    environ = os.environ if environ is None else environ
    given = environ.get("BROWSER_PATH")
    if given:
        if Path(given).is_file() and os.access(given, os.X_OK):
            return given
        raise ExportError(f"BROWSER_PATH={given!r} is not an executable file; point it at a Chrome or Chromium")
    for name in BROWSER_NAMES:
        found = which(name)
        if found:
            return found
    raise ExportError(
        "no Chrome or Chromium found: plotly's image export (Kaleido) needs one. Install it "
        "(Debian: apt-get install chromium) or set BROWSER_PATH to its executable."
    )


@dataclass
class Inputs:
    """What the figures are computed from."""

    checkpoint: Path
    baseline: Path
    results: Path
    prompt: str = DEFAULT_PROMPT
    control: tuple[float, float] = (DEFAULT_U, 0.0)  # the single-u figures' control (the first axis at DEFAULT_U)
    font_size: int = field(default_factory=lambda: logic.figure_font_size(presenter=True))
    compare_with: Path | None = None  # the comparison slide's second model (figures --compare-with)


class _Model:
    """The checkpoint and its PCA map, loaded on first use (the training and results figures need neither)."""

    def __init__(self, inputs: Inputs):
        self.inputs = inputs
        self._loaded = None
        self._pca = None

    @property
    def loaded(self):
        if self._loaded is None:
            from ..training.checkpoint import load_checkpoint

            model, tok, _ = load_checkpoint(self.inputs.checkpoint)
            self._loaded = (model, tok)
        return self._loaded

    @property
    def pca(self):
        if self._pca is None:
            from ..analysis.pca import checkpoint_identity, pca_map_for_checkpoint

            model, tok = self.loaded
            cache = Path(os.environ.get("STEERING_CACHE", Path.home() / ".cache" / "steering")) / "pca"
            self._pca = pca_map_for_checkpoint(model, tok, checkpoint_identity(self.inputs.checkpoint), cache)
        return self._pca


def _styled(fig, inputs: Inputs):
    from ..figures.steer import style_figure

    return style_figure(fig, inputs.font_size)


def _steer(m: _Model, inputs: Inputs):
    from ..figures.steer import steer_figure

    model, tok = m.loaded
    pca = m.pca
    first = pca.reference[0].name
    reference = [p for p in pca.reference if p.name == first]
    view = compute.compute_steer_view(model, tok, pca, inputs.prompt, inputs.control, model.training_solver)
    return steer_figure(
        view.next_tokens,
        view.next_probs,
        [p.points for p in reference],
        [p.u for p in reference],
        view.path,
        inputs.control[0],
        explained=pca.explained_variance_ratio,
        font_size=inputs.font_size,
        bars_title=f"Next token at u = {logic.format_u(inputs.control[0])}",
        map_title="H(τ) in the PCA map (mean over tokens)",
        stations=view.stations,
    )


def _trajectories(dims: int):
    def build(m: _Model, inputs: Inputs):
        from ..analysis.inputs import PATH_SOLVER
        from ..analysis.pca import ProjectedPath
        from ..analysis.trajectories import compute_trajectory, pooled
        from ..figures.flow import pca_paths_figure

        model, tok = m.loaded
        pca, solver = m.pca, PATH_SOLVER  # fine fixed steps: the path between its points is drawn straight
        family = np.round(np.linspace(-2.0, 2.0, 9), 4)
        paths = []
        for u in family:
            traj = compute_trajectory(model, tok, inputs.prompt, (float(u), inputs.control[1]), solver, n_tau=33)
            paths.append(ProjectedPath(name="", u=float(u), tau=traj.tau, points=pca.project(pooled(traj))))
        return _styled(
            pca_paths_figure(
                paths,
                dims=dims,
                explained_variance=pca.explained_variance_ratio,
                title=f"H(τ) of {inputs.prompt!r} for u from −2 to +2 ({solver.label()})",
            ),
            inputs,
        )

    return build


def _regimes(m: _Model, inputs: Inputs):
    from ..figures.regimes import nfe_regimes_figure

    model, tok = m.loaded
    regimes = compute.regimes_in_chunks(
        model, tok, inputs.prompt, np.round(np.linspace(-2.0, 2.0, 41), 6), rtol=1e-3, atol=1e-4
    )
    return _styled(nfe_regimes_figure(regimes), inputs)


def _tolerance(m: _Model, inputs: Inputs):
    from ..analysis.regimes import tolerance_scaling
    from ..figures.regimes import tolerance_figure

    model, tok = m.loaded
    return _styled(tolerance_figure(tolerance_scaling(model, tok, inputs.prompt, inputs.control)), inputs)


def _solvers(m: _Model, inputs: Inputs):
    from ..analysis.solvers import compare_solvers
    from ..figures.solvers import divergence_figure
    from ..model.ode import SolverConfig

    model, tok = m.loaded
    comparison = compare_solvers(
        model,
        tok,
        inputs.prompt,
        inputs.control,
        model.training_solver,
        SolverConfig("dopri5", rtol=1e-7, atol=1e-9),
        n_tau=33,
    )
    return _styled(
        divergence_figure(comparison, title="Divergence of 4 Euler steps from dopri5 (tol 1e-7) along τ"), inputs
    )


def _lens(m: _Model, inputs: Inputs):
    from ..analysis.lens import depth_lens
    from ..figures.lens import depth_lens_heatmap

    model, tok = m.loaded
    return _styled(depth_lens_heatmap(depth_lens(model, tok, inputs.prompt, inputs.control, n_tau=11, top_k=5)), inputs)


def _contraction(m: _Model, inputs: Inputs):
    from ..analysis.dynamics import contraction_by_u
    from ..figures.dynamics import contraction_figure

    model, tok = m.loaded
    contractions = contraction_by_u(
        model, tok, inputs.prompt, (-1.5, 0.0, 1.5), n_tau=9, n_probes=2, lanczos_iterations=8
    )
    return _styled(contraction_figure(contractions), inputs)


def _convergence(m: _Model, inputs: Inputs):
    from ..analysis.dynamics import convergence
    from ..figures.dynamics import convergence_figure

    model, tok = m.loaded
    return _styled(convergence_figure(convergence(model, tok, inputs.prompt, inputs.control, max_steps=64)), inputs)


def _training(m: _Model, inputs: Inputs):
    from ..figures.training import training_curves_figure
    from ..training.checkpoint import read_log

    logs = {name: read_log(path) for name, path in (("hybrid", inputs.checkpoint), ("discrete", inputs.baseline))}
    logs = {name: records for name, records in logs.items() if records}
    if not logs:
        raise ExportError(f"no training log (train_log.jsonl) in {inputs.checkpoint} or {inputs.baseline}")
    return training_curves_figure(logs, font_size=inputs.font_size)


def _activation_steering(m: _Model, inputs: Inputs):
    from ..evaluation.results_table import load_results
    from ..figures.results import accuracy_fluency_figure

    results = load_results(inputs.results)
    if results is None:
        raise ExportError(f"no {inputs.results / 'results.json'}: run `python -m steering experiments` first")
    if "activation_steering" not in results:  # a model of one's own: experiments skipped it, and says why
        why = next((k["why"] for k in results.get("skipped", []) if k["section"] == "activation_steering"), "")
        raise ExportError(f"{inputs.results / 'results.json'} has no activation-steering comparison: {why}")
    act = results["activation_steering"]
    return accuracy_fluency_figure([act["hybrid"], act["activation"]], font_size=inputs.font_size)


# name -> builder(model, inputs), in the order of a talk through the lab
def _compare(m: _Model, inputs: Inputs):
    """The comparison slide: each model's paths in its bend view, and dopri5's NFE and first step for both."""
    from ..figures.compare import compare_slide_figure
    from ..training.checkpoint import load_checkpoint
    from . import compare

    if inputs.compare_with is None:
        raise ExportError("the comparison slide needs a second model: give --compare-with CHECKPOINT")
    sides = {}
    for path in (inputs.checkpoint, inputs.compare_with):
        model, tok, config = load_checkpoint(path)
        if not hasattr(model, "field"):
            raise ExportError(f"{path} holds a discrete model: no ODE block to compare paths or solver work on")
        pca = m.pca if path == inputs.checkpoint else _Model(Inputs(Path(path), Path(path), Path(path))).pca
        prompt = inputs.prompt if not logic.model_texts(config).user_model else logic.model_texts(config).prompts[0]
        sides[str(path)] = (
            compare.side_paths(model, tok, pca, prompt, inputs.control[1]),
            compare.nfe_and_first_steps(model, tok, prompt, inputs.control[1]),
        )
    slide = compare_slide_figure(
        {name: paths.bend for name, (paths, _) in sides.items()},
        {name: paths.orthogonal_share for name, (paths, _) in sides.items()},
        next(iter(sides.values()))[1].u,
        {name: steps.nfe for name, (_, steps) in sides.items()},
        {name: steps.first_step for name, (_, steps) in sides.items()},
        compare.FIRST_STEP_THRESHOLD,
    )
    return _styled(slide, inputs)


FIGURES: dict[str, Callable] = {
    "steer": _steer,
    "trajectories-2d": _trajectories(2),
    "trajectories-3d": _trajectories(3),
    "solvers": _solvers,
    "regimes": _regimes,
    "tolerance": _tolerance,
    "lens": _lens,
    "dynamics-contraction": _contraction,
    "dynamics-convergence": _convergence,
    "training": _training,
    "activation-steering": _activation_steering,
    "compare": _compare,  # only with --compare-with ("all" leaves it out without one)
}


def parse_names(text: str | None, pair: bool = False) -> list[str]:
    """Figure names from a comma-separated list (None or "all": every figure, the comparison slide only with a
    `pair`, a second model); unknown names refused."""
    if text is None or text.strip().lower() == "all":
        return [name for name in FIGURES if pair or name != "compare"]
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FIGURES]
    if unknown or not names:
        raise ExportError(
            f"unknown figure(s) {', '.join(map(repr, unknown)) or '(none given)'}; figures: {', '.join(FIGURES)}"
        )
    return list(dict.fromkeys(names))


def slide_figure(fig):
    """The figure laid out for a 1920 x 1080 slide: its own height dropped (the export sets the size)."""
    fig.update_layout(width=None, height=None, autosize=True)
    return fig


def build_figures(names: Sequence[str], inputs: Inputs, on_built=None) -> dict:
    """{name: figure}; on_built(name, seconds) after each."""
    m = _Model(inputs)
    figures = {}
    for name in names:
        start = time.perf_counter()
        figures[name] = slide_figure(FIGURES[name](m, inputs))
        if on_built is not None:
            on_built(name, time.perf_counter() - start)
    return figures


def write_figures(figures: dict, out: Path, formats: Sequence[str] = FORMATS, browser: str | None = None) -> list[Path]:
    """Every figure in every format, out/NAME.FORMAT at 1920 x 1080, in one browser session."""
    import kaleido

    browser = browser or find_browser()
    os.environ["BROWSER_PATH"] = browser  # Kaleido's browser driver reads it
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    specs, paths = [], []
    for name, fig in figures.items():
        as_dict = fig.to_dict()
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            specs.append(dict(fig=as_dict, path=path, opts=dict(format=fmt, width=WIDTH, height=HEIGHT, scale=1)))
            paths.append(path)
    # mathjax off: no LaTeX in these figures, and its default comes from a CDN
    try:
        kaleido.write_fig_from_object_sync(specs, kopts=dict(mathjax=False))
    except Exception as err:  # the browser would not start, or a figure would not render
        raise ExportError(f"plotly's export with the browser {browser} failed: {type(err).__name__}: {err}") from err
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ExportError(f"the export wrote no {', '.join(missing)}")
    return paths


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
