"""pyproject.toml against the requirements files and the command line it installs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def requirement_lines(name: str) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / name).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def test_runtime_dependencies_are_read_from_requirements_txt():
    assert "dependencies" in PYPROJECT["project"]["dynamic"] and "dependencies" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    assert all("==" in line and not line.startswith("-") for line in requirement_lines("requirements.txt"))


def test_setuptools_reads_the_pinned_dependencies():
    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    config = pyprojecttoml.read_configuration(ROOT / "pyproject.toml", expand=True)
    assert config["project"]["dependencies"] == requirement_lines("requirements.txt")


def test_dev_extra_is_requirements_dev_txt_without_its_runtime_line():
    # setuptools' file reader cannot follow `-r`, so the dev extra is listed in pyproject and must agree
    lines = requirement_lines("requirements-dev.txt")
    assert lines[0] == "-r requirements.txt"
    assert PYPROJECT["project"]["optional-dependencies"]["dev"] == lines[1:]
    assert any(line.startswith("ruff==") for line in lines)


def test_console_script_is_the_python_m_entry_point():
    import steering.cli.main as cli

    assert PYPROJECT["project"]["scripts"] == {"steering": "steering.cli.main:main"}
    module, function = PYPROJECT["project"]["scripts"]["steering"].split(":")
    assert module == cli.__name__ and getattr(cli, function) is cli.main


def test_only_the_steering_package_is_installed():
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["steering", "steering.*"]
    find_packages = pytest.importorskip("setuptools").find_packages
    found = find_packages(str(ROOT), include=["steering", "steering.*"])
    domains = ("data", "judges", "model", "inference", "training", "analysis", "figures", "evaluation", "lab", "api")
    domains += ("cli",)
    assert "steering" in found and {f"steering.{d}" for d in domains} <= set(found)
    assert all(name == "steering" or name.startswith("steering.") for name in found)


def test_scripts_test_sh_lints_before_pytest_and_runs_it_on_pinned_xdist():
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    lint, fmt, tests = (script.index(s) for s in ("ruff check .", "ruff format --check .", "-m pytest"))
    assert lint < tests and fmt < tests
    assert "-n 2" in script and any(
        line.startswith("pytest-xdist==") for line in requirement_lines("requirements-dev.txt")
    )


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one process", "an xdist worker"])
def test_a_hanging_test_fails_with_its_traceback_instead_of_holding_the_suite(tmp_path, workers):
    """The per-test limit (pytest-timeout, from pyproject) is in force, in scripts/test.sh's xdist workers too; here
    shortened to 2 s."""
    import subprocess
    import sys
    import time

    limits = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert 0 < limits["timeout"] <= 900 and limits["timeout_method"] == "signal"
    assert any(line.startswith("pytest-timeout==") for line in requirement_lines("requirements-dev.txt"))
    (tmp_path / "test_hangs.py").write_text("import time\n\n\ndef test_hangs():\n    time.sleep(3600)\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
    started = time.monotonic()
    # run's own time-out kills the (single) pytest process and fails this test should the limit not work
    done = subprocess.run(
        [*cmd, *workers, "--rootdir", str(tmp_path), "-o", "timeout=2", "test_hangs.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1 and time.monotonic() - started < 60, output
    assert "Timeout (>2.0s)" in output and "time.sleep(3600)" in output and "1 failed" in output, output
