"""The public API (steering.load() and its views): the issue's contract as written, from a folder outside the
checkout too; the same seed and u; clear errors that name the choices; every view's .figure() and .to_dict()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

import steering
from steering.api import SHIPPED
from steering.training.checkpoint import ASSETS

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The film was"

CONTRACT = """
import json
import steering
m = steering.load()
outs = m.generate("The film was", u={"sentiment": 2.0}, n=2, seed=3, max_new_tokens=24)
p = m.paths("The film was", us=[-2.0, 0.0, 2.0])
c = m.compare(steering.load("assets/flat"))
print(json.dumps({
    "axes": m.axes,
    "path": str(m.path),
    "texts": [o.text for o in outs],
    "paths_figure": type(p.figure()).__name__,
    "paths": json.loads(json.dumps(p.to_dict()))["axis"],
    "compare_figure": type(c.figure()).__name__,
    "compare": sorted(json.loads(json.dumps(c.to_dict()))["models"]),
}))
"""


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """The PCA maps fitted here go to a folder of this module's, not the user's ~/.cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STEERING_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def hybrid():
    return steering.load()


def test_load_is_the_shipped_hybrid_and_speaks_its_axis_names(hybrid):
    assert hybrid.path == ASSETS / "hybrid" and hybrid.model.config.arch == "hybrid"
    assert hybrid.axes == ["sentiment", "style"]
    assert steering.load("flat").path == ASSETS / "flat"  # a shipped one by its name


def test_the_same_seed_gives_the_same_texts_and_u_changes_them(hybrid):
    def texts(u, seed=3):
        return [o.text for o in hybrid.generate(PROMPT, u=u, n=2, seed=seed, max_new_tokens=16)]

    first = texts({"sentiment": 2.0})
    assert first == texts({"sentiment": 2.0}) and all(t.startswith(PROMPT) for t in first)
    assert texts({"sentiment": -2.0}) != first
    assert texts({"sentiment": 2.0}, seed=4) != first
    assert texts(None) == texts({"sentiment": 0.0, "style": 0.0})  # an axis left out is 0


def test_a_path_that_is_not_a_checkpoint_names_the_choices(tmp_path):
    for path in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(FileNotFoundError) as err:
            steering.load(path)
        assert all(name in str(err.value) for name in SHIPPED) and str(path) in str(err.value)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        steering.load(broken)


def test_an_unknown_axis_or_value_names_the_axes(hybrid):
    for call in (
        lambda: hybrid.generate(PROMPT, u={"joy": 1.0}),
        lambda: hybrid.paths(PROMPT, axis="joy"),
        lambda: hybrid.lens(PROMPT, {"sentiment": 9.0}),
    ):
        with pytest.raises(ValueError) as err:
            call()
        assert "sentiment" in str(err.value) and "style" in str(err.value)
    with pytest.raises(ValueError, match="dict of axis name"):
        hybrid.generate(PROMPT, u=2.0)


def test_a_discrete_model_generates_but_takes_no_control():
    discrete = steering.load("assets/discrete")
    assert discrete.axes == [] and discrete.generate(PROMPT, max_new_tokens=4)[0].text.startswith(PROMPT)
    with pytest.raises(ValueError, match="discrete"):
        discrete.generate(PROMPT, u={"sentiment": 1.0})
    with pytest.raises(ValueError, match="discrete"):
        discrete.paths(PROMPT)


def test_the_paths_start_together_fan_out_with_u_and_come_as_a_figure_and_plain_data(hybrid):
    import numpy as np

    p = hybrid.paths(PROMPT, us=[-2.0, 0.0, 2.0], n_tau=9)
    fig = p.figure()
    assert isinstance(fig, go.Figure) and [t.name for t in fig.data if t.mode == "lines+markers"] == [
        "u=-2.00",
        "u=+0.00",
        "u=+2.00",
    ]
    data = json.loads(json.dumps(p.to_dict()))
    assert [path["u"] for path in data["paths"]] == [-2.0, 0.0, 2.0] and data["axis"] == "sentiment"
    starts = np.array([path["points"][0] for path in data["paths"]])
    ends = np.array([path["points"][-1] for path in data["paths"]])
    assert np.allclose(starts, starts[0], atol=1e-6)  # u acts only inside the block
    assert np.linalg.norm(ends[0] - ends[2]) > 1e-3
    assert all(len(path["stations"]) == 3 for path in data["paths"])  # RK4 in two steps: τ = 0, 0.5, 1


