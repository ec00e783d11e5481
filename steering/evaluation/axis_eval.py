"""`evaluate` on a model trained on one's own file (`train --data`): each axis judged by its own judge.

The same measurements as steering/evaluation/evaluate.py where they carry over (losses, bits per byte, α and
the gradient counts, solver divergence, valid words, repeats, the perplexity cost of steering), on
the held-out split saved with the checkpoint (heldout.jsonl). Steering: for each axis, NEW_TOKENS
continuations of held-out openings at u = +s and u = -s on that axis (the other at 0), judged by
that axis's judge (judges.axis_judges.train_axis_judges, saved in the checkpoint's judges/); the share
judged on the asked-for side. Each judge's held-out accuracy says how far to trust it.

Without a baseline (none given, and the shipped one is on another tokenizer, as it always is for a
model of one's own), the model is evaluated alone: its steering, text and depth figures, and
`skipped` names each comparison left out and why.
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch

from ..data import user_data
from ..data.heldout import PROMPT_TOKENS, heldout_batch
from ..data.tokenizer import bos_id, encode
from ..judges import axis_judges
from ..model.ode import SolverConfig
from ..training.checkpoint import load_checkpoint
from ..training.train import evaluate_loss
from .evaluate import (
    _same_tokenizer,
    bits_per_byte,
    heldout_path_curvature,
    log_summary,
    middle_relative_update,
    outer_only_bits_per_byte,
    repeated_trigram_rate,
    steered_perplexity_ratio,
    trained_steer_u,
    valid_word_rate,
)
from .measures import (
    FULL,
    QUICK,
    SEED,
    PromptGenerations,
    generate_for_prompts,
    probe_controls,
    probe_shares,
    solver_divergence,
    word_probabilities,
)


def heldout_prompts(tok, heldout, n: int, prompt_tokens: int = PROMPT_TOKENS) -> list[list[int]]:
    """BOS + the first prompt_tokens tokens of n held-out texts, round-robin over the groups."""
    groups: dict = {}
    for r in heldout:
        ids = encode(tok, r.text)
        if len(ids) >= prompt_tokens:
            groups.setdefault(r.label, []).append([bos_id(tok)] + ids[:prompt_tokens])
    queues = [groups[k] for k in sorted(groups)]
    prompts = []
    while len(prompts) < n and any(queues):
        for q in queues:
            if q and len(prompts) < n:
                prompts.append(q.pop(0))
    return prompts


def openings(heldout, n_per_group: int, chars: int = 300) -> list[str]:
    groups: dict = {}
    for r in heldout:
        groups.setdefault(r.label, []).append(r.text)
    cut = [
        t if len(t) <= chars else t[:chars].rsplit(" ", 1)[0] for k in sorted(groups) for t in groups[k][:n_per_group]
    ]
    return [t for t in cut if t]


def axis_settings(axes, steer_u: float) -> dict[str, tuple[float, float]]:
    """u = 0 and each side of each axis at ±steer_u (the other axis at 0)."""
    settings = {"neutral": (0.0, 0.0)}
    for i in range(len(axes)):
        for sign, end in ((1.0, "positive"), (-1.0, "negative")):
            u = [0.0, 0.0]
            u[i] = sign * steer_u
            settings[f"{i}:{end}"] = (u[0], u[1])
    return settings


NO_BASELINE = (
    "no baseline on this checkpoint's tokenizer (train one with --tokenizer pointing at the hybrid's, "
    "then pass --baseline)"
)
COMPARISONS = ("val_loss_discrete", "bits_per_byte_discrete", "discrete_mid_relative_update", "baseline_middle_bpb")


def evaluate_axes(
    checkpoint, baseline=None, quick: bool = False, steer_u: float | None = None, seed: int = SEED
) -> dict:
    """The evaluation of a user checkpoint, as a dict (JSON-ready); `axes` holds one entry per axis.
    With baseline None the model is judged alone and `skipped` lists the comparisons left out."""
    size = QUICK if quick else FULL
    hybrid, tok, config = load_checkpoint(checkpoint)
    if hybrid.config.arch != "hybrid":
        raise ValueError(f"{checkpoint} holds a {hybrid.config.arch} model; --checkpoint must be the hybrid")
    discrete = None
    if baseline is not None:
        discrete, baseline_tok, _ = load_checkpoint(baseline)
        if not _same_tokenizer(tok, baseline_tok):
            raise ValueError(
                f"{checkpoint} and {baseline} use different tokenizers; train the baseline with --tokenizer "
                "pointing at the hybrid's"
            )
    steer_u = trained_steer_u(config) if steer_u is None else float(steer_u)
    if not 0 < steer_u <= 3:
        raise ValueError(f"steer_u must lie in (0, 3], got {steer_u}")
    axes = user_data.axes_of(config)
    heldout = user_data.read_heldout(checkpoint)
    judges = axis_judges.load_axis_judges(checkpoint)
    torch.manual_seed(SEED)

    block = hybrid.config.block_size if discrete is None else min(hybrid.config.block_size, discrete.config.block_size)
    val_x, val_y, val_u = heldout_batch(tok, block, size.val_reviews, heldout)
    report = {
        "data": (config.get("meta", {}).get("train") or {}).get("data", ""),
        "val_loss_hybrid": evaluate_loss(hybrid, val_x, val_y),
        "val_loss_own_control": evaluate_loss(hybrid, val_x, val_y, val_u),
        "steer_u": steer_u,
    }
    texts = openings(heldout, size.bpb_reviews)
    report["bits_per_byte_hybrid"] = bits_per_byte(hybrid, tok, texts)
    # what the block's depth is worth: one Euler step in place of the trained solver, and no block at all
    one_step = bits_per_byte(hybrid, tok, texts, solver=SolverConfig("euler", steps=1))
    report["depth_use_bpb"] = one_step - report["bits_per_byte_hybrid"]
    report["block_skip_bpb"] = bits_per_byte(hybrid, tok, texts, skip_middle=True) - report["bits_per_byte_hybrid"]
    report["path_curvature"] = heldout_path_curvature(hybrid, tok, texts[: size.curvature_texts])
    if discrete is not None:
        report["val_loss_discrete"] = evaluate_loss(discrete, val_x, val_y)
        report["bits_per_byte_discrete"] = bits_per_byte(discrete, tok, texts)
        report["baseline_middle_bpb"] = (
            outer_only_bits_per_byte(discrete, tok, texts) - report["bits_per_byte_discrete"]
        )
        report["discrete_mid_relative_update"] = middle_relative_update(discrete, val_x, val_y)
    report.update(log_summary(checkpoint, baseline, config["model"], hybrid))

    prompts = heldout_prompts(tok, heldout, size.prompts)
    if not prompts:
        raise ValueError(f"no held-out text of {checkpoint} is {PROMPT_TOKENS} tokens long: nothing to prompt with")
    gens = generate_for_prompts(hybrid, tok, prompts, axis_settings(axes, steer_u), seed=seed)
    report["axes"] = []
    for i, (axis, judge) in enumerate(zip(axes, judges, strict=True)):
        positive = judge.predict(gens.continuations[f"{i}:positive"])
        negative = judge.predict(gens.continuations[f"{i}:negative"])
        report["axes"].append(
            {
                "name": axis.name,
                "negative": axis.negative,
                "positive": axis.positive,
                "judge_heldout_acc": judge.heldout_accuracy,
                "steer_positive_acc": float(np.mean(positive == 1)),
                "steer_negative_acc": float(np.mean(negative == 0)),
                "neutral_positive_share": float(np.mean(judge.predict(gens.continuations["neutral"]) == 1)),
            }
        )
    suggested = (config.get("meta") or {}).get("prompts") or []
    for index, axis in enumerate(axes):
        probe = axis_probe(hybrid, tok, axis, index, suggested, steer_u)
        if probe is not None:
            report["axes"][index]["probe"] = probe
    report["solver_divergence"] = solver_divergence(hybrid, prompts, (-steer_u, 0.0, steer_u))
    report["ode_relative_displacement"] = middle_relative_update(hybrid, val_x, val_y)
    report["valid_word_rate"] = valid_word_rate(tok, gens, axis_judges.load_training_words(checkpoint))
    report["repeated_trigram_rate"] = repeated_trigram_rate(
        [t for k in gens.continuations for t in gens.continuations[k]]
    )
    first = PromptGenerations(
        prompts,
        {
            "positive": gens.tokens["0:positive"],
            "negative": gens.tokens["0:negative"],
            "neutral": gens.tokens["neutral"],
        },
        {},
    )
    report["ppl_ratio_steered"] = steered_perplexity_ratio(hybrid, prompts, first)
    report["skipped"] = [] if discrete is not None else [f"{key}: {NO_BASELINE}" for key in COMPARISONS]
    return report


def axis_probe(model, tok, axis, index: int, prompts, steer_u: float) -> dict | None:
    """The evaluation's word probe on one axis: its probe words (chosen at training time: by hand with
    --probe-words, else the words its judge ties most to each end) after the model's first suggested
    prompt, at u = ±steer_u on that axis (the other at 0); None without words."""
    words = axis.probe_words or {}
    if not prompts or not words.get("positive") or not words.get("negative"):
        return None
    positive, negative = " " + words["positive"][0], " " + words["negative"][0]
    raw = word_probabilities(
        model, tok, prompts[0], {"good": positive, "bad": negative}, controls=probe_controls(steer_u), axis=index
    )
    at_positive, at_negative = probe_shares(raw)
    return {
        "prompt": prompts[0],
        "positive_word": positive,
        "negative_word": negative,
        "positive_share_at_plus": at_positive,
        "negative_share_at_minus": at_negative,
    }


def format_axis_table(report: dict, seconds: float | None = None) -> str:
    lines = [f"{'figure':34s} {'value':>10s}"]
    for key, value in report.items():
        if key == "axes":
            for axis in value:
                name = f"{axis['name']} ({axis['negative']} / {axis['positive']})"
                lines.append(name)
                for k in ("judge_heldout_acc", "steer_positive_acc", "steer_negative_acc", "neutral_positive_share"):
                    shown = "n/a" if axis[k] is None else f"{axis[k]:.4g}"
                    lines.append(f"  {k:32s} {shown:>10s}")
                if "probe" in axis:
                    probe = axis["probe"]
                    lines.append(
                        f"  probe after {probe['prompt']!r}: P({probe['positive_word'].strip()}) share at +u "
                        f"{probe['positive_share_at_plus']:.3f}, P({probe['negative_word'].strip()}) share at -u "
                        f"{probe['negative_share_at_minus']:.3f}"
                    )
        elif key == "skipped":
            lines += [f"skipped {line}" for line in value]
        elif isinstance(value, str):
            lines.append(f"{key:34s} {value}")
        else:
            lines.append(f"{key:34s} {value:>10.4g}")
    if seconds is not None:
        lines.append(f"(took {seconds:.0f} s)")
    return "\n".join(lines)


def run(checkpoint, baseline, quick: bool, as_json: bool, steer_u: float | None = None, seed: int = SEED) -> str:
    """`python -m steering evaluate` on a model trained on a user's file: JSON or the table."""
    start = time.perf_counter()
    report = evaluate_axes(checkpoint, baseline, quick, steer_u, seed)
    return json.dumps(report, indent=2) if as_json else format_axis_table(report, time.perf_counter() - start)
