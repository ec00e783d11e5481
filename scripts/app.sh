#!/usr/bin/env bash
# Set up (first run only) and start the lab on the shipped model: bash scripts/app.sh [streamlit args]
# (STEERING_CHECKPOINT=DIR: another checkpoint; STEERING_CHECKPOINTS=FOLDER: the sidebar lists those under it)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
exec .venv/bin/streamlit run app.py "$@"
