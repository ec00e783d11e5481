#!/usr/bin/env bash
# Issue 64's full-size parity candidates (docs/journal.md, "Parity"): the shipped recipe (scripts/train_shipped.sh,
# D5i) with four field evaluations a token (RK4 in one step) of a field as wide as a discrete block's MLP (1,528:
# parameters under the discrete model's), against the shipped tokenizer and batches, so it compares with
# assets/discrete.   bash scripts/train_parity.sh OUT [extra train flags, e.g. --field-basis 3 --alpha-init 5]
# THREADS (default 2) torch threads on CORES (default 0,1). Resumable: the same command continues from the last save.
# P1: THREADS=1 CORES=0 bash scripts/train_parity.sh ~/runs/P1 --field-basis 3 --alpha-init 5 \
#         --solver-error-reference-steps 2
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash scripts/train_parity.sh OUT [extra train flags]}
shift
bash scripts/setup.sh requirements.txt
mkdir -p "$(dirname "$OUT")"
OMP_NUM_THREADS=${THREADS:-2} exec taskset -c "${CORES:-0,1}" .venv/bin/python -m steering train --arch hybrid \
    --preset demo --tokenizer assets/discrete/tokenizer.json --out "$OUT" --device cpu \
    --no-progress --resume --bf16 --d-model 384 --n-heads 6 --steps 2800 --lr 1.5e-3 --rt-fraction 0.1 --eval-every 100 \
    --n-pre 1 --n-mid 4 --n-post 1 --field-heads 6 --field-hidden 1528 \
    --solver rk4 --solver-steps 1 --freeze-alpha \
    --solver-error-weight 100 --solver-error-tolerance 1e-3 --solver-error-start 200 --solver-error-ramp 400 \
    --stage2-steps 300 --stage2-lr 8e-2 --stage2-beyond-only --beyond-positive-lr-scale 0.1 \
    --contrast-weight 5 --style-contrast-weight 0.7 --contrast-positive-side 0.5 --contrast-u 2.0 "$@" >> "$OUT.log" 2>&1
