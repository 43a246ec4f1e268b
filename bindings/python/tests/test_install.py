"""`pip install bindings/python` into a fresh venv, offline, then the example runs from it."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

PACKAGE = os.path.join(REPO, "bindings", "python")


def _venv_available():
    # Debian ships ensurepip, which venv needs for pip, in python3-venv.
    return all(importlib.util.find_spec(m) is not None for m in ("venv", "ensurepip"))


def test_pip_install_into_a_venv_works_offline_and_runs_the_example(library, model_path, tmp_path):
    if not _venv_available():
        pytest.skip("python3 -m venv is unavailable (Debian: apt-get install python3-venv; scripts/setup-deps does)")
    venv = tmp_path / "venv"
    # The system's setuptools and wheel build the package: no index, no network.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    probe = subprocess.run([py, "-c", "import setuptools, wheel"], capture_output=True, text=True)
    assert probe.returncode == 0, f"the venv lacks setuptools or wheel (python3-setuptools, python3-wheel): {probe.stderr}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    env["PIP_NO_INPUT"] = "1"
    package = tmp_path / "package"  # a copy: the build leaves build/ and *.egg-info beside its sources
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    pip = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(package)],
        capture_output=True, text=True, env=env, cwd=str(tmp_path),
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    where = subprocess.run(
        [py, "-c", "import libinfer; print(libinfer.__file__); print(libinfer.library_version())"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), check=True,
    ).stdout.split("\n")
    assert where[0].startswith(str(venv)), where
    assert where[1] == library.infer_version().decode()
    example = os.path.join(REPO, "examples", "python", "generate.py")
    run = subprocess.run(
        [py, example, model_path, "Once upon a time"], capture_output=True, text=True, env=env, cwd=str(tmp_path),
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
