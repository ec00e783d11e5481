"""What check_bars.py needs about a checkpoint that no measuring command prints: its solvers, weights and sizes.

    .venv/bin/python scripts/ship/facts.py CHECKPOINT OUTDIR

Writes OUTDIR/facts.json and copies the checkpoint's config.json and train_log.jsonl beside it, so OUTDIR alone
holds everything the bars are judged on.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from safetensors import safe_open  # noqa: E402

from steering.lab.logic import default_state  # noqa: E402
from steering.model.transformer import ModelConfig  # noqa: E402

ASSETS = ROOT / "assets"
SHIPPED_FILES = ("model.safetensors", "config.json", "tokenizer.json", "train_log.jsonl")


def weight_dtypes(path: Path) -> list[str]:
    """The tensor dtypes of a safetensors file ("F16", ...), from its header alone."""
    with safe_open(str(path), "pt") as f:
        return sorted({f.get_slice(name).get_dtype() for name in f.keys()})


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def facts(checkpoint: Path) -> dict:
    config = json.loads((checkpoint / "config.json").read_text())
    candidate = sum((checkpoint / name).stat().st_size for name in SHIPPED_FILES)
    shipped = checkpoint.resolve() == (ASSETS / "hybrid").resolve()
    # the shipped folder holds exactly these four files, so shipping swaps their bytes for the candidate's
    projected = folder_bytes(ASSETS) - (0 if shipped else folder_bytes(ASSETS / "hybrid") - candidate)
    return {
        "checkpoint": str(checkpoint),
        # the solver the lab opens a checkpoint with (steering/lab/logic.py default_state) and the trained one
        "app_default_solver": default_state(config["model"]).solver_config().label(),
        "training_solver": ModelConfig.from_dict(config["model"]).training_solver.label(),
        "weight_dtypes": weight_dtypes(checkpoint / "model.safetensors"),
        "tokenizer_same_as_discrete": (checkpoint / "tokenizer.json").read_bytes()
        == (ASSETS / "discrete" / "tokenizer.json").read_bytes(),
        "assets_bytes_now": folder_bytes(ASSETS),
        "assets_bytes_shipped": projected,
    }


if __name__ == "__main__":
    checkpoint, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "train_log.jsonl"):
        shutil.copyfile(checkpoint / name, out / name)
    (out / "facts.json").write_text(json.dumps(facts(checkpoint), indent=2))
    print(f"wrote {out / 'facts.json'}")
