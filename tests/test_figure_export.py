"""`python -m steering figures`: slides written by plotly's own export through Debian's chromium."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from steering.lab.figure_export import png_size

ROOT = Path(__file__).resolve().parent.parent


def run_figures(*args, env_extra=None):
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "steering", "figures", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_figures_are_written_as_1920x1080_png_and_svg(tmp_path, tiny_trained_pair):
    hybrid, discrete = tiny_trained_pair
    out = tmp_path / "slides"
    proc = run_figures(
        "--out",
        str(out),
        "--checkpoint",
        str(hybrid),
        "--baseline",
        str(discrete),
        "--only",
        "steer,regimes,training",
        "--u",
        "sentiment=-1",
        env_extra={"STEERING_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote 6 files" in proc.stdout
    for name in ("steer", "regimes", "training"):
        assert png_size(out / f"{name}.png") == (1920, 1080)
        svg = ET.parse(out / f"{name}.svg").getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        assert (svg.get("width"), svg.get("height")) == ("1920", "1080")
        assert len(list(svg.iter())) > 50  # drawn, not an empty frame
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{n}.{f}" for n in ("steer", "regimes", "training") for f in ("png", "svg")
    )


def test_an_axis_the_checkpoint_lacks_is_refused_before_anything_is_built(tmp_path, tiny_trained_pair):
    hybrid, _ = tiny_trained_pair
    proc = run_figures("--out", str(tmp_path / "slides"), "--checkpoint", str(hybrid), "--u", "nope=1")
    assert proc.returncode == 2 and "sentiment in [-3, 3], style in [-3, 3]" in proc.stderr
    assert not (tmp_path / "slides").exists()


def test_without_a_browser_the_command_says_how_to_get_one(tmp_path):
    proc = run_figures("--out", str(tmp_path), "--only", "training", env_extra={"BROWSER_PATH": str(tmp_path / "no")})
    assert proc.returncode == 2 and "BROWSER_PATH" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())


def test_an_unknown_figure_is_refused(tmp_path):
    proc = run_figures("--out", str(tmp_path), "--only", "steer,pie")
    assert proc.returncode == 2 and "unknown figure" in proc.stderr and "Traceback" not in proc.stderr
