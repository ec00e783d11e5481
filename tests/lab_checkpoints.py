"""Small hybrid and discrete checkpoints for the app tests, built in seconds.

Both come out of the real trainer (so their folders hold a real train_log.jsonl for the
Training page), a few steps long on a small model. The hybrid's vector field is then
made strong (as tests/conftest.py does for its random models), so that moving u
visibly changes sampled text even though a few steps of training could not teach that.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

SIZE = dict(vocab_size=300, block_size=48, d_model=32, n_heads=2, field_hidden=64, control_embed_dim=8)
TRAIN = dict(steps=4, stage2_steps=2, tokens_per_batch=256, warmup=1, eval_every=2, eval_reviews=8, max_reviews=150)


def build_lab_checkpoints(root: Path) -> dict[str, Path]:
    from steering.training.checkpoint import load_checkpoint, save_checkpoint
    from steering.training.train import make_config, train

    hybrid, discrete = root / "hybrid", root / "discrete"
    train(make_config("tiny", arch="hybrid", out=str(hybrid), **SIZE, **TRAIN), progress=False)
    train(
        make_config(
            "tiny", arch="discrete", out=str(discrete), tokenizer=str(hybrid / "tokenizer.json"), **SIZE, **TRAIN
        ),
        progress=False,
    )
    model, tok, config = load_checkpoint(hybrid)
    torch.manual_seed(0)
    with torch.no_grad():
        torch.nn.init.normal_(model.field.fc_out.weight, std=0.08)
        model.field.alpha.fill_(0.6)
    log = (hybrid / "train_log.jsonl").read_text()
    save_checkpoint(model, hybrid, tok, config.get("meta"), dtype=torch.float32)
    (hybrid / "train_log.jsonl").write_text(log)
    return {"hybrid": hybrid, "discrete": discrete, "cache": root / "cache"}


def lab_environment(paths: dict[str, Path]) -> dict[str, str]:
    """The environment variables that point the app at these checkpoints."""
    return {
        "STEERING_CHECKPOINT": str(paths["hybrid"]),
        "STEERING_BASELINE": str(paths["discrete"]),
        "STEERING_CACHE": str(paths["cache"]),
        "STEERING_RESULTS": str(paths["cache"] / "no-results"),
    }


def describe(paths: dict[str, Path]) -> str:
    return json.dumps({k: str(v) for k, v in paths.items()}) + f" (pid {os.getpid()})"
