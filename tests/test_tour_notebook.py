"""docs/tour.ipynb runs top to bottom on the shipped model, from a folder outside the checkout, in a minute at most,
and draws its figures.

Run with nbclient, not nbmake: the test reads the executed cells' outputs to count the figures, which nbmake's
pass/fail plugin does not hand back. The notebook is committed without outputs (checked here too)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
TOUR = ROOT / "docs" / "tour.ipynb"
BUDGET_S = 60  # the bound on the whole run, the kernel's start included
PLOTLY = "application/vnd.plotly.v1+json"  # what a plotly Figure displays as in a notebook


def test_the_tour_is_committed_without_outputs():
    notebook = nbformat.read(TOUR, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_the_tour_runs_in_a_minute_and_draws_at_least_three_figures(tmp_path, monkeypatch):
    # the kernel inherits this environment: the package importable as the test run has it (not installed, the
    # CI's case), a fresh cache (the PCA maps fitted inside the budget), one thread as the suite runs
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    for name in [k for k in os.environ if k.startswith("STEERING_")]:  # the lab tests' toy checkpoints
        monkeypatch.delenv(name)
    monkeypatch.setenv("STEERING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    outside = tmp_path / "elsewhere"  # no assets/ here: steering.load("assets/flat") must look beside the package
    outside.mkdir()
    notebook = nbformat.read(TOUR, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=BUDGET_S, kernel_name="python3", resources={"metadata": {"path": str(outside)}}
    )
    started = time.perf_counter()
    client.execute()  # raises CellExecutionError with the cell's traceback; shuts its kernel down on any outcome
    seconds = time.perf_counter() - started
    figures = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if PLOTLY in output.get("data", {})
    ]
    assert len(figures) >= 3, [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]
    assert seconds <= BUDGET_S, f"the tour took {seconds:.1f} s"
    printed = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)
    steered = [line.split(": ", 1) for line in printed.splitlines() if line.startswith("sentiment ")]
    assert [u for u, _ in steered] == ["sentiment -2", "sentiment +0", "sentiment +2"]
    assert all(text.startswith("The film was") for _, text in steered) and len({t for _, t in steered}) == 3
