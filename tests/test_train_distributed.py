"""train under torchrun: no collective hangs on a rank's view of the disk, a lost worker ends the run (or
torchrun restarts it and it resumes), and two torchrun "nodes" on loopback train together.

Every test ends every process it started (tests/process_tree.py), and fails rather than waits."""

import json
import os
import re
import shlex
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from process_tree import Launched

from steering.training.checkpoint import load_checkpoint, read_log

ROOT = Path(__file__).resolve().parent.parent
STEPS, STAGE2_STEPS = 16, 4
# tiny, short, and resumable state after every step, so a kill anywhere has one to resume from
RUN = [
    "--preset", "tiny", "--steps", str(STEPS), "--stage2-steps", str(STAGE2_STEPS), "--eval-every", "5",
    "--tokens-per-batch", "512", "--stage2-tokens-per-batch", "512", "--max-reviews", "1000",
    "--save-every-s", "0", "--dist-timeout-s", "120", "--no-progress",
    "--stage2-beyond-only", "--contrast-u", "2.0",  # stage 2's second forward, without gradient, under DDP
]  # fmt: skip
EVERY_STEP = [(1, s) for s in range(STEPS)] + [(2, s) for s in range(STAGE2_STEPS)]
LIMIT_S = 400  # one run: 60-130 s here with its core shared by other jobs; past this the test kills its tree and fails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), **extra}


def _torchrun(*launcher: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *launcher]


def _two_processes(port: int, *extra: str) -> list[str]:
    return _torchrun("--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), *extra)


def _log_lines(out: Path) -> int:
    log = out / "train_log.jsonl"
    return len(log.read_text().splitlines()) if log.is_file() else 0


def _steps(out: Path) -> list[tuple[int, int]]:
    return [(r["stage"], r["step"]) for r in read_log(out)]


HOLD_RANK1 = """
import os, runpy, sys, time
from pathlib import Path

import steering.training.distributed

def held_back(*args, **kwargs):
    rank, world = setup(*args, **kwargs)
    while rank != 0 and not Path(os.environ["HOLD_UNTIL"]).is_file():
        time.sleep(0.05)
    return rank, world

setup, steering.training.distributed.start = steering.training.distributed.start, held_back
sys.argv = ["steering", "train", *sys.argv[1:]]
runpy.run_module("steering", run_name="__main__")
"""


@pytest.fixture(scope="module")
def late_rank(tmp_path_factory):
    """A two-process run without --tokenizer whose rank 1, once in the process group, waits until rank 0
    has written tokenizer.json (what a loaded machine does at random: such a rank skipped the tokenizer's
    barrier that rank 0 waited in, and the run hung)."""
    root = tmp_path_factory.mktemp("late_rank")
    out = root / "run"
    (root / "hold_rank1.py").write_text(HOLD_RANK1)
    cmd = _two_processes(_free_port(), str(root / "hold_rank1.py"), "--out", str(out), *RUN)
    with Launched(cmd, root / "output.txt", cwd=ROOT, env=_env(HOLD_UNTIL=str(out / "tokenizer.json"))) as run:
        code = run.wait(LIMIT_S)
        assert code == 0, run.output()[-4000:]
        assert run.left_behind() == []
    return out


def test_two_processes_with_rank1_started_late_train_together(late_rank):
    config = json.loads((late_rank / "config.json").read_text())
    assert config["meta"]["world_size"] == 2
    log = read_log(late_rank)
    assert _steps(late_rank) == EVERY_STEP  # rank 0 logs once per step
    assert log[0]["tokens"] > 512  # tokens of both ranks are counted
    load_checkpoint(late_rank)


def _kill_rank1_mid_run(run: Launched, out: Path) -> float:
    """SIGKILL rank 1 once rank 0 has logged 7 steps (stage 1, past an eval); the time of the kill."""
    assert run.wait(LIMIT_S, until=lambda: _log_lines(out) >= 7) is None, "the run ended before it could be killed"
    workers = run.workers()
    assert sorted(workers) == [0, 1], workers
    os.kill(workers[1], signal.SIGKILL)
    return time.monotonic()


def test_a_killed_worker_ends_the_run_and_resume_completes_it(late_rank, tmp_path):
    out = tmp_path / "run"
    tokenizer = ["--tokenizer", str(late_rank / "tokenizer.json")]
    cmd = _two_processes(_free_port(), "-m", "steering", "train", "--out", str(out), *RUN, *tokenizer)
    with Launched(cmd, tmp_path / "killed.txt", cwd=ROOT, env=_env()) as run:
        killed_at = _kill_rank1_mid_run(run, out)
        code = run.wait(60)
        ended_in = time.monotonic() - killed_at
        assert code != 0 and ended_in < 60, (code, ended_in)
        assert run.left_behind() == [], "processes outlived the run"
    assert _log_lines(out) < len(EVERY_STEP)
    cmd = _two_processes(_free_port(), "-m", "steering", "train", "--out", str(out), *RUN, *tokenizer, "--resume")
    with Launched(cmd, tmp_path / "resumed.txt", cwd=ROOT, env=_env()) as run:
        assert run.wait(LIMIT_S) == 0, run.output()[-4000:]
        assert re.search(r"resuming .*: stage 1 step [1-9]", run.output())
        assert run.left_behind() == []
    assert _steps(out) == EVERY_STEP  # each step once
    # each rank resumed its own batches (and its own RNG): the losses are the uninterrupted run's
    assert [r["loss"] for r in read_log(out)] == pytest.approx([r["loss"] for r in read_log(late_rank)], rel=1e-5)
    assert json.loads((out / "config.json").read_text())["meta"]["world_size"] == 2


# a restarted rank 0 that joins 3 s after rank 1: the process group's keys from the killed round are still
# in torchrun's store, and rank 1 took rank 0's old address from them (gloo: connection refused, every time)
RESTARTED_RANK0_LATE = """
import os, runpy, sys, time

import steering.training.distributed

def late(*args, **kwargs):
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0" and os.environ["RANK"] == "0":
        time.sleep(3)
    return start(*args, **kwargs)

start, steering.training.distributed.start = steering.training.distributed.start, late
sys.argv = ["steering", "train", *sys.argv[1:]]
runpy.run_module("steering", run_name="__main__")
"""


def test_with_max_restarts_a_killed_worker_is_restarted_and_the_run_resumes(late_rank, tmp_path):
    out = tmp_path / "run"
    (tmp_path / "restarted_rank0_late.py").write_text(RESTARTED_RANK0_LATE)
    launcher = ["--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1"]
    rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}"]
    train = [str(tmp_path / "restarted_rank0_late.py"), "--out", str(out), *RUN]
    train += ["--tokenizer", str(late_rank / "tokenizer.json")]
    with Launched(_torchrun(*launcher, *rdzv, *train), tmp_path / "output.txt", cwd=ROOT, env=_env()) as run:
        _kill_rank1_mid_run(run, out)
        assert run.wait(LIMIT_S) == 0, run.output()[-4000:]
        assert re.search(r"resuming .*: stage 1 step [1-9]", run.output()), run.output()[-4000:]
        assert run.left_behind() == []
    assert _steps(out) == EVERY_STEP
    assert [r["loss"] for r in read_log(out)] == pytest.approx([r["loss"] for r in read_log(late_rank)], rel=1e-5)


