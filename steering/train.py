"""Two-stage training for the hybrid and the discrete baseline.

Stage 1: language modelling on review windows with their control u (control dropout
  makes u = 0 the unconditioned model). The discrete baseline sees the same batches and
  ignores u.
Stage 2 (hybrid only, as in the paper): embeddings, head and the blocks before the ODE
  block frozen; the ODE block trains (and by default the two blocks after it, which read
  its output). Its loss adds a contrastive term to the LM loss: each review must be
  likelier under its own sentiment (and style) than under the flipped value (Bayes rule
  over the class-conditional LM, as GeDi). LM loss alone hardly moves u, because the
  context already predicts most tokens; the contrast says what u must do. The LM term is
  also taken at u = 0, so that "no preference" stays a fit of all the text rather than
  drifting towards one side while the contrast pulls u = ±1 apart.

Runs unchanged under `torchrun --nproc_per_node=N` (DDP: gloo on CPU, nccl on GPU).
"""
from __future__ import annotations

import functools
import json
import math
import os
import shutil
import statistics
import time
from collections import deque
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from . import data
from .checkpoint import LOG, TOKENIZER, save_checkpoint
from .model import ModelConfig, build_model, language_model_loss
from .tokenizer import bos_id, decode, load_tokenizer, train_tokenizer

EXPLODE_FACTOR = 10.0
VANISH_THRESHOLD = 1e-7


@dataclass
class TrainConfig:
    arch: str = "hybrid"
    out: str = "runs/hybrid"
    steps: int = 1200                 # stage 1 optimiser steps
    stage2_steps: int = 250           # hybrid only
    tokens_per_batch: int = 4096
    stage2_tokens_per_batch: int = 2048  # stage 2 runs each batch once per control copy
    lr: float = 2e-3
    stage2_lr: float = 1e-3
    warmup: int = 200                 # stage 2 warms up for a quarter of this
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    control_dropout: float = 0.15
    rt_fraction: float = 0.4
    start_prob: float = 0.5           # chance a window starts at its review's beginning
    stage2_start_prob: float | None = None  # stage 2's, when it differs (where a prompt's opening steers most)
    stage2_rt_fraction: float | None = None  # stage 2's share of Rotten Tomatoes batches, when it differs
    roughness_weight: float = 2000.0    # penalty on α·F changing along the Euler path
    roughness_relative_to: str = "state"  # "state": |ΔF|²/|H(0)|²; "field": |ΔF|²/|F|² (blind to the field's size)
    stage2_roughness_weight: float | None = None       # stage 2's penalty, when it differs from stage 1's
    stage2_roughness_relative_to: str | None = None
    overlap_weight: float = 0.0       # penalty on the field reading its own writes (ode.read_write_overlap)
    stage2_overlap_weight: float | None = None         # stage 2's, when it differs from stage 1's
    contrast_weight: float = 3.0      # stage 2 contrastive weight (the sentiment axis; style's too unless set below)
    style_contrast_weight: float | None = None  # the style axis's own weight (the axes share the field)
    negative_contrast_weight: float | None = None  # the sentiment weight of negative rows, when it differs
    contrast_positive_side: float = 1.0  # scales the sentiment contrast's gradient through the model at u = +1
    contrast_early_weight: float = 0.0   # extra contrast weight on a window's first tokens: 1 + this x exp(-t / span)
    contrast_early_span: float = 8.0     # (where u has no context to lean on: prompts, a review's opening)
    contrast_scale: float = 3.0       # 0: Bayes rule on summed log-likelihoods; >0: scale x per-token mean
    contrast_axes: str = "sentiment+style"  # which control axes get a flipped copy in stage 2
    contrast_tokens: str = "all"      # "all"; "word_start": u judged on word-initial tokens only;
                                      # "word_start_sentiment": that for the sentiment axis, all tokens for style
    contrast_lexicon_weight: float = 0.0  # sentiment contrast weighs target token v by 1 + this x |log-odds(v)|
                                          # (positive vs negative training reviews; see sentiment_log_odds)
    stage2_neutral_lm: bool = True    # stage 2 also fits every window at u = 0 (keeps "no preference" unbiased)
    stage2_neutral_share: float = 0.5  # that u = 0 fit's share of stage 2's LM loss (the rest: at the true u)
    positive_kl_weight: float = 0.0   # stage 2: weight of KL(next token at sentiment +1 || at u = 0), u = 0 held fixed
    negative_kl_weight: float = 0.0   # the same at sentiment -1 (steered text's fluency cost, paid per side)
    stage2_split_control: bool = False  # stage 2 gives u's two signs their own embedding (ode.py), from stage 1's
    field_out_lr_scale: float = 1.0   # lr multiplier of the field's output layer (see _make_optimizer)
    stage2_control_lr_scale: float = 1.0  # stage 2's lr multiplier of the control embedding e(u) (see _make_optimizer)
    neighbor_drop: float = 0.0        # stage 1: chance of leaving out each block next to the middle (layer drop)
    train_alpha: bool = True          # False: α stays at alpha_init in both stages (the field's weights still train)
    stage2_trains: str = "field+post" # "field" (paper) or "field+post" (also the blocks after the ODE)
    eval_every: int = 100
    eval_reviews: int = 200
    max_reviews: int = 0              # 0: all training reviews; else a fixed subset (tiny runs)
    tokenizer: str = ""               # reuse this tokenizer.json (so both archs share one)
    contrast_u: float = 1.0           # |u| of the contrast's copies; the LM term fits u = ±1 (the data's labels)
    seed: int = 1234
    device: str = "auto"
    resume: bool = False
    bf16: bool = False                # bf16 autocast for the forward pass (weights, optimizer, loss stay fp32)
    save_every_s: float = 300.0       # resumable state at least this often (and at every eval)
    # model size
    vocab_size: int = 4096
    block_size: int = 128
    d_model: int = 256
    n_heads: int = 4
    field_hidden: int = 512
    field_heads: int = 0              # > 0: a token-mixing field (attention inside the ODE block)
    field_norm: str = "layer"         # "entry": the field normalises with H(0)'s statistics (ode.py)
    n_pre: int = 2                    # blocks before the middle
    n_mid: int = 2                    # blocks the middle stands for (the discrete model's middle; init scale)
    n_post: int = 2                   # blocks after the middle
    control_embed_dim: int = 32
    alpha_init: float = 0.1           # the paper's; 1.0 doubled the middle's displacement in a pilot (README)


