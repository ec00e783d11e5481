#!/usr/bin/env bash
# Create .venv and install the project's packages (idempotent). Used by app.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.installed-$(cat "$@" | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check $(printf -- '-r %s ' "$@")
  touch "$stamp"
fi
