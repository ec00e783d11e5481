#!/usr/bin/env bash
# The shipped pair's CPU recipe (docs/model-card.md#the-shipped-recipe): bash scripts/train_shipped.sh [OUT]
# Trains the tokenizer, then the hybrid and the discrete baseline side by side, one thread each,
# on the same batches and seed. About 55 minutes on 2 cores (53 in the last run); copy OUT/hybrid and OUT/discrete
# to assets/ to ship them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
OUT=${1:-runs/shipped}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
steering() { .venv/bin/python -m steering "$@"; }

steering tokenizer --vocab-size 7168 --out "$OUT/tokenizer.json"
# recipe: the hybrid (docs/model-card.md#the-shipped-recipe)
steering train --arch hybrid --preset demo --tokenizer "$OUT/tokenizer.json" --out "$OUT/hybrid" --no-progress \
    --n-pre 1 --n-mid 4 --n-post 1 --field-heads 4 --field-norm entry --alpha-init 1.0 --freeze-alpha \
    --overlap-weight 10 --roughness-relative-to field --roughness-weight 2 \
    --stage2-roughness-relative-to state --stage2-roughness-weight 1200 --stage2-steps 300 \
    --contrast-weight 5 --style-contrast-weight 2 --contrast-positive-side 0.5 \
    > "$OUT/hybrid.log" 2>&1 &
hybrid=$!
# recipe: the discrete baseline
steering train --arch discrete --preset demo --tokenizer "$OUT/tokenizer.json" --out "$OUT/discrete" --no-progress \
    > "$OUT/discrete.log" 2>&1
wait "$hybrid"
echo "wrote $OUT/hybrid and $OUT/discrete"
