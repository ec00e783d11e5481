"""The talk scripts' fixed-step solver set to the one the lab opens the shipped hybrid with:

    .venv/bin/python scripts/ship/talk_solver.py [--checkpoint assets/hybrid]

Each step of assets/talks/*.json that names a fixed-step solver ("solver": "euler", "steps": "4") shows the model
as it runs in the lab, so it must name the checkpoint's default solver (steering/lab/logic.py default_state).
Adaptive steps (dopri5 at a tolerance) are the talk's own choice and stay. The text is edited in place, so the
files keep their layout; each is then parsed as the lab parses it. Prints the captions that name a solver or a
step count: their words are for a person to check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from steering.lab.logic import FIXED_SOLVERS, default_state  # noqa: E402
from steering.lab.talk_scripts import TALKS_DIR, load_talk, talk_names  # noqa: E402

FIXED = re.compile(r'"solver": "(' + "|".join(FIXED_SOLVERS) + r')", "steps": "(\d+)"')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "assets" / "hybrid")
    args = parser.parse_args()
    state = default_state(json.loads((args.checkpoint / "config.json").read_text())["model"])
    wanted = f'"solver": "{state.solver}", "steps": "{state.steps}"'
    for name in talk_names():
        path = TALKS_DIR / f"{name}.json"
        text, changed = FIXED.subn(wanted, path.read_text())
        path.write_text(text)
        talk = load_talk(name)  # raises on a file the lab could not open
        print(f"{path.relative_to(ROOT)}: {changed} fixed-step solver(s) now {state.solver} ({state.steps} steps)")
        for k, step in enumerate(talk.steps, start=1):
            if re.search(r"euler|rk4|midpoint|\bsteps?\b", step.caption, re.I):
                print(f"  check step {k}'s words: {step.caption}")


if __name__ == "__main__":
    main()
