#!/usr/bin/env bash
# Issue 33's full-size candidate D2 (docs/journal.md, "The full-size candidate D2"), not shipped:
#   bash scripts/train_depth.sh [OUT] [CORES] [extra train flags, e.g. --bf16]
# The hybrid only, on the shipped tokenizer, batches and seed, so it compares with assets/discrete.
# The field's weights are linear in depth (--field-basis 2), α = 4 frozen, RK4 with two steps, and a
# penalty on RK4's own error estimate from step 200 keeps those two steps near the continuous solution.
# D2 ran in fp32: 480-610 tok/s on one core here (5.2-6.6 h for stage 1); --bf16: 800-940 tok/s (3.4-4.0 h).
# D3 (alpha 6, journal "D3"): THREADS=2 bash scripts/train_depth.sh runs/D3 0,1 --alpha-init 6.0 --bf16
# Resumable: run the same command again after a kill. Measure a saved state with
#   .venv/bin/python -m steering depth OUT --json
# Elsewhere (a lent GPU machine: scripts/device/train_depth.sh): PYTHON=python3 trains with that interpreter as it
# is (no .venv, no setup.sh, no taskset: CORES is then ignored), DEVICE=cuda on the GPU (default cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/D2}
CORES=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
DEVICE=${DEVICE:-cpu}
mkdir -p "$(dirname "$OUT")"
export OMP_NUM_THREADS=${THREADS:-1}
if [ -n "${PYTHON:-}" ]; then
  steering() { "$PYTHON" -m steering "$@"; }
else
  bash scripts/setup.sh requirements.txt
  steering() { taskset -c "$CORES" .venv/bin/python -m steering "$@"; }
fi

steering train --arch hybrid --preset demo --tokenizer assets/discrete/tokenizer.json --out "$OUT" --device "$DEVICE" \
    --no-progress --resume --d-model 384 --n-heads 6 --steps 2800 --lr 1.5e-3 --rt-fraction 0.1 --eval-every 100 \
    --n-pre 1 --n-mid 4 --n-post 1 --field-heads 6 --field-hidden 1520 --field-basis 2 \
    --solver rk4 --solver-steps 2 --alpha-init 4.0 --freeze-alpha \
    --solver-error-weight 100 --solver-error-tolerance 1e-3 --solver-error-start 200 \
    --stage2-steps 300 --stage2-lr 8e-2 --stage2-beyond-only --beyond-positive-lr-scale 0.1 \
    --contrast-weight 5 --style-contrast-weight 2 --contrast-positive-side 0.5 --contrast-u 1.65 "$@"
