#!/usr/bin/env bash
# The shipped hybrid's recipe, D5i's (scripts/train_depth.sh with its flags), on a lent GPU machine, inside one `run`
# call, leaving in $OUT what a later session needs to evaluate and ship it (docs/journal.md, "Training on a lent GPU").
#   bash scripts/device/train_depth.sh [NAME] [more train flags]     (repo root there; the run tool sets OUT)
# Carried wheels (.whl/, from scripts/device/fetch_wheels.sh) are installed first. Training stops at a deadline so
# that the call ends in time: its state is then in RUNS/NAME (ignored, so kept while the machine stays warm), and
# the same command resumes it. STATE_IN=DIR starts from a carried stage1_end (as this script returns it) instead.
# Environment: DEVICE (cuda), TOTAL_S (seconds the whole script may take, 480), RUNS (runs/device),
# THREADS (4), PYTHON (python3), WHEELS (.whl), SITE (/tmp/site: where the wheels go).
# What comes back (at most 8 files, 16 MiB each, 64 MiB in all): NAME.log; NAME.tar.gz.partN (NAME/model.safetensors,
# config.json, tokenizer.json, train_log.jsonl; the log alone while unfinished); NAME-stage1.tar.gz.partN
# (NAME/stage1_end without Adam's moments: enough to run stage 2 from, not to resume stage 1); MANIFEST (how to
# rejoin and check them). Exit 0: the model is finished; 3: training stopped at the deadline; else what failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
NAME=D5i
if [ $# -gt 0 ] && [[ $1 != -* ]]; then NAME=$1; shift; fi
: "${OUT:?OUT must name the folder whose files come back (the run tool sets it)}"
DEVICE=${DEVICE:-cuda}
TOTAL_S=${TOTAL_S:-480}
RUNS=${RUNS:-runs/device}
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}
RUN=$RUNS/$NAME
# The shipped recipe, D5i's (journal, "The range bar met, and D5i"); --device comes from DEVICE, the rest from train_depth.sh
RECIPE=(--alpha-init 6.5 --field-hidden 2000 --bf16 --solver-error-ramp 400 --contrast-u 2.0 --style-contrast-weight 0.7)
PACK_RESERVE_S=40       # packing about 70 MB takes a few seconds; the rest is slack for a slow disk
PART_BYTES=$((15 * 1024 * 1024))   # under the 16 MiB a returned file may have
BACK_BUDGET=$((63 * 1024 * 1024))  # under the 64 MiB that come back in all
mkdir -p "$OUT" "$RUNS"

finished() { [ -f "$RUN/model.safetensors" ] && [ ! -d "$RUN/resume" ]; }
saved_at() {  # the stage and step of the run's saved state (train.py keeps resume.old while it swaps in a new one)
  local state
  for state in "$RUN/resume/state.json" "$RUN/resume.old/state.json"; do
    if [ -f "$state" ]; then
      "$PY" -c 'import json, sys; m = json.load(open(sys.argv[1])); print("stage", m["stage"], "step", m["step"])' "$state"
      return
    fi
  done
  echo "nothing"
}

setup() {
  if compgen -G "$WHEELS/*.whl" > /dev/null; then
    PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHEELS"/*.whl
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  fi
  "$PY" - "$DEVICE" <<'EOF'
import sys
import torch
device = sys.argv[1]
print(f"torch {torch.__version__}, python {sys.version.split()[0]}", flush=True)
if device.startswith("cuda"):
    if not torch.cuda.is_available():
        sys.exit(f"DEVICE={device} but torch.cuda.is_available() is False: no GPU here (DEVICE=cpu to test elsewhere)")
    print(f"GPU: {torch.cuda.get_device_name()}, bf16 {torch.cuda.is_bf16_supported()}", flush=True)
EOF
  "$PY" -c "import steering.training.train" || {
    echo "a package python -m steering train needs is missing: run scripts/device/fetch_wheels.sh and carry .whl"
    return 1
  }
}

train() {
  if finished; then
    echo "$RUN holds a finished model: nothing to train"
    return 0
  fi
  if [ -n "${STATE_IN:-}" ] && [ ! -d "$RUN/resume" ]; then
    [ -f "$STATE_IN/state.json" ] || { echo "STATE_IN=$STATE_IN holds no state.json"; return 1; }
    mkdir -p "$RUN"
    cp -r "$STATE_IN" "$RUN/resume"
    echo "starting from $STATE_IN: $(saved_at)"
  fi
  local limit=$((TOTAL_S - (SECONDS - started) - PACK_RESERVE_S))
  if [ "$limit" -lt 60 ]; then
    echo "only ${limit}s left for training: raise TOTAL_S"
    return 1
  fi
  echo "training $RUN on $DEVICE for at most ${limit}s"
  local rc=0
  # timeout signals the whole process group (bash and python); a state saved before the signal is kept
  # (train.py writes each save into a fresh folder and swaps it in), so a rerun resumes from it
  timeout --kill-after=15 "$limit" env PYTHON="$PY" DEVICE="$DEVICE" THREADS="${THREADS:-4}" PYTHONUNBUFFERED=1 \
    bash scripts/train_depth.sh "$RUN" 0 "${RECIPE[@]}" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "stopped at the deadline (${limit}s); saved: $(saved_at) (saves come every --eval-every steps and 5 min)"
  elif [ "$rc" != 0 ]; then
    echo "training failed (exit $rc)"
    return "$rc"
  fi
}

