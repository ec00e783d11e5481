"""scripts/train_depth.sh's interpreter and device from the environment, and scripts/device/train_depth.sh (the depth
recipe on a lent GPU machine) run here on the CPU: what it leaves for the run tool to return rejoins into a checkpoint
that loads, and its slimmed stage1_end runs stage 2 to the same weights."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from safetensors import safe_open

from steering.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
# the recipe's model made small and short (the last flag wins): the packing and the resume are what is tested
SMALL_AND_SHORT = [
    *("--d-model", "32", "--n-heads", "2", "--field-heads", "2", "--field-hidden", "64", "--max-reviews", "800"),
    *("--steps", "3", "--stage2-steps", "2", "--eval-every", "2"),
    *("--tokens-per-batch", "256", "--stage2-tokens-per-batch", "128"),
]


def _recorder(path: Path, record: Path):
    """A stand-in interpreter that writes its arguments and the CPUs it may run on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\ngrep Cpus_allowed_list /proc/$$/status >> {record}\n"
    )
    path.chmod(0o755)


def test_train_depth_takes_its_interpreter_and_device_from_the_environment(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "train_depth.sh", repo / "scripts")
    (repo / "scripts" / "setup.sh").write_text('touch "$(dirname "$0")/../setup-ran"\n')
    _recorder(repo / ".venv" / "bin" / "python", tmp_path / "venv-args")
    _recorder(tmp_path / "python3", tmp_path / "given-args")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "DEVICE")}
    script = str(repo / "scripts" / "train_depth.sh")

    subprocess.run(["bash", script, "runs/x", "0", "--steps", "4"], env=env, check=True, timeout=60)
    *args, cpus = (tmp_path / "venv-args").read_text().splitlines()
    assert (repo / "setup-ran").is_file()  # the CPU way: setup.sh, .venv, pinned to CORES
    assert cpus.split()[-1] == "0"
    assert args[:3] == ["-m", "steering", "train"] and args[args.index("--device") + 1] == "cpu"
    assert args[-2:] == ["--steps", "4"]

    (repo / "setup-ran").unlink()
    given = {**env, "PYTHON": str(tmp_path / "python3"), "DEVICE": "cuda"}
    subprocess.run(["bash", script, "runs/x", "0", "--steps", "4"], env=given, check=True, timeout=60)
    *args, cpus = (tmp_path / "given-args").read_text().splitlines()
    assert not (repo / "setup-ran").exists()
    assert cpus.split()[-1] == Path(f"/proc/{os.getpid()}/status").read_text().split("Cpus_allowed_list:")[1].split()[0]
    assert args[args.index("--device") + 1] == "cuda" and args[-2:] == ["--steps", "4"]


def _device_recipe() -> list[str]:
    text = (ROOT / "scripts" / "device" / "train_depth.sh").read_text()
    return re.search(r"^RECIPE=\((.*)\)$", text, re.MULTILINE).group(1).split()


def test_the_device_script_returns_a_checkpoint_and_a_stage1_end_that_runs_stage_2_again(tmp_path):
    out, runs, home = tmp_path / "out", tmp_path / "runs", tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        **dict(OUT=str(out), RUNS=str(runs), DEVICE="cpu", PYTHON=sys.executable, THREADS="1"),
        "WHEELS": str(tmp_path / "no-wheels"),  # this interpreter has every package
    }
    done = subprocess.run(
        ["bash", "scripts/device/train_depth.sh", "T", *SMALL_AND_SHORT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "finished: " in done.stdout and (out / "T.log").read_text() == done.stdout

    # what the run tool returns: at most 8 files, each under 16 MiB, 64 MiB in all
    files = sorted(out.iterdir())
    assert len(files) <= 8 and sum(f.stat().st_size for f in files) <= 64 * MIB
    assert all(f.stat().st_size < 16 * MIB and re.fullmatch(r"[A-Za-z0-9._-]+", f.name) for f in files)
    manifest = (out / "MANIFEST").read_text().splitlines()
    commands = [line for line in manifest if line.startswith("cat AT/")]
    assert [c.split()[1] for c in commands] == ["AT/T.tar.gz.part*", "AT/T-stage1.tar.gz.part*"]
    for line in manifest:
        if re.match(r"[0-9a-f]{64}  ", line):
            digest, archive = line.split()[:2]
            joined = b"".join(p.read_bytes() for p in sorted(out.glob(f"{archive}.part*")))
            assert hashlib.sha256(joined).hexdigest() == digest, archive
    for command in commands:
        subprocess.run(command.replace("AT/", f"{out}/").replace("DEST", str(home)), shell=True, check=True)

    model, _, config = load_checkpoint(home / "T")
    trained = config["meta"]["train"]
    assert (trained["alpha_init"], trained["contrast_u"], trained["style_contrast_weight"]) == (6.5, 2.0, 0.7)
    assert trained["bf16"] and trained["field_basis"] == 2 and trained["d_model"] == 32
    log = (home / "T" / "train_log.jsonl").read_text().splitlines()
    assert {json.loads(line)["stage"] for line in log} == {1, 2}

    stage1 = home / "T" / "stage1_end"
    with safe_open(str(stage1 / "state.safetensors"), "pt") as f:
        names = list(f.keys())
    assert not any(k.startswith("opt.") for k in names) and any(k.startswith("model.") for k in names)
    # stage 2 again on the CPU from the returned stage1_end, as scripts/train_depth.sh runs it: the same weights
    again = tmp_path / "again"
    shutil.copytree(stage1, again / "resume")
    subprocess.run(
        ["bash", "scripts/train_depth.sh", str(again), "0", *_device_recipe(), *SMALL_AND_SHORT],
        cwd=ROOT,
        env={**env, "DEVICE": "cpu"},
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert {json.loads(line)["stage"] for line in (again / "train_log.jsonl").read_text().splitlines()} == {2}
    assert (again / "model.safetensors").read_bytes() == (home / "T" / "model.safetensors").read_bytes()
