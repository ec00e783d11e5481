"""steering.load() and the Model it returns: a checkpoint with one method per view of the lab.

Each method calls the function the lab's pages and the command line call for the same view (steering.analysis,
steering.lab.compare, steering.evaluation) and returns a result from steering/api/results.py. The control is
spoken in the checkpoint's own axis names, u={"sentiment": 2.0}; an axis left out is 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..analysis.inputs import REFERENCE_SOLVER, model_solver
from ..model.controls import NamedControl, axes_help, axis_names, internal_axis, named_control
from ..model.ode import CONTROL_AXES, SolverConfig
from ..training.checkpoint import ASSETS, CONFIG, CheckpointError, last_saved_state
from . import results

SHIPPED = ("hybrid", "flat", "discrete")  # the checkpoints in assets/, beside the package
FAMILY = (-2.0, -1.0, 0.0, 1.0, 2.0)  # the paths drawn by default: the sliders' range
SolverLike = SolverConfig | str | None  # None: the checkpoint's training solver; a name: that method's defaults


def checkpoint_folder(path: str | Path | None = None) -> Path:
    """Where `path` names a checkpoint or a training run: as given (from the working folder), else under the
    repository the package lives in ("assets/flat") or under its assets/ ("flat"), so a notebook anywhere finds
    the shipped ones. None: the shipped hybrid."""
    if path is None:
        return ASSETS / "hybrid"
    given = Path(path).expanduser()
    candidates = [given] if given.is_absolute() else [given, ASSETS.parent / given, ASSETS / given]
    for folder in candidates:
        if (folder / CONFIG).is_file() or last_saved_state(folder / "resume") is not None:
            return folder
    raise FileNotFoundError(
        f"{path} is not a checkpoint: no {CONFIG} there, nor a training run's resume/state.json. Give a checkpoint "
        f"folder, a training run's --out folder, or one of the shipped ones: {', '.join(SHIPPED)} (in {ASSETS}); "
        f"or train one with `python -m steering train --out {path}`"
    )


def load(path: str | Path | None = None) -> Model:
    """The checkpoint at `path` (default: the shipped hybrid), or a training run's last saved state while it trains.

    A path that is neither gives FileNotFoundError naming the choices; a folder whose files are broken, ValueError."""
    from ..analysis.pca import checkpoint_identity
    from ..training.checkpoint import load_checkpoint, load_saved_state

    folder = checkpoint_folder(path)
    try:
        if (folder / CONFIG).is_file():
            model, tok, config = load_checkpoint(folder)
            identity = checkpoint_identity(folder)
        else:  # a run mid-training: its weights change at every save, so its PCA map is fitted afresh, not kept
            model, tok, at = load_saved_state(folder)
            config, identity = {"model": model.config.to_dict(), "meta": {"saved_state": at}}, None
    except CheckpointError as err:
        raise ValueError(str(err)) from None
    return Model(folder, model, tok, config, identity)


class Model:
    """A loaded checkpoint: `model` (the torch module), `tokenizer`, `config` (its config.json), `path`."""

    def __init__(self, path: Path, model, tokenizer, config: dict, identity: str | None):
        self.path, self.model, self.tokenizer, self.config = path, model, tokenizer, config
        self._identity = identity  # a hash of the weights: the key of the cached PCA map
        self._pca = None

    def __repr__(self) -> str:
        return f"<steering.Model {self.name}: {self.model.config.arch}, axes {self.axes}>"

    @property
    def name(self) -> str:
        """Its short name: the path from the repository when it lies there (assets/hybrid), else the path."""
        try:
            return self.path.resolve().relative_to(ASSETS.parent.resolve()).as_posix()
        except ValueError:
            return str(self.path)

    @property
    def has_block(self) -> bool:
        """Whether it has a continuous block (a hybrid), which is the only place u enters."""
        return hasattr(self.model, "field")

    @property
    def axes(self) -> list[str]:
        """The control's axis names, e.g. ['sentiment', 'style']; a discrete model takes no control: []."""
        return list(axis_names(self.config)) if self.has_block else []

    # ------------------------------------------------------------ the control, the solver, the map
    def control(self, u: Mapping[str, float] | None = None) -> NamedControl:
        """u ({axis name: value}, each in [-3, 3]) as the model's control; an unknown axis gives ValueError."""
        if u is None or (not u and not self.has_block):
            return NamedControl(names=tuple(self.axes), values=(0.0,) * len(CONTROL_AXES))
        if not self.has_block:
            raise ValueError(f"{self.name} is a discrete model: it takes no control, got u={dict(u)}")
        if not isinstance(u, Mapping):
            raise ValueError(f"u is a dict of axis name to value, e.g. {{{self.axes[0]!r}: 1.0}}; got {u!r}")
        # the names and values are checked where the command line checks its --u NAME=VALUE pairs
        return named_control(self.config, [f"{name}={value}" for name, value in u.items()])

    def _axis(self, axis: str | None) -> tuple[int, str]:
        """(the control entry, the name) of the axis a view sweeps; default: the first."""
        self._needs_block()
        name = self.axes[0] if axis is None else axis
        if name not in self.axes:
            raise ValueError(f"no axis {name!r} in {self.name}; its axes: {axes_help(self.config)}")
        return CONTROL_AXES.index(internal_axis(self.config, name)), name

    def _needs_block(self):
        if not self.has_block:
            raise ValueError(f"{self.name} is a discrete model: it has no continuous block to draw, solve or steer")

    def _solver(self, solver: SolverLike) -> SolverConfig:
        return model_solver(self.model, solver)

    def pca_map(self):
        """The PCA map the lab draws paths on (steering.lab.compute.lab_pca_map), fitted once and cached."""
        if self._pca is None:
            if self._identity is None:
                from ..analysis.pca import fit_pca_map

                self._pca = fit_pca_map(self.model, self.tokenizer)
            else:
                from ..lab.compute import lab_pca_map

                self._pca = lab_pca_map(self.model, self.tokenizer, self.config, self._identity)
        return self._pca

    # ------------------------------------------------------------ the views
    def generate(
        self,
        prompt: str,
        u: Mapping[str, float] | None = None,
        *,
        n: int = 1,
        seed: int = 0,
        max_new_tokens: int = 40,
        solver: SolverLike = None,
        **sampling,
    ) -> list:
        """n continuations of `prompt` at u (steering.inference.generate.Generation: .text is the prompt and its
        continuation). The same seed gives the same texts at every u, so what differs is u's doing. sampling:
        temperature=, top_k=, top_p=, repetition_penalty=, no_repeat_ngram= (default: the evaluation's sampler)."""
        from ..inference.generate import generate

        control = self.control(u)
        return generate(
            self.model,
            self.tokenizer,
            prompt,
            *control.values,
            n=n,
            max_new_tokens=max_new_tokens,
            seed=seed,
            solver=self._solver(solver),
            **sampling,
        )

    def paths(
        self,
        prompt: str,
        us: Sequence[float] = FAMILY,
        *,
        axis: str | None = None,
        u: Mapping[str, float] | None = None,
        solver: SolverLike = None,
        n_tau: int = 33,
    ) -> results.Paths:
        """The prompt's paths H(τ) through the block, one per value of `axis` in `us` (the other axes as `u` gives
        them), on the lab's PCA map, with the solver's step ends marked (the Trajectories page)."""
        from ..analysis.curvature import path_curvature
        from ..analysis.pca import ProjectedPath
        from ..analysis.trajectories import compute_path, pooled

        k, name = self._axis(axis)
        base, solver = self.control(u), self._solver(solver)
        us = [float(v) for v in us]
        if not us:
            raise ValueError("give at least one value in us")
        pca = self.pca_map()
        drawn, nfe, arc = [], [], []
        for value in us:
            control = self.control({**base.as_dict(), name: value}).values
            path = compute_path(self.model, self.tokenizer, prompt, control, solver, n_tau=n_tau)
            stations = pca.project(path.stations.mean(axis=1))
            drawn.append(
                ProjectedPath(name="", u=value, tau=path.tau, points=pca.project(pooled(path)), stations=stations)
            )
            nfe.append(path.nfe)
            arc.append(path_curvature(path.states)[0])
        return results.Paths(
            checkpoint=self.name,
            prompt=prompt,
            axis=name,
            control=base.as_dict(),
            us=us,
            solver=solver.label(),
            paths=drawn,
            explained_variance=pca.explained_variance_ratio,
            nfe=nfe,
            arc_to_chord=np.asarray(arc, dtype=float),
        )

    def compare(self, other: Model, prompt: str = "The movie was", *, u: Mapping[str, float] | None = None):
        """This checkpoint against `other` on one prompt, as the Compare page sets them side by side: each one's
        paths for u from -2 to 2 in its bend view, and dopri5's NFE and first step over u (steering.lab.compare).
        u: the second axis's value (both models take it by its name)."""
        from ..lab.compare import FIRST_STEP_THRESHOLD, nfe_and_first_steps, side_paths

        if not isinstance(other, Model):
            raise ValueError(f"compare takes another steering.load(...) model, got {type(other).__name__}")
        names = [self.name, other.name] if self.name != other.name else [f"A: {self.name}", f"B: {other.name}"]
        sides, steps = {}, {}
        for label, m in zip(names, (self, other)):
            m._needs_block()
            other_axis = m.control(u).values[1]  # the page sweeps the first axis and holds the second
            sides[label] = side_paths(m.model, m.tokenizer, m.pca_map(), prompt, other_axis)
            steps[label] = nfe_and_first_steps(m.model, m.tokenizer, prompt, other_axis)
        return results.Comparison(prompt, self.axes[0], names, sides, steps, FIRST_STEP_THRESHOLD)

    def regimes_map(
        self,
        prompt: str,
        us: Sequence[float] | None = None,
        tolerances: Sequence[float] | None = None,
        *,
        axis: str | None = None,
        u: Mapping[str, float] | None = None,
        max_steps: int = 2000,
    ) -> results.RegimesMap:
        """dopri5's NFE over u × tolerance (rtol t, atol t/10) for one prompt, each cell's reason and the bands of
        two levels (the Regimes page). The defaults are the page's full grid (minutes); a few u and tolerances
        take seconds."""
        from ..analysis.regimes_map import DEFAULT_TOLERANCES, DEFAULT_U_GRID, regimes_map

        k, name = self._axis(axis)
        base = self.control(u)
        found = regimes_map(
            self.model,
            self.tokenizer,
            prompt,
            DEFAULT_U_GRID if us is None else us,
            DEFAULT_TOLERANCES if tolerances is None else tolerances,
            axis=CONTROL_AXES[k],
            other=base.values[1 - k],
            max_steps=max_steps,
        )
        return results.RegimesMap(axis=name, control=base.as_dict(), map=found)

    def solvers(
        self, prompt: str, u: Mapping[str, float] | None = None, *, solver: SolverLike = None, reference=None
    ) -> results.SolverView:
        """A solver (default: the training one) against a reference (default: dopri5 at rtol 1e-7) along τ on the
        same prompt and control: how far apart their states drift (the Solvers page)."""
        from ..analysis.solvers import compare_solvers

        self._needs_block()
        control = self.control(u)
        reference = REFERENCE_SOLVER if reference is None else model_solver(self.model, reference)
        found = compare_solvers(self.model, self.tokenizer, prompt, control.values, self._solver(solver), reference)
        return results.SolverView(control=control.as_dict(), comparison=found)

    def lens(
        self, prompt: str, u: Mapping[str, float] | None = None, *, solver: SolverLike = None, n_tau: int = 11, top_k=5
    ) -> results.Lens:
        """The next-token distribution if the flow stopped at τ, for n_tau depths (the Depth lens page)."""
        from ..analysis.lens import depth_lens

        self._needs_block()
        control = self.control(u)
        found = depth_lens(
            self.model, self.tokenizer, prompt, control.values, self._solver(solver), n_tau=n_tau, top_k=top_k
        )
        return results.Lens(control=control.as_dict(), lens=found)

    def evaluate(
        self, baseline: str | Path | Model | None = None, *, quick: bool = False, steer_u=None, seed: int | None = None
    ) -> results.Evaluation:
        """`python -m steering evaluate` on this checkpoint: judged text, probes, solver checks and fluency on the
        held-out split, against the discrete baseline (default: the shipped one; a model of one's own on another
        tokenizer is judged alone). quick: fewer prompts and reviews (seconds on a small model, not the figures)."""
        from ..evaluation.measures import SEED
        from ..training.checkpoint import DEFAULT_BASELINE, is_user_checkpoint, matching_default_baseline

        if not (self.path / CONFIG).is_file():
            raise ValueError(f"{self.name} is a training run's saved state: evaluate needs a checkpoint folder")
        if isinstance(baseline, Model):
            baseline = baseline.path
        elif baseline is not None:
            baseline = checkpoint_folder(baseline)
        seed = SEED if seed is None else seed
        if is_user_checkpoint(self.path):
            from ..evaluation.axis_eval import evaluate_axes

            baseline = matching_default_baseline(self.path) if baseline is None else baseline
            report, bars = evaluate_axes(self.path, baseline, quick, steer_u, seed), {}
        else:
            from ..evaluation.evaluate import TARGETS, evaluate

            baseline = DEFAULT_BASELINE if baseline is None else baseline
            report = evaluate(self.path, baseline, quick, steer_u, seed)
            bars = {name: (bar, bool(met(report))) for name, (bar, met) in TARGETS.items() if name in report}
        return results.Evaluation(self.name, None if baseline is None else str(baseline), report, bars)
