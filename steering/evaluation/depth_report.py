"""Does the ODE block do work? The issue-33 figures of one model, quick enough to follow a training run.

    python -m steering depth runs/D2            # a run's last saved state, while it trains
    python -m steering depth assets/hybrid --json

The same measures as the evaluation (evaluate.py: depth_use_bpb, block_skip_bpb, path_curvature,
solver_divergence), on fewer held-out texts and prompts, plus what explains them: how far the block
moves the state, and the levels dopri5's NFE takes over u on the 10 probe prompts (as
`analyze regimes --prompt-set probe`). A discrete model reports the cost of
dropping the blocks the hybrid's ODE stands for (all but its first and last): the load the block must
carry to be worth as much.
"""

from __future__ import annotations

import json

import torch

from ..analysis.regimes import nfe_regimes
from ..data.heldout import PROBE_PROMPT_VARIANTS, heldout_prompts
from ..model.ode import SolverConfig
from .evaluate import (
    TARGETS,
    bits_per_byte,
    heldout_openings,
    heldout_path_curvature,
    middle_relative_update,
    outer_only_bits_per_byte,
)
from .measures import solver_divergence

TEXTS_PER_GROUP = 10  # held-out openings per (label, source): 40 texts
PROMPTS = 6  # held-out prompts for the divergence
PROBE_PROMPTS = len(PROBE_PROMPT_VARIANTS)  # 10, for the NFE levels
DIVERGENCE_US = (-2.0, 0.0, 2.0)  # the lab's slider ends and its middle
CURVATURE_TEXTS = 8


@torch.no_grad()
def depth_report(
    model,
    tok,
    texts_per_group: int = TEXTS_PER_GROUP,
    prompts: int = PROMPTS,
    probe_prompts: int = PROBE_PROMPTS,
    baseline=None,
) -> dict:
    """The block's worth in bits/byte, its paths' curvature, the fixed solver's divergence and dopri5's NFE levels.
    With a discrete `baseline` on the same tokenizer, also its middle blocks' load on the same openings
    (baseline_middle_bpb, what block_skip_bpb is held to)."""
    openings = heldout_openings(texts_per_group)
    trained = bits_per_byte(model, tok, openings)
    if model.config.arch == "discrete":
        return {
            "arch": "discrete",
            "bits_per_byte": trained,
            "outer_only_bpb": outer_only_bits_per_byte(model, tok, openings) - trained,
        }
    against = {}
    if baseline is not None:
        against["baseline_middle_bpb"] = outer_only_bits_per_byte(baseline, tok, openings) - bits_per_byte(
            baseline, tok, openings
        )
    ids = heldout_prompts(tok, prompts)
    # dopri5 at the lab's tolerances (rtol 1e-3, atol 1e-4) over 41 u in [-2, 2]
    nfe_levels = [
        sorted(set(nfe_regimes(model, tok, p, solvers=("dopri5",)).nfe["dopri5"].tolist()))
        for p in PROBE_PROMPT_VARIANTS[:probe_prompts]
    ]
    return {
        "arch": "hybrid",
        "bits_per_byte": trained,
        "depth_use_bpb": bits_per_byte(model, tok, openings, solver=SolverConfig("euler", steps=1)) - trained,
        "block_skip_bpb": bits_per_byte(model, tok, openings, skip_middle=True) - trained,
        "path_curvature": heldout_path_curvature(model, tok, openings[:CURVATURE_TEXTS]),
        "solver_divergence": solver_divergence(model, ids, DIVERGENCE_US),
        # mean over the prompts' tokens of |H(1) − H(0)| / |H(0)| at u = 0 (the prompts have one length)
        "displacement": middle_relative_update(model, torch.tensor(ids), torch.zeros(len(ids), len(ids[0]))),
        "nfe_levels": nfe_levels,
        "prompts_with_two_levels": sum(len(levels) >= 2 for levels in nfe_levels),
        "texts": len(openings),
        "prompts": len(ids),
        "probe_prompts": len(nfe_levels),
        **against,
    }


def format_report(report: dict, source: str) -> str:
    if report["arch"] == "discrete":
        return (
            f"{source} (discrete): bits/byte {report['bits_per_byte']:.4f}; with only its first and last blocks "
            f"+{report['outer_only_bpb']:.4f} (the load a hybrid's block_skip_bpb compares with)"
        )
    lines = [f"{source}: {report['texts']} held-out openings, {report['prompts']} held-out prompts"]
    for key in (
        "bits_per_byte",
        "depth_use_bpb",
        "block_skip_bpb",
        "path_curvature",
        "solver_divergence",
        "displacement",
    ):
        if key == "block_skip_bpb" and "baseline_middle_bpb" in report:
            lines.append(f"  {'baseline_middle_bpb':<20} {report['baseline_middle_bpb']:.4f}")
        bar = TARGETS.get(key)
        if key == "block_skip_bpb" and "baseline_middle_bpb" not in report:
            verdict = f"  (bar {bar[0]}: no baseline on this tokenizer)"
        else:
            verdict = f"  (bar {bar[0]}: {'met' if bar[1](report) else 'not met'})" if bar else ""
        lines.append(f"  {key:<20} {report[key]:.4f}{verdict}")
    levels = "; ".join("/".join(map(str, levels)) for levels in report["nfe_levels"])
    lines.append(
        f"  dopri5 NFE over u in [-2, 2], probe prompts: {levels}  ({report['prompts_with_two_levels']} of "
        f"{report['probe_prompts']} take two levels or more; the bar: 5 of 10)"
    )
    return "\n".join(lines)


def run(
    path: str, texts_per_group: int, prompts: int, probe_prompts: int, as_json: bool, baseline: str | None = None
) -> str:
    """`baseline` (default: the shipped discrete model) is used when its tokenizer is the model's."""
    from ..training.checkpoint import DEFAULT_BASELINE, load_checkpoint, load_model_or_saved_state

    model, tok, source = load_model_or_saved_state(path)
    discrete = None
    if model.config.arch == "hybrid":
        discrete, baseline_tok, _ = load_checkpoint(baseline or DEFAULT_BASELINE)
        if discrete.config.arch != "discrete" or baseline_tok.get_vocab() != tok.get_vocab():
            if baseline is not None:
                raise ValueError(f"{baseline} is not a discrete model on {path}'s tokenizer")
            discrete = None
    report = depth_report(model, tok, texts_per_group, prompts, probe_prompts, discrete)
    return json.dumps({"source": source, **report}) if as_json else format_report(report, source)
