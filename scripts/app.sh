#!/usr/bin/env bash
# Set up (first run only) and start the lab on the shipped model: bash scripts/app.sh [streamlit args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
exec .venv/bin/streamlit run app.py "$@"
