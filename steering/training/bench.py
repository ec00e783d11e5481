"""Training throughput, fp32 against bf16 autocast, both architectures, side by side in one run.

    python -m steering bench-train [--json]

Each (architecture, precision) pair trains the flagship's layout (scripts/train_flagship.sh)
on random full batches of 32 x 128 tokens, with the recipe's stage-1 loss (language model and,
for the hybrid, the path-roughness term) and AdamW. The four run in turns, a few steps each,
for several rounds, so a change in the machine's load falls on all of them alike; a pair's
figure is the median of its step times. One thread, as each model gets in the recipe.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from ..model.transformer import build_model
from .train import make_config, model_config, stage1_loss

# the flagship recipe's layout (scripts/train_flagship.sh)
FLAGSHIP = dict(d_model=384, n_heads=6, vocab_size=8192, block_size=128)
FLAGSHIP_HYBRID = dict(
    n_pre=1,
    n_mid=4,
    n_post=1,
    field_heads=6,
    field_hidden=768,
    field_norm="entry",
    alpha_init=1.0,
    roughness_relative_to="field",
    roughness_weight=2.0,
)
BATCH_ROWS = 32


@dataclass
class ThroughputResult:
    tokens_per_s: dict[str, dict[str, float]]  # arch -> precision -> tokens/s
    steps_per_round: int
    rounds: int
    threads: int

    @property
    def bf16_speedup(self) -> dict[str, float]:
        return {arch: t["bf16"] / t["fp32"] for arch, t in self.tokens_per_s.items()}

    def to_dict(self) -> dict:
        return {
            "tokens_per_s": self.tokens_per_s,
            "bf16_speedup": self.bf16_speedup,
            "steps_per_round": self.steps_per_round,
            "rounds": self.rounds,
            "threads": self.threads,
            "batch": [BATCH_ROWS, FLAGSHIP["block_size"]],
        }


def _trainer(arch: str, bf16: bool, seed: int = 0):
    """A closure that runs one training step of a fresh flagship-size model on a fixed random batch."""
    overrides = {**FLAGSHIP, **(FLAGSHIP_HYBRID if arch == "hybrid" else {})}
    cfg = make_config("demo", arch=arch, bf16=bf16, **overrides)
    torch.manual_seed(seed)
    model = build_model(model_config(cfg)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, cfg.vocab_size, (BATCH_ROWS, cfg.block_size + 1), generator=gen)
    x, y = tokens[:, :-1], tokens[:, 1:]
    u = torch.randint(-1, 2, (BATCH_ROWS, 2), generator=gen).float()

    def step():
        loss, _ = stage1_loss(model, x, y, u, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def measure_training_throughput(steps_per_round: int = 2, rounds: int = 3, threads: int = 1) -> ThroughputResult:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        trainers = {
            (arch, precision): _trainer(arch, precision == "bf16")
            for arch in ("hybrid", "discrete")
            for precision in ("fp32", "bf16")
        }
        for step in trainers.values():  # warm-up: lazy kernel set-up, first allocations
            step()
        times: dict[tuple[str, str], list[float]] = {key: [] for key in trainers}
        for _ in range(rounds):
            for key, step in trainers.items():
                for _ in range(steps_per_round):
                    start = time.perf_counter()
                    step()
                    times[key].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    tokens = BATCH_ROWS * FLAGSHIP["block_size"]
    result: dict[str, dict[str, float]] = {}
    for (arch, precision), values in times.items():
        result.setdefault(arch, {})[precision] = tokens / statistics.median(values)
    return ThroughputResult(result, steps_per_round, rounds, threads)


def format_throughput(result: ThroughputResult) -> str:
    lines = [
        f"training throughput, flagship layout, batch {BATCH_ROWS} x {FLAGSHIP['block_size']}, "
        f"{result.threads} thread(s), median of {result.rounds} x {result.steps_per_round} steps each",
        f"{'arch':10s} {'fp32 tok/s':>12s} {'bf16 tok/s':>12s} {'bf16 / fp32':>12s}",
    ]
    for arch, t in result.tokens_per_s.items():
        lines.append(f"{arch:10s} {t['fp32']:12,.0f} {t['bf16']:12,.0f} {result.bf16_speedup[arch]:12.2f}")
    return "\n".join(lines)