def _readme_multi_machine_command() -> list[str]:
    """The README's command for several machines (a shell line continued with backslashes)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^ {4}(torchrun --nnodes(?:[^\n]*\\\n)*[^\n]*)", text, re.MULTILINE)
    assert match, "README.md has no indented `torchrun --nnodes ...` command"
    return shlex.split(match.group(1).replace("\\\n", " "))


def test_two_torchrun_nodes_on_loopback_train_together_by_the_readme_recipe(late_rank, tmp_path):
    words = _readme_multi_machine_command()
    assert words[0] == "torchrun" and "--rdzv-endpoint" in words and "--rdzv-backend" in words
    endpoint = f"127.0.0.1:{_free_port()}"
    words = [endpoint if w.startswith("HOST:") else w for w in words[1:]]
    assert endpoint in words, "the README's endpoint is written HOST:PORT"
    # each "machine" runs in a folder of its own (no shared disk); later flags take the place of the README's
    cmd = _torchrun(*words, *RUN, "--out", "run", "--tokenizer", str(late_rank / "tokenizer.json"))
    machines = [tmp_path / "a", tmp_path / "b"]
    runs = []
    try:
        for folder in machines:
            folder.mkdir()
            runs.append(Launched(cmd, folder / "output.txt", cwd=folder, env=_env()))
        for run in runs:
            assert run.wait(LIMIT_S) == 0, run.output()[-4000:]
        assert all(run.left_behind() == [] for run in runs)
    finally:
        for run in runs:
            run.end()
    written = [folder / "run" for folder in machines if (folder / "run" / "config.json").is_file()]
    assert len(written) == 1, "rank 0 alone writes, on its own machine"
    assert json.loads((written[0] / "config.json").read_text())["meta"]["world_size"] == 2
    assert _steps(written[0]) == EVERY_STEP
    load_checkpoint(written[0])


def test_two_processes_train_on_ones_own_labelled_file(tmp_path):
    """torchrun with --data: both ranks train on the file's axes; rank 0 writes the axes, judges and world size."""
    from user_files import labelled_rows, write_csv

    data = write_csv(tmp_path / "rows.csv", labelled_rows(320))
    out = tmp_path / "run"
    axes = ["--axis", "formality=register:casual,formal", "--axis", "topic=topic"]
    run_args = [w for w in RUN if w not in ("--max-reviews", "1000")]
    cmd = _two_processes(
        _free_port(), "-m", "steering", "train", "--data", str(data), "--text-column", "text", *axes, *run_args,
        "--out", str(out),
    )  # fmt: skip
    with Launched(cmd, tmp_path / "output.txt", cwd=ROOT, env=_env()) as run:
        assert run.wait(LIMIT_S) == 0, run.output()[-4000:]
        assert run.left_behind() == []
    config = json.loads((out / "config.json").read_text())
    assert config["meta"]["world_size"] == 2
    assert [a["name"] for a in config["meta"]["axes"]] == ["formality", "topic"]
    assert [(a["negative"], a["positive"]) for a in config["meta"]["axes"]] == [
        ("casual", "formal"),
        ("cooking", "sports"),
    ]
    assert (out / "judges" / "axis1.safetensors").is_file() and (out / "heldout.jsonl").is_file()
    assert _steps(out) == EVERY_STEP
    load_checkpoint(out)