PRESETS = {
    "tiny": dict(vocab_size=512, block_size=64, d_model=64, n_heads=2, field_hidden=128, control_embed_dim=8,
                 steps=150, stage2_steps=40, tokens_per_batch=1024, stage2_tokens_per_batch=1024, warmup=20, eval_every=50, eval_reviews=64,
                 max_reviews=3000, lr=3e-3, stage2_lr=3e-3),
    "demo": dict(),
}


def make_config(preset: str = "demo", **overrides) -> TrainConfig:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = replace(TrainConfig(), **PRESETS[preset])
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


def model_config(cfg: TrainConfig) -> ModelConfig:
    return ModelConfig(arch=cfg.arch, vocab_size=cfg.vocab_size, block_size=cfg.block_size, d_model=cfg.d_model,
                       n_heads=cfg.n_heads, field_hidden=cfg.field_hidden, field_heads=cfg.field_heads,
                       field_norm=cfg.field_norm, n_pre=cfg.n_pre, n_mid=cfg.n_mid, n_post=cfg.n_post,
                       control_embed_dim=cfg.control_embed_dim, alpha_init=cfg.alpha_init)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


# ---------------------------------------------------------------- distributed helpers

def _loopback_interface() -> str | None:
    import socket
    return next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)


def _dist_setup(device: torch.device) -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        single_node = os.environ.get("LOCAL_WORLD_SIZE") == str(world)
        if device.type == "cpu" and single_node and "GLOO_SOCKET_IFNAME" not in os.environ:
            # gloo otherwise binds to whatever the hostname resolves to; in sandboxes where that
            # address is not routable its connect hangs for the 30-minute collective timeout
            loopback = _loopback_interface()
            if loopback:
                os.environ["GLOO_SOCKET_IFNAME"] = loopback
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def _barrier(world: int):
    if world > 1:
        dist.barrier()


# ---------------------------------------------------------------- data

