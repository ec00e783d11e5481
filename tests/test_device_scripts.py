"""scripts/train_depth.sh takes its interpreter and device from the environment (for a lent GPU machine)."""

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