summary() {
  [ -f "$RUN/train_log.jsonl" ] || return 0
  "$PY" - "$RUN/train_log.jsonl" <<'EOF'
import json, statistics, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
for stage in (1, 2):
    rows = [r for r in records if r["stage"] == stage]
    if not rows:
        continue
    evals = [r for r in rows if "val_loss" in r]
    last = f", held-out loss {evals[-1]['val_loss']:.4f} at step {evals[-1]['step']}" if evals else ""
    print(
        f"stage {stage}: {len(rows)} steps logged, last step {rows[-1]['step']}, median "
        f"{statistics.median(r['tokens_per_s'] for r in rows):,.0f} tokens/s, exploding "
        f"{sum(r['exploding'] for r in rows)}, vanishing {sum(r['vanishing'] for r in rows)}{last}"
    )
EOF
}

# stage1_end without Adam's moments (two thirds of its size): stage 2 builds a fresh optimizer, so it starts from
# this exactly as from the full state; resuming stage 1 itself from it would need the moments
slim_stage1() {
  "$PY" - "$RUN/stage1_end" "$1" <<'EOF'
import shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
source, target = Path(sys.argv[1]), Path(sys.argv[2])
target.mkdir(parents=True)  # and its parents: the staging folder's stage1/NAME
tensors = load_file(str(source / "state.safetensors"))
save_file({k: v for k, v in tensors.items() if not k.startswith("opt.")}, str(target / "state.safetensors"))
shutil.copy(source / "state.json", target / "state.json")
EOF
}

# each archive split into parts under 16 MiB; MANIFEST says how to rejoin them and their sha256
pack() {
  local staging what=(train_log.jsonl) archives=() sums=() used size
  staging=$(mktemp -d)
  finished && what=(model.safetensors config.json tokenizer.json train_log.jsonl)
  mkdir -p "$staging/run/$NAME"
  for f in "${what[@]}"; do
    if [ -f "$RUN/$f" ]; then cp "$RUN/$f" "$staging/run/$NAME/"; fi
  done
  tar -C "$staging/run" -czf "$staging/$NAME.tar.gz" "$NAME"
  split -b "$PART_BYTES" -d -a 1 "$staging/$NAME.tar.gz" "$OUT/$NAME.tar.gz.part"
  archives+=("$NAME.tar.gz")
  sums+=("$(sha256sum < "$staging/$NAME.tar.gz" | cut -c1-64)  $NAME.tar.gz  ${what[*]}")
  if [ -f "$RUN/stage1_end/state.json" ]; then
    slim_stage1 "$staging/stage1/$NAME/stage1_end"
    tar -C "$staging/stage1" -czf "$staging/$NAME-stage1.tar.gz" "$NAME"
    used=$(du -cb "$OUT"/* | tail -1 | cut -f1)
    size=$(stat -c %s "$staging/$NAME-stage1.tar.gz")
    if [ $((used + size + 65536)) -le "$BACK_BUDGET" ]; then
      split -b "$PART_BYTES" -d -a 1 "$staging/$NAME-stage1.tar.gz" "$OUT/$NAME-stage1.tar.gz.part"
      archives+=("$NAME-stage1.tar.gz")
      sums+=("$(sha256sum < "$staging/$NAME-stage1.tar.gz" | cut -c1-64)  $NAME-stage1.tar.gz  stage1_end (for stage 2)")
    else
      echo "stage1_end left behind: $size bytes packed, $used already in OUT, $BACK_BUDGET at most in all"
    fi
  fi
  {
    echo "# $NAME by scripts/device/train_depth.sh, $(date -u +%FT%TZ); finished: $(finished && echo yes || echo no)"
    echo "# AT = the run reply's files_at; DEST = the folder to hold $NAME/ (e.g. /root/runs). Rejoin and unpack:"
    for archive in "${archives[@]}"; do echo "cat AT/$archive.part* | tar -xzf - -C DEST"; done
    echo "# sha256 of each joined archive (cat AT/ARCHIVE.part* | sha256sum), then what it holds under $NAME/:"
    printf '%s\n' "${sums[@]}"
  } > "$OUT/MANIFEST"
  rm -rf "$staging"
  ls -l "$OUT"
}

main() {
  echo "scripts/device/train_depth.sh $NAME on $(hostname) at $(date -u +%FT%TZ)"
  if command -v nvidia-smi > /dev/null; then nvidia-smi -L || true; fi
  setup
  local rc=0
  train "$@" || rc=$?
  summary || echo "(no summary: $RUN/train_log.jsonl could not be read)"
  pack
  echo "took $((SECONDS - started))s"
  [ "$rc" = 0 ] || return "$rc"
  if finished; then
    echo "finished: $RUN"
  else
    echo "not finished: $RUN holds $(saved_at); the same command resumes it while this machine is warm (exit 3)"
    return 3
  fi
}

# exit on the same line: bash reads a script as it runs, so nothing after this line is read even if the file changes
main "$@" 2>&1 | tee "$OUT/$NAME.log"; exit "${PIPESTATUS[0]}"
