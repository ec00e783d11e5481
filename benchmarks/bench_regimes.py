"""Time of the NFE-regimes sweep: 41 values of u, dopri5 and adaptive_heun, a 16-token prompt.

Not a test. The issue's budget is 3 s on 2 CPU cores. Run:
    OMP_NUM_THREADS=2 python benchmarks/bench_regimes.py [--checkpoint DIR] [--repeats 3]
(default checkpoint: assets/hybrid, or $STEERING_CHECKPOINT).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steering.analysis.regimes import DEFAULT_U_GRID, nfe_regimes
from steering.data.tokenizer import encode
from steering.training.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint

PROMPT_16 = "The movie was long, but the acting was strong and the story kept me watching until"


def sixteen_token_prompt(tok) -> str:
    words = PROMPT_16.split(" ")
    text = ""
    for word in words:
        candidate = (text + " " + word).strip()
        if len(encode(tok, candidate)) > 16:
            break
        text = candidate
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, tok, _ = load_checkpoint(args.checkpoint)
    prompt = sixteen_token_prompt(tok)
    n_tokens = len(encode(tok, prompt))
    nfe_regimes(model, tok, prompt, DEFAULT_U_GRID[:3])  # warm-up
    times, cpu, result = [], [], None
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = nfe_regimes(model, tok, prompt, DEFAULT_U_GRID)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(
        f"checkpoint {args.checkpoint} (d_model {model.config.d_model}), prompt {prompt!r} ({n_tokens} tokens), "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"41-point regimes sweep (dopri5 + adaptive_heun, rtol {result.rtol:g}): "
        f"median {statistics.median(times):.3f} s, best {min(times):.3f} s over {args.repeats} runs (budget 3 s); "
        f"CPU time median {statistics.median(cpu):.3f} s (wall time above it means a busy machine)"
    )
    print(
        f"NFE dopri5 {int(result.nfe['dopri5'].min())}..{int(result.nfe['dopri5'].max())}, "
        f"adaptive_heun {int(result.nfe['adaptive_heun'].min())}..{int(result.nfe['adaptive_heun'].max())}"
    )


if __name__ == "__main__":
    main()