def test_flat_against_depth_the_flat_fields_paths_are_straight(hybrid):
    c = hybrid.compare(steering.load("assets/flat"), PROMPT)
    assert isinstance(c.figure(), go.Figure)
    models = json.loads(json.dumps(c.to_dict()))["models"]
    assert list(models) == ["assets/hybrid", "assets/flat"]
    # the shipped claim: the depth-varying field's paths bend, the flat field's are straight rays
    assert models["assets/flat"]["arc_to_chord_excess"] < 1e-3 < models["assets/hybrid"]["arc_to_chord_excess"]


def test_the_other_views_have_the_same_shape(hybrid):
    views = [
        hybrid.regimes_map(PROMPT, us=[-2.0, 0.0, 2.0], tolerances=[1e-4, 1e-2]),
        hybrid.solvers(PROMPT, {"sentiment": 1.0}),
        hybrid.lens(PROMPT, {"sentiment": -1.0}, n_tau=5),
    ]
    for view in views:
        assert isinstance(view.figure(), go.Figure)
        json.dumps(view.to_dict(), allow_nan=False)
    regimes, solvers, lens = (v.to_dict() for v in views)
    assert len(regimes["nfe"][0]) == 3 and regimes["control"] == {"sentiment": 0.0, "style": 0.0}
    assert solvers["solver_a"].startswith("rk4") and 0 <= solvers["divergence"] < 0.05
    assert len(lens["tau"]) == 5 and lens["control"]["sentiment"] == -1.0


def test_evaluate_gives_the_figures_and_their_bars(tmp_path):
    from lab_checkpoints import build_lab_checkpoints

    paths = build_lab_checkpoints(tmp_path)
    evaluation = steering.load(paths["hybrid"]).evaluate(paths["discrete"], quick=True)
    data = json.loads(json.dumps(evaluation.to_dict()))
    assert data["report"]["val_loss_hybrid"] > 0 and data["bars"]["bits_per_byte_hybrid"]["bar"] == "<= 1.6034"
    assert isinstance(evaluation.figure(), go.Figure)


def own_environment() -> dict[str, str]:
    """This process's environment without the STEERING_* variables other tests of the session set (the lab's
    tests point the app at toy checkpoints for the whole session): a child sees what a user's shell would."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STEERING_")}


def test_the_cli_generates_through_the_api(hybrid):
    """One way, not two: `generate --json` gives the API's texts for the same prompt, control and seed."""
    args = ["generate", "--prompt", PROMPT, "--u", "sentiment=2", "--n", "2", "--seed", "3", "--max-new-tokens", "12"]
    args += ["--checkpoint", str(hybrid.path)]  # named: the lab tests point $STEERING_CHECKPOINT at a toy model
    env = {**own_environment(), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "steering", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    api = [o.text for o in hybrid.generate(PROMPT, u={"sentiment": 2.0}, n=2, seed=3, max_new_tokens=12)]
    assert [r["text"] for r in json.loads(done.stdout)] == api


def test_the_contract_runs_from_a_folder_outside_the_checkout(tmp_path):
    """The issue's contract as written, in a folder with no assets/: load() and load("assets/flat") find the
    checkpoints beside the package. The package is importable as `pip install -e .` or the CI's PYTHONPATH
    makes it; here PYTHONPATH (the suite does not install it)."""
    env = {
        **own_environment(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "STEERING_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    # run() kills the child should it pass its time-out
    done = subprocess.run(
        [sys.executable, "-c", CONTRACT], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["axes"] == ["sentiment", "style"] and Path(out["path"]) == ASSETS / "hybrid"
    assert len(out["texts"]) == 2 and all(t.startswith(PROMPT) for t in out["texts"])
    assert out["paths_figure"] == out["compare_figure"] == "Figure" and out["paths"] == "sentiment"
    assert out["compare"] == ["assets/flat", "assets/hybrid"]


def test_import_steering_is_cheap():
    """`import steering` loads neither torch nor plotly; steering.load is reached on first use."""
    code = "import sys, steering; print(sorted(m for m in ('torch', 'plotly') if m in sys.modules)); steering.load"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
