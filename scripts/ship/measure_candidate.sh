#!/usr/bin/env bash
# Every measurement issue 53's "Done when" names, on one checkpoint, then its bars:
#   bash scripts/ship/measure_candidate.sh CHECKPOINT OUTDIR
# Beside a training run: chrt -i 0 bash scripts/ship/measure_candidate.sh ... (SCHED_IDLE; docs/journal.md, "D5").
# Each command's JSON (or an independent check's printed lines) goes to OUTDIR/NAME.json (.txt), its stderr to
# OUTDIR/NAME.log, its seconds to OUTDIR/timings.tsv. A step that fails is reported and the others still run, so
# one broken measurement does not cost the rest; the script then exits non-zero, and check_bars.py counts the
# missing figures as missed. THREADS (default 1) sets the torch threads; SKIP_APP=1 leaves out the browser bench
# (minutes, and its timings mean little beside a training run); AFTER_THREE_TRIES=1 judges style at 0.85 (issue 53).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 CHECKPOINT OUTDIR" >&2; exit 2; }
CKPT=$(realpath "$1")
OUT=$(realpath -m "$2")
[ -f "$CKPT/model.safetensors" ] && [ -f "$CKPT/config.json" ] || { echo "no checkpoint in $CKPT" >&2; exit 2; }
mkdir -p "$OUT"
export OMP_NUM_THREADS=${THREADS:-1}
PY=.venv/bin/python
BASE=$PWD/assets/discrete  # the shipped baseline, by path: STEERING_BASELINE in the caller's environment must not move it
failed=()

step() {  # step NAME EXT COMMAND...: COMMAND's stdout to OUT/NAME.EXT, timed
    local name=$1 ext=$2 start=$SECONDS
    shift 2
    echo "[measure] $name ..." >&2
    if "$@" > "$OUT/$name.$ext" 2> "$OUT/$name.log"; then
        echo "[measure] $name: $((SECONDS - start)) s" >&2
    else
        echo "[measure] $name FAILED after $((SECONDS - start)) s (see $OUT/$name.log)" >&2
        rm -f "$OUT/$name.$ext"  # a half-written file must not look measured
        failed+=("$name")
    fi
    printf '%s\t%s\n' "$name" "$((SECONDS - start))" >> "$OUT/timings.tsv"
}

: > "$OUT/timings.tsv"
step facts txt "$PY" scripts/ship/facts.py "$CKPT" "$OUT"
step evaluate json "$PY" -m steering evaluate --checkpoint "$CKPT" --baseline "$BASE" --json
for seed in 2234 3234; do  # the sampled figures' spread: check_bars.py judges their mean (SEED_RUNS)
    step "evaluate_seed$seed" json "$PY" -m steering evaluate --checkpoint "$CKPT" --baseline "$BASE" --seed "$seed" --json
done
step curvature json "$PY" -m steering analyze curvature --checkpoint "$CKPT" --json
step regimes json "$PY" -m steering analyze regimes --prompt-set probe --checkpoint "$CKPT" --json
step depth json "$PY" -m steering depth "$CKPT" --baseline "$BASE" --json
step bench json "$PY" -m steering bench --checkpoint "$CKPT" --baseline "$BASE" --json  # with its Euler-4 point
# the independent checks, outside the project's scoring and solvers (regimes_band.py needs a band of the regimes
# map, issue 54's subject, not a bar here)
step check_bits_per_byte txt "$PY" scripts/checks/bits_per_byte.py "$CKPT"
step check_solver_divergence txt "$PY" scripts/checks/solver_divergence.py "$CKPT"
step check_adaptive_steps txt "$PY" scripts/checks/adaptive_steps.py "$CKPT"
step check_human_or_model txt "$PY" scripts/checks/human_or_model.py "$CKPT"
if [ "${SKIP_APP:-0}" != 1 ]; then
    step bench_app json "$PY" benchmarks/bench_app.py --checkpoint "$CKPT" --baseline "$BASE" --json
fi

echo "[measure] seconds per step:" >&2
column -t "$OUT/timings.tsv" >&2
fallback=(); [ "${AFTER_THREE_TRIES:-0}" = 1 ] && fallback=(--after-three-tries)
"$PY" scripts/ship/check_bars.py "$OUT" "${fallback[@]}" | tee "$OUT/bars.md"
bars=${PIPESTATUS[0]}
if [ ${#failed[@]} -gt 0 ]; then
    echo "[measure] failed steps: ${failed[*]}" >&2
    exit 1
fi
exit "$bars"