def _training_reviews(cfg: TrainConfig):
    reviews = data.train_reviews()
    if cfg.max_reviews:
        g = torch.Generator().manual_seed(0)
        pick = torch.randperm(len(reviews), generator=g)[: cfg.max_reviews].tolist()
        reviews = tuple(reviews[i] for i in sorted(pick))
    return reviews


def prepare_tokenizer(cfg: TrainConfig, reviews, rank: int, world: int):
    """Reuse --tokenizer, else the one in the output folder, else train one (rank 0) and share it."""
    path = Path(cfg.tokenizer) if cfg.tokenizer else Path(cfg.out) / TOKENIZER
    if not path.is_file():
        if rank == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            train_tokenizer((r.text for r in reviews), cfg.vocab_size).save(str(path))
        _barrier(world)
    return load_tokenizer(path)


def heldout_batch(tok, block_size: int, n_reviews: int):
    """The first block_size+1 tokens of the first n held-out reviews of each (label, source)."""
    heldout = data.heldout_reviews()
    groups: dict = {}
    for r in heldout:
        groups.setdefault((r.label, r.source), []).append(r)
    per_group = max(1, n_reviews // len(groups))
    picked = [r for key in sorted(groups) for r in groups[key][:per_group]]
    enc = data.encode_reviews(tok, picked, bos_id(tok), max_tokens=block_size + 1)
    width = max(len(t) for t in enc.tokens) - 1
    inputs = torch.zeros(len(picked), width, dtype=torch.long)
    targets = torch.full((len(picked), width), -1, dtype=torch.long)
    for i, t in enumerate(enc.tokens):
        inputs[i, : len(t) - 1] = t[:-1]
        targets[i, : len(t) - 1] = t[1:]
    return inputs, targets, enc.controls


@torch.no_grad()
def evaluate_loss(model, inputs, targets, controls=None, batch: int = 32) -> float:
    """Mean token cross-entropy on fixed held-out windows (u = 0 unless controls given)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(inputs), batch):
        x, y = inputs[i:i + batch], targets[i:i + batch]
        u = None if controls is None else controls[i:i + batch]
        logits, _ = model(x, u)
        n = int((y >= 0).sum())
        total += float(language_model_loss(logits, y)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)


# ---------------------------------------------------------------- losses

def neighbor_skips(cfg: TrainConfig, step: int) -> tuple[bool, bool]:
    """Which neighbours of the middle stage-1 step `step` leaves out; a function of (seed, step), so resume replays it."""
    if cfg.neighbor_drop <= 0:
        return (False, False)
    draws = torch.rand(2, generator=torch.Generator().manual_seed(cfg.seed * 1_000_003 + step))
    return tuple(bool(d < cfg.neighbor_drop) for d in draws)


def stage2_view(cfg: TrainConfig) -> TrainConfig:
    """cfg with stage 2's roughness and overlap penalties in place of stage 1's (where set)."""
    weight = cfg.roughness_weight if cfg.stage2_roughness_weight is None else cfg.stage2_roughness_weight
    relative_to = cfg.stage2_roughness_relative_to or cfg.roughness_relative_to
    overlap = cfg.overlap_weight if cfg.stage2_overlap_weight is None else cfg.stage2_overlap_weight
    return replace(cfg, roughness_weight=weight, roughness_relative_to=relative_to, overlap_weight=overlap)


def enter_stage2(sampler: data.BatchSampler, cfg: TrainConfig) -> None:
    """Stage 2's batches: its own size, and (where set) its own share of windows that open a review
    and of Rotten Tomatoes blurbs (short, so more of their tokens carry the label)."""
    sampler.tokens_per_batch = cfg.stage2_tokens_per_batch
    if cfg.stage2_start_prob is not None:
        sampler.start_prob = cfg.stage2_start_prob
    if cfg.stage2_rt_fraction is not None:
        sampler.rt_fraction = cfg.stage2_rt_fraction


def autocast(cfg: TrainConfig, device: torch.device):
    """bf16 autocast when cfg.bf16 (CPU matrix units or CUDA tensor cores), else a no-op context."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16)


def stage1_loss(model, x, y, u, cfg: TrainConfig, skip_neighbors: tuple[bool, bool] = (False, False)):
    with autocast(cfg, x.device):
        logits, roughness = model(x, u, roughness_relative_to=cfg.roughness_relative_to, skip_neighbors=skip_neighbors)
    lm = language_model_loss(logits, y)
    return lm + cfg.roughness_weight * roughness, {"lm_loss": lm.item(), "roughness": roughness.item()}


def word_start_tokens(tok) -> torch.Tensor:
    """[vocab] bool: the tokens that begin a word (byte-level BPE marks them with a leading space)."""
    return torch.tensor([decode(tok, [i]).startswith(" ") for i in range(tok.get_vocab_size())])


def sentiment_log_odds(split: data.EncodedSplit, vocab_size: int, smoothing: float = 10.0) -> torch.Tensor:
    """[vocab] log of each token's rate in positive over negative training reviews (add-`smoothing` counts).

    Near 0 for words both classes use, large for the words that tell them apart (with the shipped
    tokenizer: " good" +0.00, " the" +0.03, since negative reviews say "not good"; " bad" -1.38,
    " worst" -2.29, " excellent" +1.40).
    """
    counts = torch.zeros(2, vocab_size)
    for tokens, control in zip(split.tokens, split.controls):
        if control[0] != 0:
            counts[int(control[0] > 0)].index_add_(0, tokens, torch.ones(len(tokens)))
    rates = (counts + smoothing) / (counts.sum(1, keepdim=True) + smoothing * vocab_size)
    return (rates[1] / rates[0]).log()


def contrast_token_weights(cfg: TrainConfig, tok, split: data.EncodedSplit) -> dict[int, torch.Tensor]:
    """Per control axis, the [vocab] weight of each target token in stage 2's contrast (none: every token 1)."""
    weights: dict[int, torch.Tensor] = {}
    if cfg.contrast_tokens.startswith("word_start"):
        starts = word_start_tokens(tok).float()
        weights = {axis: starts for axis in ((0,) if cfg.contrast_tokens == "word_start_sentiment" else (0, 1))}
    if cfg.contrast_lexicon_weight:
        lexicon = 1.0 + cfg.contrast_lexicon_weight * sentiment_log_odds(split, cfg.vocab_size).abs()
        weights[0] = weights[0] * lexicon if 0 in weights else lexicon
    return weights


def _scale_grad(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x in the forward pass; its gradient multiplied by scale in the backward pass."""
    return x.detach() + scale * (x - x.detach())


def stage2_loss(model, x, y, u, cfg: TrainConfig, contrast_token_weights: dict[int, torch.Tensor] | None = None):
    """LM at the true u, plus, per control axis: each row likelier under its own value than the flipped one.

    With contrast_scale = 0 the class logit is the difference of summed log-likelihoods (Bayes
    rule); a long window then wins its case with tiny per-token shifts. contrast_scale > 0 uses
    scale x the per-token mean difference instead, which asks u to move every token's odds.
    contrast_token_weights maps a control axis to a [vocab] weight of each target token in that
    axis's per-token mean: a 0/1 mask judges u on chosen tokens only (word starts: word choice, not
    spelling), contrast_lexicon_weight's weights make the words that tell the classes apart count most.
    Weights: cfg.contrast_weight for sentiment (negative rows: negative_contrast_weight, where set),
    style_contrast_weight for style; contrast_positive_side scales the gradient of every sentiment
    likelihood taken at u = +1 (the margin's value is unchanged), so the two controls can be
    trained with unequal pressure. contrast_early_weight E weighs token t of a window by
    1 + E·exp(-t / contrast_early_span) in every axis's contrast: early tokens have little context,
    so there u alone must carry the sentiment. With stage2_neutral_lm the LM term also fits every
    window at u = 0, that fit taking stage2_neutral_share of it. positive_kl_weight and
    negative_kl_weight hold the next-token distribution at sentiment +1 / -1 near u = 0's (KL per
    token, u = 0's side detached): a steered sample's perplexity under u = 0 grows with that KL, so
    it prices the fluency cost of each side on its own, where the contrast only asks for a margin.
    """
    axes = [0] if cfg.contrast_axes == "sentiment" else [0, 1]
    # the LM term fits each row at its own label (u = ±1, as in the data); the contrast compares
    # the label and its flip at |u| = contrast_u, so |u| > 1 is where steering is strong
    contrast_own = u * cfg.contrast_u
    copies = [u] if cfg.contrast_u == 1.0 else [u, contrast_own]
    for axis in axes:
        flipped = contrast_own.clone()
        flipped[:, axis] = -flipped[:, axis]
        copies.append(flipped)
    if cfg.stage2_neutral_lm:
        copies.append(torch.zeros_like(u))
    with autocast(cfg, x.device):
        logits, roughness = model(torch.cat([x] * len(copies)), torch.cat(copies),
                                  roughness_relative_to=cfg.roughness_relative_to)
    chunks = logits.float().chunk(len(copies))
    lm = language_model_loss(chunks[0], y)
    if cfg.contrast_u != 1.0:
        chunks = chunks[1:]   # from here on chunks[0] is the contrast's own copy
    safe_y = y.clamp_min(0)
    token_weight = (y >= 0).float()   # padding counts for nothing
    neutral_kl = lm.new_zeros(())
    prices_sides = bool(cfg.positive_kl_weight or cfg.negative_kl_weight)
    if prices_sides and not cfg.stage2_neutral_lm:
        raise ValueError("positive_kl_weight / negative_kl_weight need stage2_neutral_lm (the u = 0 copy)")
    if cfg.stage2_neutral_lm:
        share = cfg.stage2_neutral_share
        lm = (1.0 - share) * lm + share * language_model_loss(chunks[-1], y)
        if prices_sides:
            neutral_kl = _neutral_kl(chunks[0], chunks[1], chunks[-1], u[:, 0],   # chunks[1]: sentiment flipped
                                     token_weight, cfg.positive_kl_weight, cfg.negative_kl_weight)
        chunks = chunks[:-1]
    if cfg.contrast_early_weight:
        t = torch.arange(y.shape[1], device=y.device, dtype=torch.float32)
        token_weight = token_weight * (1.0 + cfg.contrast_early_weight * torch.exp(-t / cfg.contrast_early_span))
    vocab_weights = contrast_token_weights or {}

    def log_likelihood(nll, mask):
        ll = -(nll * mask).sum(1)
        return ll * cfg.contrast_scale / mask.sum(1).clamp_min(1) if cfg.contrast_scale > 0 else ll

    def token_nll(chunk):
        return F.cross_entropy(chunk.transpose(1, 2), safe_y, reduction="none")

    nll_own = token_nll(chunks[0])
    style_weight = cfg.contrast_weight if cfg.style_contrast_weight is None else cfg.style_contrast_weight
    negative_weight = cfg.contrast_weight if cfg.negative_contrast_weight is None else cfg.negative_contrast_weight
    contrasts, weighted = [], []
    for axis, chunk in zip(axes, chunks[1:]):
        has_value = u[:, axis] != 0
        if has_value.any():
            mask = token_weight if axis not in vocab_weights else \
                token_weight * vocab_weights[axis].to(y.device)[safe_y].float()
            own_ll, flipped_ll = log_likelihood(nll_own, mask), log_likelihood(token_nll(chunk), mask)
            if axis == 0 and cfg.contrast_positive_side != 1.0:
                # each window's likelihood at +1 trains the positive control, at -1 the negative one
                at_positive = u[:, 0] > 0
                own_ll = _scale_grad(own_ll, torch.where(at_positive, cfg.contrast_positive_side, 1.0))
                flipped_ll = _scale_grad(flipped_ll, torch.where(at_positive, 1.0, cfg.contrast_positive_side))
            margin = own_ll - flipped_ll
            per_row = F.softplus(-margin[has_value])
            if axis == 0:   # sentiment: each class may have its own weight
                row_weight = torch.where(u[has_value, 0] < 0, negative_weight, cfg.contrast_weight)
            else:
                row_weight = torch.full_like(per_row, style_weight)
            contrasts.append(per_row.mean())
            weighted.append((row_weight * per_row).mean())
    contrast = torch.stack(contrasts).mean() if contrasts else lm.new_zeros(())
    weighted_contrast = torch.stack(weighted).mean() if weighted else lm.new_zeros(())
    loss = lm + weighted_contrast + neutral_kl + cfg.roughness_weight * roughness
    parts = {"lm_loss": lm.item(), "contrast_loss": contrast.item(), "roughness": roughness.item()}
    if prices_sides:
        parts["neutral_kl"] = neutral_kl.item()
    return loss, parts


def _neutral_kl(own_logits, flipped_logits, zero_logits, sentiment, token_weight, positive_weight, negative_weight):
    """Weighted per-token KL(p at sentiment ±1 || p at u = 0), the u = 0 side a fixed target.

    A row's own copy is at its own sentiment and the flipped copy at the other, so every row with
    a sentiment gives one distribution for each side.
    """
    target = F.log_softmax(zero_logits.detach(), -1)

    def kl(logits):   # [B, T]
        log_p = F.log_softmax(logits, -1)
        return (log_p.exp() * (log_p - target)).sum(-1)

    kl_own, kl_flipped = kl(own_logits), kl(flipped_logits)
    w = token_weight * (sentiment != 0)[:, None].float()   # a row without a sentiment has no side
    total = zero_logits.new_zeros(())
    for weight, sign in ((positive_weight, 1.0), (negative_weight, -1.0)):
        if weight:
            side_kl = torch.where((sentiment == sign)[:, None], kl_own, kl_flipped)
            total = total + weight * (side_kl * w).sum() / w.sum().clamp_min(1)
    return total


# ---------------------------------------------------------------- resumable state (no pickle)

def _save_state(path: Path, model, opt, step: int, stage: int, sampler_gen: torch.Generator, history):
    """Write the state into a fresh folder and swap it in, so a kill mid-save leaves the last good one."""
    fresh, old = path.with_name(path.name + ".new"), path.with_name(path.name + ".old")
    shutil.rmtree(fresh, ignore_errors=True)
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    opt_state = opt.state_dict()
    for pid, st in opt_state["state"].items():
        for k, v in st.items():
            tensors[f"opt.{pid}.{k}"] = torch.as_tensor(v).cpu().contiguous()
    tensors["rng.sampler"] = sampler_gen.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    fresh.mkdir(parents=True)
    save_file(tensors, str(fresh / "state.safetensors"))
    (fresh / "state.json").write_text(json.dumps({
        "step": step, "stage": stage, "param_groups": opt_state["param_groups"], "grad_history": list(history)}))
    if path.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
    fresh.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _resume_dir(path: Path) -> Path | None:
    """The last complete saved state: `path`, or its `.old` copy when a kill came mid-swap."""
    for candidate in (path, path.with_name(path.name + ".old")):
        if (candidate / "state.json").is_file():
            return candidate
    return None


def _load_state(path: Path, model, opt, sampler_gen: torch.Generator):
    meta = json.loads((path / "state.json").read_text())
    tensors = load_file(str(path / "state.safetensors"))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, pid, name = k.split(".", 2)
            state.setdefault(int(pid), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    sampler_gen.set_state(tensors["rng.sampler"])
    torch.set_rng_state(tensors["rng.torch"])
    return meta


# ---------------------------------------------------------------- the loop

def _grad_norm(params) -> float:
    norms = [p.grad.detach().norm() for p in params if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


def _make_optimizer(model, lr: float, weight_decay: float, field_out_lr_scale: float = 1.0,
                    control_lr_scale: float = 1.0):
    """AdamW; matrices decay, vectors and α do not.

    The field's output passes through α (0.1 at the start), and Adam moves each weight by
    about lr per step whatever its gradient, so α·F learns slower than a block's output;
    field_out_lr_scale raises its output layer's lr. Measured at 10 (= 1/α_init): α fell
    to 0.025 to compensate and the block moved H no further, so the demo keeps 1.
    control_lr_scale does the same for the control embedding e(u): its weights start at std 1,
    so at the base lr stage 2 moves them by a few percent (split signs barely part).
    """
    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        scale = field_out_lr_scale if name.startswith("field.fc_out") else \
            control_lr_scale if name.startswith("field.control_embed") else 1.0
        decay = weight_decay if p.dim() >= 2 else 0.0
        groups.setdefault((scale, decay), []).append(p)
    return torch.optim.AdamW([{"params": ps, "weight_decay": decay, "lr": lr * scale, "lr_scale": scale}
                              for (scale, decay), ps in groups.items()], lr=lr, betas=(0.9, 0.95))


def _lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def _freeze_for_stage2(model, trains: str):
    """Embeddings, head and the blocks before the ODE stay fixed; the field (and maybe `post`) train."""
    prefixes = {"field": ("field.",), "field+post": ("field.", "post.")}[trains]
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith(prefixes)


def train(cfg: TrainConfig, progress: bool = True) -> Path:
    """Train per cfg; write weights, config, tokenizer and a JSONL log into cfg.out."""
    device = resolve_device(cfg.device)
    rank, world = _dist_setup(device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    reviews = _training_reviews(cfg)
    tok = prepare_tokenizer(cfg, reviews, rank, world)
    cfg = replace(cfg, vocab_size=tok.get_vocab_size())
    split = data.encode_reviews(tok, reviews, bos_id(tok))
    val_x, val_y, val_u = heldout_batch(tok, cfg.block_size, cfg.eval_reviews)

    model = build_model(model_config(cfg)).to(device)
    first_val = evaluate_loss(model, val_x.to(device), val_y.to(device))
    sampler_gen = torch.Generator().manual_seed(cfg.seed + 1000 * rank)
    sampler = data.BatchSampler(split, cfg.block_size, cfg.tokens_per_batch, sampler_gen,
                                rt_fraction=cfg.rt_fraction, start_prob=cfg.start_prob,
                                control_dropout=cfg.control_dropout)
    stages = [(1, cfg.steps, cfg.lr)]
    if cfg.arch == "hybrid" and cfg.stage2_steps > 0:
        stages.append((2, cfg.stage2_steps, cfg.stage2_lr))

    state_dir = out / "resume"
    saved = _resume_dir(state_dir) if cfg.resume else None
    start_stage, start_step, history = 1, 0, deque(maxlen=200)
    if saved is not None:
        start_stage = json.loads((saved / "state.json").read_text())["stage"]
    log_path = out / LOG
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        if not (cfg.resume and log_path.is_file()):
            log_path.write_text("")

    for stage, n_steps, lr in stages:
        if stage < start_stage:
            continue
        if stage == 2:
            if cfg.stage2_split_control and cfg.arch == "hybrid":
                model.split_control()   # before the optimizer and any stage-2 resume state, which hold W₋
            _freeze_for_stage2(model, cfg.stage2_trains)
            enter_stage2(sampler, cfg)
        if not cfg.train_alpha and hasattr(model, "field"):
            model.field.alpha.requires_grad_(False)
        opt = _make_optimizer(model, lr, cfg.weight_decay if stage == 1 else 0.0, cfg.field_out_lr_scale,
                              cfg.stage2_control_lr_scale if stage == 2 else 1.0)
        if saved is not None and stage == start_stage:
            meta = _load_state(saved, model, opt, sampler_gen)
            start_step, history = meta["step"], deque(meta["grad_history"], maxlen=200)
            if rank == 0:
                _truncate_log(log_path, stage, start_step)
        else:
            # each stage trains a different set of parameters: its grad norms get their own median
            start_step, history = 0, deque(maxlen=200)
        trainable = [p for p in model.parameters() if p.requires_grad]
        ode_params = list(model.ode_parameters())
        # a left-out neighbour leaves its parameters without gradient on that step
        wrapped = (torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=cfg.neighbor_drop > 0)
                   if world > 1 else model)
        loss_fn = stage1_loss
        if stage == 2:
            loss_fn = functools.partial(stage2_loss, contrast_token_weights=contrast_token_weights(cfg, tok, split))
        stage_cfg = cfg if stage == 1 else stage2_view(cfg)
        bar = tqdm(range(start_step, n_steps), desc=f"{cfg.arch} stage {stage}", disable=not progress or rank != 0,
                   initial=start_step, total=n_steps)
        model.train()
        last_save = stage_start = time.perf_counter()
        for step in bar:
            t0 = time.perf_counter()
            base_lr = _lr_at(step, n_steps, lr, cfg.warmup if stage == 1 else cfg.warmup // 4)
            for group in opt.param_groups:
                group["lr"] = base_lr * group["lr_scale"]
            x, y, u, n_tokens = sampler.sample()
            x, y, u = x.to(device), y.to(device), u.to(device)
            layer_drop = {"skip_neighbors": neighbor_skips(cfg, step)} if stage == 1 else {}
            loss, parts = loss_fn(wrapped, x, y, u, stage_cfg, **layer_drop)
            if stage_cfg.overlap_weight > 0 and hasattr(model, "field"):
                overlap = model.field.read_write_overlap()
                # ramped over stage 1's warm-up: the ratio's gradient grows as 1/|W|, large while
                # the output layers are still at their near-zero init
                ramp = min(1.0, (step + 1) / max(1, cfg.warmup)) if stage == 1 else 1.0
                loss = loss + stage_cfg.overlap_weight * ramp * overlap
                parts["overlap"] = overlap.item()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = _grad_norm(trainable)
            ode_grad_norm = _grad_norm(ode_params)
            exploding = len(history) >= 20 and grad_norm > EXPLODE_FACTOR * statistics.median(history)
            vanishing = ode_grad_norm < VANISH_THRESHOLD
            history.append(grad_norm)
            torch.nn.utils.clip_grad_norm_(trainable, cfg.grad_clip)
            opt.step()
            tokens_per_s = n_tokens * world / (time.perf_counter() - t0)
            if rank != 0:
                continue
            record = {"stage": stage, "step": step, "loss": loss.item(), **parts, "grad_norm": grad_norm,
                      "ode_grad_norm": ode_grad_norm, "alpha": _alpha(model), "tokens_per_s": tokens_per_s,
                      "tokens": n_tokens * world, "lr": base_lr,
                      "exploding": bool(exploding), "vanishing": bool(vanishing)}
            last = step == n_steps - 1
            if (step + 1) % cfg.eval_every == 0 or last:
                record["val_loss"] = evaluate_loss(model, val_x.to(device), val_y.to(device))
                if cfg.arch == "hybrid":
                    record["val_loss_conditioned"] = evaluate_loss(model, val_x.to(device), val_y.to(device),
                                                                   val_u.to(device))
            if "val_loss" in record or time.perf_counter() - last_save >= cfg.save_every_s:
                _save_state(state_dir, model, opt, step + 1, stage, sampler_gen, history)
                last_save = time.perf_counter()
            with log_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens_per_s:,.0f}")
            if not progress and (step + 1) % 50 == 0:
                print(progress_line(cfg.arch, stage, step + 1, n_steps, start_step,
                                    time.perf_counter() - stage_start, record), flush=True)
        start_step = 0
        if stage == 1 and len(stages) > 1 and rank == 0 and (state_dir / "state.json").is_file():
            # stage 1's end state, kept: stage-2 variants resume from a copy of it (runs/, not shipped)
            shutil.copytree(state_dir, out / "stage1_end", dirs_exist_ok=True)

    if rank == 0:
        meta = {"train": asdict(cfg), "initial_val_loss": first_val, "world_size": world,
                "parameters": model.num_parameters()}
        save_checkpoint(model, out, tok, meta)
        for folder in (state_dir, state_dir.with_name("resume.old"), state_dir.with_name("resume.new")):
            shutil.rmtree(folder, ignore_errors=True)
    _barrier(world)
    if world > 1:
        dist.destroy_process_group()
    return out


def progress_line(arch: str, stage: int, done: int, total: int, first: int, elapsed_s: float, record: dict) -> str:
    """One log line with the stage's progress and its ETA from this run's own pace (logs, nohup)."""
    rate = (done - first) / max(elapsed_s, 1e-9)
    eta = (total - done) / rate if rate > 0 else float("inf")
    shown = "?" if not math.isfinite(eta) else f"{int(eta // 3600)}h{int(eta % 3600 // 60):02d}m"
    val = f", val {record['val_loss']:.3f}" if "val_loss" in record else ""
    return (f"{arch} stage {stage}: step {done}/{total} ({100 * done / total:.0f}%), loss {record['loss']:.3f}{val}, "
            f"{record['tokens_per_s']:,.0f} tok/s, ETA {shown}")


def _truncate_log(log_path: Path, stage: int, step: int):
    """Drop log lines written after the saved state, so a resumed run logs each step once."""
    kept = [line for line in log_path.read_text().splitlines()
            if line.strip() and (json.loads(line)["stage"], json.loads(line)["step"]) < (stage, step)]
    log_path.write_text("".join(line + "\n" for line in kept))


def _alpha(model) -> float | None:
    field = getattr(model, "field", None)
    return field.alpha.item() if field is not None else None


def train_config_fields() -> list[str]:
    return [f.name for f in fields(TrainConfig)]
