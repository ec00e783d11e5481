"""Issue 64's parity layout (RK4 in one step, a field as wide as a block's MLP) against the discrete baseline, before
any training: forward latency, FLOP ratio, cached decode and parameters, side by side in one process. Random weights
cost what trained ones do, so this prices a layout before a run is spent on it.

Not a test. Run (rerun it: single runs scatter by several per cent; docs/journal.md, "Parity"):
    OMP_NUM_THREADS=2 python benchmarks/bench_parity_layout.py [--basis 3] [--hidden 1528] [--baseline assets/discrete]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steering.evaluation.efficiency import fixed_step_nfe, forward_flops, measure_decode, measure_latency  # noqa: E402
from steering.model.transformer import ModelConfig, build_model  # noqa: E402
from steering.training.checkpoint import load_checkpoint  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--basis", type=int, default=3, help="the field's Legendre terms in τ")
    parser.add_argument("--hidden", type=int, default=1528, help="the field's MLP width")
    parser.add_argument("--baseline", default=str(ROOT / "assets" / "discrete"))
    args = parser.parse_args()
    torch.manual_seed(0)
    discrete, _, _ = load_checkpoint(args.baseline)
    d = discrete.config
    config = ModelConfig(
        arch="hybrid", vocab_size=d.vocab_size, block_size=d.block_size, d_model=d.d_model, n_heads=d.n_heads,
        n_pre=1, n_mid=4, n_post=1, field_heads=d.n_heads, field_hidden=args.hidden, field_basis=args.basis,
        solver="rk4", solver_steps=1, beyond_steering=True, alpha_init=5.0,
    )  # fmt: skip
    hybrid = build_model(config).eval()
    discrete.eval()
    latency = measure_latency(hybrid, discrete, 8, 128, 9, hybrid.training_solver)
    flops = forward_flops(config, 8, 128, fixed_step_nfe(hybrid.training_solver)) / forward_flops(d, 8, 128)
    decode_h, decode_d = measure_decode(hybrid, repeats=5), measure_decode(discrete, repeats=5)
    print(
        json.dumps(
            {
                "threads": torch.get_num_threads(),
                "latency_ratio": latency.ratio,
                "hybrid_forward_ms": latency.hybrid_median_s * 1e3,
                "discrete_forward_ms": latency.discrete_median_s * 1e3,
                "flop_ratio": flops,
                "decode_tokens_per_s": decode_h.fast_tokens_per_s,
                "decode_tokens_per_s_discrete": decode_d.fast_tokens_per_s,
                "parameters": hybrid.num_parameters(),
                "parameters_discrete": discrete.num_parameters(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
