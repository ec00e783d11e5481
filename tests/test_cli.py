import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, env_extra=None):
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "steering", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )


def test_generate_json(small_checkpoint):
    proc = run_cli(
        "generate",
        "--checkpoint",
        str(small_checkpoint),
        "--prompt",
        "The movie was",
        "--sentiment",
        "1",
        "--style",
        "-1",
        "--n",
        "2",
        "--max-new-tokens",
        "8",
        "--seed",
        "5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out) == 2
    for item in out:
        assert item["text"].startswith("The movie was") and item["prompt"] == "The movie was"
        assert item["control"] == {"sentiment": 1.0, "style": -1.0} and item["nfe"] == 4 * 8
        assert "style" not in item  # the control speaks by the checkpoint's axis names, once


def test_generate_text_with_an_adaptive_solver(small_checkpoint):
    proc = run_cli(
        "generate",
        "--checkpoint",
        str(small_checkpoint),
        "--prompt",
        "so",
        "--max-new-tokens",
        "4",
        "--solver",
        "dopri5",
        "--rtol",
        "1e-4",
        "--atol",
        "1e-5",
    )
    assert proc.returncode == 0, proc.stderr
    assert "NFE" in proc.stdout


def test_the_shipped_axes_by_name_and_by_shortcut_give_the_same_samples(small_checkpoint):
    common = ("generate", "--checkpoint", str(small_checkpoint), "--prompt", "hi", "--max-new-tokens", "4", "--json")
    named = run_cli(*common, "--u", "sentiment=1", "--u", "style=-1")
    short = run_cli(*common, "--sentiment", "1", "--style", "-1")
    assert named.returncode == short.returncode == 0, named.stderr + short.stderr
    assert json.loads(named.stdout) == json.loads(short.stdout)
    assert json.loads(named.stdout)[0]["control"] == {"sentiment": 1.0, "style": -1.0}
    both = run_cli(*common, "--sentiment", "1", "--u", "sentiment=1")
    assert both.returncode == 2 and "given twice" in both.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sentiment", "4"], "[-3, 3]"),
        (["--style", "nan"], "finite"),
        (["--solver", "dopri5", "--rtol", "1e-12", "--atol", "1e-12", "--max-steps", "2"], "max_steps=2"),
        (["--rtol", "-1", "--solver", "dopri5"], "rtol"),
    ],
)
def test_generate_bad_input_is_one_clear_line(small_checkpoint, args, message):
    proc = run_cli("generate", "--checkpoint", str(small_checkpoint), "--prompt", "hi", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_missing_checkpoint_says_how_to_train(tmp_path):
    proc = run_cli("generate", "--checkpoint", str(tmp_path / "none"), "--prompt", "hi")
    assert proc.returncode == 2
    assert "python -m steering train" in proc.stderr and "Traceback" not in proc.stderr


def test_tokenizer_command_refuses_a_vocabulary_smaller_than_the_bytes(tmp_path):
    proc = run_cli("tokenizer", "--vocab-size", "100", "--out", str(tmp_path / "tok.json"))
    assert proc.returncode == 2
    assert "at least 257" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "tok.json").exists()


def test_a_command_without_solver_flags_solves_as_the_checkpoint_trained(small_depth_hybrid, small_tokenizer, tmp_path):
    """The depth-varying field trains with RK4: generate and analyze use it unless told otherwise."""
    import argparse

    import torch

    from steering.cli.main import solver_from_args
    from steering.inference.generate import generate
    from steering.model.ode import SolverConfig
    from steering.training.checkpoint import save_checkpoint

    rk4 = small_depth_hybrid.training_solver
    assert rk4 == SolverConfig("rk4", steps=1)
    flags = dict(solver=None, steps=None, rtol=1e-3, atol=1e-4, max_steps=2000)
    assert solver_from_args(argparse.Namespace(**flags), rk4) == rk4
    assert solver_from_args(argparse.Namespace(**{**flags, "steps": 3}), rk4) == SolverConfig("rk4", steps=3)
    assert solver_from_args(argparse.Namespace(**{**flags, "solver": "euler"}), rk4) == SolverConfig("euler", steps=4)
    ckpt = save_checkpoint(small_depth_hybrid, tmp_path / "depth", small_tokenizer, dtype=torch.float32)
    proc = run_cli("generate", "--checkpoint", str(ckpt), "--prompt", "The movie", "--max-new-tokens", "6", "--json")
    assert proc.returncode == 0, proc.stderr
    model = small_depth_hybrid
    as_trained = generate(model, small_tokenizer, "The movie", max_new_tokens=6, solver=rk4)[0]
    by_euler = generate(model, small_tokenizer, "The movie", max_new_tokens=6, solver=SolverConfig("euler", steps=4))[0]
    assert as_trained.tokens != by_euler.tokens  # the two solvers land apart on this field
    assert json.loads(proc.stdout)[0]["continuation"] == as_trained.continuation
