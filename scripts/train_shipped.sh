#!/usr/bin/env bash
# The shipped pair's recipe (docs/model-card.md#the-shipped-recipe): bash scripts/train_shipped.sh [OUT] [DEVICE]
# Trains the tokenizer, then the hybrid and the discrete baseline side by side, one thread each,
# on the same batches and seed, with bf16 autocast. DEVICE is cpu (default) or cuda.
# About 1 h 50 min on this project's 2-core machine (discrete 85 min; hybrid stage 1 87 min + stage 2 21 min).
# Resumable: run the same command again after a kill and each model continues from its last
# saved state (saved at every evaluation and at least every 5 minutes). Progress with an ETA goes to
# OUT/hybrid.log and OUT/discrete.log. Copy OUT/hybrid and OUT/discrete to assets/ to ship them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
OUT=${1:-runs/shipped}
DEVICE=${2:-cpu}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
steering() { .venv/bin/python -m steering "$@"; }
trained() { [ -f "$1/model.safetensors" ] && [ ! -d "$1/resume" ]; }   # finished: never retrain

tokenizer() {
steering tokenizer --vocab-size 8192 --out "$OUT/tokenizer.json"
}
hybrid() {
steering train --arch hybrid --preset demo --tokenizer "$OUT/tokenizer.json" --out "$OUT/hybrid" --device "$DEVICE" \
    --no-progress --resume --bf16 --d-model 384 --n-heads 6 --steps 2800 --lr 1.5e-3 --rt-fraction 0.1 --eval-every 100 \
    --n-pre 1 --n-mid 4 --n-post 1 --field-heads 6 --field-hidden 768 --field-norm entry --alpha-init 1.0 \
    --freeze-alpha --overlap-weight 10 --roughness-relative-to field --roughness-weight 2 \
    --stage2-roughness-relative-to state --stage2-roughness-weight 1200 --stage2-steps 300 --stage2-lr 8e-2 \
    --stage2-beyond-only --beyond-positive-lr-scale 0.1 --contrast-weight 5 --style-contrast-weight 2 \
    --contrast-positive-side 0.5 --contrast-u 1.65
}
discrete() {
steering train --arch discrete --preset demo --tokenizer "$OUT/tokenizer.json" --out "$OUT/discrete" --device "$DEVICE" \
    --no-progress --resume --bf16 --d-model 384 --n-heads 6 --steps 2800 --lr 1.5e-3 --rt-fraction 0.1 --eval-every 200
}
[ -f "$OUT/tokenizer.json" ] || tokenizer
trained "$OUT/hybrid" || hybrid >> "$OUT/hybrid.log" 2>&1 &
hybrid_job=$!
trained "$OUT/discrete" || discrete >> "$OUT/discrete.log" 2>&1
wait "$hybrid_job"
echo "wrote $OUT/hybrid and $OUT/discrete"
