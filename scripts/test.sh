#!/usr/bin/env bash
# Set up (first run only), lint, and run the whole test suite (then its 15 slowest tests): bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements-dev.txt
# lint and formatting first (rules: pyproject.toml [tool.ruff]); set -e stops the run if either fails
.venv/bin/ruff check .
.venv/bin/ruff format --check .
if ! command -v chromium >/dev/null 2>&1; then
  # the browser test drives Debian's chromium (Playwright cannot download its own here)
  (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
    || echo "warning: could not install chromium; the browser test will fail" >&2
fi
# two pytest workers (pytest-xdist), a module per worker at a time (its fixtures, servers included, built once), one
# torch thread each: 444 s against 708 s for one process on two threads (docs/journal.md). `-n 0` runs in one process
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=15 "$@"  # the 15 slowest: where the time goes
