#!/usr/bin/env bash
# Ship a finished training run as assets/hybrid and regenerate everything downstream of its weights (issue 53):
#   bash scripts/ship/ship_hybrid.sh RUN_DIR
# Beside a training run: chrt -i 0 bash scripts/ship/ship_hybrid.sh ... (SCHED_IDLE). Measure and judge the run
# first (scripts/ship/measure_candidate.sh). Steps, in order; the first that fails stops the script with its
# log, and FROM=N reruns from step N (the copied weights stay; TO=N stops after step N). Logs and scratch output go to WORK (default
# /tmp/ship-hybrid). THREADS (default 1) sets the torch threads. Commits nothing: `git status` shows the ship.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { echo "usage: $0 RUN_DIR" >&2; exit 2; }
RUN=$(realpath "$1")
WORK=${WORK:-/tmp/ship-hybrid}
FROM=${FROM:-1}
TO=${TO:-99}
mkdir -p "$WORK"
export OMP_NUM_THREADS=${THREADS:-1}
PY=.venv/bin/python
DEST=assets/hybrid

run() {  # run N NAME COMMAND...: skipped below FROM, timed, its output in WORK/N-NAME.log
    local n=$1 name=$2 start=$SECONDS
    shift 2
    [ "$n" -ge "$FROM" ] && [ "$n" -le "$TO" ] || { echo "[ship] $n $name: skipped (FROM=$FROM, TO=$TO)"; return 0; }
    echo "[ship] $n $name ..."
    if ! "$@" > "$WORK/$n-$name.log" 2>&1; then
        echo "[ship] STOPPED: step $n ($name) failed after $((SECONDS - start)) s. Its log, last lines:" >&2
        tail -n 15 "$WORK/$n-$name.log" >&2
        echo "[ship] full log: $WORK/$n-$name.log; fix it, then: FROM=$n bash $0 $RUN" >&2
        exit 1
    fi
    echo "[ship] $n $name: $((SECONDS - start)) s"
}

finished_run() {  # the four files a finished run leaves, its training over, and the shipped tokenizer
    for f in model.safetensors config.json tokenizer.json train_log.jsonl; do
        [ -f "$RUN/$f" ] || { echo "$RUN/$f is missing" >&2; return 1; }
    done
    [ ! -d "$RUN/resume" ] || { echo "$RUN/resume exists: the run has not finished" >&2; return 1; }
    # issue 53: the tokenizer stays byte-identical to the discrete baseline's
    cmp "$RUN/tokenizer.json" assets/discrete/tokenizer.json || { echo "tokenizer differs from assets/discrete's" >&2; return 1; }
    "$PY" -c 'import json, sys; a = json.load(open(sys.argv[1]))["model"]["arch"]; sys.exit(a != "hybrid")' \
        "$RUN/config.json" || { echo "$RUN holds no hybrid" >&2; return 1; }
}

copy_run() {
    mkdir -p "$DEST"
    for f in config.json tokenizer.json train_log.jsonl; do cp "$RUN/$f" "$DEST/$f"; done
    # the shipped weights are fp16 (training saves them so; save_checkpoint's default): convert any other run
    "$PY" - "$RUN" "$DEST" <<'EOF'
import shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
from scripts.ship.facts import weight_dtypes
from steering.training.checkpoint import load_checkpoint, save_checkpoint
run, dest = Path(sys.argv[1]), Path(sys.argv[2])
if weight_dtypes(run / "model.safetensors") == ["F16"]:
    shutil.copyfile(run / "model.safetensors", dest / "model.safetensors")
else:
    with tempfile.TemporaryDirectory() as tmp:  # weights only: config and tokenizer stay the run's bytes
        save_checkpoint(load_checkpoint(run)[0], tmp)
        shutil.copyfile(Path(tmp) / "model.safetensors", dest / "model.safetensors")
print(f"{dest}: {weight_dtypes(dest / 'model.safetensors')}")
EOF
}

run 1 check-run finished_run
run 2 copy copy_run
# the size budget (80 MB), the checkpoints load, and scripts/train_shipped.sh carries the shipped recipe; by node ID,
# so a renamed test stops the ship ("not found") where a -k pattern would quietly select nothing
T=tests/test_shipped_model.py
run 3 shipped-tests "$PY" -m pytest -q -p no:cacheprovider \
    "$T::test_shipped_checkpoints_load_as_float32_and_fit_the_size_budget" \
    "$T::test_every_flag_of_the_recipe_is_a_training_option_on_either_device" \
    "$T::test_the_recipe_scripts_train_exactly_the_shipped_configs"
run 4 experiments "$PY" -m steering experiments --checkpoint "$DEST" --out assets/results  # the regimes map too
run 5 screenshots "$PY" scripts/ship/docs_screenshots.py --checkpoint "$DEST"
run 6 regimes-screenshot "$PY" scripts/regimes_screenshot.py --checkpoint "$DEST" --out docs/regimes.png
run 7 compare-screenshot "$PY" benchmarks/bench_compare.py --a assets/flat --b "$DEST" --screenshot docs/compare.png --json
run 8 talk-solver "$PY" scripts/ship/talk_solver.py --checkpoint "$DEST"
run 9 export-talk "$PY" -m steering export-talk --checkpoint "$DEST" --out "$WORK/talk.html"
[ "$TO" -ge 9 ] || exit 0

cat "$WORK/8-talk-solver.log"
cat <<EOF

[ship] done: assets/hybrid, assets/results, docs/*.png and assets/talks regenerated from $RUN.
By hand, with the figures of scripts/ship/measure_candidate.sh's folder (bars.md) and assets/results/results.md:
  - README.md: the headline table and "The model" (parameters, α, field, solver, training time);
  - docs/model-card.md: recipe, training time on this machine (fp32 and bf16), every evaluation figure, the FLOP
    and latency ratios at the trained solver and at Euler 4 with the bits/byte and divergence of each, the
    solver the app opens with and why, limits (style's bar if shipped at 0.85);
  - the captions listed above (assets/talks), the Regimes page's reading for the shipped model, docs/bend.png
    in the README's tour if it is to be shown;
  - docs/journal.md: the ship, with this script's step times (above) and $WORK/7-compare-screenshot.log;
  - the offline demo built to $WORK/talk.html: open it once.
Then: bash scripts/test.sh, and commit.
EOF
