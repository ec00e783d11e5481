#!/usr/bin/env bash
# The flat hybrid in assets/flat: the paper's kind of field (autonomous, near-straight paths), shipped as
# assets/hybrid until issue 53 and kept beside the depth-varying one (docs/model-card.md).
#   bash scripts/train_flat.sh [OUT] [DEVICE]
# The hybrid only, on the shipped tokenizer; about 1 h 50 min on one thread with bf16 (stage 1 87 min,
# stage 2 21 min) on this project's 2-core machine. Resumable: run the same command again after a kill.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
OUT=${1:-runs/flat}
DEVICE=${2:-cpu}
mkdir -p "$(dirname "$OUT")"
export OMP_NUM_THREADS=1
steering() { .venv/bin/python -m steering "$@"; }

steering train --arch hybrid --preset demo --tokenizer assets/discrete/tokenizer.json --out "$OUT" --device "$DEVICE" \
    --no-progress --resume --bf16 --d-model 384 --n-heads 6 --steps 2800 --lr 1.5e-3 --rt-fraction 0.1 --eval-every 100 \
    --n-pre 1 --n-mid 4 --n-post 1 --field-heads 6 --field-hidden 768 --field-norm entry --alpha-init 1.0 \
    --freeze-alpha --overlap-weight 10 --roughness-relative-to field --roughness-weight 2 \
    --stage2-roughness-relative-to state --stage2-roughness-weight 1200 --stage2-steps 300 --stage2-lr 8e-2 \
    --stage2-beyond-only --beyond-positive-lr-scale 0.1 --contrast-weight 5 --style-contrast-weight 2 \
    --contrast-positive-side 0.5 --contrast-u 1.65
