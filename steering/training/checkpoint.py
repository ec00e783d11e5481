"""Checkpoints as plain files: weights in safetensors, config in JSON. Nothing is unpickled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..data.tokenizer import load_tokenizer
from ..data.user_data import is_user_model
from ..model.transformer import ModelConfig, build_model
from .config import train_config_from_dict

ASSETS = Path(__file__).resolve().parents[2] / "assets"
# STEERING_CHECKPOINT / STEERING_BASELINE point the app and the CLIs at another checkpoint.
DEFAULT_CHECKPOINT = Path(os.environ.get("STEERING_CHECKPOINT", ASSETS / "hybrid"))
DEFAULT_BASELINE = Path(os.environ.get("STEERING_BASELINE", ASSETS / "discrete"))
WEIGHTS, CONFIG, TOKENIZER, LOG = "model.safetensors", "config.json", "tokenizer.json", "train_log.jsonl"


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing, incomplete or corrupt; the message names the file."""


def save_checkpoint(
    model, out_dir: str | Path, tokenizer=None, meta: dict | None = None, dtype: torch.dtype = torch.float16
) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype).contiguous()
        for k, v in model.state_dict().items()
    }
    save_file(state, str(out / WEIGHTS))
    (out / CONFIG).write_text(json.dumps({"model": model.config.to_dict(), "meta": meta or {}}, indent=2))
    if tokenizer is not None:
        tokenizer.save(str(out / TOKENIZER))
    return out


def read_config(ckpt_dir: str | Path) -> dict:
    path = Path(ckpt_dir) / CONFIG
    if not path.is_file():
        raise CheckpointError(f"checkpoint config not found: {path}. Train one with `python -m steering train`.")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"checkpoint config {path} is not valid JSON: {err}") from None


def load_checkpoint(ckpt_dir: str | Path = DEFAULT_CHECKPOINT, device: str = "cpu"):
    """(model in eval mode, float32; tokenizer; full config dict)."""
    ckpt = Path(ckpt_dir)
    if not ckpt.is_dir():
        raise CheckpointError(
            f"checkpoint folder not found: {ckpt}. Train one with "
            f"`python -m steering train --arch hybrid --out {ckpt}`."
        )
    config = read_config(ckpt)
    train_options = (config.get("meta") or {}).get("train")
    if isinstance(train_options, dict):
        # an older run's options load too; one warning names any that no longer exist and mattered
        train_config_from_dict(train_options, source=str(ckpt / CONFIG))
    try:
        model = build_model(ModelConfig.from_dict(config["model"]))
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint config {ckpt / CONFIG} is invalid: {err}") from None
    weights = ckpt / WEIGHTS
    if not weights.is_file():
        raise CheckpointError(f"checkpoint weights not found: {weights}")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"checkpoint weights {weights} are corrupt: {err}") from None
    try:
        model.load_state_dict({k: v.float() for k, v in state.items()})
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint weights {weights} do not match {ckpt / CONFIG}: {str(err)[:300]}") from None
    try:
        tok = load_tokenizer(ckpt / TOKENIZER)
    except (FileNotFoundError, ValueError) as err:
        raise CheckpointError(str(err)) from None
    return model.to(device).eval(), tok, config


def last_saved_state(path: Path) -> Path | None:
    """A training run's last complete saved state (train.py): `path`, or its `.old` copy when a kill came mid-swap."""
    for candidate in (path, path.with_name(path.name + ".old")):
        if (candidate / "state.json").is_file():
            return candidate
    return None


def load_saved_state(run_dir: str | Path):
    """(model in eval mode, float32; tokenizer; the state's step and stage) of a run's last saved state, while it
    trains: the weights of run_dir/resume, the tokenizer train writes beside it."""
    run = Path(run_dir)
    saved = last_saved_state(run / "resume")
    if saved is None:
        raise CheckpointError(f"{run} holds neither a checkpoint ({CONFIG}) nor a training run's saved state (resume/)")
    meta = json.loads((saved / "state.json").read_text())
    if "model" not in meta or not (run / TOKENIZER).is_file():
        raise CheckpointError(
            f"{saved} was saved by an older version, which kept neither the model's config nor the tokenizer "
            "with it: resume the run with this version and measure its next saved state"
        )
    model = build_model(ModelConfig.from_dict(meta["model"]))
    with safe_open(str(saved / "state.safetensors"), "pt") as f:
        model.load_state_dict({k[len("model.") :]: f.get_tensor(k).float() for k in f.keys() if k.startswith("model.")})
    return model.eval(), load_tokenizer(run / TOKENIZER), {"step": meta["step"], "stage": meta["stage"]}


def load_model_or_saved_state(path: str | Path):
    """(model, tokenizer, a line naming what was loaded) from a checkpoint folder or a training run's folder."""
    if (Path(path) / CONFIG).is_file():
        model, tok, _ = load_checkpoint(path)
        return model, tok, str(path)
    model, tok, at = load_saved_state(path)
    return model, tok, f"{path} at stage {at['stage']} step {at['step']}"


def read_log(ckpt_dir: str | Path) -> list[dict]:
    path = Path(ckpt_dir) / LOG
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def is_user_checkpoint(folder: str | Path) -> bool:
    """Whether a checkpoint folder holds a model trained on a user's file (its config records the axes)."""
    return (Path(folder) / CONFIG).is_file() and is_user_model(read_config(folder))


def matching_default_baseline(checkpoint) -> Path | None:
    """The shipped baseline where it shares the checkpoint's tokenizer, else None (the model is judged alone)."""
    try:
        theirs, ours = (load_tokenizer(Path(folder) / TOKENIZER) for folder in (DEFAULT_BASELINE, checkpoint))
    except (FileNotFoundError, ValueError):
        return None
    return DEFAULT_BASELINE if theirs.get_vocab() == ours.get_vocab() else None
